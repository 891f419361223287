import { test } from "node:test";
import assert from "node:assert/strict";
import { RowModel, RowWindow, TraceStore, argChanges, belowText, problemsBelow, rowValuesOf, visibleRows, windowRange } from "../src/tree";
import { KINDS } from "../src/kinds";

function sample(): TraceStore {
  const s = new TraceStore();
  s.apply({ op: "node", id: "root", parent_id: null, kind: "action", name: "Agent", status: "running" });
  s.apply({ op: "node", id: "q1", parent_id: "root", kind: "query", name: "first query", status: "ok", usage: { total_tokens: 10 }, cost: 0.5 });
  s.apply({ op: "node", id: "t1", parent_id: "root", kind: "tool_call", name: "add", status: "ok" });
  s.apply({ op: "node", id: "t1a", parent_id: "t1", kind: "log", name: "adding numbers", status: "ok", usage: { prompt_tokens: 2, completion_tokens: 3 } });
  s.apply({ op: "node", id: "t2", parent_id: "root", kind: "tool_call", name: "search", status: "denied", error: "not allowed" });
  return s;
}

test("patches merge into nodes; later fields win", () => {
  const s = sample();
  s.apply({ op: "node", id: "root", status: "ok", end: 2 });
  assert.equal(s.nodes.get("root")!.status, "ok");
  assert.equal(s.nodes.get("root")!.name, "Agent");
  assert.equal(s.nodes.size, 5);
});

test("roll-ups sum tokens and cost of all descendants", () => {
  const r = sample().rollups();
  assert.equal(r.get("root")!.tokens, 15);
  assert.equal(r.get("root")!.cost, 0.5);
  assert.equal(r.get("t1")!.tokens, 5);
  assert.equal(r.get("root")!.descendants, 4);
});

test("default expansion opens depth 0 and 1; user toggles survive updates", () => {
  const s = sample();
  const expanded = new Map<string, boolean>();
  assert.deepEqual(visibleRows(s, expanded).map((r) => r.id), ["root", "q1", "t1", "t1a", "t2"]);
  expanded.set("t1", false);
  assert.deepEqual(visibleRows(s, expanded).map((r) => r.id), ["root", "q1", "t1", "t2"]);
  expanded.set("t1", true);
  s.apply({ op: "node", id: "t1b", parent_id: "t1", kind: "log", name: "more", status: "ok" });
  assert.deepEqual(visibleRows(s, expanded).map((r) => r.id), ["root", "q1", "t1", "t1a", "t1b", "t2"]);
  expanded.set("root", false);
  assert.deepEqual(visibleRows(s, expanded).map((r) => r.id), ["root"]);
});

test("search keeps ancestors of matches visible, even when collapsed", () => {
  const s = sample();
  const expanded = new Map<string, boolean>([["t1", false]]);
  const rows = visibleRows(s, expanded, "ADDING");
  assert.deepEqual(rows.map((r) => r.id), ["root", "t1", "t1a"]);
  assert.deepEqual(rows.map((r) => r.match), [false, false, true]);
  assert.deepEqual(visibleRows(s, expanded, "denied").map((r) => r.id), ["root", "t2"]);
  assert.deepEqual(visibleRows(s, expanded, "no such thing"), []);
});

test("nodes whose parent is unknown show as roots until the parent arrives", () => {
  const s = new TraceStore();
  s.apply({ op: "node", id: "child", parent_id: "later", name: "c" });
  assert.deepEqual(visibleRows(s, new Map()).map((r) => r.id), ["child"]);
  s.apply({ op: "node", id: "later", parent_id: null, name: "p" });
  assert.deepEqual(visibleRows(s, new Map()).map((r) => [r.id, r.depth]), [["later", 0], ["child", 1]]);
});

