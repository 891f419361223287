import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { applyBatchPatch, emptyBatch, fmtProvider, fmtSeconds, fmtTokens, fraction, openTracesLabel } from "../src/batch";
import { costLabel } from "../src/dom";

test("progress patches replace the counts; the open group is the view's own", () => {
  const s = emptyBatch();
  applyBatchPatch(s, { op: "progress", progress: { total: 10, done: 2, failed: 1, running: 3, left: 4 } });
  applyBatchPatch(s, { op: "open", type: "ValueError" });
  applyBatchPatch(s, { op: "progress", progress: { total: 10, done: 9, failed: 1, running: 0, left: 0, finished: true, status: "done" } as any });
  assert.equal(s.done, 9);
  assert.equal(s.left, 0);
  assert.equal(s.finished, true);
  assert.equal(s.opened, "ValueError"); // a later snapshot does not close the group
  assert.deepEqual(fraction(s), { done: 0.9, failed: 0.1 });
  applyBatchPatch(s, { op: "open", type: null, open_error: "gone" });
  assert.equal(s.opened, null);
  assert.equal(s.open_error, "gone");
});

test("unknown cost, usage and ETA read as unknown, never as zero", () => {
  assert.equal(costLabel(null, 0, []), "cost unknown");
  assert.equal(costLabel(0.0123, 3, ["fake:b"]), "≥ $0.01 (3 calls unpriced: fake:b)");
  assert.equal(costLabel(1.5, 1, []), "≥ $1.50 (1 call unpriced)");
  assert.equal(costLabel(null, 2, ["fake:b"]), "cost unknown (2 calls unpriced: fake:b)");
  assert.equal(costLabel(0.125, 0, []), "$0.13"); // rounded as the kernel rounds (half up)
  assert.equal(costLabel(0, 0, []), "$0.0000"); // a priced free model is a real zero
  assert.equal(fmtTokens({}), "tokens unknown");
  assert.equal(fmtTokens({ prompt_tokens: 1200, completion_tokens: 34 }), "1,234 tokens (1,200 in · 34 out)");
  assert.equal(fmtSeconds(null), "unknown");
  assert.equal(fmtSeconds(125), "2m05s");
  assert.deepEqual(fraction({ ...emptyBatch(), total: 0, finished: true }), { done: 1, failed: 0 });
});

test("the view replays the kernel's patches into the kernel's snapshot (parity fixture)", () => {
  // js/test/fixtures/batch_parity.json is written by tests/notebook/test_batch_view.py
  const c = JSON.parse(readFileSync(new URL("../test/fixtures/batch_parity.json", import.meta.url), "utf-8"));
  const s = { ...emptyBatch(), title: c.title };
  for (const p of c.patches) applyBatchPatch(s, JSON.parse(JSON.stringify(p)));
  assert.deepEqual({ ...s }, c.snapshot);
  // the error message stays the exact text (the view only ever sets it as textContent)
  assert.equal(s.errors[0].first_message, '<img src=x onerror="window.__pwned=1">bad & worse');
});

test("a provider batch shows the provider's own counts, the run's and each batch's", () => {
  assert.deepEqual(fmtProvider(null), []);
  const p = {
    status: "waiting", batches: 2, total: 60000, succeeded: 41200, errored: 12, expired: 0, canceled: 0, processing: 18788,
    per_batch: [
      { id: "batch_a", provider: "openai", status: "in_progress", total: 50000, succeeded: 41200, errored: 12, processing: 8788 },
      { id: "batch_b", provider: "openai", status: "validating", total: 10000, succeeded: 0, errored: 0, expired: 3, processing: 10000 },
    ],
  };
  assert.deepEqual(fmtProvider(p), [
    "provider waiting: 41,200 / 60,000 completed, 12 failed in 2 batches",
    "openai batch_a: 41,200 / 50,000 completed, 12 failed (in_progress)",
    "openai batch_b: 0 / 10,000 completed, 0 failed, 3 expired (validating)",
  ]);
  // after a restart: the batches found in the run manifest are named as resumed
  assert.equal(
    fmtProvider({ ...p, resumed_batches: 2, per_batch: [] })[0],
    "provider waiting: 41,200 / 60,000 completed, 12 failed in 2 batches (2 resumed from the run manifest)",
  );
  const s = emptyBatch();
  applyBatchPatch(s, { op: "progress", progress: { total: 60000, provider: p } });
  assert.equal(fmtProvider(s.provider)[1], "openai batch_a: 41,200 / 50,000 completed, 12 failed (in_progress)");
});

test("an error group's button says how many of its items' traces it opens", () => {
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `n${i}`);
  const group = (count: number, kept: number) => ({ type: "E", count, first_message: "", items: [], node_ids: ids(kept) });
  assert.equal(openTracesLabel(group(38, 20)), "open 20 of 38 traces");
  assert.equal(openTracesLabel(group(3, 3)), "open traces (3)");
});
