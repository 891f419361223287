"""The compiled JSON grammar (``_cjson.c``) against the Python one it replaces: for any text and
any chunking, every ``feed`` and ``close`` returns equal events, and a failure is the same
error (message, position, excerpt, events of the failing chunk) at the same chunk."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langfx_nb.structured import stream_parser
from langfx_nb.structured.stream_parser import StreamParseError, StreamParser

from .test_stream_parser import SETTINGS, _chunks, _json_doc, _text

pytestmark = pytest.mark.skipif(
    not stream_parser.ACCELERATED,
    reason="built without a C compiler (test_install_built_the_compiled_grammar fails)",
)


def python_parser(object_root: bool = False, unwrap_result: bool = False) -> StreamParser:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream_parser, "_compiled", None)
        return StreamParser("json", object_root=object_root, unwrap_result=unwrap_result)


def transcript(parser: StreamParser, chunks: list[str]) -> list[Any]:
    """What each call returned or raised, up to the first error, then the final state."""
    out: list[Any] = []
    try:
        for c in chunks:
            out.append(parser.feed(c))
        out.append(parser.close())
    except StreamParseError as err:
        out.append(("error", str(err), err.position, err.excerpt, err.events))
        assert parser.error is err
        with pytest.raises(StreamParseError) as again:  # a failed parser stays failed
            parser.feed("x")
        assert again.value is err
    out.append((parser.done, parser.value))
    return out


def check_same(chunks: list[str], object_root: bool = False, unwrap: bool = False) -> None:
    compiled = StreamParser("json", object_root=object_root, unwrap_result=unwrap)
    assert compiled._core is not None
    reference = python_parser(object_root, unwrap)
    assert transcript(compiled, chunks) == transcript(reference, chunks)


@SETTINGS
@given(
    doc=_json_doc,
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 2]),
    frame=st.sampled_from(["bare", "fence", "prose", "list-in-prose"]),
    object_root=st.booleans(),
    data=st.data(),
)
def test_same_events_on_documents(
    doc: Any, ensure_ascii: bool, indent: int | None, frame: str, object_root: bool, data: Any
) -> None:
    body = json.dumps(doc, ensure_ascii=ensure_ascii, indent=indent)
    text = {
        "bare": body,
        "fence": f"Here:\n```json\n{body}\n```\nafter {{[",
        "prose": f"The answer is {body} -- done.",
        "list-in-prose": f"Steps [1] and [2]: {body}",
    }[frame]
    check_same(_chunks(data, text), object_root)


@SETTINGS
@given(
    doc=_json_doc,
    wrapper=st.sampled_from(
        [
            '{"result": %s}',
            '{"result": %s, "other": [1, {"result": 2}], "note": "text after the answer"}',
            '{"x": 1, "result": %s}',
            '{"result": 0, "result": %s}',
            "%s",
            'Sure: {"result": %s}',
        ]
    ),
    object_root=st.booleans(),
    corrupt=st.booleans(),
    data=st.data(),
)
def test_same_events_when_unwrapping_result(
    doc: Any, wrapper: str, object_root: bool, corrupt: bool, data: Any
) -> None:
    """``unwrap_result``: compiled, natively; Python, through ``_ResultUnwrapper``."""
    text = wrapper % json.dumps(doc)
    if corrupt:
        i = data.draw(st.integers(0, len(text)), label="cut at")
        text = text[:i] + data.draw(st.sampled_from(["", "}", '"', ":", "x"])) + text[i + 1 :]
    check_same(_chunks(data, text), object_root, unwrap=True)


@SETTINGS
@given(doc=_json_doc, data=st.data())
def test_same_errors_on_corrupted_documents(doc: Any, data: Any) -> None:
    text = json.dumps(doc, ensure_ascii=data.draw(st.booleans()))
    for _ in range(data.draw(st.integers(1, 3), label="corruptions")):
        i = data.draw(st.integers(0, len(text)), label="at")
        junk = data.draw(
            st.sampled_from(
                ["", "}", "]", '"', "\\", ",", ":", "x", "\\u12", "\\ud83d", "\\q", "tru", "-", "0"]
            )
            | _text
        )
        text = text[:i] + junk + text[i + data.draw(st.integers(0, 3)) :]
    check_same(_chunks(data, text))


@SETTINGS
@given(
    text=st.text(alphabet=st.sampled_from(list('{}[]"\\,:`\n tnrufalse019.-+eEé😀')), max_size=80),
    data=st.data(),
)
def test_same_outcome_on_arbitrary_text(text: str, data: Any) -> None:
    check_same(_chunks(data, text))


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1e999, "b": -0, "c": 0.5e-3, "d": 12345678901234567890123}',
        '{"a": 01}',
        '{"a": 1.}',
        '{"a": .5}',
        '{"a": -}',
        '{"a": tru}',
        '{"a": "x\\ud83d\\u0041y", "b": "\\udc00\\ud83d"}',
        '{"a": "\\ud83d\\uzzzz"}',
        '{"é": {"中": ["😀", "\\u00e9"]}, "": []}',
        '```json\n{"a": [1, 2,]}\n```',
        "``` \n[1]",
        "nothing",
        '{"a": 1}} trailing',
        '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]',
        '{"a": ' + "7" * 4301 + "}",
    ],
)
def test_same_outcome_at_every_two_way_split(text: str) -> None:
    for cut in range(len(text) + 1):
        check_same([text[:cut], text[cut:]])
    check_same(list(text))


def test_long_string_keeps_few_live_pieces() -> None:
    """A long string is held as blocks of joined pieces, not one object per chunk: 400 KB of
    text in 4-character chunks would take over 5 MB as separate strings."""
    parser = StreamParser("json")
    parser.feed('{"s": "')
    tracemalloc.start()
    try:
        for i in range(100_000):
            parser.feed(f"{i % 10_000:04d}")  # a new string per chunk, as a stream delivers
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1_000_000
    assert parser.feed('"}')[-3].value == "".join(f"{i % 10_000:04d}" for i in range(100_000))


def test_events_are_the_real_frozen_classes() -> None:
    events = StreamParser("json").feed('{"a": ["x", 1]}')
    reference = python_parser().feed('{"a": ["x", 1]}')
    assert [type(e) for e in events] == [type(e) for e in reference]
    assert events == reference
    with pytest.raises(AttributeError):
        events[0].path = ("changed",)  # type: ignore[misc]


def test_same_failure_past_the_depth_limit() -> None:
    text = '{"a": ' + "[" * 999 + '{"b": [1]}'
    for cut in (0, 5, 6, 500, 1004, 1005, 1006, len(text)):
        check_same([text[:cut], text[cut:]])
