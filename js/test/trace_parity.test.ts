// The live view's rows and the static copy's rows agree: the kernel folds core trace records
// into the snapshot (and live patches) the view receives and computes each row's values
// (langfx_nb/notebook/trace_rows.py); tests/notebook/test_trace_parity.py writes both into
// fixtures/trace_parity.json. Here the view's store and traceRows replay them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Patch, TraceNode, TraceStore, traceRows } from "../src/tree";

const fixture = JSON.parse(readFileSync(new URL("../test/fixtures/trace_parity.json", import.meta.url), "utf-8"));
const cases = Object.entries(fixture.cases as Record<string, any>);

test("the fixture has cases", () => {
  assert.ok(cases.length >= 3);
});

for (const [name, c] of cases) {
  test(`${name}: the snapshot the view starts from shows the static copy's rows`, () => {
    const store = new TraceStore();
    store.load(c.state.nodes as TraceNode[]);
    assert.deepEqual(traceRows(store, c.state.ended === true, c.gone), c.rows);
  });
  if (c.patches) {
    test(`${name}: the live patches, merged as they arrive, show the same rows`, () => {
      const store = new TraceStore();
      store.rollups(); // kept incrementally from here on, as in the view
      for (const p of c.patches as Patch[]) store.apply(p);
      const rows = traceRows(store, false, c.gone);
      // live patches carry whole records; the snapshot carries summaries: the rows agree
      assert.deepEqual(rows, c.rows);
    });
  }
}
