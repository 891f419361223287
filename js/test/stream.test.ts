import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { applyStreamPatch, emptyStream, pathKey } from "../src/stream";
import { fieldKind, parseField, resolveRef } from "../src/schema_form";

test("an object fills in field by field; strings grow; completed fields are marked", () => {
  const s = emptyStream();
  applyStreamPatch(s, { op: "reset", mode: "object" });
  applyStreamPatch(s, { op: "open", path: ["name"], value: "" });
  applyStreamPatch(s, { op: "append", path: ["name"], delta: "Ad" });
  applyStreamPatch(s, { op: "append", path: ["name"], delta: "a" });
  assert.deepEqual(s.value, { name: "Ada" });
  assert.deepEqual(s.open, [pathKey(["name"])]);
  applyStreamPatch(s, { op: "done", path: ["name"], value: "Ada" });
  applyStreamPatch(s, { op: "open", path: ["tags", 0] });
  applyStreamPatch(s, { op: "done", path: ["tags", 0], value: "x" });
  assert.deepEqual(s.value, { name: "Ada", tags: ["x"] });
  assert.deepEqual(s.done, [pathKey(["name"]), pathKey(["tags", 0])]);
  assert.deepEqual(s.open, []);
  applyStreamPatch(s, { op: "status", status: "complete", value: { name: "Ada", tags: ["x"] } });
  assert.equal(s.status, "complete");
});

test("text streams accumulate; failures keep the error text", () => {
  const s = emptyStream();
  applyStreamPatch(s, { op: "reset", mode: "text" });
  applyStreamPatch(s, { op: "text", delta: "Hello <img src=x onerror=alert(1)>" });
  applyStreamPatch(s, { op: "status", status: "parsing_failed", error: "bad json" });
  assert.equal(s.text, "Hello <img src=x onerror=alert(1)>");
  assert.equal(s.error, "bad json");
});

test("streamed tool calls accumulate argument text, then the final call", () => {
  const s = emptyStream();
  applyStreamPatch(s, { op: "tool", id: "c1", name: "add" });
  applyStreamPatch(s, { op: "tool", id: "c1", delta: '{"a": 1' });
  assert.equal(s.tools.c1.args_text, '{"a": 1');
  applyStreamPatch(s, { op: "tool", id: "c1", args: { a: 1 } });
  assert.deepEqual(s.tools.c1, { name: "add", args_text: '{"a": 1', args: { a: 1 }, done: true });
});

test("schema form parses and rejects field input", () => {
  assert.equal(parseField("integer", " 3 ", "a"), 3);
  assert.throws(() => parseField("integer", "3.5", "a"), /integer/);
  assert.throws(() => parseField("number", "x", "b"), /number/);
  assert.deepEqual(parseField("json", "[1, 2]", "c"), [1, 2]);
  assert.throws(() => parseField("json", "{", "c"), /JSON/);
  assert.equal(parseField("enum", "1", "d", ["a", "b"]), "b");
  assert.equal(fieldKind({ type: "string" }), "string");
  assert.equal(fieldKind({ type: "array" }), "json");
  const root = { $defs: { P: { type: "integer" } }, properties: { p: { $ref: "#/$defs/P" } } };
  assert.equal(resolveRef(root.properties.p, root).type, "integer");
  assert.equal(resolveRef({ anyOf: [{ type: "string" }, { type: "null" }] }, {}).type, "string");
});

test("the view replays the kernel's patches into the kernel's snapshot (parity fixture)", () => {
  // js/test/fixtures/stream_parity.json is written by tests/notebook/test_widgets_parity.py
  const fixture = JSON.parse(readFileSync(new URL("../test/fixtures/stream_parity.json", import.meta.url), "utf-8"));
  for (const [name, c] of Object.entries(fixture) as [string, any][]) {
    const s = emptyStream();
    for (const p of c.patches) applyStreamPatch(s, JSON.parse(JSON.stringify(p)));
    assert.deepEqual({ ...s }, c.snapshot, name);
  }
});
