"""``lf.llms.OpenAI`` against a real llama.cpp ``llama-server`` with a small real model.

The assertions are about the wire and the types (chunks arriving one by one, usage, finish
reasons, error classes, connections), never about the tiny model's wording. Requests use
``temperature=0`` so the answers, while meaningless, repeat from run to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf

from ._proxy import CountingProxy
from .conftest import LlamaServer, openai_at

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(120)]

# A prompt the model answers briefly and completely (finish reason "stop") at temperature 0.
SHORT = "Reply with the single word: yes"
COUNT = "Count from 1 to 20, separated by spaces."
LONG = "Write a very long story about a dragon and a castle."
SHORT_OPTS: dict[str, Any] = {"temperature": 0, "max_tokens": 200}
# Where only the wire matters: the server's grammar holds the answer to `{"ok": true|false}`,
# so it always ends (finish reason "stop") within a few tokens, even when batching with other
# requests changes the numbers enough to change a free-text answer.
QUICK: dict[str, Any] = {
    "temperature": 0,
    "max_tokens": 64,
    "response_schema": {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    },
}


class Person(BaseModel):
    name: str
    age: int


async def test_call_returns_text_and_usage(lm: lf.llms.OpenAI) -> None:
    msg = await lm.call(SHORT, **SHORT_OPTS)
    assert isinstance(msg, lf.AIMessage) and msg.text.strip()
    u = msg.usage
    assert u is not None and u.prompt_tokens and u.completion_tokens
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert msg.metadata["provider_finish_reason"] == "stop"


async def test_stream_arrives_incrementally_with_usage(lm: lf.llms.OpenAI) -> None:
    start = time.monotonic()
    arrivals: list[float] = []
    chunks: list[lf.StreamChunk] = []
    async for chunk in lm.stream(COUNT, **SHORT_OPTS):
        arrivals.append(time.monotonic() - start)
        chunks.append(chunk)
    text_chunks = [c for c in chunks if c.delta]
    assert len(text_chunks) >= 10
    # token by token: the first text arrived long before the last one
    assert arrivals[chunks.index(text_chunks[0])] < arrivals[-1] / 2
    final = chunks[-1]
    assert final.final and final.finish_reason == "stop"
    assert "".join(c.delta for c in chunks) == final.aggregated.text
    u = final.usage
    assert u is not None and u.prompt_tokens and u.completion_tokens
    assert u.completion_tokens >= len(text_chunks) - 1
    assert u.cached_tokens is not None  # llama-server reports prompt-cache hits too


async def test_early_break_closes_the_connection_and_the_next_call_works(
    llama_server: LlamaServer, allow_requests: None
) -> None:
    with CountingProxy(llama_server.port) as proxy:
        lm = openai_at(proxy.url)
        try:
            seen = 0
            async with contextlib.aclosing(lm.stream(LONG, temperature=0, max_tokens=400)) as s:
                async for chunk in s:
                    seen += bool(chunk.delta)
                    if seen == 3:
                        break
            assert proxy.wait_closed(1), "the abandoned stream's connection stayed open"
            msg = await lm.call(SHORT, **QUICK)
            assert msg.text.strip()
            assert proxy.opened == 2
        finally:
            await lm.aclose()


async def test_max_tokens_truncation_is_incomplete_everywhere(lm: lf.llms.OpenAI) -> None:
    opts: dict[str, Any] = {"temperature": 0, "max_tokens": 4}
    with pytest.raises(lf.IncompleteGenerationError):
        await lm.call(LONG, **opts)
    with pytest.raises(lf.IncompleteGenerationError):
        async for _ in lm.stream(LONG, **opts):
            pass
    with pytest.raises(lf.IncompleteGenerationError):
        await lf.query(LONG, lm=lm, **opts)
    with pytest.raises(lf.IncompleteGenerationError):
        async for _ in lf.query_stream(LONG, lm=lm, **opts):
            pass


async def test_native_structured_output_gives_a_valid_value(lm: lf.llms.OpenAI) -> None:
    for _ in range(3):
        person = await lf.query(
            "Invent a person.", Person, lm=lm, native_structured_output=True, **SHORT_OPTS
        )
        assert isinstance(person, Person)


async def test_query_stream_with_native_output_ends_complete(lm: lf.llms.OpenAI) -> None:
    events = [
        e
        async for e in lf.query_stream(
            "Invent a person.", Person, lm=lm, native_structured_output=True, **SHORT_OPTS
        )
    ]
    kinds = [e.type for e in events]
    assert kinds[-1] == "generation_complete", kinds
    assert isinstance(events[-1].value, Person)
    ends = {e.path: e.value for e in events if e.type == "field_end"}
    assert ends[("name",)] == events[-1].value.name and ends[("age",)] == events[-1].value.age
    assert kinds.index("field_start") < kinds.index("field_end") < len(kinds) - 1


async def test_too_long_prompt_is_a_context_length_error(lm: lf.llms.OpenAI) -> None:
    prompt = "apple banana cherry " * 1200  # ~3600 tokens, the server was started with -c 2048
    with pytest.raises(lf.ContextLengthError) as info:
        await lm.call(prompt, max_tokens=8)
    assert info.value.status == 400
    with pytest.raises(lf.ContextLengthError):
        async for _ in lm.stream(prompt, max_tokens=8):
            pass


async def test_eight_concurrent_calls_and_streams_all_succeed(lm: lf.llms.OpenAI) -> None:
    async def call() -> str:
        return (await lm.call(SHORT, **QUICK)).text

    async def stream() -> str:
        chunks = [c async for c in lm.stream(SHORT, **QUICK)]
        assert chunks[-1].final and chunks[-1].finish_reason == "stop"
        return chunks[-1].aggregated.text

    texts = await asyncio.gather(*(f() for f in [call, stream] * 4))
    assert [json.loads(t).keys() for t in texts] == [{"ok"}] * 8


async def test_connections_are_pooled_and_streams_end_cleanly(
    llama_server: LlamaServer, allow_requests: None
) -> None:
    """Sequential calls share one connection. llama-server closes the connection after every
    streamed response (it advertises keep-alive, then its chunked writer ends the socket), so
    the request after a stream needs a fresh one: exactly one per stream, none leaked, the
    dead one never reused (every request succeeds)."""
    with CountingProxy(llama_server.port) as proxy:
        lm = openai_at(proxy.url)
        try:
            for _ in range(3):
                await lm.call(SHORT, **QUICK)
            assert proxy.opened == 1
            for _ in range(3):
                chunks = [c async for c in lm.stream(SHORT, **QUICK)]
                assert chunks[-1].final
            await lm.call(SHORT, **QUICK)
            # the first stream reused the calls' connection; after each stream the server
            # closed it, so the next request opened a new one
            assert proxy.opened == 1 + 3
        finally:
            await lm.aclose()


async def test_server_killed_mid_stream_then_the_next_call_reconnects(
    llama_paths: dict[str, str], allow_requests: None
) -> None:
    server = LlamaServer(llama_paths["server"], llama_paths["model"])
    server.start()
    lm = openai_at(server.url)
    try:
        await lm.call(SHORT, **QUICK)  # a pooled connection exists now
        seen = 0
        with pytest.raises(lf.ServerError, match="connection failed"):
            async for chunk in lm.stream(LONG, temperature=0, max_tokens=400):
                seen += bool(chunk.delta)
                if seen == 3:
                    server.kill()
        with pytest.raises(lf.ServerError, match="connection failed"):
            await lm.call(SHORT, **QUICK)  # nobody listens now: refused
        server.start()  # same port
        msg = await lm.call(SHORT, **QUICK)
        assert msg.text.strip()
    finally:
        await lm.aclose()
        server.stop()
