"""Reasoning as message parts, on each provider's wire format.

The fixtures used here (``*thinking*``, ``*thoughts*``, ``*reasoning*``) are built from the
providers' documented formats, not recorded (see ``fixtures/SOURCES.md``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.base import ToolSpec
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.openai_responses import OpenAIResponses
from langfx_nb.messages import ContinuationPart, ReasoningPart, TextPart

from .wire import SECRET_KEY, SPLITS, Reply, Server, fixture, splits

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ANTHROPIC_SIG = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
ANTHROPIC_URL = "https://api.anthropic.com/v1"
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta"
OPENAI_URL = "https://api.openai.com/v1"


async def drain(lm: lf.LanguageModel, prompt: Any = "x", **kw: Any) -> list[lf.StreamChunk]:
    return [c async for c in lm.stream(prompt, **kw)]


def without_continuation(msg: lf.Message[Any]) -> lf.AIMessage[Any]:
    return lf.AIMessage([p for p in msg.parts if not isinstance(p, ContinuationPart)])


def transcript(answer: lf.Message[Any]) -> lf.ComplexMessage[Any]:
    return lf.ComplexMessage([lf.UserMessage("q"), answer, lf.UserMessage("and?")])


def assert_round_trips(msg: lf.Message[Any]) -> None:
    back = lf.Message.from_json(msg.to_json_str())
    assert back == msg and back.reasoning == msg.reasoning


# -- messages ----------------------------------------------------------------------------------
def test_reasoning_part_json_round_trip_and_text() -> None:
    full = ReasoningPart(
        "thinking…", "sig", provider="anthropic", model="m", endpoint="https://x", id="rs_1"
    )
    redacted = ReasoningPart("", "data==", redacted=True, provider="anthropic", model="m")
    msg: lf.AIMessage[Any] = lf.AIMessage([full, redacted, "answer"])
    assert msg.text == "answer"  # reasoning is never answer text
    assert msg.reasoning == [full, redacted]
    data = msg.to_json()
    assert data["version"] == 1
    assert data["parts"][0] == {
        "kind": "reasoning",
        "text": "thinking…",
        "signature": "sig",
        "provider": "anthropic",
        "model": "m",
        "endpoint": "https://x",
        "id": "rs_1",
    }
    assert data["parts"][1]["redacted"] is True
    assert_round_trips(msg)
    bad = {**data, "parts": [{"kind": "reasoning", "text": "t", "signature": 3}]}
    with pytest.raises(ValueError, match="signature"):
        lf.Message.from_json(bad)


_opt = st.none() | st.text(min_size=1)


@given(
    text=st.text(),
    signature=_opt,
    redacted=st.booleans(),
    provider=st.text(),
    model=st.text(),
    endpoint=_opt,
    id=_opt,
)
def test_any_reasoning_part_survives_the_json_round_trip(
    text: str,
    signature: str | None,
    redacted: bool,
    provider: str,
    model: str,
    endpoint: str | None,
    id: str | None,
) -> None:
    part = ReasoningPart(text, signature, redacted, provider, model, endpoint, id)
    msg: lf.AIMessage[Any] = lf.AIMessage([part, "a"])
    assert lf.Message.from_json(msg.to_json_str()).parts[0] == part


# -- Anthropic ---------------------------------------------------------------------------------
def anthropic(server: Server, model: str = "claude-sonnet-4-5", **kw: Any) -> Anthropic:
    return Anthropic(model, api_key=SECRET_KEY, transport=server.transport, **kw)


@pytest.mark.parametrize("split", SPLITS)
async def test_anthropic_thinking_and_redacted_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("anthropic_thinking_redacted.sse"))[split]))
    chunks = await drain(anthropic(server), "27 × 453?", thinking_budget=2048)
    msg = chunks[-1].aggregated
    assert msg.text == "27 × 453 = 12,231"
    thinking = (
        "Let me solve this step by step:\n\n1. First break down 27 × 453"
        "\n2. 453 = 400 + 50 + 3 — ça marche 🎉"
    )
    assert msg.reasoning == [
        ReasoningPart(thinking, ANTHROPIC_SIG, provider="anthropic", model="claude-sonnet-4-5",
                      endpoint=ANTHROPIC_URL),
        ReasoningPart("", REDACTED, redacted=True, provider="anthropic",
                      model="claude-sonnet-4-5", endpoint=ANTHROPIC_URL),
    ]  # fmt: skip
    assert [p.kind for p in msg.parts] == ["reasoning", "reasoning", "text", "continuation"]
    assert server.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert server.body["max_tokens"] == 2048 + 4096
    assert_round_trips(msg)
    assert server.all_closed()


async def test_anthropic_whole_response_thinking_goes_back_only_to_the_same_model() -> None:
    server = Server(Reply.json(fixture("anthropic_message_thinking.json")))
    lm = anthropic(server)
    msg = await lm.call("Weather in Paris?", tools=[WEATHER], thinking_budget=1024, max_tokens=3000)
    assert server.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert server.body["max_tokens"] == 3000
    assert [p.kind for p in msg.parts] == ["reasoning", "reasoning", "tool_call", "continuation"]
    assert msg.reasoning[0].text.startswith("The user asks for the weather")
    assert msg.reasoning[1].redacted and msg.reasoning[1].signature == REDACTED
    expected = [
        {
            "type": "thinking",
            "thinking": "The user asks for the weather in Paris. I should call get_weather.",
            "signature": "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfF"
            "G/UvLEczmEsUjavL",
        },
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "tool_use", "id": "toolu_01CswdEQBMshySk6Y9DFKrfq", "name": "get_weather",
         "input": {"city": "Paris"}},
    ]  # fmt: skip
    # rebuilt from the parts alone (no continuation): the same blocks, signatures intact
    for answer in (msg, without_continuation(msg)):
        server.replies.append(Reply.json(fixture("anthropic_message_text.json")))
        await lm.call(transcript(answer))
        assert server.body["messages"][1] == {"role": "assistant", "content": expected}
    # another model never gets this model's reasoning: dropped (the continuation still raises)
    other = anthropic(server, "claude-opus-4-1")
    server.replies.append(Reply.json(fixture("anthropic_message_text.json")))
    await other.call(transcript(without_continuation(msg)))
    assert server.body["messages"][1]["content"] == [expected[2]]
    with pytest.raises(lf.InvalidRequestError, match="continuation"):
        await other.call(transcript(msg))


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"thinking_budget": 1000}, lf.InvalidRequestError, "at least 1024"),
        ({"thinking_budget": 2048, "max_tokens": 2048}, lf.InvalidRequestError, "exceed"),
        ({"thinking_budget": 2048, "temperature": 0.2}, lf.UnsupportedCapabilityError, "temp"),
        (
            {"thinking_budget": 2048, "tools": [WEATHER], "tool_choice": "any"},
            lf.UnsupportedCapabilityError,
            "tool_choice",
        ),
        ({"reasoning_effort": "high"}, lf.UnsupportedCapabilityError, "thinking_budget"),
    ],
)
async def test_anthropic_reasoning_options_fail_before_sending(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    server = Server()
    with pytest.raises(error, match=match):
        await anthropic(server).call("x", **options)
    assert server.requests == []


# -- Gemini ------------------------------------------------------------------------------------
def gemini(server: Server, model: str = "gemini-2.5-flash", **kw: Any) -> Gemini:
    return Gemini(model, api_key=SECRET_KEY, transport=server.transport, **kw)


@pytest.mark.parametrize("split", SPLITS)
async def test_gemini_thought_summaries_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("gemini_thoughts.sse"))[split]))
    chunks = await drain(gemini(server), "r's in strawberry?", thinking_budget=1024)
    assert "".join(c.delta for c in chunks) == 'There are three r\'s in "strawberry".'
    msg = chunks[-1].aggregated
    thoughts = (
        '**Counting the letters**\n\nI\'m checking each letter of "strawberry" — ça va 🍓'
        "\n\n**Confirming**\n\nThree r's in total."
    )
    assert msg.reasoning == [
        ReasoningPart(thoughts, provider="gemini", model="gemini-2.5-flash", endpoint=GEMINI_URL)
    ]
    assert [p.kind for p in msg.parts] == ["reasoning", "text", "continuation"]
    assert msg.usage == lf.Usage(9, 11 + 260, 280, None, 260)
    assert server.body["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 1024,
        "includeThoughts": True,
    }
    assert_round_trips(msg)
    assert server.all_closed()


async def test_gemini_whole_response_thoughts_go_back_only_to_the_same_model() -> None:
    server = Server(Reply.json(fixture("gemini_generate_thoughts.json")))
    lm = gemini(server)
    msg = await lm.call("Weather?", tools=[WEATHER], thinking_budget=0)
    assert server.body["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 0,
        "includeThoughts": False,
    }
    assert [p.kind for p in msg.parts] == ["reasoning", "tool_call", "continuation"]
    assert msg.usage is not None and msg.usage.reasoning_tokens == 152
    thought = {
        "text": "**Planning the lookup**\n\nThe user wants the weather; I'll call get_weather "
        "for Paris.",
        "thought": True,
    }
    server.replies.append(Reply.json(fixture("gemini_generate_text.json")))
    await lm.call(transcript(without_continuation(msg)))
    sent = server.body["contents"][1]["parts"]
    assert sent[0] == thought and "functionCall" in sent[1]
    other = gemini(server, "gemini-2.5-pro")
    server.replies.append(Reply.json(fixture("gemini_generate_text.json")))
    await other.call(transcript(without_continuation(msg)))
    assert [list(p) for p in server.body["contents"][1]["parts"]] == [["functionCall"]]


async def test_gemini_reasoning_options_fail_before_sending() -> None:
    server = Server()
    with pytest.raises(lf.UnsupportedCapabilityError, match="reasoning_effort"):
        await gemini(server).call("x", reasoning_effort="low")
    with pytest.raises(lf.InvalidRequestError, match="thinking_budget"):
        await gemini(server).call("x", thinking_budget=-5)
    assert server.requests == []


# -- OpenAI Responses --------------------------------------------------------------------------
def responses(server: Server, model: str = "o4-mini", **kw: Any) -> OpenAIResponses:
    return OpenAIResponses(model, api_key=SECRET_KEY, transport=server.transport, **kw)


RS_ID = "rs_68af1c2f0f4c81a0a1b2c3d4e5f60718"
ENCRYPTED = "gAAAAABor5wzREASONING-ENCRYPTED-CONTENT=="
SUMMARY = (
    "**Adding the numbers**\n\nThe user asks for 2+2 — c’est 4.\n\n"
    "**Answering briefly**\n\nReply with just the number."
)


@pytest.mark.parametrize("split", SPLITS)
async def test_responses_reasoning_summary_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("openai_responses_reasoning.sse"))[split]))
    chunks = await drain(responses(server), "2+2?", reasoning_effort="low")
    assert "".join(c.delta for c in chunks) == "2 + 2 = 4 🎉"
    msg = chunks[-1].aggregated
    assert msg.reasoning == [
        ReasoningPart(SUMMARY, ENCRYPTED, provider="openai", model="o4-mini",
                      endpoint=OPENAI_URL, id=RS_ID)
    ]  # fmt: skip
    assert [p.kind for p in msg.parts] == ["reasoning", "text", "continuation"]
    assert msg.usage == lf.Usage(13, 211, 224, 0, 192)
    assert server.body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert server.body["include"] == ["reasoning.encrypted_content"]
    assert_round_trips(msg)
    assert server.all_closed()


async def test_responses_whole_response_reasoning_goes_back_only_to_the_same_model() -> None:
    server = Server(Reply.json(fixture("openai_responses_reasoning.json")))
    lm = responses(server)
    msg = await lm.call("2+2?")
    assert "reasoning" not in server.body and "include" not in server.body
    assert [p.kind for p in msg.parts] == ["reasoning", "text", "continuation"]
    assert msg.reasoning[0].text == SUMMARY and msg.reasoning[0].signature == ENCRYPTED
    server.replies.append(Reply.json(fixture("openai_responses_reasoning.json")))
    await lm.call(transcript(without_continuation(msg)))
    reasoning_item = server.body["input"][1]
    assert reasoning_item == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": SUMMARY}],
        "id": RS_ID,
        "encrypted_content": ENCRYPTED,
    }
    assert server.body["input"][2]["type"] == "message"
    server.replies.append(Reply.json(fixture("openai_responses_reasoning.json")))
    await responses(server, "gpt-5").call(transcript(without_continuation(msg)))
    assert [i.get("type") for i in server.body["input"]] == [None, "message", None]


async def test_responses_reject_thinking_budget_before_sending() -> None:
    server = Server()
    with pytest.raises(lf.UnsupportedCapabilityError, match="reasoning_effort"):
        await responses(server).call("x", thinking_budget=2048)
    assert server.requests == []


# -- OpenAI Chat Completions (and compatible servers) --------------------------------------------
def chat(server: Server, **kw: Any) -> OpenAI:
    return OpenAI(
        "deepseek-reasoner", base_url="http://127.0.0.1:9/v1", transport=server.transport, **kw
    )


THOUGHT = "Okay, the user wants 9.11 vs 9.8. 9.8 = 9.80 > 9.11 — voilà."


@pytest.mark.parametrize("split", SPLITS)
async def test_chat_reasoning_content_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("openai_reasoning_content.sse"))[split]))
    chunks = await drain(chat(server), "9.11 or 9.8?", reasoning_effort="high")
    assert "".join(c.delta for c in chunks) == "9.8 is larger than 9.11."
    msg = chunks[-1].aggregated
    assert msg.reasoning == [
        ReasoningPart(THOUGHT, provider="openai", model="deepseek-reasoner",
                      endpoint="http://127.0.0.1:9/v1")
    ]  # fmt: skip
    assert [p.kind for p in msg.parts] == ["reasoning", "text", "continuation"]
    assert msg.usage is not None and msg.usage.reasoning_tokens == 31
    assert server.body["reasoning_effort"] == "high"
    assert server.all_closed()


async def test_chat_whole_reasoning_content_is_never_sent_back() -> None:
    server = Server(Reply.json(fixture("openai_completion_reasoning.json")))
    lm = chat(server)
    msg = await lm.call("9.11 or 9.8?")
    assert "reasoning_effort" not in server.body
    assert msg.reasoning[0].text == THOUGHT and msg.text == "9.8 is larger than 9.11."
    server.replies.append(Reply.json(fixture("openai_completion_reasoning.json")))
    await lm.call(transcript(msg))
    assert server.body["messages"][1] == {
        "role": "assistant",
        "content": "9.8 is larger than 9.11.",
    }
    with pytest.raises(lf.UnsupportedCapabilityError, match="thinking_budget"):
        await lm.call("x", thinking_budget=1024)


# -- models without reasoning options, and the trace -------------------------------------------
async def test_models_without_reasoning_options_reject_them() -> None:
    lm = lf.llms.get("fake:echo")
    with pytest.raises(lf.UnsupportedCapabilityError, match="no thinking_budget option"):
        await lm.call("x", thinking_budget=1024)


async def test_trace_node_shows_reasoning_text_but_never_signatures() -> None:
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me solve this step by step",
             "signature": ANTHROPIC_SIG},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "text", "text": "27 × 453 = 12,231"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 100},
    }  # fmt: skip
    server = Server(Reply.json(reply))
    async with lf.Session(anthropic(server)) as session:
        answer = await session.query("27 × 453?")
        assert answer == "27 × 453 = 12,231"
        (node,) = session.all_queries
        outputs = node.outputs
        dumped = session.trace_json_str()
    assert outputs["reasoning"][0]["text"].startswith("Let me solve this step by step")
    assert outputs["reasoning"][1] == {"redacted": True}
    assert "Let me solve this step by step" in dumped
    assert ANTHROPIC_SIG not in dumped and REDACTED not in dumped


async def test_fake_models_stream_reasoning_as_a_part_not_as_text() -> None:
    from langfx_nb.llms.fake import Scripted

    thought = ReasoningPart("let me think", provider="fake", model="scripted")
    lm = Scripted([lf.AIMessage([thought, "42"])])
    chunks = await drain(lm, "q")
    assert "".join(c.delta for c in chunks) == "42"
    assert chunks[-1].aggregated.reasoning == [thought]


async def test_a_quoted_answer_brings_its_text_not_its_reasoning() -> None:
    server = Server(Reply.json(fixture("anthropic_message_thinking.json")))
    lm = anthropic(server)
    answer = await lm.call("Weather?", tools=[WEATHER])
    answer.parts.append(TextPart("It is sunny."))
    prompt = lf.Template("Check this answer: {{answer}}").render(answer=answer)
    assert [p.kind for p in prompt.parts] == ["text", "tool_call", "text"]
    assert prompt.reasoning == []
