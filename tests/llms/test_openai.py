from __future__ import annotations

import json

import pytest

import langfx_nb as lf
from langfx_nb.llms.base import LMRequest, ToolSpec
from langfx_nb.llms.openai import OpenAI
from langfx_nb.messages import ContinuationPart

from .wire import SECRET_KEY, SPLITS, Reply, Server, check_error_reply, fixture, splits

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolSpec(
    "get_time", "Time in a zone.", {"type": "object", "properties": {"tz": {"type": "string"}}}
)
USAGE = lf.Usage(19, 10, 29, 6, 2)


def model(server: Server, **kw: object) -> OpenAI:
    kw.setdefault("api_key", SECRET_KEY)
    return OpenAI("gpt-4o", transport=server.transport, **kw)


async def drain(lm: OpenAI, prompt: str | lf.Message = "x", **kw: object) -> list[lf.StreamChunk]:
    return [c async for c in lm.stream(prompt, **kw)]


@pytest.mark.parametrize("split", SPLITS)
async def test_text_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("openai_text.sse"))[split]))
    chunks = await drain(model(server), "Hi", system_message="Be brief.", max_tokens=50)
    text = "Hej! Smörgåsbord och 日本語 🎉 klart."
    assert "".join(c.delta for c in chunks) == text
    msg = chunks[-1].aggregated
    assert msg.text == text and msg.usage == USAGE
    cont = next(p for p in msg.parts if isinstance(p, ContinuationPart))
    assert cont.data["id"] == "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
    req = server.requests[0]
    assert str(req.url) == "https://api.openai.com/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert SECRET_KEY not in str(req.url)
    assert server.body == {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_completion_tokens": 50,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert server.all_closed()


@pytest.mark.parametrize("split", SPLITS)
async def test_parallel_tool_call_fragments_matched_by_index(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("openai_tool.sse"))[split]))
    chunks = await drain(model(server), "Weather?", tools=[WEATHER, TIME], tool_choice="any")
    events = [e for c in chunks for e in c.events]
    starts = [(e.id, e.name) for e in events if e.type == "tool_call_start"]
    assert starts == [("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"), ("call_ABC2", "get_time")]
    deltas = "".join(e.delta for e in events if e.type == "tool_call_delta" and e.id == "call_ABC2")
    assert deltas == '{"tz": "CET"}'
    msg = chunks[-1].aggregated
    assert msg.tool_calls == [
        lf.ToolCall("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", {"city": "Zürich"}),
        lf.ToolCall("call_ABC2", "get_time", {"tz": "CET"}),
    ]
    assert chunks[-1].finish_reason == "tool_calls"
    assert server.body["tool_choice"] == "required"
    assert server.body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": dict(WEATHER.input_schema),
        },
    }


async def test_tool_round_trip_and_images() -> None:
    server = Server(
        Reply.json(fixture("openai_completion_tool.json")),
        Reply.json(fixture("openai_completion_json.json")),
    )
    lm = model(server)
    img = lf.Image.from_bytes(b"\x89PNG\r\n\x1a\n0000")
    prompt = lf.UserMessage(["Weather here? ", img, lf.Image.from_uri("https://x.test/a.png")])
    first = await lm.call(prompt, tools=[WEATHER], tool_choice="get_weather")
    assert server.body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert server.body["messages"][0]["content"] == [
        {"type": "text", "text": "Weather here? "},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{img.to_base64()}"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
    ]
    call = first.tool_calls[0]
    assert call == lf.ToolCall("call_abc123", "get_weather", {"city": "Boston, MA"})
    assert first.usage == lf.Usage(82, 17, 99, 0, 0)
    await lm.call(
        lf.ComplexMessage(
            [lf.UserMessage("Weather?"), first, lf.ToolMessage('{"f": 50}', call.id, "get_weather")]
        ),
        tools=[WEATHER],
    )
    assert server.body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",  # not null: llama-cpp-python's server rejects null (HTTP 500)
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Boston, MA"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc123", "content": '{"f": 50}'},
    ]
    other = OpenAI("gpt-4o-mini", api_key=SECRET_KEY, transport=server.transport)
    with pytest.raises(lf.InvalidRequestError, match="continuation"):
        await other.call(
            lf.ComplexMessage([lf.UserMessage("Weather?"), first, lf.UserMessage("?")])
        )


