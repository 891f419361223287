import { test } from "node:test";
import assert from "node:assert/strict";
import { placeErrors } from "../src/schema_form";

test("kernel validation errors go to the field their loc names, nested paths included", () => {
  const { byField, rest } = placeErrors(
    [
      { loc: ["seats"], msg: "Input should be greater than or equal to 1" },
      { loc: ["guests", 0, "name"], msg: "Input should be a valid string" },
      { loc: ["guests", 1, "name"], msg: "Field required" },
    ],
    ["seats", "guests"],
  );
  assert.equal(byField.get("seats"), "seats: Input should be greater than or equal to 1");
  assert.equal(byField.get("guests"), "guests.0.name: Input should be a valid string\nguests.1.name: Field required");
  assert.deepEqual(rest, []);
});

test("errors without a field, or for a field the form does not show, stay general", () => {
  const { byField, rest } = placeErrors(
    [
      { loc: [], msg: "Input should be a valid dictionary" },
      { loc: ["extra"], msg: "Extra inputs are not permitted" },
      { loc: ["a"], msg: "Field required" },
    ],
    ["a"],
  );
  assert.deepEqual([...byField.entries()], [["a", "a: Field required"]]);
  assert.deepEqual(rest, ["arguments: Input should be a valid dictionary", "extra: Extra inputs are not permitted"]);
});
