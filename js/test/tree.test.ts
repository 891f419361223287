import { test } from "node:test";
import assert from "node:assert/strict";
import { RowWindow, argChanges, costText, rollupOf, rowValuesOf, windowRange } from "../src/tree";
import { KINDS } from "../src/kinds";

test("only a window of the rows goes to the DOM; the range clamps at both ends", () => {
  const [start, end] = windowRange(22 * 5000, 360, 22, 10000);
  assert.ok(end - start <= 40, `window ${start}..${end}`);
  assert.equal(start, 5000 - 8);
  assert.deepEqual(windowRange(0, 360, 22, 3), [0, 3]);
  assert.deepEqual(windowRange(-50, 360, 22, 100), [0, 25]);
  assert.deepEqual(windowRange(22 * 99, 360, 22, 100), [91, 100]);
});

test("message kinds are the ones the kernel uses", () => {
  assert.deepEqual(Object.values(KINDS).sort(), ["cancel", "decision", "decision_result", "detail", "detail_request", "events", "open_group", "open_trace", "rendered", "show", "snapshot", "sync", "trace_opened", "window", "window_request"]);
});

test("what went wrong below a row reads as counts by status", () => {
  const below = (counts?: Record<string, number>) => rowValuesOf({ node: { id: "a" }, below: counts }).below;
  assert.equal(below({ denied: 1, cancelled: 1 }), "1 cancelled, 1 denied below");
  assert.equal(below({ timed_out: 2 }), "2 timed out below");
  assert.equal(below(undefined), "");
});

test("an edit is shown key by key", () => {
  assert.deepEqual(argChanges({ a: 2, b: 3 }, { a: 20, b: 3, c: "x" }), ["a: 2 → 20", 'c: ∅ → "x"']);
  assert.deepEqual(argChanges({ a: 1 }, {}), ["a: 1 → ∅"]);
});

test("cost is known only where a node carries one: '—' for unpriced subtrees, not $0", () => {
  const roll = (cost: number, priced: number, unpriced: number, tokens = 15) => ({ tokens, cost, priced, unpriced, descendants: 4 });
  // a sum that leaves out 5 unpriced tokens: labelled partial, never a total
  assert.equal(costText(roll(0.5, 1, 1)), "≥ $0.50 (1 call unpriced)");
  assert.equal(costText(roll(0, 0, 1, 5)), "—"); // 5 tokens, no price: unknown
  assert.equal(costText(roll(0, 0, 0, 0)), ""); // nothing used
  assert.equal(costText(roll(0, 1, 0, 5)), "$0"); // a known zero is $0
  assert.equal(costText(roll(0.5, 2, 0)), "$0.50"); // every call priced: a total
});

test("a query's details read as a conversation: system, prompt, reasoning, answer with tool calls", async () => {
  const { conversation } = await import("../src/trace_explorer");
  const turns = conversation({
    id: "q", kind: "query",
    inputs: { prompt: "Hi {{x}}", options: { system_message: "Be brief." }, rendered_prompt: { role: "user", text: "Hi Ada" } },
    outputs: { text: "Hello", tool_calls: [{ id: "c1", name: "add", args: { a: 1 } }], reasoning: [{ text: "greet" }, { redacted: true }] },
  }) as any[];
  assert.deepEqual(turns.map((t) => t.role), ["system", "user", "reasoning", "reasoning", "assistant"]);
  assert.equal(turns[1].text, "Hi Ada");
  assert.equal(turns[3].text, "(redacted by the provider)");
  assert.deepEqual(turns[4].tool_calls, [{ id: "c1", name: "add", args: { a: 1 } }]);
  assert.equal(conversation({ id: "t", kind: "tool_call", inputs: {} }), null);
});

test("a row window answers for the rows it holds, and only for the view it was computed for", () => {
  const row = (id: string, depth: number) => ({ node: { id, kind: "item", status: "ok" }, depth, kids: depth === 0, open: false, roll: [10, 0, 0, 4, 2] });
  const win = new RowWindow({ start: 100, total: 1000, nodes: 5000, rows: [row("a", 0), row("b", 1)], counts: { status: { ok: 5000 }, kind: {} }, selected_index: 700 }, "1|", "z");
  assert.equal(win.at(101)?.node.id, "b");
  assert.equal(win.at(99), undefined);
  assert.equal(win.indexOf("a"), 100);
  assert.equal(win.indexOf("z"), 700); // the selection, placed by the kernel
  assert.equal(win.indexOf("q"), -1);
  assert.ok(win.covers(100, 102, "1|"));
  assert.ok(!win.covers(100, 103, "1|"));
  assert.ok(!win.covers(100, 102, "2|"));
  const a = win.at(win.indexOf("a"))!;
  assert.deepEqual(rollupOf(a), { tokens: 10, cost: 0, priced: 0, descendants: 4, own: 2, unpriced: 0 });
  // the row values are the ones a whole store would give for the same node and sums
  const v = rowValuesOf({ ...a, below: { failed: 2 } }, true);
  assert.equal(v.tokens, "10 tok");
  assert.equal(v.below, "2 failed below");
});
