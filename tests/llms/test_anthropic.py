from __future__ import annotations

import datetime
import uuid

import pytest

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.base import ToolSpec
from langfx_nb.messages import ContinuationPart

from .wire import SECRET_KEY, SPLITS, Reply, Server, check_error_reply, fixture, splits

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
MODEL = "claude-sonnet-4-5"


def model(server: Server, **kw: object) -> Anthropic:
    return Anthropic(MODEL, api_key=SECRET_KEY, transport=server.transport, **kw)


async def drain(lm: Anthropic, prompt: str = "x", **kw: object) -> list[lf.StreamChunk]:
    return [c async for c in lm.stream(prompt, **kw)]


@pytest.mark.parametrize("split", SPLITS)
async def test_text_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("anthropic_text.sse"))[split]))
    chunks = await drain(model(server), "Greet me", system_message="Be warm.")
    text = "Grüß Gott! Ça va ? 日本語 🎉 done."
    assert "".join(c.delta for c in chunks) == text
    msg = chunks[-1].aggregated
    assert msg.text == text and chunks[-1].finish_reason == "stop"
    # prompt = input + cache creation + cache read; cached = cache read
    assert msg.usage == lf.Usage(472 + 100 + 2048, 15, 472 + 100 + 2048 + 15, 2048, None, 100)
    cont = next(p for p in msg.parts if isinstance(p, ContinuationPart))
    assert cont.data["content"] == [{"type": "text", "text": text}]
    req = server.requests[0]
    assert str(req.url) == "https://api.anthropic.com/v1/messages"
    assert req.headers["x-api-key"] == SECRET_KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert SECRET_KEY not in str(req.url)
    assert server.body == {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Greet me"}]}],
        "system": "Be warm.",
        "stream": True,
    }
    assert server.all_closed()


@pytest.mark.parametrize("split", SPLITS)
async def test_tool_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("anthropic_tool.sse"))[split]))
    chunks = await drain(model(server), "Weather?", tools=[WEATHER], tool_choice="any")
    events = [e for c in chunks for e in c.events]
    assert [e.type for e in events] == ["tool_call_start"] + ["tool_call_delta"] * 3 + [
        "tool_call_end"
    ]
    assert "".join(e.delta for e in events if e.type == "tool_call_delta") == (
        '{"city": "Zürich", "unit": "celsius"}'
    )
    msg = chunks[-1].aggregated
    assert msg.text == "Okay, let's check the weather for Zürich."
    assert msg.tool_calls == [
        lf.ToolCall(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"city": "Zürich", "unit": "celsius"}
        )
    ]
    assert chunks[-1].finish_reason == "tool_calls"
    assert server.body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": dict(WEATHER.input_schema),
        }
    ]
    assert server.body["tool_choice"] == {"type": "any"}


async def test_tool_round_trip_uses_raw_blocks_and_tool_results() -> None:
    server = Server(
        Reply.json(fixture("anthropic_message_tool.json")),
        Reply.json(fixture("anthropic_message_text.json")),
    )
    lm = model(server)
    first = await lm.call("Weather in SF?", tools=[WEATHER], tool_choice="get_weather")
    assert server.body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    call = first.tool_calls[0]
    assert call == lf.ToolCall(
        "toolu_01A09q90qw90lq917835lq9", "get_weather", {"city": "San Francisco, CA"}
    )
    assert first.usage == lf.Usage(2095 + 1024, 503, 2095 + 1024 + 503, 1024, None, 0)
    second = await lm.call(
        lf.ComplexMessage(
            [
                lf.UserMessage("Weather in SF?"),
                first,
                lf.ToolMessage('{"temp_f": 65}', call.id, "get_weather"),
                lf.ToolMessage("boom", "toolu_other", "get_weather", is_error=True),
            ]
        ),
        tools=[WEATHER],
    )
    assert second.text == "Hi! My name is Claude."
    assert server.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in SF?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll check the weather."},
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": "get_weather",
                    "input": {"city": "San Francisco, CA"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": '{"temp_f": 65}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_other",
                    "content": "boom",
                    "is_error": True,
                },
            ],
        },
    ]


async def test_thinking_blocks_are_kept_for_the_next_turn_but_not_shown() -> None:
    server = Server(Reply.sse(splits(fixture("anthropic_thinking.sse"))["one_byte"]))
    chunks = await drain(model(server))
    msg = chunks[-1].aggregated
    assert msg.text == "4"
    cont = next(p for p in msg.parts if isinstance(p, ContinuationPart))
    assert cont.data["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants 2+2. That is 4.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
    }
    server.replies.append(Reply.json(fixture("anthropic_message_text.json")))
    await model(server).call(
        lf.ComplexMessage([lf.UserMessage("2+2?"), msg, lf.UserMessage("and?")])
    )
    assert server.body["messages"][1]["content"] == cont.data["content"]
    other = Anthropic("claude-other", api_key=SECRET_KEY, transport=server.transport)
    with pytest.raises(lf.InvalidRequestError, match="continuation"):
        await other.call(lf.ComplexMessage([lf.UserMessage("2+2?"), msg, lf.UserMessage("and?")]))


