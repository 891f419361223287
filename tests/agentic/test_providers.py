"""One agent run per provider adapter, over recorded wire bytes (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI

from ..llms.wire import SECRET_KEY, Reply, Server, fixture, splits

OPENAI_TEXT = {
    "id": "chatcmpl-2",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "It is 21 C."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 120, "completion_tokens": 6, "total_tokens": 126},
}

CASES: dict[str, tuple[Any, str, bytes, str]] = {
    # provider: (model factory, tool fixture, final reply, call id in the fixture)
    "gemini": (
        lambda t: Gemini("gemini-2.5-flash", api_key=SECRET_KEY, transport=t),
        "gemini_generate_tool.json",
        fixture("gemini_generate_text.json"),
        "fc-1",
    ),
    "anthropic": (
        lambda t: Anthropic("claude-sonnet-4-5", api_key=SECRET_KEY, transport=t),
        "anthropic_message_tool.json",
        fixture("anthropic_message_text.json"),
        "toolu_01A09q90qw90lq917835lq9",
    ),
    "openai": (
        lambda t: OpenAI("gpt-4o-mini", api_key=SECRET_KEY, transport=t),
        "openai_completion_tool.json",
        json.dumps(OPENAI_TEXT).encode(),
        "call_abc123",
    ),
}


@pytest.mark.parametrize("provider", sorted(CASES))
async def test_agent_runs_over_each_provider(provider: str) -> None:
    make, tool_fixture, final, call_id = CASES[provider]
    server = Server(Reply.json(fixture(tool_fixture)), Reply.json(final))
    lm = make(server.transport)
    cities: list[str] = []

    @lf.tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        cities.append(city)
        return {"city": city, "temp_c": 21}

    async with lf.Session(lm) as session:
        answer = await lf.Agent("Weather?", tools=[get_weather]).invoke(session)
        (call,) = session.all_tool_calls
        summary = session.usage_summary
        trace = session.trace_json_str()
    assert answer and len(cities) == 1
    assert call.status == "ok" and call.inputs["call_id"] == call_id
    assert summary.requests == 2 and summary.usage.total_tokens
    second = server.requests[1].content.decode()
    assert call_id in second and "temp_c" in second  # the result went back, correlated
    assert SECRET_KEY not in trace
    assert server.all_closed()


async def test_streamed_agent_over_gemini_sse_with_two_tools() -> None:
    server = Server(Reply.sse(fixture("gemini_tool.sse")), Reply.sse(fixture("gemini_text.sse")))
    lm = Gemini("gemini-2.5-flash", api_key=SECRET_KEY, transport=server.transport)

    @lf.tool
    async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Current weather for a city."""
        return {"city": city, "temp": 21, "unit": unit}

    @lf.tool
    async def get_time(tz: str) -> str:
        """Time in a zone."""
        return "12:00"

    deltas: list[str] = []

    def observe(event: dict[str, Any]) -> None:
        if event["type"] == "node_update" and "delta" in event["changes"]:
            deltas.append(event["changes"]["delta"])

    async with lf.Session(lm) as session:
        session.subscribe(observe)
        agent = lf.Agent("Weather and time?", tools=[get_weather, get_time], stream=True)
        answer = await agent.invoke(session)
        calls = [(c.name, c.status) for c in session.all_tool_calls]
    assert answer.startswith("Bonjour") and "".join(deltas) == answer
    assert calls == [("get_weather", "ok"), ("get_time", "ok")]
    assert server.all_closed()


async def test_cancelling_a_streamed_agent_closes_the_http_stream() -> None:
    events = splits(fixture("gemini_text.sse"))["per_event"]
    assert len(events) > 2
    server = Server(Reply.sse(events, hang_after=1))
    lm = Gemini("gemini-2.5-flash", api_key=SECRET_KEY, transport=server.transport)
    first = asyncio.Event()

    def observe(event: dict[str, Any]) -> None:
        if event["type"] == "node_update":
            first.set()

    async with lf.Session(lm) as session:
        session.subscribe(observe)
        task = asyncio.ensure_future(lf.Agent("hi", stream=True).invoke(session))
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [(q.name, q.status) for q in session.all_queries] == [("step 1", "cancelled")]
    assert server.all_closed()