def test_images_a_tool_returned_follow_the_batch_of_tool_messages() -> None:
    # Chat Completions takes text only in a tool message, and no other message may come
    # between the tool messages answering one assistant turn.
    shot = lf.Image.from_bytes(b"\x89PNG\r\n\x1a\n0000")
    calls = lf.AIMessage([lf.ToolCall("c1", "screenshot", {}), lf.ToolCall("c2", "clock", {})])
    described = '[{"type": "image", "mime_type": "image/png"}]'
    with_image = lf.ToolMessage(described, "c1", "screenshot")
    with_image.parts.append(shot)  # as an MCP tool's result carries its image
    request = LMRequest(
        (
            lf.UserMessage("What is on screen, and the time?"),
            calls,
            with_image,
            lf.ToolMessage("12:00", "c2", "clock"),
            lf.UserMessage("Thanks."),
        )
    )
    body = OpenAI("gpt-4o-mini", api_key=SECRET_KEY).encode(request)
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
    ]
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": described}
    assert body["messages"][4]["content"] == [
        {"type": "text", "text": "Image returned by tool call c1 (screenshot):"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{shot.to_base64()}"}},
    ]
    assert body["messages"][5] == {"role": "user", "content": "Thanks."}


async def test_response_format_json_schema_strict_only_when_valid() -> None:
    strict = {
        "title": "Person",
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    loose = {"type": "object", "properties": {"name": {"type": "string"}}}
    server = Server(
        Reply.json(fixture("openai_completion_json.json")),
        Reply.json(fixture("openai_completion_json.json")),
    )
    msg = await model(server).call("Who?", response_schema=strict)
    assert json.loads(msg.text) == {"name": "Ada", "age": 36}
    assert server.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Person", "schema": strict, "strict": True},
    }
    await model(server).call("Who?", response_schema=loose)
    assert server.body["response_format"]["json_schema"]["strict"] is False
    assert server.body["response_format"]["json_schema"]["name"] == "response"


async def test_compatible_server_needs_no_key_and_never_gets_the_env_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-SECRET")
    server = Server(Reply.sse(fixture("openai_text.sse")))
    lm = OpenAI("llama3", base_url="http://127.0.0.1:8080/v1/", transport=server.transport)
    await drain(lm, "Hi", max_tokens=5)
    req = server.requests[0]
    assert str(req.url) == "http://127.0.0.1:8080/v1/chat/completions"
    assert "authorization" not in req.headers
    assert server.body["max_tokens"] == 5 and "max_completion_tokens" not in server.body
    assert "127.0.0.1" in repr(lm) and lm.cache_identity()["base_url"] == "http://127.0.0.1:8080/v1"
    # the default endpoint reads the env var at request time
    server = Server(Reply.sse(fixture("openai_text.sse")))
    await drain(OpenAI("gpt-4o", transport=server.transport))
    assert server.requests[0].headers["authorization"] == "Bearer sk-env-SECRET"


async def test_compatible_server_quirks() -> None:
    """No usage chunk, no [DONE], no tool-call id: still a complete answer."""
    data = (
        b'data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":'
        b'[{"index":0,"function":{"name":"get_weather","arguments":"{\\"city\\":"}}]}}]}\n\n'
        b'data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        b'"function":{"arguments":"\\"Oslo\\"}"}}]},"finish_reason":"tool_calls"}]}\n\n'
    )
    lm = model(Server(Reply.sse(data)), stream_usage=False, base_url="http://localhost:11434/v1")
    chunks = await drain(lm, tools=[WEATHER])
    msg = chunks[-1].aggregated
    assert msg.tool_calls[0].name == "get_weather" and msg.tool_calls[0].args == {"city": "Oslo"}
    assert msg.tool_calls[0].id.startswith("call_")
    assert msg.usage is None


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("openai_refusal.sse", lf.ContentFilteredError),
        ("openai_length.sse", lf.IncompleteGenerationError),
    ],
)
@pytest.mark.parametrize("split", ["whole", "one_byte"])
async def test_stream_finish_reasons(name: str, error: type[Exception], split: str) -> None:
    server = Server(Reply.sse(splits(fixture(name))[split]))
    with pytest.raises(error):
        await drain(model(server))
    assert server.all_closed()


