"""Reading the providers' batch result files: each line parsed once (a succeeded line is
known by its start and parsed when its body is read), whatever the key order or spacing,
with failures read whole and a damaged succeeded line named when its body is read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langfx_nb.errors import ProviderBatchError
from langfx_nb.llms.anthropic import AnthropicWire
from langfx_nb.llms.batch_wire import Polled
from langfx_nb.llms.gemini import GeminiWire
from langfx_nb.llms.openai import OpenAIWire


class Files:
    """The part of a model a wire reads result files through."""

    base_url = "http://x/v1"

    def __init__(self, content: bytes) -> None:
        self.content = content

    async def api_request(self, method: str, url: str, **kw: Any) -> bytes:
        return self.content

    def redact(self, text: str) -> str:
        return text.replace("sk-secret-key", "<redacted>")


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


class Operation(Files):
    """A Gemini model whose batch GET answers ``operation`` (and the model's base URL)."""

    base_url = "http://x/v1beta"

    def __init__(self, operation: dict[str, Any]) -> None:
        super().__init__(json.dumps(operation).encode())


def gemini_op(state: str, rows: Any = None, **more: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"name": "batches/b1", "metadata": {"state": state}, **more}
    if rows is not None:
        op["response"] = {"inlinedResponses": rows}
    return op


GEMINI_OK = {"candidates": [{"content": {"parts": [{"text": "hi"}]}}]}


@pytest.mark.parametrize("prefix", ["BATCH_STATE_", "JOB_STATE_"])
async def test_gemini_states_read_in_either_vocabulary(prefix: str) -> None:
    """The API reference's ``BatchState`` says ``BATCH_STATE_SUCCEEDED``; the batch guide's
    examples compare ``metadata.state`` with ``JOB_STATE_SUCCEEDED``. A finished batch is
    known by its state even where ``done`` is left out, and an expired one's failures are
    ``expired`` (they are resubmitted as such)."""
    wire = GeminiWire(Operation(gemini_op(f"{prefix}RUNNING")))
    assert not (await wire.poll("batches/b1")).ended
    late = {"error": {"code": 4, "message": "late"}, "metadata": {"key": "a"}}
    rows = {"inlinedResponses": [late]}
    wire = GeminiWire(Operation(gemini_op(f"{prefix}EXPIRED", rows)))
    polled = await wire.poll("batches/b1")
    assert polled.ended
    out = await wire.results("batches/b1", polled)
    assert out["a"].failure == "expired"
    assert out["*"].failure == "expired"  # a request with no row at all never ran


async def test_gemini_inlined_responses_as_the_reference_nests_them_or_as_a_list() -> None:
    nested = {"inlinedResponses": [{"response": GEMINI_OK, "metadata": {"key": "a"}}]}
    flat = [{"response": GEMINI_OK, "metadata": {"key": "a"}}]
    for rows in (nested, flat):
        wire = GeminiWire(Operation(gemini_op("BATCH_STATE_SUCCEEDED", rows, done=True)))
        out = await wire.results("batches/b1", await wire.poll("batches/b1"))
        assert out["a"].body == GEMINI_OK and "*" not in out


async def test_gemini_a_failed_batch_without_an_error_fails_every_request() -> None:
    wire = GeminiWire(Operation(gemini_op("BATCH_STATE_FAILED", done=True)))
    out = await wire.results("batches/b1", await wire.poll("batches/b1"))
    assert out["*"].failure == "errored" and "BATCH_STATE_FAILED" in out["*"].message
    wire = GeminiWire(Operation(gemini_op("JOB_STATE_CANCELLED", done=True)))
    out = await wire.results("batches/b1", await wire.poll("batches/b1"))
    assert out["*"].failure == "canceled"


async def test_counts_keep_numbers_and_leave_unknown_members_out() -> None:
    batch = {
        "status": "in_progress",
        "request_counts": {"total": 5, "completed": "2", "failed": 0, "x_new": None, "y": "n/a"},
    }
    polled = await OpenAIWire(Files(json.dumps(batch).encode())).poll("b1")
    assert polled.counts == {"total": 5, "completed": 2, "failed": 0}


async def test_openai_requests_without_a_line_in_a_cancelled_batch_were_canceled() -> None:
    raw = jsonl(openai_ok("a", BODY))
    polled = Polled(True, "cancelled", raw={"output_file_id": "f", "error_file_id": None})
    out = await OpenAIWire(Files(raw)).results("b1", polled)
    assert out["a"].body == BODY and out["*"].failure == "canceled"


async def test_a_per_request_error_is_kept_without_the_models_key() -> None:
    """The model's own key (``redact``) and credential-shaped text both leave the message."""
    failed = {
        "id": "r",
        "custom_id": "d",
        "response": {
            "status_code": 401,
            "body": {"error": {"message": "key sk-secret-key and api_key=abc123 refused"}},
        },
        "error": None,
    }
    polled = Polled(True, "completed", raw={"output_file_id": "f"})
    out = await OpenAIWire(Files(jsonl(failed))).results("b1", polled)
    assert out["d"].failure == "errored"
    assert "sk-secret-key" not in out["d"].message and "abc123" not in out["d"].message


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2026-12-03T00:00:00Z", 1796256000.0),
        ("2026-12-03T00:00:00.123456Z", 1796256000.0),
        ("2026-12-03T01:30:00+01:30", 1796256000.0),
        ("yesterday", None),
        (1796256000, None),
    ],
)
def test_anthropic_created_at_is_read_as_rfc_3339(text: Any, epoch: float | None) -> None:
    from langfx_nb.llms.anthropic import _epoch

    assert _epoch(text) == epoch


def test_each_model_gives_its_own_providers_wire_and_others_have_none() -> None:
    from langfx_nb.errors import InvalidRequestError
    from langfx_nb.llms.anthropic import Anthropic
    from langfx_nb.llms.batch_wire import wire_for
    from langfx_nb.llms.fake import Echo
    from langfx_nb.llms.gemini import Gemini
    from langfx_nb.llms.openai import OpenAI
    from langfx_nb.llms.openai_responses import OpenAIResponses

    kinds = {OpenAI: OpenAIWire, Anthropic: AnthropicWire, Gemini: GeminiWire}
    for model_class, wire_class in kinds.items():
        wire = wire_for(model_class("m", api_key="k"), read_limit=123)
        assert type(wire) is wire_class and wire.read_limit == 123
    for other in (OpenAIResponses("m", api_key="k"), Echo()):
        with pytest.raises(InvalidRequestError, match="has none"):
            wire_for(other)