async def test_images_and_documents() -> None:
    server = Server(Reply.json(fixture("anthropic_message_text.json")))
    png = lf.Image.from_bytes(b"\x89PNG\r\n\x1a\n0000")
    url = lf.Image.from_uri("https://example.com/a.jpg")
    pdf = lf.PDF.from_bytes(b"%PDF-1.4 ...")
    await model(server).call(lf.UserMessage(["Compare ", png, url, pdf]))
    assert server.body["messages"][0]["content"] == [
        {"type": "text", "text": "Compare "},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": png.to_base64()},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": pdf.to_base64()},
        },
    ]
    for bad in (
        lf.UserMessage([lf.Audio.from_bytes(b"RIFF0000WAVE")]),
        lf.UserMessage([lf.Image.from_bytes(b"xx", "image/tiff")]),
    ):
        with pytest.raises(lf.UnsupportedCapabilityError):
            await model(Server()).call(bad)


async def test_no_native_schema_and_no_seed() -> None:
    with pytest.raises(lf.UnsupportedCapabilityError, match="structured output"):
        await model(Server()).call("x", response_schema={"type": "object"})
    with pytest.raises(lf.UnsupportedCapabilityError, match="seed"):
        await model(Server()).call("x", seed=1)
    assert Anthropic.capabilities.native_schema is False


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("anthropic_max_tokens.sse", lf.IncompleteGenerationError),
        ("anthropic_refusal.sse", lf.ContentFilteredError),
        ("anthropic_no_stop.sse", lf.StreamProtocolError),
        ("anthropic_unknown_block.sse", lf.StreamProtocolError),
        ("anthropic_overloaded.sse", lf.ServerError),
    ],
)
@pytest.mark.parametrize("split", ["whole", "one_byte", "crlf_between_cr_lf"])
async def test_stream_failures(name: str, error: type[Exception], split: str) -> None:
    server = Server(Reply.sse(splits(fixture(name))[split]))
    with pytest.raises(error) as info:
        await drain(model(server))
    assert "SECRET" not in str(info.value)
    assert server.all_closed()


async def test_unknown_event_types_are_ignored() -> None:
    chunks = await drain(model(Server(Reply.sse(fixture("anthropic_unknown_event.sse")))))
    assert chunks[-1].aggregated.text == "ok"


@pytest.mark.parametrize(
    "bad",
    [
        # a delta before message_start
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"x"}}\n\n',
        # a delta for a block that was never started
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":3,'
        b'"delta":{"type":"text_delta","text":"x"}}\n\n',
        # an unknown delta type
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"mystery_delta","x":"y"}}\n\n',
        # message_stop while a block is open
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ],
)
async def test_event_order_is_checked(bad: bytes) -> None:
    server = Server(Reply.sse(bad))
    with pytest.raises(lf.StreamProtocolError):
        await drain(model(server))
    assert server.all_closed()


@pytest.mark.parametrize(
    ("name", "status", "error", "code"),
    [
        ("anthropic_error_529.json", 529, lf.ServerError, "overloaded_error"),
        ("anthropic_error_429.json", 429, lf.RateLimitError, "rate_limit_error"),
        ("anthropic_error_401.json", 401, lf.AuthenticationError, "authentication_error"),
        ("anthropic_error_context.json", 400, lf.ContextLengthError, "invalid_request_error"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_error_bodies(
    name: str, status: int, error: type[Exception], code: str, stream: bool
) -> None:
    await check_error_reply(
        model,
        name,
        status,
        error,
        code,
        stream=stream,
        headers={"retry-after": "12"},
        retry_after=12.0,
    )


async def test_overloaded_stream_is_retried_before_the_first_chunk() -> None:
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    server = Server(
        Reply.json(fixture("anthropic_error_529.json"), status=529),
        Reply.sse(fixture("anthropic_text.sse")),
    )
    lm = model(
        server, retry=lf.llms.RetryPolicy(max_attempts=2, sleep=fake_sleep, random=lambda: 0.0)
    )
    chunks = await drain(lm)
    assert chunks[-1].aggregated.text.startswith("Grüß Gott!")
    assert sleeps == [1.0] and server.all_closed()


async def test_in_stream_rate_limit_error_keeps_its_class() -> None:
    data = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'
        b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error",'
        b'"message":"slow down SECRET"}}\n\n'
    )
    server = Server(Reply.sse(data))
    with pytest.raises(lf.RateLimitError) as info:
        await drain(model(server))
    assert "rate_limit_error" in str(info.value) and "SECRET" not in str(info.value)
    assert server.all_closed()


@pytest.mark.parametrize("kind", ["requests", "tokens", "input-tokens", "output-tokens"])
async def test_its_rate_limit_headers_hold_the_accounts_next_request(kind: str) -> None:
    # an answer saying a limit is used up until a reset two hours away: the next request
    # of the account is not sent, and says how long the provider asked for
    reset = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=2)
    headers = {
        f"anthropic-ratelimit-{kind}-remaining": "0",
        f"anthropic-ratelimit-{kind}-limit": "50",
        f"anthropic-ratelimit-{kind}-reset": reset.isoformat().replace("+00:00", "Z"),
    }
    body = fixture("anthropic_message_text.json")
    server = Server(Reply.json(body, headers=headers), Reply.json(body))
    lm = Anthropic(MODEL, api_key=f"sk-ant-{kind}-{uuid.uuid4().hex}", transport=server.transport)
    await lm.call("x")
    with pytest.raises(lf.RateLimitError, match=r"asked to wait 7,\d{3}") as info:
        await lm.call("y")
    assert info.value.retry_after is not None and info.value.retry_after > 7000
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_429s_retry_after_ms_wins_over_retry_after(stream: bool) -> None:
    await check_error_reply(
        model,
        "anthropic_error_429.json",
        429,
        lf.RateLimitError,
        "rate_limit_error",
        stream=stream,
        headers={"retry-after-ms": "1500", "retry-after": "12"},
        retry_after=1.5,
    )