async def test_refusal_and_content_filter_non_streaming() -> None:
    with pytest.raises(lf.ContentFilteredError):
        await model(Server(Reply.json(fixture("openai_completion_refusal.json")))).call("x")
    body = json.loads(fixture("openai_completion_json.json"))
    body["choices"][0]["finish_reason"] = "content_filter"
    with pytest.raises(lf.ContentFilteredError):
        await model(Server(Reply.json(body))).call("x")
    body["choices"][0]["finish_reason"] = "stop"
    body["choices"][0]["message"]["content"] = ""
    with pytest.raises(lf.EmptyGenerationError):
        await model(Server(Reply.json(body))).call("x")


async def test_stream_cut_before_done_is_a_protocol_error() -> None:
    data = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"partial"}}]}\n\n'
    with pytest.raises(lf.StreamProtocolError):
        await drain(model(Server(Reply.sse(data))))


async def test_top_k_rejected_at_openai() -> None:
    with pytest.raises(lf.UnsupportedCapabilityError):
        await model(Server()).call("x", top_k=3)


@pytest.mark.parametrize(
    ("name", "status", "error", "code"),
    [
        ("openai_error_429.json", 429, lf.RateLimitError, "rate_limit_exceeded"),
        ("openai_error_401.json", 401, lf.AuthenticationError, "invalid_api_key"),
        ("openai_error_context.json", 400, lf.ContextLengthError, "context_length_exceeded"),
        ("openai_error_500.json", 500, lf.ServerError, "server_error"),
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
        headers={"retry-after-ms": "1500"},
        retry_after=1.5,
    )


async def test_in_stream_error_object_from_a_compatible_server() -> None:
    data = (
        b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"par"}}]}\n\n'
        b'data: {"error":{"message":"CUDA out of memory SECRET","type":"server_error",'
        b'"code":503}}\n\n'
    )
    server = Server(Reply.sse(data))
    with pytest.raises(lf.ServerError) as info:
        await drain(model(server, base_url="http://localhost:8000/v1"))
    assert "SECRET" not in str(info.value)
    assert server.all_closed()


async def test_own_client_is_reused_and_closed() -> None:
    server = Server(Reply.sse(fixture("openai_text.sse")), Reply.sse(fixture("openai_text.sse")))
    lm = model(server)
    await drain(lm)
    first = lm._client()
    await drain(lm)
    assert lm._client() is first
    await lm.aclose()
    assert first.is_closed


# -- what OpenAI-compatible servers taught us (docs/providers.md) ----------------------------
# Fixtures named llama_server_* and llama_cpp_python_* were recorded from the real servers
# (llama.cpp's llama-server; llama-cpp-python 0.3.36's server); handmade_* ones are hand-built:
# see fixtures/README.md.


async def test_tool_only_assistant_turn_content_is_empty_string_or_null_by_choice() -> None:
    call = lf.ToolCall("call_1", "get_weather", {"city": "Oslo"})
    transcript = lf.ComplexMessage(
        [lf.UserMessage("Weather?"), lf.AIMessage([call]), lf.ToolMessage("{}", "call_1", "x")]
    )
    server = Server(
        Reply.json(fixture("openai_completion_json.json")),
        Reply.json(fixture("openai_completion_json.json")),
    )
    await model(server).call(transcript, tools=[WEATHER])
    assert server.body["messages"][1]["content"] == ""
    await model(server, tool_call_content=None).call(transcript, tools=[WEATHER])
    assert server.body["messages"][1]["content"] is None
    with pytest.raises(ValueError):
        model(server, tool_call_content="-")


