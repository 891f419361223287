"""Reasoning as message parts, from each provider's wire format: Anthropic thinking and
redacted thinking, Gemini thought summaries, OpenAI Responses reasoning summaries."""

from __future__ import annotations

from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI, OpenAIResponses
from langfx_nb.messages import ContinuationPart, Message, ReasoningPart

from .wire import SECRET_KEY, Reply, Server, fixture, splits


def reasoning(msg: Message[Any]) -> list[ReasoningPart]:
    return [p for p in msg.parts if isinstance(p, ReasoningPart)]


async def test_anthropic_streamed_thinking_is_a_reasoning_part() -> None:
    server = Server(Reply.sse(splits(fixture("anthropic_thinking.sse"))["one_byte"]))
    lm = Anthropic("claude-sonnet-4-5", api_key=SECRET_KEY, transport=server.transport)
    chunks = [c async for c in lm.stream("2+2?")]
    msg = chunks[-1].aggregated
    assert reasoning(msg) == [ReasoningPart("The user wants 2+2. That is 4.", "anthropic")]
    assert msg.text == "4"  # reasoning is never answer text
    assert msg.reasoning == "The user wants 2+2. That is 4."
    assert all(c.delta != "The user wants 2+2. " for c in chunks)


async def test_anthropic_redacted_thinking_is_kept_opaque_and_marked() -> None:
    server = Server(Reply.json(fixture("anthropic_message_redacted.json")))
    lm = Anthropic("claude-sonnet-4-5", api_key=SECRET_KEY, transport=server.transport)
    msg = await lm.call("Which is cheaper?")
    assert reasoning(msg) == [
        ReasoningPart("Compare the two options by cost.", "anthropic"),
        ReasoningPart("", "anthropic", redacted=True),
    ]
    assert msg.text == "The second option is cheaper."
    # The same model gets the blocks back verbatim (signature, redacted data) ...
    server.replies.append(Reply.json(fixture("anthropic_message_text.json")))
    await lm.call(lf.ComplexMessage([lf.UserMessage("Which?"), msg, lf.UserMessage("Why?")]))
    sent = server.body["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["thinking", "redacted_thinking", "text"]
    # ... another model gets neither the blocks nor the reasoning text, once the
    # continuation is dropped (keeping it is refused, as before).
    shown = lf.AIMessage([p for p in msg.parts if not isinstance(p, ContinuationPart)])
    other = OpenAI("gpt-4.1", api_key=SECRET_KEY, transport=server.transport)
    server.replies.append(Reply.json(fixture("openai_completion_json.json")))
    await other.call(lf.ComplexMessage([lf.UserMessage("Which?"), shown, lf.UserMessage("Why?")]))
    assert server.body["messages"][1] == {
        "role": "assistant",
        "content": "The second option is cheaper.",
    }
    assert "Compare the two options" not in str(server.body)


async def test_gemini_thought_summaries_are_reasoning_parts() -> None:
    server = Server(Reply.json(fixture("gemini_generate_tool.json")))
    lm = Gemini("gemini-2.5-flash", api_key=SECRET_KEY, transport=server.transport)
    msg = await lm.call("Weather in Paris?")
    assert reasoning(msg) == [ReasoningPart("Let me check.", "gemini")]
    assert msg.text == ""
    assert msg.usage is not None and msg.usage.reasoning_tokens == 20


async def test_openai_responses_reasoning_summaries_are_reasoning_parts() -> None:
    server = Server(Reply.json(fixture("openai_responses_reasoning.json")))
    lm = OpenAIResponses("o4-mini", api_key=SECRET_KEY, transport=server.transport)
    msg = await lm.call("Which is cheaper, 12 or 15?")
    assert reasoning(msg) == [
        ReasoningPart(
            "**Comparing prices**\n\nThe user asks which is cheaper; 12 < 15.\n\nSo the first one.",
            "openai",
        )
    ]
    assert msg.text == "The first one is cheaper."
    assert msg.usage is not None and msg.usage.reasoning_tokens == 64


def test_reasoning_parts_round_trip_through_json() -> None:
    msg = lf.AIMessage(
        [ReasoningPart("why", "anthropic"), ReasoningPart("", "anthropic", redacted=True), "ok"]
    )
    back = Message.from_json(msg.to_json_str())
    assert back == msg and back.reasoning == "why" and back.text == "ok"


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
async def test_the_trace_shows_reasoning_folded_apart_from_the_text(provider: str) -> None:
    answer = lf.AIMessage([ReasoningPart("thinking it over", provider), "the answer"])
    async with lf.Session(lf.llms.StaticResponse(answer)) as session:
        assert await session.query("q") == "the answer"
    (node,) = session.all_queries
    assert node.outputs["text"] == "the answer"
    assert node.outputs["reasoning"] == "thinking it over"


async def test_fake_models_stream_reasoning_as_a_part_not_as_text() -> None:
    answer = lf.AIMessage([ReasoningPart("hmm", "fake"), "done"])
    chunks = [c async for c in lf.llms.StaticResponse(answer, chunk_size=2).stream("q")]
    assert "".join(c.delta for c in chunks) == "done"
    assert chunks[-1].aggregated.reasoning == "hmm"
