"""LangFunc: prompt → model → transform, hooks, streaming, concurrency, schema-less query."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Echo, LMRequest, Scripted, StaticResponse


async def test_call_renders_and_returns_ai_message() -> None:
    f = lf.LangFunc("Hello {{name}}", lm=Echo(), name="world")
    out = await f.call()
    assert isinstance(out, lf.AIMessage)
    assert out.text == "Hello world"
    assert (await f.call({"name": "Ada"})).text == "Hello Ada"


async def test_lm_at_call_time_wins() -> None:
    f = lf.LangFunc("hi", lm=StaticResponse("bound"))
    assert (await f.call(lm=StaticResponse("given"))).text == "given"


async def test_missing_model_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="lm="):
        await lf.LangFunc("hi").call()


async def test_options_reach_the_model() -> None:
    lm = Scripted(["ok"])
    await lf.LangFunc("hi", lm=lm).call(temperature=0.3, system_message="be brief")
    assert lm.requests[0].options.temperature == 0.3
    assert lm.requests[0].system == "be brief"


class Shouty(lf.LangFunc):
    def transform_input(self, message: lf.Message[Any]) -> lf.Message[Any]:
        return lf.UserMessage(message.text.upper())

    def transform_output(self, message: lf.AIMessage[Any]) -> lf.AIMessage[Any]:
        return lf.AIMessage(message.text + "!", metadata=message.metadata)


async def test_hooks_transform_input_and_output() -> None:
    out = await Shouty("hello {{x}}", lm=Echo()).call({"x": "there"})
    assert out.text == "HELLO THERE!"


async def test_stream_yields_model_chunks() -> None:
    f = lf.LangFunc("abcdefghij {{x}}", lm=Echo(chunk_size=4))
    chunks = [c async for c in f.stream({"x": "k"})]
    assert "".join(c.delta for c in chunks) == "abcdefghij k"
    assert chunks[-1].final
    assert len(chunks) > 2


async def test_concurrent_calls_do_not_share_state() -> None:
    def respond(req: LMRequest) -> str:
        return req.messages[-1].text

    lm = Scripted([respond], loop=True, delay=0.0)
    f = Shouty("n={{n}}", lm=lm)
    outs = await asyncio.gather(*(f.call({"n": i}) for i in range(50)))
    assert [o.text for o in outs] == [f"N={i}!" for i in range(50)]
    assert not hasattr(f, "__dict__") or not f.__dict__  # nothing per call kept on it


async def test_query_without_schema_returns_text() -> None:
    assert await lf.query("Hi {{n}}", lm=Echo(), vars={"n": 2}) == "Hi 2"


async def test_query_returns_message() -> None:
    msg = await lf.query("Hi", lm=Echo(), returns_message=True)
    assert isinstance(msg, lf.AIMessage)
    assert msg.text == msg.result == "Hi"


async def test_query_with_template_and_message() -> None:
    t = lf.Template("{{a}}-{{b}}", a=1)
    assert await lf.query(t, lm=Echo(), vars={"b": 2}) == "1-2"
    raw = lf.UserMessage("{{not rendered}}")
    assert await lf.query(raw, lm=Echo()) == "{{not rendered}}"


async def test_query_keeps_image_parts() -> None:
    lm = Scripted(["seen"])
    img = lf.Image.from_uri("https://example.com/a.png")
    await lf.query("What is in {{img}}?", lm=lm, vars={"img": img})
    assert lm.requests[0].messages[-1].modalities == [img]


async def test_query_system_message_goes_to_system_role() -> None:
    lm = Scripted(["ok"])
    await lf.query("q", lm=lm, system_message="You are terse.")
    assert lm.requests[0].system == "You are terse."
    assert "terse" not in lm.requests[0].messages[-1].text


async def test_query_vars_do_not_collide_with_options() -> None:
    lm = Scripted(["ok"])
    await lf.query("{{temperature}}", lm=lm, vars={"temperature": "hot"}, temperature=0.1)
    assert lm.requests[0].messages[-1].text == "hot"
    assert lm.requests[0].options.temperature == 0.1


async def test_query_needs_a_model() -> None:
    with pytest.raises(TypeError, match="lm="):
        await lf.query("hi")


class Tracking(Echo):
    closed = 0

    async def _stream(self, request: LMRequest) -> AsyncGenerator[lf.StreamChunk, None]:
        try:
            async for chunk in super()._stream(request):
                yield chunk
        finally:
            Tracking.closed += 1


async def test_stream_early_exit_closes_the_model_stream() -> None:
    f = lf.LangFunc("abcdefghijklmnop", lm=Tracking(chunk_size=2))
    agen = f.stream()
    async for _ in agen:
        break
    await agen.aclose()  # type: ignore[attr-defined]
    assert Tracking.closed == 1
