"""StreamView: field-by-field state from real query_stream events, text streams, failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import StaticResponse
from langfx_nb.notebook.stream_view import StreamReducer, StreamView, path_key

from ._fakes import record_sends


class Person(pydantic.BaseModel):
    name: str
    tags: list[str]


ANSWER = '```python\nPerson(name="Ada <b>L</b>", tags=["math", "poetry"])\n```'


async def test_structured_stream_fills_in_and_completes() -> None:
    view = StreamView()
    sent = record_sends(view)
    lm = StaticResponse(ANSWER, chunk_size=3)
    value = await view.consume(lf.query_stream("who?", Person, lm=lm), display=False)
    assert value == Person(name="Ada <b>L</b>", tags=["math", "poetry"])
    assert view.status == "complete"
    assert view.value == {"name": "Ada <b>L</b>", "tags": ["math", "poetry"]}
    state = view.state
    assert state["status"] == "complete"
    assert path_key(["name"]) in state["done"] and path_key(["tags", 1]) in state["done"]
    assert state["open"] == []
    patches = [p for m in sent if m["kind"] == "events" for p in m["events"]]
    appends = [p for p in patches if p["op"] == "append" and p["path"] == ["name"]]
    assert len(appends) > 1  # the string grew over several chunks
    assert len([m for m in sent if m["kind"] == "events"]) < len(patches)


async def test_parsing_failure_is_shown_and_raised() -> None:
    view = StreamView()
    record_sends(view)
    lm = StaticResponse("```python\nPerson(name=1 +)\n```", chunk_size=5)
    with pytest.raises(lf.MappingError):
        await view.consume(lf.query_stream("who?", Person, lm=lm), display=False)
    assert view.status == "parsing_failed"
    assert "expected" in view.state["error"]  # the parser's reason, shown as text


async def test_text_stream_grows_and_completes() -> None:
    view = StreamView()
    record_sends(view)
    text = await view.consume(
        lf.query_stream("hi", lm=StaticResponse("# Hello\n*world*", chunk_size=2)), display=False
    )
    assert text == "# Hello\n*world*"
    assert view.state["mode"] == "text" and view.state["status"] == "done"  # not "validated"
    assert view._fallback_text() == "Answer[done]: # Hello\n*world*"


def test_tool_call_stream_events_are_display_only() -> None:
    from langfx_nb.llms.streaming import ToolCallDelta, ToolCallEnd, ToolCallStart

    r = StreamReducer()
    r.apply(ToolCallStart("c1", "add"))
    r.apply(ToolCallDelta("c1", '{"a": 1'))
    assert r.snapshot()["tools"]["c1"] == {"name": "add", "args_text": '{"a": 1', "done": False}
    r.apply(ToolCallEnd(lf.ToolCall("c1", "add", {"a": 1})))
    assert r.snapshot()["tools"]["c1"]["args"] == {"a": 1}


def test_reducer_rebuilds_nested_values_from_patches() -> None:
    r = StreamReducer()
    for event in [
        {"type": "object_start", "path": []},
        {"type": "array_start", "path": ["xs"]},
        {"type": "field_start", "path": ["xs", 0]},
        {"type": "string_field_delta", "path": ["xs", 0], "delta": "é"},
        {"type": "field_end", "path": ["xs", 0], "value": "é"},
        {"type": "array_end", "path": ["xs"]},
        {"type": "object_end", "path": []},
        {"type": "generation_failed", "error": RuntimeError("network")},
    ]:
        r.apply(event)
    snap = r.snapshot()
    assert snap["value"] == {"xs": ["é"]}
    assert snap["status"] == "generation_failed" and snap["error"] == "RuntimeError: network"
    assert path_key(["xs", 0]) == '["xs",0]'  # JSON.stringify form, as the view computes it


def test_queued_patches_are_never_changed_by_later_events() -> None:
    r = StreamReducer()
    first = r.apply({"type": "object_start", "path": []})
    r.apply({"type": "field_start", "path": ["name"]})
    r.apply({"type": "string_field_delta", "path": ["name"], "delta": "Ada"})
    done = r.apply({"type": "field_end", "path": ["name"], "value": "Ada"})
    r.apply({"type": "generation_complete", "value": {"name": "Ada"}})
    assert first[-1] == {"op": "open", "path": [], "value": {}}  # still what was sent
    assert done[-1]["value"] == "Ada" and r.value == {"name": "Ada"}


class Trip(pydantic.BaseModel):
    city: str
    minutes: int
    note: str = ""


async def test_failed_fields_and_missing_required_fields_are_named_at_the_field() -> None:
    view = StreamView(schema=Trip, title="trip")
    lm = StaticResponse('```python\nTrip(minutes="a few")\n```', chunk_size=4)
    with pytest.raises(lf.MappingError):
        await view.consume(lf.query_stream("how long?", Trip, lm=lm), display=False)
    state = view.state
    assert state["fields"] == [
        {"name": "city", "required": True},
        {"name": "minutes", "required": True},
        {"name": "note", "required": False},
    ]
    assert state["status"] == "validation_failed"  # it parsed: its fields did not validate
    # "minutes" completed as a field but did not validate: marked failed, with the message
    assert "valid integer" in state["field_errors"][path_key(["minutes"])]
    assert state["missing"] == [path_key(["city"])]
    assert "missing required: city" in view._fallback_html()
    assert view._fallback_text().startswith("trip[validation_failed]")


async def test_a_stream_failing_before_its_first_event_displays_nothing() -> None:
    view = StreamView()
    shown: list[int] = []
    view._ipython_display_ = lambda **_: shown.append(1)  # type: ignore[method-assign]

    async def broken() -> Any:
        raise lf.TemplateError("missing template variable 'x'")
        yield  # pragma: no cover

    with pytest.raises(lf.TemplateError):
        await view.consume(broken())
    assert shown == [] and view.status == "idle"


@pytest.mark.parametrize("schema", [None, Person])
async def test_a_cancelled_consumer_shows_cancelled_and_propagates(schema: object) -> None:
    view = StreamView()
    record_sends(view)
    lm = StaticResponse(ANSWER, chunk_size=3)
    started = asyncio.Event()

    async def stalled() -> object:
        async for event in lf.query_stream("who?", schema, lm=lm):
            yield event
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(view.consume(stalled(), display=False))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert view.status == "cancelled"
