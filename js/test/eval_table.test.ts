import { test } from "node:test";
import assert from "node:assert/strict";
import { EvalRow, filterRows, isFlagged, metricCounts, metricText, runningMetrics, scoreText, sortRows } from "../src/eval_table";

function rows(): EvalRow[] {
  return [
    { key: "c2#0", id: "c2", status: "ok", output: "Paris", scores: { exact: true, len: 0.5 }, meta: { topic: "geo" } },
    { key: "c10#0", id: "c10", status: "failed", error: "ValueError: broke", scores: {} },
    { key: "c1#0", id: "c1", status: "ok", output: "<b>Rome</b>", scores: { exact: false, len: 1 }, errors: {}, meta: { topic: "geo" } },
    { key: "c3#0", id: "c3", status: "ok", output: "Oslo", scores: { exact: true, len: null }, errors: { len: "KeyError: x" } },
  ];
}

test("filter matches every word in ids, outputs, errors and metadata", () => {
  const texts = new WeakMap<EvalRow, string>();
  assert.deepEqual(filterRows(rows(), "geo", false, "report", texts).map((r) => r.id), ["c2", "c1"]);
  assert.deepEqual(filterRows(rows(), "topic=geo rome", false, "report", texts).map((r) => r.id), ["c1"]);
  assert.deepEqual(filterRows(rows(), "valueerror", false, "report", texts).map((r) => r.id), ["c10"]);
  // c2 passes its one check (exact); its numeric score 0.5 is not a check
  assert.deepEqual(filterRows(rows(), "", true, "report", texts).map((r) => r.id), ["c10", "c1", "c3"]);
});

test("failing only: a row that passes every check is not listed, whatever its numbers", () => {
  const passing: EvalRow = { key: "p#0", id: "p", status: "ok", output: "x", scores: { exact: true, cost: 0.002, words: 0 }, errors: {} };
  assert.equal(isFlagged(passing, "report"), false);
  assert.equal(isFlagged({ ...passing, scores: { exact: true, judge: false } }, "report"), true);
  assert.equal(isFlagged({ ...passing, scores: { exact: null }, errors: { exact: "KeyError: x" } }, "report"), true);
});

test("sorting: numeric ids, scores descending, missing values last", () => {
  assert.deepEqual(sortRows(rows(), "id", false).map((r) => r.id), ["c1", "c2", "c3", "c10"]);
  assert.deepEqual(sortRows(rows(), "score:len", true).map((r) => r.id), ["c1", "c2", "c10", "c3"]);
  assert.deepEqual(sortRows(rows(), "score:len", false).map((r) => r.id), ["c2", "c1", "c10", "c3"]);
});

test("comparisons: changed cases are flagged, deltas sort", () => {
  const cmp: EvalRow[] = [
    { key: "a", id: "a", change: "same", a: { m: 1 }, b: { m: 1 } },
    { key: "b", id: "b", change: "regressed", a: { m: 1 }, b: { m: 0 } },
    { key: "c", id: "c", change: "improved", a: { m: 0 }, b: { m: 1 } },
  ];
  assert.deepEqual(cmp.filter((r) => isFlagged(r, "compare")).map((r) => r.id), ["b", "c"]);
  assert.deepEqual(sortRows(cmp, "change", false).map((r) => r.id), ["b", "c", "a"]);
  assert.deepEqual(sortRows(cmp, "delta:m", false).map((r) => r.id), ["b", "a", "c"]);
});

test("score and metric texts", () => {
  assert.equal(scoreText(true), "pass");
  assert.equal(scoreText(null), "—");
  assert.equal(scoreText(0.25), "0.250");
  assert.equal(metricText({ name: "x", kind: "pass_rate", value: 0.8, low: 0.49, high: 0.943, n: 10 }), "80.0% [49.0%, 94.3%]");
  assert.equal(metricText({ name: "x", kind: "mean", value: 2.5, low: 1, high: 4, n: 4, se: 0.6455 }), "2.500 ± 0.65");
  const running = runningMetrics(rows());
  // a numeric metric: the mean of the scored rows; a pass rate: passes over every row
  assert.deepEqual(running.find((m) => m.name === "len"), { name: "len", value: 0.75, n: 2, errors: 1, missing: 1 });
  assert.deepEqual(running.find((m) => m.name === "exact"), { name: "exact", value: 0.5, n: 4, errors: 0, missing: 1 });
  assert.equal(metricCounts({ name: "x", kind: "pass_rate", value: 0.7, low: 0.4, high: 0.9, n: 10, trials: 10, errors: 2 }), "n=10 · 2 errors");
  assert.equal(metricCounts({ name: "x", kind: "mean", value: 0.7, low: 0.4, high: 0.9, n: 8, trials: 10, errors: 1, missing: 1 }), "n=8 of 10 · 1 error · 1 task failed");
});

test("10,000 rows: the flagged filter and a score sort keep every match in order", () => {
  const many: EvalRow[] = Array.from({ length: 10_000 }, (_, i) => ({ key: `c${i}#0`, id: `c${i}`, status: "ok", output: `answer ${i}`, scores: { exact: i % 3 === 0 } }));
  const shown = sortRows(filterRows(many, "answer", true, "report", new WeakMap()), "id", false);
  assert.equal(shown.length, 6666);
  assert.equal(shown[0].id, "c1");
  assert.equal(shown[shown.length - 1].id, "c9998");
});
