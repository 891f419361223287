// A query's Conversation opens on the user's own request, not on the protocol's built-in
// instructions and example that come before it in the rendered prompt.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FOLD_LINES, foldWindow, requestAt } from "../src/dom";
import { conversation } from "../src/trace_explorer";

// written by tests/notebook/test_conversation_fixture.py from a real query's node
const { inputs } = JSON.parse(readFileSync(new URL("../test/fixtures/protocol_prompt.json", import.meta.url), "utf-8"));

test("the folded prompt shows the user's request, the example is under show all", () => {
  const turns = conversation({ id: "1", kind: "query", name: "query:Planet", status: "ok", inputs } as any)!;
  const user = turns[0] as any;
  const text = String(user.text);
  assert.ok(text.split("\n").length > FOLD_LINES); // long enough to be folded
  const fold = foldWindow(text, user.open_at);
  assert.ok(fold.head.startsWith("REQUEST:\nHow many moons has Mars? Answer with the number."), fold.head);
  assert.ok(fold.before);
  assert.ok(!fold.head.includes("apple")); // the protocol's example is not what opens
  assert.ok(!foldWindow(text).head.includes("How many moons")); // as it opened before
});

test("a template not found in the prompt opens at its start", () => {
  assert.equal(requestAt("a\nb\nc", "zzz {{x}}"), 0);
  assert.equal(requestAt("intro\nQ:\nsay hi", "say {{x}}"), "intro\n".length);
});
