from __future__ import annotations

import json

import pytest

import langfx_nb as lf
from langfx_nb.llms.base import ToolSpec
from langfx_nb.llms.gemini import Gemini, gemini_schema
from langfx_nb.messages import ContinuationPart

from .wire import SECRET_KEY, SPLITS, Reply, Server, check_error_reply, fixture, splits

BASE = "https://generativelanguage.googleapis.com/v1beta"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def model(server: Server, **kw: object) -> Gemini:
    return Gemini("gemini-2.5-flash", api_key=SECRET_KEY, transport=server.transport, **kw)


@pytest.mark.parametrize("split", SPLITS)
async def test_text_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("gemini_text.sse"))[split]))
    chunks = [c async for c in model(server).stream("Say hi")]
    text = "Bonjour ! Le café ☕ est prêt — 日本語のテキスト 🎉🎉 Fin."
    assert "".join(c.delta for c in chunks) == text
    final = chunks[-1]
    assert final.final and final.finish_reason == "stop"
    msg = final.aggregated
    assert msg.text == text
    assert msg.usage == lf.Usage(11, 51, 62, 4, 34)
    cont = [p for p in msg.parts if isinstance(p, ContinuationPart)]
    assert cont[0].provider == "gemini" and cont[0].model == "gemini-2.5-flash"
    assert cont[0].data["parts"] == [
        {"text": text, "thoughtSignature": "CiIBVKhc7nVq0t3XQ2pB7nS4H9eJb2VdS0cWx1n6aQ=="}
    ]
    req = server.requests[0]
    assert str(req.url) == f"{BASE}/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == SECRET_KEY
    assert SECRET_KEY not in str(req.url)
    assert server.all_closed()


async def test_request_shape() -> None:
    server = Server(Reply.json(fixture("gemini_generate_text.json")))
    lm = model(server, temperature=0.2, max_tokens=64)
    img = lf.Image.from_bytes(b"\x89PNG\r\n\x1a\nabc")
    remote = lf.Image.from_uri("https://example.com/cat.jpg")
    msg = await lm.call(
        lf.ComplexMessage(
            [
                lf.SystemMessage("Be brief."),
                lf.UserMessage(["What is this? ", img, remote]),
                lf.AIMessage("A cat."),
                lf.UserMessage("And 1+1?"),
            ]
        ),
        stop=["\n\n"],
        top_k=5,
        seed=7,
    )
    assert msg.text == "1+1 equals 2."
    assert msg.usage == lf.Usage(15, 6, 21, None, None)
    body = server.body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is this? "},
                {"inlineData": {"mimeType": "image/png", "data": img.to_base64()}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
            ],
        },
        {"role": "model", "parts": [{"text": "A cat."}]},
        {"role": "user", "parts": [{"text": "And 1+1?"}]},
    ]
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "topK": 5,
        "maxOutputTokens": 64,
        "seed": 7,
        "stopSequences": ["\n\n"],
    }
    assert str(server.requests[0].url) == f"{BASE}/models/gemini-2.5-flash:generateContent"


async def test_tool_round_trip_keeps_signatures_and_ids() -> None:
    server = Server(
        Reply.json(fixture("gemini_generate_tool.json")),
        Reply.json(fixture("gemini_generate_text.json")),
    )
    lm = model(server)
    first = await lm.call("Weather in Paris?", tools=[WEATHER], tool_choice="get_weather")
    assert server.body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parametersJsonSchema": dict(WEATHER.input_schema),
                }
            ]
        }
    ]
    assert server.body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }
    assert first.tool_calls == [lf.ToolCall("fc-1", "get_weather", {"city": "Paris"})]
    assert first.text == ""  # thought text is not answer text
    assert first.metadata["finish_reason"] == "tool_calls"
    transcript = lf.ComplexMessage(
        [
            lf.UserMessage("Weather in Paris?"),
            first,
            lf.ToolMessage('{"temp": 21}', "fc-1", "get_weather"),
        ]
    )
    await lm.call(transcript, tools=[WEATHER])
    contents = server.body["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"text": "Let me check.", "thought": True},
            {
                "functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": "SIGNATURE_A==",
            },
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"temp": 21}, "id": "fc-1"}}
        ],
    }


@pytest.mark.parametrize("split", ["whole", "one_byte", "crlf_between_cr_lf"])
async def test_streamed_tool_calls(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("gemini_tool.sse"))[split]))
    chunks = [c async for c in model(server).stream("Weather?", tools=[WEATHER])]
    events = [e for c in chunks for e in c.events]
    kinds = [e.type for e in events]
    assert kinds == ["tool_call_start", "tool_call_delta", "tool_call_end"] * 2
    msg = chunks[-1].aggregated
    calls = msg.tool_calls
    assert [(c.name, c.args) for c in calls] == [
        ("get_weather", {"city": "Zürich", "unit": "celsius"}),
        ("get_time", {"tz": "Europe/Zurich"}),
    ]
    assert all(c.id.startswith("call_") for c in calls) and calls[0].id != calls[1].id
    assert msg.usage == lf.Usage(60, 60, 120, None, 36)
    # the synthesized ids never go back to Gemini; the signature does
    server.replies.append(Reply.json(fixture("gemini_generate_text.json")))
    results = [
        lf.ToolMessage('"sunny"', calls[0].id, "get_weather"),
        lf.ToolMessage('"10:00"', calls[1].id),  # the name is found from the call
    ]
    await model(server).call(lf.ComplexMessage([lf.UserMessage("Weather?"), msg, *results]))
    contents = server.body["contents"]
    assert contents[1]["parts"][0]["thoughtSignature"] == "EpYCCpMCAdHtim9sig+/x=="
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"result": "sunny"}}},
        {"functionResponse": {"name": "get_time", "response": {"result": "10:00"}}},
    ]


