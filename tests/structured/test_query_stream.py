"""lf.query_stream: field events, exactly one terminal outcome, upstream always closed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, PydanticUserError

import langfx_nb as lf
from langfx_nb.llms import Scripted, StaticResponse
from langfx_nb.llms.base import LanguageModel, LMRequest
from langfx_nb.llms.streaming import StreamAccumulator, StreamChunk
from langfx_nb.structured.protocols import to_python_expr

TERMINALS = (lf.GenerationComplete, lf.ParsingFailed, lf.GenerationFailed, lf.Cancelled)


class Item(BaseModel):
    name: str
    color: str


class Answer(BaseModel):
    items: list[Item]
    n: int


ANSWER = Answer(items=[Item(name='a "quoted" é 😀\n', color="red")], n=-3)
PY_TEXT = f"Sure!\n```python\n{to_python_expr(ANSWER)}\n```\n"
JSON_TEXT = "```json\n" + json.dumps({"result": ANSWER.model_dump()}, ensure_ascii=True) + "\n```"


class Tracking(StaticResponse):
    """Streams like the fakes and records whether its stream generator was closed."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.closed = 0
        self.chunks_sent = 0

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        try:
            async for chunk in super()._stream(request):
                self.chunks_sent += 1
                yield chunk
        finally:
            self.closed += 1


class FailsMidStream(LanguageModel):
    provider = "test"

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        acc = StreamAccumulator(self.model_id)
        yield acc.text('```json\n{"result": {"items": [')
        raise lf.ServerError("connection dropped")


class Stalls(LanguageModel):
    """Sends one chunk, then waits forever (until cancelled); records closing."""

    provider = "test"

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        acc = StreamAccumulator(self.model_id)
        try:
            yield acc.text("```python\nAnswer(items=[")
            await asyncio.Event().wait()
        finally:
            self.closed = True


class NoStream(LanguageModel):
    provider = "test"


async def collect(stream: Any) -> list[Any]:
    return [ev async for ev in stream]


def check_terminal(events: list[Any]) -> Any:
    terminals = [e for e in events if isinstance(e, TERMINALS)]
    assert len(terminals) == 1
    assert events[-1] is terminals[0]
    return terminals[0]


@pytest.mark.parametrize(("protocol", "text"), [("python", PY_TEXT), ("json", JSON_TEXT)])
async def test_events_then_the_same_value_as_query(protocol: str, text: str) -> None:
    events = await collect(
        lf.query_stream("Fruits?", Answer, lm=StaticResponse(text, chunk_size=3), protocol=protocol)
    )
    done = check_terminal(events)
    assert isinstance(done, lf.GenerationComplete)
    expected = await lf.query("Fruits?", Answer, lm=StaticResponse(text), protocol=protocol)
    assert done.value == expected == ANSWER
    assert done.message.result == expected
    assert done.message.text == text
    # paths are relative to the answer (no "result" wrapper) and deltas rebuild the strings
    name = ("items", 0, "name")
    deltas = [e.delta for e in events if isinstance(e, lf.StringFieldDelta) and e.path == name]
    assert "".join(deltas) == ANSWER.items[0].name
    ends = {e.path: e.value for e in events if isinstance(e, lf.FieldEnd)}
    assert ends[("n",)] == -3
    assert ends[()] == ANSWER.model_dump()
    assert events[0] == lf.FieldStart(())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.text(max_size=12), min_size=1, max_size=3),
    n=st.integers(-(10**6), 10**6),
    chunk_size=st.integers(1, 9),
    protocol=st.sampled_from(["python", "json"]),
)
async def test_final_value_always_matches_query(
    names: list[str], n: int, chunk_size: int, protocol: str
) -> None:
    answer = Answer(items=[Item(name=s, color=s[::-1]) for s in names], n=n)
    if protocol == "python":
        text = f"```python\n{to_python_expr(answer)}\n```"
    else:
        text = "```json\n" + json.dumps({"result": answer.model_dump()}) + "\n```"
    lm = StaticResponse(text, chunk_size=chunk_size)
    events = await collect(lf.query_stream("q", Answer, lm=lm, protocol=protocol))
    done = check_terminal(events)
    assert isinstance(done, lf.GenerationComplete)
    assert done.value == await lf.query("q", Answer, lm=lm, protocol=protocol) == answer


async def test_without_schema_yields_text_deltas() -> None:
    stream = lf.query_stream("Say {{what}}", lm=lf.llms.Echo(chunk_size=2), vars={"what": "hi"})
    deltas = await collect(stream)
    assert all(isinstance(d, str) for d in deltas)
    assert "".join(deltas) == "Say hi"


async def test_native_structured_output_streams_json() -> None:
    text = json.dumps(ANSWER.model_dump())
    events = await collect(
        lf.query_stream(
            "q", Answer, lm=StaticResponse(text, chunk_size=5), native_structured_output=True
        )
    )
    done = check_terminal(events)
    assert isinstance(done, lf.GenerationComplete) and done.value == ANSWER
    assert lf.FieldEnd(("n",), -3) in events


