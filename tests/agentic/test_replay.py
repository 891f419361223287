"""Offline replay: a run repeated with the same SQLite cache sends no request at all.

The second run uses a model of the same identity whose own answers differ (a fake with
another script, or a provider whose server is gone and whose network is blocked), so any
request that was not replayed would change the output or fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import Scripted, SQLiteCache, StaticResponse, allow_model_requests
from langfx_nb.llms.openai import OpenAI
from tests.llms.local_server import Reply, local_server
from tests.llms.wire import CITY_SSE

TC = lf.ToolCall


@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _agent_run(lm: Scripted, stream: bool = False) -> tuple[str, list[tuple[str, Any]]]:
    async with lf.Session(lm) as session:
        agent = lf.Agent("1+2, then +4?", "Use tools.", tools=[add], stream=stream)
        answer = await agent.invoke(session)
        outputs = [(n.kind, n.outputs) for n in session.root.walk() if n.kind != "session"]
    return answer, outputs


@pytest.mark.parametrize("stream", [False, True])
async def test_agent_run_replays_offline_from_a_sqlite_cache(tmp_path: Path, stream: bool) -> None:
    path = tmp_path / "cache.sqlite"
    first = Scripted(
        [TC("c1", "add", {"a": 1, "b": 2}), TC("c2", "add", {"a": 3, "b": 4}), "It is 7."],
        cache=SQLiteCache(path),
    )
    answer, outputs = await _agent_run(first, stream)
    assert answer == "It is 7." and len(first.requests) == 3

    offline = Scripted([lf.ServerError("the network is off")], cache=SQLiteCache(path))
    again, outputs_again = await _agent_run(offline, stream)
    assert offline.requests == []
    assert again == answer
    assert _without_cache_hit(outputs_again) == _without_cache_hit(outputs)


def _without_cache_hit(outputs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (k, {x: y for x, y in o.items() if x != "cache_hit"} if isinstance(o, dict) else o)
        for k, o in outputs
    ]


def test_cache_key_ignores_message_metadata() -> None:
    lm = StaticResponse("x")
    plain = lm.build_request([lf.UserMessage("hi"), lf.AIMessage("yo"), lf.UserMessage("and?")])
    replayed = lf.AIMessage("yo", metadata={"cache_hit": True, "cache_key": "abc"})
    replayed.usage = lf.Usage(1, 2, 3)
    marked = lm.build_request([lf.UserMessage("hi"), replayed, lf.UserMessage("and?")])
    assert lm._cache_key(plain, 0) == lm._cache_key(marked, 0)
    other = lm.build_request([lf.UserMessage("hi"), lf.AIMessage("no"), lf.UserMessage("and?")])
    assert lm._cache_key(plain, 0) != lm._cache_key(other, 0)


class City(BaseModel):
    name: str
    landmarks: list[str]


async def _stream_events(lm: OpenAI) -> list[Any]:
    try:
        return [e async for e in lf.query_stream("Paris?", City, lm=lm)]
    finally:
        await lm.aclose()


async def test_query_stream_replays_offline_from_a_sqlite_cache(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    async with local_server(Reply.sse(CITY_SSE)) as server:
        url = server.url
        allow_model_requests(True)
        try:
            lm = OpenAI("m", api_key="k", base_url=url, cache=SQLiteCache(path))
            events = await _stream_events(lm)
        finally:
            allow_model_requests(False)
        assert len(server.requests) == 1
    done = events[-1]
    assert isinstance(done, lf.GenerationComplete)
    assert done.value == City(name="Paris", landmarks=["Louvre"])

    # the server is gone and real requests are blocked: only the cache can answer
    again = await _stream_events(OpenAI("m", api_key="k", base_url=url, cache=SQLiteCache(path)))
    assert isinstance(again[-1], lf.GenerationComplete)
    assert again[-1].value == done.value
    assert again[-1].message.metadata.get("cache_hit") is True
    fields = [(type(e).__name__, getattr(e, "value", None)) for e in events]
    fields_again = [(type(e).__name__, getattr(e, "value", None)) for e in again]
    assert [f for f in fields_again if f[0] == "FieldEnd"] == [
        f for f in fields if f[0] == "FieldEnd"
    ]


async def test_text_stream_replays_offline(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first = StaticResponse("streamed words", chunk_size=3, cache=SQLiteCache(path))
    text = "".join([d async for d in lf.query_stream("q", lm=first)])
    offline = StaticResponse("streamed words", cache=SQLiteCache(path))  # same identity
    assert "".join([d async for d in lf.query_stream("q", lm=offline)]) == text
    assert offline.num_requests == 0


@pytest.mark.parametrize("bad", ["no answer here", "City(name=1)"])
async def test_a_bad_streamed_answer_is_not_replayed(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "cache.sqlite"
    lm = StaticResponse(bad, cache=SQLiteCache(path))
    events = [e async for e in lf.query_stream("q", City, lm=lm)]
    assert isinstance(events[-1], lf.ParsingFailed)
    assert len(SQLiteCache(path)) == 0