test("10,000 nodes: all rows listed, and only a window of them goes to the DOM", () => {
  const s = new TraceStore();
  s.apply({ op: "node", id: "root", parent_id: null, name: "root" });
  for (let i = 0; i < 9999; i++) s.apply({ op: "node", id: `n${i}`, parent_id: i % 10 === 0 ? "root" : `n${i - (i % 10)}`, name: `node ${i}` });
  const expanded = new Map<string, boolean>();
  for (let i = 0; i < 9999; i += 10) expanded.set(`n${i}`, true);
  const rows = visibleRows(s, expanded);
  assert.equal(rows.length, 10000);
  const [start, end] = windowRange(22 * 5000, 360, 22, rows.length);
  assert.ok(end - start <= 40, `window ${start}..${end}`);
  assert.equal(start, 5000 - 8);
});

test("window range clamps at both ends", () => {
  assert.deepEqual(windowRange(0, 360, 22, 3), [0, 3]);
  assert.deepEqual(windowRange(-50, 360, 22, 100), [0, 25]);
  assert.deepEqual(windowRange(22 * 99, 360, 22, 100), [91, 100]);
});

test("message kinds are the ones the kernel uses", () => {
  assert.deepEqual(Object.values(KINDS).sort(), ["cancel", "decision", "decision_result", "detail", "detail_request", "events", "open_group", "open_trace", "rendered", "show", "snapshot", "sync", "trace_opened", "window", "window_request"]);
});

function rng(seed: number): () => number {
  return () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
}

test("incremental rows and roll-ups equal a full rebuild, whatever order nodes arrive in", () => {
  for (let seed = 1; seed <= 30; seed++) {
    const rand = rng(seed);
    const s = new TraceStore();
    const model = new RowModel(s);
    const expanded = new Map<string, boolean>();
    const ids: string[] = [];
    for (let i = 0; i < 300; i++) {
      const r = rand();
      if (r < 0.6 || ids.length === 0) {
        const id = `n${i}`;
        // mostly known parents; sometimes a parent that arrives later (orphan), sometimes none
        const parent = ids.length && r < 0.55 ? ids[Math.floor(rand() * ids.length)] : r < 0.58 ? `n${i + 3}` : null;
        s.apply({ op: "node", id, parent_id: parent, name: id, usage: { total_tokens: Math.floor(rand() * 10) } });
        ids.push(id);
      } else if (r < 0.8) {
        const id = ids[Math.floor(rand() * ids.length)];
        s.apply({ op: "node", id, status: rand() < 0.5 ? "ok" : "failed", usage: { total_tokens: Math.floor(rand() * 10) } });
      } else if (r < 0.85) {
        expanded.set(ids[Math.floor(rand() * ids.length)], rand() < 0.5);
      }
      if (rand() < 0.3) {
        model.update(expanded, "", `${expanded.size}:${[...expanded.values()].join()}`);
        assert.deepEqual(model.ids, visibleRows(s, expanded).map((row) => row.id), `seed ${seed} step ${i}`);
      }
    }
    const incremental = new Map([...s.rollups()].map(([k, v]) => [k, { ...v }]));
    s.epoch++; // force a full recompute
    assert.deepEqual(incremental, s.rollups(), `roll-ups, seed ${seed}`);
    const counts = new Map<string, number>();
    for (const n of s.nodes.values()) counts.set(String(n.status), (counts.get(String(n.status)) ?? 0) + 1);
    for (const [k, v] of counts) assert.equal(s.statusCounts.get(k), v);
  }
});

test("a live trace of 20,000 nodes grows by appending rows", () => {
  const s = new TraceStore();
  const model = new RowModel(s);
  const expanded = new Map<string, boolean>();
  s.apply({ op: "node", id: "root", parent_id: null, name: "session" });
  for (let i = 0; i < 20000; i++) s.apply({ op: "node", id: `l${i}`, parent_id: "root", name: "tick" });
  model.update(expanded, "", "");
  for (let frame = 0; frame < 20; frame++) {
    for (let i = 0; i < 100; i++) s.apply({ op: "node", id: `f${frame}-${i}`, parent_id: "root", name: "tick", usage: { total_tokens: 1 } });
    model.update(expanded, "", "");
    s.rollups();
  }
  assert.equal(model.ids.length, 22001);
  assert.equal(model.ids[22000], "f19-99"); // appended in place, no rebuild needed
  assert.equal(s.rollups().get("root")!.tokens, 2000);
});