async def test_malformed_answer_ends_in_parsing_failed_with_position() -> None:
    text = "```json\n" + '{"result": {"items": [}, "n": 1}}' + "\n```"
    events = await collect(
        lf.query_stream("q", Answer, lm=StaticResponse(text, chunk_size=4), protocol="json")
    )
    failed = check_terminal(events)
    assert isinstance(failed, lf.ParsingFailed)
    assert isinstance(failed.error, lf.StreamParseError)
    assert failed.error.position == text.index("[}") + 1
    assert "[}" in failed.error.excerpt
    assert failed.text == text
    with pytest.raises(lf.MappingError):  # the non-streaming query agrees
        await lf.query("q", Answer, lm=StaticResponse(text), protocol="json")


async def test_valid_syntax_but_wrong_type_fails_validation() -> None:
    text = "```python\nAnswer(items=[], n='many')\n```"
    events = await collect(lf.query_stream("q", Answer, lm=StaticResponse(text)))
    failed = check_terminal(events)
    assert isinstance(failed, lf.ParsingFailed)
    assert "n" in str(failed.error)
    assert lf.FieldEnd(("n",), "many") in events  # partial data is plain, never validated


async def test_truncated_response_fails_without_hanging() -> None:
    text = "```python\nAnswer(items=[Item(name='a"
    events = await collect(lf.query_stream("q", Answer, lm=StaticResponse(text, chunk_size=1)))
    assert isinstance(check_terminal(events), lf.ParsingFailed)


async def test_provider_failure_ends_in_generation_failed() -> None:
    events = await collect(lf.query_stream("q", Answer, lm=FailsMidStream(), protocol="json"))
    failed = check_terminal(events)
    assert isinstance(failed, lf.GenerationFailed)
    assert isinstance(failed.error, lf.ServerError)
    assert lf.ArrayStart(("items",)) in events  # progress before the failure was reported

    scripted = Scripted([lf.RateLimitError("slow down")])
    events = await collect(lf.query_stream("q", Answer, lm=scripted))
    assert isinstance(check_terminal(events), lf.GenerationFailed)


async def test_setup_errors_raise_before_iteration() -> None:
    with pytest.raises(TypeError, match="lm="):
        lf.query_stream("q", Answer)
    with pytest.raises(lf.UnsupportedCapabilityError):
        lf.query_stream("q", Answer, lm=NoStream())
    with pytest.raises(lf.TemplateError):
        lf.query_stream("Hello {{name}}", Answer, lm=StaticResponse(""))
    with pytest.raises(ValueError, match="protocol"):
        lf.query_stream("q", Answer, lm=StaticResponse(""), protocol="yaml")
    with pytest.raises(ValueError, match="protocol"):  # as lf.query: also without a schema
        lf.query_stream("q", lm=StaticResponse(""), protocol="yaml")
    with pytest.raises(PydanticUserError):  # not a type pydantic can validate
        lf.query_stream("q", object(), lm=StaticResponse(""))
    lm = Tracking("never sent")
    lf.query_stream("q", Answer, lm=lm)  # not iterated: nothing is sent
    assert lm.num_requests == 0 and lm.closed == 0


async def test_early_break_closes_upstream_without_terminal_event() -> None:
    lm = Tracking(PY_TEXT, chunk_size=2)
    seen: list[Any] = []
    async with contextlib.aclosing(lf.query_stream("q", Answer, lm=lm)) as stream:
        async for ev in stream:
            seen.append(ev)
            if isinstance(ev, lf.StringFieldDelta):
                break
    assert lm.closed == 1
    assert lm.chunks_sent < len(PY_TEXT) // 2
    assert not any(isinstance(e, TERMINALS) for e in seen)


async def test_dropped_stream_is_closed_by_the_event_loop() -> None:
    lm = Tracking(PY_TEXT, chunk_size=2)
    async for ev in lf.query_stream("q", Answer, lm=lm):
        if isinstance(ev, lf.ObjectStart):
            break
    for _ in range(5):  # the loop's async-generator finalizer runs aclose() in a task
        await asyncio.sleep(0)
    assert lm.closed == 1


async def test_tool_call_events_are_surfaced_not_executed() -> None:
    call = lf.ToolCall("c1", "lookup", {"q": "apples"})
    lm = Scripted([[PY_TEXT, call]], chunk_size=4)
    events = await collect(lf.query_stream("q", Answer, lm=lm))
    kinds = [e.type for e in events if e.type.startswith("tool_call")]
    assert kinds[0] == "tool_call_start" and kinds[-1] == "tool_call_end"
    assert "tool_call_delta" in kinds
    end = next(e for e in events if isinstance(e, lf.ToolCallEnd))
    assert end.call == call
    done = check_terminal(events)
    assert isinstance(done, lf.GenerationComplete) and done.value == ANSWER
    assert done.message.tool_calls == [call]


async def test_json_without_result_wrapper_keeps_its_paths() -> None:
    text = "```json\n" + json.dumps(ANSWER.model_dump()) + "\n```"
    events = await collect(
        lf.query_stream("q", Answer, lm=StaticResponse(text, chunk_size=7), protocol="json")
    )
    assert isinstance(check_terminal(events), lf.GenerationComplete)
    assert lf.FieldEnd(("n",), -3) in events


async def test_unfenced_json_after_prose_with_brackets() -> None:
    body = json.dumps({"result": ANSWER.model_dump()})
    text = f"Here is the answer [as JSON]: {body} Hope that helps [really]."
    events = await collect(
        lf.query_stream("q", Answer, lm=StaticResponse(text, chunk_size=5), protocol="json")
    )
    done = check_terminal(events)
    assert isinstance(done, lf.GenerationComplete) and done.value == ANSWER
    assert lf.FieldEnd(("n",), -3) in events
