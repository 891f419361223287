import { test } from "node:test";
import assert from "node:assert/strict";
import { barPlace, visibleRange, zoomBy } from "../src/timeline";

const span: [number, number] = [10, 110];

test("not zoomed, the axis is the whole span; zooming in halves it around the point", () => {
  assert.deepEqual(visibleRange(span, null), [10, 110]);
  assert.deepEqual(zoomBy(span, null, 0.5), [35, 85]);
  assert.deepEqual(zoomBy(span, null, 0.5, 0), [10, 60]); // around the left edge
  assert.deepEqual(zoomBy(span, [35, 85], 0.5, 1), [60, 85]); // around the right edge
});

test("zooming out past the span is the whole trace again, and the range stays inside it", () => {
  assert.equal(zoomBy(span, [35, 85], 2), null);
  assert.equal(zoomBy(span, [35, 85], 3), null);
  assert.deepEqual(zoomBy(span, [90, 110], 1.5, 1), [80, 110]); // clamped at the end
  assert.deepEqual(visibleRange(span, [-50, -40]), [10, 20]); // a saved zoom off the span
  assert.deepEqual(visibleRange(span, [0, 500]), [10, 110]);
});

test("a bar is placed on the zoomed axis and clipped to it", () => {
  assert.deepEqual(barPlace(20, 30, 10, 110), [10, 10]);
  assert.deepEqual(barPlace(0, 60, 10, 110), [0, 50]); // started before the range
  assert.deepEqual(barPlace(100, 200, 10, 110), [90, 10]); // runs past it
  assert.equal(barPlace(0, 5, 10, 110), null); // outside: not drawn
  assert.equal(barPlace(120, 130, 10, 110), null);
  assert.deepEqual(barPlace(50, 40, 10, 110), [40, 0]); // an end before the start: a tick
});
