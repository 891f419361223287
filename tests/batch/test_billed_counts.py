"""Every request a provider answered is counted with its usage and cost, whatever happened
to the answer afterwards: truncated, refused, failed validation, repaired. Through real HTTP
against a local OpenAI-compatible server on 127.0.0.1; the server's own request count is the
truth the library's totals must match."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import OpenAI, allow_model_requests
from tests.llms.local_server import LocalServer, Reply

PROMPT, COMPLETION = 10, 5  # the usage every scripted answer reports
PRICE = lf.Price(1.0, 2.0)  # per million tokens: 20 per million per request


class A(pydantic.BaseModel):
    n: int


def answer(content: str, finish: str = "stop", refusal: str | None = None) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    body = {
        "id": "chatcmpl-1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": PROMPT,
            "completion_tokens": COMPLETION,
            "total_tokens": PROMPT + COMPLETION,
        },
    }
    return Reply.json(json.dumps(body).encode())


def streamed(content: str, finish: str) -> Reply:
    chunks = [
        {"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {
            "id": "c",
            "choices": [],
            "usage": {
                "prompt_tokens": PROMPT,
                "completion_tokens": COMPLETION,
                "total_tokens": PROMPT + COMPLETION,
            },
        },
    ]
    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return Reply.sse(data + b"data: [DONE]\n\n")


@pytest.fixture
async def served() -> AsyncIterator[tuple[LocalServer, OpenAI]]:
    """A local server (set its ``replies``) and a model that talks to it."""
    server = LocalServer([answer('{"n": 0}')])
    await server.listen()
    allow_model_requests(True)  # the suite blocks model requests but to such servers
    lm = OpenAI("m", base_url=server.url + "/v1", api_key="k", retry=None)
    try:
        yield server, lm
    finally:
        await lm.aclose()
        allow_model_requests(False)
        await server.aclose()


async def test_a_batch_counts_every_answered_request_as_the_server_did(
    served: tuple[LocalServer, OpenAI],
) -> None:
    server, lm = served
    server.replies = [
        answer('{"n": 1}'),  # ok
        answer('{"n": 2', "length"),  # truncated: IncompleteGenerationError
        answer('{"m": 3}'),  # fails validation: MappingError
        answer("", refusal="no"),  # refused: ContentFilteredError
        answer('{"m": 4}'),  # item 4, attempt 1: fails validation, repaired ...
        answer('{"n": 4}'),  # ... by attempt 2
        answer('{"n": 5', "length"),  # last item truncated too
    ]
    snapshots: list[Any] = []

    async def fn(x: int, s: lf.Session) -> A:
        return await s.query("say {{x}}", A, vars={"x": x}, repair=1 if x == 4 else 0)

    session = lf.Session(lm, prices={"openai:m": PRICE})
    result = await lf.batch(
        fn, range(6), max_concurrency=1, progress=snapshots.append, session=session
    )
    sent = len(server.requests)
    assert sent == 7
    assert result.statuses == ["ok", "failed", "failed", "failed", "ok", "failed"]
    totals = result.totals
    assert totals.requests == sent
    assert totals.usage.prompt_tokens == PROMPT * sent
    assert totals.usage.completion_tokens == COMPLETION * sent
    assert totals.cost == pytest.approx(PRICE.cost(lf.Usage(PROMPT, COMPLETION)) * sent)
    assert totals.unpriced_requests == 0
    final = snapshots[-1]
    assert final.requests == sent and final.usage.total_tokens == (PROMPT + COMPLETION) * sent
    summary = session.usage_summary
    assert summary.requests == sent and summary.usage.total_tokens == totals.usage.total_tokens
    # the node of the truncated item's query shows the request, its usage and the text
    queries = [n for n in session.trace_store.nodes.values() if n.name == "query:A"]
    truncated = queries[1]
    assert truncated.status == "failed"
    assert truncated.usage is not None and truncated.usage.total_tokens == PROMPT + COMPLETION
    assert truncated.cost == pytest.approx(PRICE.cost(lf.Usage(PROMPT, COMPLETION)))
    assert truncated.outputs["text"] == '{"n": 2'
    assert truncated.outputs["finish_reason"] == "length"


async def test_a_truncated_stream_is_counted_by_the_model_and_the_session(
    served: tuple[LocalServer, OpenAI],
) -> None:
    server, lm = served
    server.replies = [streamed('{"n": 1', "length")]
    session = lf.Session(lm)
    events = [event async for event in session.query_stream("say", A)]
    assert events[-1].type == "generation_failed"
    error = events[-1].error
    assert isinstance(error, lf.IncompleteGenerationError)
    assert len(server.requests) == 1
    assert lm.num_requests == 1 and lm.total_usage.total_tokens == PROMPT + COMPLETION
    assert error.response is not None and error.response.text == '{"n": 1'
    summary = session.usage_summary
    assert summary.requests == 1 and summary.usage.total_tokens == PROMPT + COMPLETION


async def test_a_plain_call_counts_a_truncated_answer(served: tuple[LocalServer, OpenAI]) -> None:
    server, lm = served
    server.replies = [answer("half an ans", "length")]
    with pytest.raises(lf.IncompleteGenerationError) as info:
        await lm.call("x")
    assert lm.num_requests == 1 and lm.total_usage.prompt_tokens == PROMPT
    response = info.value.response
    assert response is not None and response.usage is not None
    assert response.text == "half an ans"


async def test_an_evaluation_reports_every_answered_request_as_the_server_did(
    served: tuple[LocalServer, OpenAI],
) -> None:
    # A trial whose task raised (truncated, refused, invalid answer) was billed: the report's
    # usage and cost count its requests, as the server counted them.
    server, lm = served
    server.replies = [
        answer('{"n": 0}'),  # ok, correct
        answer('{"n": 2', "length"),  # truncated
        answer('{"m": 3}'),  # fails validation
        answer("", refusal="no"),  # refused
        answer('{"n": 9}'),  # ok, wrong
    ]

    async def task(inputs: dict[str, Any], s: lf.Session) -> int:
        return (await s.query("say {{x}}", A, vars={"x": inputs["x"]})).n

    cases = [lf.eval.Case(id=f"c{i}", inputs={"x": i}, expected=0) for i in range(5)]
    session = lf.Session(lm, prices={"openai:m": PRICE})
    report = await lf.eval.run(
        task, cases, lf.eval.exact, session=session, max_concurrency=1, progress=False
    )
    sent = len(server.requests)
    assert sent == 5
    assert [r.status for r in report.results] == ["ok", "failed", "failed", "failed", "ok"]
    assert report.usage.prompt_tokens == PROMPT * sent
    assert report.usage.completion_tokens == COMPLETION * sent
    assert report.cost == pytest.approx(PRICE.cost(lf.Usage(PROMPT, COMPLETION)) * sent)
