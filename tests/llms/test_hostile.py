"""Hostile responses: any JSON in any event, in any order, fails only with an ``LMError``
(never a bare TypeError/KeyError), and the response is always closed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import langfx_nb as lf
from langfx_nb.llms._http import HTTPModel
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.base import ToolSpec
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.openai_responses import OpenAIResponses

from .wire import Reply, Server

# the providers' own vocabulary, so generated objects reach deep into the decoders
KEYS = [
    *("candidates", "content", "parts", "text", "thought", "thoughtSignature", "functionCall"),
    *("name", "args", "id", "finishReason", "index", "usageMetadata", "promptFeedback"),
    *("blockReason", "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "error"),
    *("code", "status", "details", "type", "message", "content_block", "delta", "usage"),
    *("input", "partial_json", "stop_reason", "input_tokens", "output_tokens", "signature"),
    *("thinking", "citation", "choices", "tool_calls", "function", "arguments", "refusal"),
    *("finish_reason", "prompt_tokens", "completion_tokens", "prompt_tokens_details"),
    *("response", "output", "item", "item_id", "call_id", "incomplete_details", "reason"),
]
STRINGS = [
    *("STOP", "MAX_TOKENS", "SAFETY", "text", "tool_use", "text_delta", "input_json_delta"),
    *("thinking_delta", "end_turn", "max_tokens", "refusal", "stop", "length", "tool_calls"),
    *("message_start", "content_block_start", "model", "user", "{", '{"a":', "", "x"),
    *("response.completed", "response.output_text.delta", "response.output_item.added"),
    *("response.function_call_arguments.delta", "function_call", "message", "output_text"),
    *("completed", "incomplete", "failed", "reasoning", "refusal"),
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(STRINGS),
    st.text(max_size=5),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=25,
)
objects = st.dictionaries(st.sampled_from(KEYS), values, max_size=5)
ANTHROPIC_EVENTS = [
    *("message_start", "content_block_start", "content_block_delta", "content_block_stop"),
    *("message_delta", "message_stop", "ping", "error", "other"),
]
TOOL = ToolSpec("f", "", {"type": "object"})


def frame(cls: type[HTTPModel], objs: list[dict[str, Any]], names: list[str]) -> bytes:
    out = []
    for i, o in enumerate(objs):
        data = json.dumps(o)
        if cls is Anthropic:
            out.append(f"event: {names[i % len(names)]}\ndata: {data}\n\n")
        else:
            out.append(f"data: {data}\n\n")
    if cls is OpenAI:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


async def run(cls: type[HTTPModel], reply: Reply, stream: bool) -> Server:
    server = Server(reply)
    lm = cls("m", api_key="k", transport=server.transport)
    try:
        if stream:
            [c async for c in lm.stream("x", tools=[TOOL])]
        else:
            await lm.call("x", tools=[TOOL])
    except lf.LMError:
        pass
    return server


@pytest.mark.parametrize("cls", [Gemini, Anthropic, OpenAI, OpenAIResponses])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objs=st.lists(objects, min_size=1, max_size=6),
    names=st.lists(st.sampled_from(ANTHROPIC_EVENTS), min_size=1, max_size=6),
)
def test_any_json_stream_fails_cleanly(
    cls: type[HTTPModel], objs: list[dict[str, Any]], names: list[str]
) -> None:
    server = asyncio.run(run(cls, Reply.sse(frame(cls, objs, names)), stream=True))
    assert server.all_closed()


@pytest.mark.parametrize("cls", [Gemini, Anthropic, OpenAI, OpenAIResponses])
@settings(max_examples=150, deadline=None)
@given(body=values, status=st.sampled_from([200, 400, 401, 429, 500, 529]))
def test_any_json_body_fails_cleanly(cls: type[HTTPModel], body: Any, status: int) -> None:
    server = asyncio.run(run(cls, Reply.json(body, status=status), stream=False))
    assert server.all_closed()
