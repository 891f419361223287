// A failed batch item's trace node carries its traceback in `error.traceback` (Python:
// langfx_nb/agentic/tracebacks.py): the detail pane shows the class and message, and the
// traceback on demand; copying the error copies both.
import { test } from "node:test";
import assert from "node:assert/strict";
import { errorCopyText, errorText, errorTraceback } from "../src/dom";

test("an error's traceback is read from its node and copied with it", () => {
  const tb = 'Traceback (most recent call last):\n  File "a.py", line 3, in fn\nKeyError: \'name\'\n';
  const error = { type: "KeyError", message: "'name'", traceback: tb };
  assert.equal(errorText(error), "KeyError: 'name'");
  assert.equal(errorTraceback(error), tb);
  assert.equal(errorCopyText(error), `KeyError: 'name'\n\n${tb}`);
  assert.equal(errorTraceback({ type: "X", message: "m" }), "");
  assert.equal(errorCopyText("plain"), "plain");
  assert.equal(errorTraceback(null), "");
});
