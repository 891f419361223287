from __future__ import annotations

import pytest

import langfx_nb as lf
from langfx_nb.llms.base import ToolSpec
from langfx_nb.llms.openai_responses import OpenAIResponses
from langfx_nb.messages import ContinuationPart

from .wire import SECRET_KEY, SPLITS, Reply, Server, fixture, splits

WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
USAGE = lf.Usage(36, 87, 123, 10, 64)


def model(server: Server, **kw: object) -> OpenAIResponses:
    return OpenAIResponses("gpt-4.1", api_key=SECRET_KEY, transport=server.transport, **kw)


async def drain(
    lm: OpenAIResponses, prompt: str | lf.Message = "x", **kw: object
) -> list[lf.StreamChunk]:
    return [c async for c in lm.stream(prompt, **kw)]


@pytest.mark.parametrize("split", SPLITS)
async def test_text_stream_at_every_split(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("openai_responses_text.sse"))[split]))
    chunks = await drain(model(server), "Hi", system_message="Be brief.", max_tokens=99)
    text = "Hej då! Ça va 日本 🎉 done."
    assert "".join(c.delta for c in chunks) == text
    msg = chunks[-1].aggregated
    assert msg.text == text and msg.usage == USAGE
    cont = next(p for p in msg.parts if isinstance(p, ContinuationPart))
    assert [i["type"] for i in cont.data["output"]] == ["reasoning", "message"]
    req = server.requests[0]
    assert str(req.url) == "https://api.openai.com/v1/responses"
    assert req.headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert server.body == {
        "model": "gpt-4.1",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "store": False,
        "instructions": "Be brief.",
        "max_output_tokens": 99,
        "stream": True,
    }
    assert server.all_closed()


@pytest.mark.parametrize("split", ["whole", "one_byte", "inside_utf8"])
async def test_streamed_function_call_and_round_trip(split: str) -> None:
    server = Server(Reply.sse(splits(fixture("openai_responses_tool.sse"))[split]))
    chunks = await drain(model(server), "Weather?", tools=[WEATHER], tool_choice="get_weather")
    events = [e for c in chunks for e in c.events]
    assert [e.type for e in events] == ["tool_call_start"] + ["tool_call_delta"] * 3 + [
        "tool_call_end"
    ]
    msg = chunks[-1].aggregated
    assert msg.tool_calls == [lf.ToolCall("call_12345xyz", "get_weather", {"city": "Zürich"})]
    assert server.body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": dict(WEATHER.input_schema),
            "strict": True,
        }
    ]
    assert server.body["tool_choice"] == {"type": "function", "name": "get_weather"}
    server.replies.append(Reply.json(fixture("openai_responses_response.json")))
    await model(server).call(
        lf.ComplexMessage(
            [lf.UserMessage("Weather?"), msg, lf.ToolMessage('{"c": 20}', "call_12345xyz")]
        )
    )
    assert server.body["input"][1:] == [
        {
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city":"Zürich"}',
            "call_id": "call_12345xyz",
            "name": "get_weather",
        },
        {"type": "function_call_output", "call_id": "call_12345xyz", "output": '{"c": 20}'},
    ]


async def test_reasoning_items_go_back_only_with_encrypted_content() -> None:
    server = Server(
        Reply.sse(fixture("openai_responses_text.sse")),
        Reply.json(fixture("openai_responses_response.json")),
    )
    first = (await drain(model(server)))[-1].aggregated
    second = await model(server).call(
        lf.ComplexMessage([lf.UserMessage("x"), first, lf.UserMessage("more")])
    )
    kinds = [i.get("type") for i in server.body["input"]]
    assert kinds == [None, "reasoning", "message", None]
    assert server.body["input"][1]["encrypted_content"] == "gAAAAABoIPOE-ENCRYPTED"
    assert "id" not in server.body["input"][2]  # by value: stateless servers cannot resolve ids
    assert second.text == "Let me look that up." and second.tool_calls[0].args == {"city": "Paris"}
    with pytest.raises(lf.InvalidRequestError, match="continuation"):
        await OpenAIResponses("gpt-5", api_key=SECRET_KEY, transport=server.transport).call(
            lf.ComplexMessage([lf.UserMessage("x"), first, lf.UserMessage("more")])
        )


async def test_incomplete_failed_and_cut_streams() -> None:
    with pytest.raises(lf.IncompleteGenerationError, match="max_output_tokens"):
        await drain(model(Server(Reply.sse(fixture("openai_responses_incomplete.sse")))))
    with pytest.raises(lf.ServerError) as info:
        await drain(model(Server(Reply.sse(fixture("openai_responses_failed.sse")))))
    assert "server_error" in str(info.value) and "SECRET" not in str(info.value)
    cut = fixture("openai_responses_text.sse").split(b"event: response.completed")[0]
    server = Server(Reply.sse(cut))
    with pytest.raises(lf.StreamProtocolError):
        await drain(model(server))
    assert server.all_closed()


async def test_structured_output_and_unsupported_options() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    server = Server(Reply.json(fixture("openai_responses_response.json")))
    await model(server).call("x", response_schema=schema)
    assert server.body["text"] == {
        "format": {"type": "json_schema", "name": "response", "schema": schema, "strict": False}
    }
    with pytest.raises(lf.UnsupportedCapabilityError):
        await model(Server()).call("x", stop=["\n"])
    assert isinstance(lf.llms.get("openai-responses:gpt-4.1"), OpenAIResponses)
