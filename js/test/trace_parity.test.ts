// The live view's rows and the static copy's rows agree: the kernel answers windows of rows
// (a live session's, a saved trace's) and computes what each row shows
// (langfx_nb/notebook/trace_rows.py row_values); tests/notebook/test_trace_parity.py writes
// both into fixtures/trace_parity.json. Here the view's rowValuesOf reads the same rows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { WindowRow, rowValuesOf } from "../src/tree";

const fixture = JSON.parse(readFileSync(new URL("../test/fixtures/trace_parity.json", import.meta.url), "utf-8"));
const cases = Object.entries(fixture.cases as Record<string, any>);

test("the fixture has cases", () => {
  assert.ok(cases.length >= 3);
});

for (const [name, c] of cases) {
  test(`${name}: the window rows the view gets show the static copy's values`, () => {
    const rows = (c.rows as WindowRow[]).map((row) => rowValuesOf(row, c.ended || c.gone));
    assert.deepEqual(rows, c.values);
  });
}
