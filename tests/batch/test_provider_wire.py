"""Reading the providers' batch result files: each line parsed once (a succeeded line is
known by its start and parsed when its body is read), whatever the key order or spacing,
with failures read whole and a damaged succeeded line named when its body is read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langfx_nb.batch.provider_wire import AnthropicWire, OpenAIWire, Polled
from langfx_nb.errors import ProviderBatchError


class Files:
    """The part of a model a wire reads result files through."""

    base_url = "http://x/v1"

    def __init__(self, content: bytes) -> None:
        self.content = content

    async def api_request(self, method: str, url: str, **kw: Any) -> bytes:
        return self.content


BODY = {"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"content": "hi"}}]}
# a body that itself holds "custom_id" and "status_code" keys, and escaped quotes
TRICKY = {"custom_id": "inner", "response": {"status_code": 200}, "text": 'say "hi"\n'}


def jsonl(*rows: Any, compact: bool = False) -> bytes:
    seps = (",", ":") if compact else (", ", ": ")
    return b"\n".join(
        r if isinstance(r, bytes) else json.dumps(r, separators=seps).encode() for r in rows
    )


def openai_ok(cid: str, body: Any, n: int = 0) -> dict[str, Any]:
    response = {"status_code": 200, "request_id": f"req_{n}", "body": body}
    return {"id": f"batch_req_{n}", "custom_id": cid, "response": response, "error": None}


@pytest.mark.parametrize("compact", [False, True])
async def test_openai_lines_in_any_order_give_the_same_outcomes(compact: bool) -> None:
    reordered = {
        "custom_id": "c",
        "error": None,
        "id": "r",
        "response": openai_ok("", BODY)["response"],
    }
    failed = {
        "id": "r4",
        "custom_id": "d",
        "response": {"status_code": 400, "body": {"error": {"message": "bad"}}},
        "error": None,
    }
    expired = {"id": "r5", "custom_id": "e", "response": None, "error": {"code": "batch_expired"}}
    raw = (
        jsonl(
            openai_ok("a", BODY),
            openai_ok("b", TRICKY, 1),
            reordered,
            failed,
            expired,
            compact=compact,
        )
        + b"\n\n"
    )
    wire = OpenAIWire(Files(raw))
    out = await wire.results("b1", Polled(True, "completed", raw={"output_file_id": "f"}))
    assert sorted(out) == ["a", "b", "c", "d", "e"]
    assert out["a"].body == BODY and out["c"].body == BODY and out["b"].body == TRICKY
    assert out["a"].failure is None and out["c"].failure is None
    assert out["d"].failure == "errored" and "bad" in out["d"].message
    assert out["e"].failure == "expired"


async def test_anthropic_lines_in_any_order_give_the_same_outcomes() -> None:
    message = {"id": "msg_1", "content": [{"type": "text", "text": "hi"}]}
    raw = jsonl(
        {"custom_id": "a", "result": {"type": "succeeded", "message": message}},
        {"result": {"message": TRICKY, "type": "succeeded"}, "custom_id": "b"},
        {"custom_id": "c", "result": {"type": "expired"}},
        {"custom_id": "d", "result": {"type": "errored", "error": {"error": {"message": "x"}}}},
    )
    out = await AnthropicWire(Files(raw)).results("b1", Polled(True, "ended"))
    assert out["a"].body == message and out["b"].body == TRICKY
    assert out["c"].failure == "expired" and out["d"].failure == "errored"


async def test_a_damaged_succeeded_line_is_named_when_its_answer_is_read() -> None:
    good = json.dumps(openai_ok("a", BODY)).encode()
    damaged = json.dumps(openai_ok("b", BODY)).encode()[:-5]  # cut short
    raw = jsonl(good, damaged)
    out = await OpenAIWire(Files(raw)).results(
        "b1", Polled(True, "completed", raw={"output_file_id": "f"})
    )
    assert out["a"].body == BODY
    with pytest.raises(ProviderBatchError, match="not valid JSON"):
        out["b"].body  # noqa: B018
