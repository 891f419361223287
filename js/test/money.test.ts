// One rule for money on both sides: the widgets show the text the kernel's static copy shows
// (langfx_nb/agentic/usage.py fmt_money; tests/agentic/test_money.py reads the same table).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { costLabel, fmtMoney, plural, totalCostText } from "../src/dom";

const fixture = JSON.parse(readFileSync(new URL("../test/fixtures/money.json", import.meta.url), "utf-8"));

test("each cost shows as the kernel shows it; small costs keep two significant digits", () => {
  for (const [cost, text] of fixture.cases as [number, string][]) assert.equal(fmtMoney(cost), text, String(cost));
  assert.equal(costLabel(0.0000107, 0, []), "$0.000011");
});

test("a summary line never says 'total cost cost unknown' nor '1 nodes'", () => {
  assert.equal(totalCostText(null, 3, []), "cost unknown (3 calls unpriced)");
  assert.equal(totalCostText(1.5, 0, []), "total cost $1.50");
  assert.equal(plural(1, "node"), "node");
  assert.equal(plural(0, "node"), "nodes");
});
