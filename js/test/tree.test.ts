import { test } from "node:test";
import assert from "node:assert/strict";
import { TraceStore, visibleRows, windowRange } from "../src/tree";
import { KINDS } from "../src/kinds";

function sample(): TraceStore {
  const s = new TraceStore();
  s.apply({ op: "node", id: "root", parent: null, kind: "action", name: "Agent", status: "running" });
  s.apply({ op: "node", id: "q1", parent: "root", kind: "query", name: "first query", status: "ok", usage: { total_tokens: 10 }, cost: 0.5 });
  s.apply({ op: "node", id: "t1", parent: "root", kind: "tool_call", name: "add", status: "ok" });
  s.apply({ op: "node", id: "t1a", parent: "t1", kind: "log", name: "adding numbers", status: "ok", usage: { prompt_tokens: 2, completion_tokens: 3 } });
  s.apply({ op: "node", id: "t2", parent: "root", kind: "tool_call", name: "search", status: "denied", error: "not allowed" });
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
  s.apply({ op: "node", id: "t1b", parent: "t1", kind: "log", name: "more", status: "ok" });
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
  s.apply({ op: "node", id: "child", parent: "later", name: "c" });
  assert.deepEqual(visibleRows(s, new Map()).map((r) => r.id), ["child"]);
  s.apply({ op: "node", id: "later", parent: null, name: "p" });
  assert.deepEqual(visibleRows(s, new Map()).map((r) => [r.id, r.depth]), [["later", 0], ["child", 1]]);
});

test("10,000 nodes: rows computed fast, and only a window of them goes to the DOM", () => {
  const s = new TraceStore();
  s.apply({ op: "node", id: "root", parent: null, name: "root" });
  for (let i = 0; i < 9999; i++) s.apply({ op: "node", id: `n${i}`, parent: i % 10 === 0 ? "root" : `n${i - (i % 10)}`, name: `node ${i}` });
  const expanded = new Map<string, boolean>();
  for (let i = 0; i < 9999; i += 10) expanded.set(`n${i}`, true);
  const t0 = performance.now();
  const rows = visibleRows(s, expanded);
  s.rollups();
  const ms = performance.now() - t0;
  assert.equal(rows.length, 10000);
  assert.ok(ms < 500, `took ${ms} ms`);
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
  assert.deepEqual(Object.values(KINDS).sort(), ["decision", "decision_result", "events", "rendered", "snapshot", "sync"]);
});