@pytest.mark.parametrize("split", ["whole", "per_event", "one_byte"])
async def test_stream_ending_at_done_without_finish_reason_is_incomplete(split: str) -> None:
    """llama-cpp-python ends a stream it interrupts (another request arrived) with a bare
    [DONE] and then drops the connection mid-body: the text so far is not an answer."""
    data = fixture("llama_cpp_python_interrupted.sse")
    pieces = splits(data)[split]
    server = Server(Reply.sse(pieces, fail_after=len(pieces)))  # the dropped connection
    chunks: list[lf.StreamChunk] = []
    with pytest.raises(lf.IncompleteGenerationError, match="finish reason"):
        async for c in model(server, base_url="http://127.0.0.1:8000/v1").stream("x"):
            chunks.append(c)
    sent = [json.loads(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: {")]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in sent)
    assert "".join(c.delta for c in chunks) == text and len(text) > 100
    assert not any(c.final for c in chunks)
    assert server.all_closed()


async def test_empty_stream_and_answer_without_finish_reason_are_incomplete() -> None:
    server = Server(Reply.sse(fixture("handmade_llama_cpp_python_empty.sse")))
    with pytest.raises(lf.IncompleteGenerationError):
        await drain(model(server))
    body = json.loads(fixture("openai_completion_json.json"))
    body["choices"][0]["finish_reason"] = None
    with pytest.raises(lf.IncompleteGenerationError):
        await model(Server(Reply.json(body))).call("x")


@pytest.mark.parametrize("stream", [False, True])
async def test_llama_server_context_overflow_is_a_context_length_error(stream: bool) -> None:
    await check_error_reply(
        model,
        "llama_server_error_context.json",
        400,
        lf.ContextLengthError,
        "exceed_context_size_error",
        stream=stream,
    )


@pytest.mark.parametrize("split", SPLITS)
async def test_llama_server_recorded_streams_at_every_split(split: str) -> None:
    lm = model(Server(Reply.sse(splits(fixture("llama_server_json.sse"))[split])))
    chunks = await drain(lm)
    assert json.loads(chunks[-1].aggregated.text) == {"ok": True}
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.cached_tokens == 0
    lm = model(Server(Reply.sse(splits(fixture("llama_server_tool.sse"))[split])))
    chunks = await drain(lm, tools=[WEATHER])
    assert chunks[-1].aggregated.tool_calls == [
        lf.ToolCall("wBzQUxc58WPtkz2LF9it4O9A5OL63wuO", "get_weather", {"city": "Paris"})
    ]
    assert chunks[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
async def test_5xx_validation_failure_is_an_invalid_request_that_quotes_the_server(
    stream: bool,
) -> None:
    """llama-cpp-python answers a request that fails its validation with HTTP 500: that is
    not transient, so it is not retried, and the server's words are the only explanation."""
    server = Server(Reply.json(fixture("llama_cpp_python_validation_500.json"), status=500))
    lm = model(server, base_url="http://127.0.0.1:8000/v1", max_attempts=3)
    with pytest.raises(lf.InvalidRequestError) as info:
        if stream:
            await drain(lm, response_schema={"type": "object"})
        else:
            await lm.call("x", response_schema={"type": "object"})
    assert not isinstance(info.value, lf.RetryableError)
    assert info.value.status == 500
    text = str(info.value)
    assert "HTTP 500 (internal_server_error)" in text
    assert "Input should be 'text' or 'json_object'" in text
    assert len(server.requests) == 1 and server.all_closed()


async def test_server_words_in_errors_are_redacted_and_bounded() -> None:
    body = {
        "error": {
            "message": f"1 validation error: headers {{'authorization': 'Bearer {SECRET_KEY}', "
            "'x-api-key': 'other-SECRET-1'}, token=SECRET-2 sk-proj-SECRET3abc " + "x" * 900,
            "type": "internal_server_error",
        }
    }
    server = Server(Reply.json(body, status=500))
    with pytest.raises(lf.InvalidRequestError) as info:
        await model(server, base_url="http://127.0.0.1:8000/v1").call("x")
    text = str(info.value) + repr(info.value)
    assert "SECRET" not in text and "validation error" in text
    assert len(str(info.value)) < 400


async def test_server_words_in_errors_mask_every_credential_shape() -> None:
    """The quoted server text goes through lf's one masking helper: key shapes of other
    services and every credential word are masked, their labels kept."""
    google, github, aws = "AIza" + "S" * 35, "ghp_" + "G" * 36, "AKIA" + "A" * 16
    message = f"validation error: {google} {github} {aws} passwd=hunter22&next=1"
    server = Server(Reply.json({"error": {"message": message}}, status=500))
    with pytest.raises(lf.InvalidRequestError) as info:
        await model(server, base_url="http://127.0.0.1:8000/v1").call("x")
    assert str(info.value).endswith(
        "the server said: validation error: <redacted> <redacted> <redacted> "
        "passwd=<redacted>&next=1"
    )


async def test_llama_cpp_python_rejects_null_content_and_accepts_empty_string() -> None:
    """Recorded: llama-cpp-python answers a tool-call turn with "content": null by HTTP 500
    (its request validation); the same turn with "" gets an answer. We send ""."""
    null = Server(Reply.json(fixture("llama_cpp_python_content_null_500.json"), status=500))
    lm = model(null, base_url="http://127.0.0.1:8000/v1", tool_call_content=None)
    transcript = lf.ComplexMessage(
        [
            lf.UserMessage("What is the weather in Paris?"),
            lf.AIMessage([lf.ToolCall("call_1", "get_weather", {"city": "Paris"})]),
            lf.ToolMessage('{"sky": "cloudy"}', "call_1", "get_weather"),
        ]
    )
    with pytest.raises(lf.InvalidRequestError, match="validation error"):
        await lm.call(transcript, tools=[WEATHER])
    assert len(null.requests) == 1


async def test_llama_cpp_python_tool_round_trip_replayed() -> None:
    """Both turns of a recorded exchange (--chat_format chatml-function-calling, a forced
    tool_choice): our second request matches what the server accepted."""
    server = Server(
        Reply.json(fixture("llama_cpp_python_tool_1.json")),
        Reply.json(fixture("llama_cpp_python_tool_2.json")),
    )
    lm = model(server, base_url="http://127.0.0.1:8000/v1")
    first = await lm.call(
        "What is the weather in Paris?", tools=[WEATHER], tool_choice="get_weather"
    )
    (call,) = first.tool_calls
    assert call.name == "get_weather" and call.args == {"city": "Paris"}
    assert call.id == "call__0_get_weather_cmpl-7a997f42-ebf1-4b6d-ab65-12bf5559b6ce"
    transcript = lf.ComplexMessage(
        [
            lf.UserMessage("What is the weather in Paris?"),
            first,
            lf.ToolMessage('{"sky": "cloudy"}', call.id, call.name),
        ]
    )
    second = await lm.call(transcript, tools=[WEATHER])
    assert second.text.strip()
    accepted = json.loads(fixture("llama_cpp_python_tool_2_request.json"))["messages"]
    sent = server.body["messages"]
    for msg in (*accepted, *sent):
        for c in msg.get("tool_calls") or ():
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    assert sent == accepted


async def test_schema_format_json_object_for_llama_cpp_python() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    server = Server(Reply.json(fixture("llama_cpp_python_json_object.json")))  # recorded
    lm = model(server, base_url="http://127.0.0.1:8000/v1", schema_format="json_object")
    msg = await lm.call("Who?", response_schema=schema)
    assert json.loads(msg.text).keys() == {"name", "age"}
    assert server.body["response_format"] == {"type": "json_object", "schema": schema}
    assert lm.cache_identity()["schema_format"] == "json_object"
    assert "schema_format" not in model(server).cache_identity()
    with pytest.raises(ValueError):
        model(server, schema_format="grammar")  # type: ignore[arg-type]