async def test_continuation_from_another_model_is_rejected_before_sending() -> None:
    server = Server(Reply.json(fixture("gemini_generate_tool.json")))
    first = await model(server).call("hi", tools=[WEATHER])
    other = Gemini("gemini-2.5-pro", api_key=SECRET_KEY, transport=server.transport)
    with pytest.raises(lf.InvalidRequestError, match="continuation"):
        await other.call(lf.ComplexMessage([lf.UserMessage("hi"), first, lf.UserMessage("more")]))
    moved = Gemini(
        "gemini-2.5-flash",
        api_key=SECRET_KEY,
        transport=server.transport,
        base_url="https://gw.example/v1beta",
    )
    with pytest.raises(lf.InvalidRequestError):
        await moved.call(lf.ComplexMessage([lf.UserMessage("hi"), first, lf.UserMessage("more")]))
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("gemini_max_tokens.sse", lf.IncompleteGenerationError),
        ("gemini_safety.sse", lf.ContentFilteredError),
    ],
)
@pytest.mark.parametrize("split", ["whole", "one_byte"])
async def test_stream_finish_reasons(name: str, error: type[Exception], split: str) -> None:
    server = Server(Reply.sse(splits(fixture(name))[split]))
    got: list[str] = []
    with pytest.raises(error):
        async for c in model(server).stream("x"):
            got.append(c.delta)
    assert got  # the partial text was shown before the failure
    assert server.all_closed()


async def test_blocked_prompt_and_empty_answer() -> None:
    server = Server(Reply.json(fixture("gemini_blocked_prompt.json")))
    with pytest.raises(lf.ContentFilteredError, match="PROHIBITED_CONTENT"):
        await model(server).call("x")
    empty = {
        "candidates": [
            {"content": {"parts": [], "role": "model"}, "finishReason": "STOP", "index": 0}
        ]
    }
    server = Server(Reply.json(empty))
    with pytest.raises(lf.EmptyGenerationError):
        await model(server).call("x")


async def test_native_schema_subset() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Person",
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "x"},
            "age": {"type": "integer", "minimum": 0},
            "pet": {"$ref": "#/$defs/Pet"},
            "kind": {"const": "human"},
        },
        "required": ["name", "age"],
        "$defs": {"Pet": {"type": "object", "properties": {"n": {"type": "string"}}}},
    }
    server = Server(Reply.json(fixture("gemini_generate_json.json")))
    msg = await model(server).call("Who?", response_schema=schema)
    assert json.loads(msg.text) == {"name": "Ada", "age": 36}
    gen = server.body["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    assert gen["responseJsonSchema"] == {
        "title": "Person",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "pet": {"type": "object", "properties": {"n": {"type": "string"}}},
            "kind": {"enum": ["human"]},
        },
        "required": ["name", "age"],
    }
    for bad in (
        {"type": "string", "pattern": "^a"},
        {"type": "string", "format": "email"},
        {
            "$ref": "#/$defs/N",
            "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
        },
    ):
        with pytest.raises(lf.UnsupportedCapabilityError):
            gemini_schema(bad)
        with pytest.raises(lf.UnsupportedCapabilityError):
            await model(Server()).call("x", response_schema=bad)


@pytest.mark.parametrize(
    ("name", "status", "error", "code"),
    [
        ("gemini_error_429.json", 429, lf.RateLimitError, "RESOURCE_EXHAUSTED"),
        ("gemini_error_key.json", 400, lf.AuthenticationError, "API_KEY_INVALID"),
        ("gemini_error_context.json", 400, lf.ContextLengthError, "INVALID_ARGUMENT"),
        ("gemini_error_503.json", 503, lf.ServerError, "UNAVAILABLE"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_error_bodies(
    name: str, status: int, error: type[Exception], code: str, stream: bool
) -> None:
    await check_error_reply(model, name, status, error, code, stream=stream, retry_after=37.5)


async def test_unsupported_part_type_is_an_error() -> None:
    body = {
        "candidates": [
            {
                "content": {
                    "parts": [{"executableCode": {"language": "PYTHON", "code": "print(1)"}}]
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ]
    }
    with pytest.raises(lf.StreamProtocolError, match="executableCode"):
        await model(Server(Reply.json(body))).call("x")


async def test_stream_without_finish_reason_is_a_protocol_error() -> None:
    data = (
        b'data: {"candidates":[{"content":{"parts":[{"text":"cut"}],"role":"model"},"index":0}]}'
        b"\r\n\r\n"
    )
    with pytest.raises(lf.StreamProtocolError):
        async for _ in model(Server(Reply.sse(data))).stream("x"):
            pass


async def test_in_stream_error_object() -> None:
    data = (
        b'data: {"error": {"code": 503, "message": "overloaded SECRET", "status": "UNAVAILABLE"}}'
        b"\r\n\r\n"
    )
    with pytest.raises(lf.ServerError) as info:
        async for _ in model(Server(Reply.sse(data))).stream("x"):
            pass
    assert "SECRET" not in str(info.value)
