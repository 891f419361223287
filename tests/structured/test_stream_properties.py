"""What a user of ``query_stream`` relies on, for any answer cut into any chunks: the streamed
fields agree with the non-streamed parse, and every stream ends in exactly one outcome."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import StaticResponse
from langfx_nb.llms.base import LanguageModel, LMRequest
from langfx_nb.llms.streaming import StreamAccumulator, StreamChunk
from langfx_nb.structured.protocols import to_python_expr

from .test_stream_parser import _check_events, _chunks, _json_doc, _text

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TERMINALS = (lf.GenerationComplete, lf.ParsingFailed, lf.GenerationFailed, lf.Cancelled)


class Leaf(BaseModel):
    label: str
    weight: float | None = None


class Tree(BaseModel):
    name: str
    count: int
    flag: bool
    tags: list[str]
    scores: dict[str, int]
    leaves: list[Leaf]


_trees = st.builds(
    Tree,
    name=_text,
    count=st.integers(-(10**30), 10**30),
    flag=st.booleans(),
    tags=st.lists(_text, max_size=4),
    scores=st.dictionaries(_text, st.integers(), max_size=3),
    leaves=st.lists(
        st.builds(
            Leaf,
            label=_text,
            weight=st.none() | st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=3,
    ),
)


class Chunked(LanguageModel):
    """Streams a fixed answer in the given chunks."""

    provider = "test"

    def __init__(self, chunks: list[str]) -> None:
        super().__init__()
        self.chunks = chunks

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        acc = StreamAccumulator(self.model_id)
        for c in self.chunks:
            yield acc.text(c)
        yield acc.finish(finish_reason="stop")


def _answer(tree: Tree, protocol: str, frame: str) -> str:
    if protocol == "python":
        body = to_python_expr(tree)
        fenced = f"```python\n{body}\n```"
    else:
        body = json.dumps({"result": tree.model_dump()}, ensure_ascii=False)
        fenced = f"```json\n{body}\n```"
    return {"bare": body, "fence": fenced, "prose": f"Here it is.\n{fenced}\nDone."}[frame]


async def _stream(text: str, chunks: list[str], protocol: str) -> list[Any]:
    stream = lf.query_stream("q", Tree, lm=Chunked(chunks), protocol=protocol)
    events = [ev async for ev in stream]
    terminals = [e for e in events if isinstance(e, TERMINALS)]
    assert len(terminals) == 1 and events[-1] is terminals[0]  # exactly one outcome, last
    return events


@SETTINGS
@given(
    tree=_trees,
    protocol=st.sampled_from(["python", "json"]),
    frame=st.sampled_from(["bare", "fence", "prose"]),
    data=st.data(),
)
async def test_any_chunking_streams_the_fields_of_the_non_streamed_parse(
    tree: Tree, protocol: str, frame: str, data: st.DataObject
) -> None:
    text = _answer(tree, protocol, frame)
    expected = await lf.query("q", Tree, lm=StaticResponse(text), protocol=protocol)
    assert expected == tree
    events = await _stream(text, _chunks(data, text), protocol)
    done = events[-1]
    assert isinstance(done, lf.GenerationComplete) and done.value == expected
    # Field events (paths relative to the answer: the JSON wrapper is invisible) rebuild the
    # same plain data, strings delta by delta. A bare Python answer is not fenced, so the
    # parser finds it only when it starts the text (it does here).
    fields = [e for e in events if not isinstance(e, TERMINALS)]
    _check_events(fields, expected.model_dump())
    assert fields[-1] == lf.FieldEnd((), expected.model_dump())


@SETTINGS
@given(
    tree=_trees,
    protocol=st.sampled_from(["python", "json"]),
    junk=st.sampled_from(["", "}", ")", "]", '"', "'", "\\", ",", ":", "=", "x", "\\u12", "(("]),
    data=st.data(),
)
async def test_damaged_answers_end_in_exactly_one_outcome(
    tree: Tree, protocol: str, junk: str, data: st.DataObject
) -> None:
    text = _answer(tree, protocol, "fence")
    cut = data.draw(st.integers(0, len(text)), label="damage at")
    damaged = text[:cut] + junk + text[cut + data.draw(st.integers(0, 3), label="dropped") :]
    try:
        expected: Any = await lf.query("q", Tree, lm=StaticResponse(damaged), protocol=protocol)
    except lf.MappingError:
        expected = None
    events = await _stream(damaged, _chunks(data, damaged), protocol)
    done = events[-1]
    if expected is None:
        assert isinstance(done, lf.ParsingFailed)
        assert done.text == damaged
        if isinstance(done.error, lf.StreamParseError):
            assert 0 <= done.error.position <= len(damaged)
    else:
        assert isinstance(done, lf.GenerationComplete) and done.value == expected


@SETTINGS
@given(doc=_json_doc, extra=st.booleans(), data=st.data())
def test_json_result_wrapper_is_unwrapped_under_any_chunking(
    doc: Any, extra: bool, data: st.DataObject
) -> None:
    """The JSON protocol's {"result": ...}: events are relative to the result, the wrapper's
    other keys are dropped, and ``value`` stays the whole document."""
    whole = {"result": doc, "note": [1, "x"]} if extra else {"result": doc}
    text = "Sure: " + json.dumps(whole)
    parser = lf.StreamParser("json", object_root=True, unwrap_result=True)
    events: list[Any] = []
    for c in _chunks(data, text):
        events += parser.feed(c)
    events += parser.close()
    assert parser.value == json.loads(json.dumps(whole))
    _check_events(events, json.loads(json.dumps(doc)))
    assert events[-1] == lf.FieldEnd((), parser.value["result"])