test("parents report failed, denied and cancelled nodes below them", () => {
  const s = sample();
  s.apply({ op: "node", id: "t1a", status: "cancelled" });
  const below = problemsBelow(s);
  assert.deepEqual(below.get("root"), { denied: 1, cancelled: 1 });
  assert.deepEqual(below.get("t1"), { cancelled: 1 });
  assert.equal(below.get("q1"), undefined);
  assert.equal(belowText(below.get("root")), "1 cancelled, 1 denied below");
});

test("an edit is shown key by key", () => {
  assert.deepEqual(argChanges({ a: 2, b: 3 }, { a: 20, b: 3, c: "x" }), ["a: 2 → 20", 'c: ∅ → "x"']);
  assert.deepEqual(argChanges({ a: 1 }, {}), ["a: 1 → ∅"]);
});

test("cost is known only where a node carries one: '—' for unpriced subtrees, not $0", async () => {
  const { costText } = await import("../src/trace_explorer");
  const s = sample();
  const r = s.rollups();
  assert.equal(r.get("root")!.priced, 1);
  // the root's sum leaves out t1a's 5 unpriced tokens: labelled partial, never a total
  assert.equal(r.get("root")!.unpriced, 1);
  assert.equal(costText(r.get("root")), "≥ $0.50 (1 call unpriced)");
  assert.equal(r.get("t1")!.priced, 0);
  assert.equal(costText(r.get("t1")), "—"); // 5 tokens, no price: unknown
  assert.equal(costText(r.get("t2")), ""); // nothing used
  s.apply({ op: "node", id: "t1a", cost: 0 }); // a known zero is $0
  assert.equal(costText(s.rollups().get("t1")), "$0");
  assert.equal(costText(s.rollups().get("root")), "$0.50"); // every call priced: a total
  // incremental roll-ups agree with a rebuild
  s.apply({ op: "node", id: "q2", parent_id: "t1", kind: "query", name: "q", cost: 0.25 });
  assert.equal(s.rollups().get("root")!.priced, 3);
  assert.equal(s.rollups().get("root")!.cost, 0.75);
});

test("the filter matches a row's hint: a log's message, a query's prompt", () => {
  const s = sample();
  s.apply({ op: "node", id: "l1", parent_id: "root", kind: "log", name: "info", hint: "cache warmed in 3 ms" });
  s.apply({ op: "node", id: "l2", parent_id: "root", kind: "log", name: "info", hint: "retrying request" });
  const rows = visibleRows(s, new Map(), "RETRYING");
  assert.deepEqual(rows.filter((r) => r.match).map((r) => r.id), ["l2"]);
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
  const win = new RowWindow();
  const row = (id: string, depth: number) => ({ node: { id, kind: "item", status: "ok" }, depth, kids: depth === 0, open: false, roll: [10, 0, 0, 4, 2] });
  win.set({ start: 100, total: 1000, nodes: 5000, rows: [row("a", 0), row("b", 1)], counts: { status: { ok: 5000 }, kind: {} }, selected_index: 700 }, "1|", "z");
  assert.equal(win.total, 1000);
  assert.equal(win.at(101)?.node.id, "b");
  assert.equal(win.at(99), undefined);
  assert.equal(win.indexOf("a"), 100);
  assert.equal(win.indexOf("z"), 700); // the selection, placed by the kernel
  assert.equal(win.indexOf("q"), -1);
  assert.ok(win.covers(100, 102, "1|"));
  assert.ok(!win.covers(100, 103, "1|"));
  assert.ok(!win.covers(100, 102, "2|"));
  assert.deepEqual(win.rollup(win.row("a")!), { tokens: 10, cost: 0, priced: 0, descendants: 4, own: 2, unpriced: 0 });
  // the row values are the ones a whole store would give for the same node and sums
  const v = rowValuesOf(win.row("a")!.node as any, 0, win.rollup(win.row("a")!), { failed: 2 }, true);
  assert.equal(v.tokens, "10 tok");
  assert.equal(v.below, "2 failed below");
});
