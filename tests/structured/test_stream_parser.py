"""The incremental parser: any document, cut anywhere, gives the same values as a full parse."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langfx_nb import (
    ArrayEnd,
    ArrayStart,
    FieldEnd,
    FieldStart,
    MappingError,
    ObjectEnd,
    ObjectStart,
    StreamParseError,
    StreamParser,
    StringFieldDelta,
)
from langfx_nb._unicode import repair_surrogates
from langfx_nb.structured.protocols import to_python_expr
from langfx_nb.structured.stream_parser import MAX_RESPONSE_CHARS, MAX_TOKEN_CHARS

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text with escapes, control characters, quotes, backslashes, non-ASCII and astral characters.
_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\"\\/\n\t\r\b\f\x00\x1f'aZ é中😀\U0001f680{}[],:=()#`")),
        st.characters(codec="utf-8"),
    ),
    max_size=30,
)
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_json_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_text, inner, max_size=5)),
    max_leaves=25,
)
_json_doc = st.one_of(st.lists(_json_value, max_size=5), st.dictionaries(_text, _json_value))


def _chunks(data: st.DataObject, text: str) -> list[str]:
    """Cut ``text`` into pieces: all single characters, or random sizes (often tiny)."""
    if data.draw(st.booleans(), label="one char at a time"):
        return list(text)
    sizes = st.one_of(st.integers(1, 4), st.integers(1, 64))
    out, i = [], 0
    while i < len(text):
        n = data.draw(sizes, label="chunk size")
        out.append(text[i : i + n])
        i += n
    return out


def _run(grammar: str, chunks: list[str]) -> tuple[Any, list[Any]]:
    parser = StreamParser(grammar)  # type: ignore[arg-type]
    events: list[Any] = []
    for c in chunks:
        events += parser.feed(c)
    events += parser.close()
    assert parser.done
    return parser.value, events


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _check_events(events: list[Any], expected: Any) -> None:
    """Deltas add up to each string; every field_end is the matching part of the document;
    starts and ends nest properly."""
    deltas: dict[tuple[Any, ...], list[str]] = {}
    open_fields: list[tuple[Any, ...]] = []
    containers: list[tuple[str, tuple[Any, ...]]] = []
    for ev in events:
        if isinstance(ev, FieldStart):
            open_fields.append(ev.path)
            deltas[ev.path] = []
        elif isinstance(ev, StringFieldDelta):
            assert open_fields[-1] == ev.path
            assert ev.delta
            deltas[ev.path].append(ev.delta)
        elif isinstance(ev, FieldEnd):
            assert open_fields.pop() == ev.path
            assert ev.value == _at(expected, ev.path)
            if isinstance(ev.value, str):
                assert "".join(deltas[ev.path]) == ev.value
            else:
                assert deltas[ev.path] == []
        elif isinstance(ev, (ObjectStart, ArrayStart)):
            assert open_fields[-1] == ev.path
            containers.append((ev.type, ev.path))
        elif isinstance(ev, (ObjectEnd, ArrayEnd)):
            kind, path = containers.pop()
            assert path == ev.path
            assert kind.split("_")[0] == ev.type.split("_")[0]
    assert not open_fields
    assert not containers


def _lists(value: Any) -> Any:
    """Tuples as lists (the stream parser reports every sequence as an array)."""
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


# -- JSON ------------------------------------------------------------------------------------
@SETTINGS
@given(
    doc=_json_doc,
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 2]),
    frame=st.sampled_from(["bare", "fence", "prose"]),
    data=st.data(),
)
def test_json_any_document_any_chunking(
    doc: Any, ensure_ascii: bool, indent: int | None, frame: str, data: st.DataObject
) -> None:
    body = json.dumps(doc, ensure_ascii=ensure_ascii, indent=indent)
    text = {
        "bare": body,
        "fence": f"Here you go:\n```json\n{body}\n```\nAnything after is ignored {{[",
        "prose": f"The answer is {body} -- and that is all.",
    }[frame]
    value, events = _run("json", _chunks(data, text))
    expected = json.loads(body)
    assert value == expected
    _check_events(events, expected)


@pytest.mark.parametrize(
    "literal", ["\\ud83d\\ude00", "\\u00e9", "\\n", "\\\\", '\\"', "\\ud83d", "\\udc00x"]
)
def test_json_escapes_split_at_every_position(literal: str) -> None:
    text = f'["a{literal}b{literal}"]'
    # as json.loads, except that a lone surrogate becomes U+FFFD (it cannot be encoded)
    expected = [repair_surrogates(s) for s in json.loads(text)]
    for cut in range(len(text) + 1):
        for c2 in range(cut, len(text) + 1):
            value, events = _run("json", [text[:cut], text[cut:c2], text[c2:]])
            assert value == expected
            _check_events(events, expected)


@pytest.mark.parametrize(
    ("grammar", "text"),
    [
        ("json", r'{"a": "x", "b": "C:\\d\"", "c": ["\\", "é\u00e9\ud83d\ude00"], "d": -1.5e3}'),
        ("python", r"""A(a='x', b='C:\\d\'', c=["\\", '''é\n'''], d=-1.5e3, e=r'\'')"""),
    ],
)
def test_every_three_way_split(grammar: str, text: str) -> None:
    """Chunk boundaries at every pair of positions (e.g. a chunk that starts with a closing
    quote and ends with a backslash)."""
    python_value = {"a": "x", "b": "C:\\d'", "c": ["\\", "é\n"], "d": -1500.0, "e": "\\'"}
    value, _ = _run(grammar, [text])
    assert value == (json.loads(text) if grammar == "json" else python_value)
    for a in range(len(text) + 1):
        for b in range(a, len(text) + 1):
            got, events = _run(grammar, [text[:a], text[a:b], text[b:]])
            assert got == value
            _check_events(events, value)


def test_surrogate_pairs_never_split_across_deltas() -> None:
    text = '{"s": "' + "x\\ud83d\\ude00" * 20 + '"}'
    _, events = _run("json", list(text))
    deltas = [e.delta for e in events if isinstance(e, StringFieldDelta)]
    for d in deltas:
        d.encode("utf-8")  # a lone surrogate would fail to encode
    assert "".join(deltas) == "x😀" * 20


def test_one_delta_per_chunk_per_string() -> None:
    text = '{"s": "' + "abc\\n" * 50 + '"}'
    chunks = [text[i : i + 16] for i in range(0, len(text), 16)]
    parser = StreamParser("json")
    for c in chunks:
        events = parser.feed(c)
        assert sum(isinstance(e, StringFieldDelta) for e in events) <= 1


def test_json_event_sequence() -> None:
    _, events = _run("json", ['{"a": [1, {"b"', ': "x"}], "c": true}'])
    assert [(e.type, getattr(e, "path", None)) for e in events] == [
        ("field_start", ()),
        ("object_start", ()),
        ("field_start", ("a",)),
        ("array_start", ("a",)),
        ("field_start", ("a", 0)),
        ("field_end", ("a", 0)),
        ("field_start", ("a", 1)),
        ("object_start", ("a", 1)),
        ("field_start", ("a", 1, "b")),
        ("string_field_delta", ("a", 1, "b")),
        ("field_end", ("a", 1, "b")),
        ("object_end", ("a", 1)),
        ("field_end", ("a", 1)),
        ("array_end", ("a",)),
        ("field_end", ("a",)),
        ("field_start", ("c",)),
        ("field_end", ("c",)),
        ("object_end", ()),
        ("field_end", ()),
    ]


def test_events_are_frozen_and_serializable() -> None:
    ev = StringFieldDelta(("a", 0), "x")
    with pytest.raises(AttributeError):
        ev.delta = "y"  # type: ignore[misc]
    assert ev.to_json() == {"type": "string_field_delta", "path": ["a", 0], "delta": "x"}
    _, events = _run("json", ['{"a": "x"}'])
    assert events[2] == FieldStart(("a",))
    assert all(e.type == e.to_json()["type"] for e in events)


def test_object_root_skips_brackets_in_prose() -> None:
    parser = StreamParser("json", object_root=True)
    events = parser.feed('Here it is [as JSON]: {"a": [1]} and [more]') + parser.close()
    assert parser.value == {"a": [1]}
    assert events[0] == FieldStart(())
    with pytest.raises(StreamParseError):
        StreamParser("json").feed("Here it is [as JSON]: ")


def test_text_after_the_document_is_ignored() -> None:
    value, _ = _run("json", ['```json\n{"a": 1}\n```\n', "and now {broken prose [", "]"])
    assert value == {"a": 1}


# -- Python ------------------------------------------------------------------------------------
_py_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(_text, inner, max_size=5),
    ),
    max_leaves=25,
)


@SETTINGS
@given(value=_py_value, fenced=st.booleans(), data=st.data())
def test_python_any_literal_any_chunking(value: Any, fenced: bool, data: st.DataObject) -> None:
    code = to_python_expr(value)
    text = f"Sure.\n```python\n{code}\n```\nDone." if fenced else code
    parsed, events = _run("python", _chunks(data, text))
    expected = _lists(ast.literal_eval(code))
    assert parsed == expected
    _check_events(events, expected)


_CALL = (
    "Answer(items=[Item(name='a', color=\"red\"), Item(name='b\\'c', color='\\u00e9\\N{BULLET}')],"
    " n=-3, f=1.5e3, ok=True, x=None, t=(1, 2,), d={'k': 'v', 1: 2}, s='''tri'ple\n''',"
    " c=\"ab\" 'cd', r=r'a\\n', h=0x1F, e='\\U0001F600\\x41\\101',)"
)
_CALL_VALUE = {
    "items": [{"name": "a", "color": "red"}, {"name": "b'c", "color": "é•"}],
    "n": -3,
    "f": 1500.0,
    "ok": True,
    "x": None,
    "t": [1, 2],
    "d": {"k": "v", 1: 2},
    "s": "tri'ple\n",
    "c": "abcd",
    "r": "a\\n",
    "h": 31,
    "e": "😀AA",
}


@SETTINGS
@given(data=st.data())
def test_python_calls_any_chunking(data: st.DataObject) -> None:
    text = f"```python\n{_CALL}\n```"
    value, events = _run("python", _chunks(data, text))
    assert value == _CALL_VALUE
    _check_events(events, _CALL_VALUE)
    names = [(e.path, e.name) for e in events if isinstance(e, ObjectStart)]
    assert names == [((), "Answer"), (("items", 0), "Item"), (("items", 1), "Item"), (("d",), None)]


def test_python_bare_answer_without_fence() -> None:
    assert _run("python", ["Answer(n", "=1)"])[0] == {"n": 1}
    assert _run("python", ["[1, 2]"])[0] == [1, 2]
    assert _run("python", ["  42"])[0] == 42
    assert _run("python", ["'", "'"])[0] == ""
    assert _run("python", ["Here it is:\n```py", "thon\nAnswer(n=2)\n```"])[0] == {"n": 2}


def test_python_comments_are_skipped() -> None:
    text = (
        "```python\n# the answer\nAnswer(  # fruits\n  n=1,  # one\n  s='# not a comment',\n)\n```"
    )
    for size in (1, 2, 3, 100):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert _run("python", chunks)[0] == {"n": 1, "s": "# not a comment"}
    assert _run("python", ["'ab'  # trailing"])[0] == "ab"


# -- malformed input ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("grammar", "text", "position"),
    [
        ("json", '{"a": tru}', 6),
        ("json", '{"a" 1}', 5),
        ("json", '{"a": "x', 8),
        ("json", "no json here", 12),
        ("json", '{"a": "\\q"}', 7),
        ("json", '{"a": "\\u12G4"}', 8),  # where json.loads reports it
        ("json", "[1,,2]", 3),
        ("json", '{"a": 1} ', None),
        ("python", "Answer(1)", 7),
        ("python", 'Answer("a"=1)', 7),
        ("python", "Answer(a=foo)", 9),
        ("python", "Answer(a=1", 10),
        ("python", "```python\nx.y + 1\n```", None),
        ("python", "just prose", 10),
        ("python", "'''abc''", 8),
    ],
)
def test_malformed_input_fails_with_position(grammar: str, text: str, position: int | None) -> None:
    parser = StreamParser(grammar)  # type: ignore[arg-type]
    if position is None and grammar == "json":
        for c in text:
            parser.feed(c)
        assert parser.close() == [] and parser.value == {"a": 1}
        return
    with pytest.raises(StreamParseError) as info:
        for c in text:
            parser.feed(c)
        parser.close()
    err = info.value
    assert isinstance(err, MappingError)
    if position is not None:
        assert err.position == position
    assert 0 <= err.position <= len(text)
    assert f"position {err.position}" in str(err)
    with pytest.raises(StreamParseError):  # a failed parser stays failed
        parser.feed("more")


@SETTINGS
@given(doc=_json_doc, data=st.data())
def test_corrupted_documents_end_in_an_error_or_a_value(doc: Any, data: st.DataObject) -> None:
    text = json.dumps(doc)
    i = data.draw(st.integers(0, len(text)), label="corruption point")
    junk = data.draw(st.sampled_from(["", "}", "]", '"', "\\", ",", ":", "x", "\\u12"]))
    bad = text[:i] + junk + text[i + data.draw(st.integers(0, 3)) :]
    parser = StreamParser("json")
    try:
        for c in _chunks(data, bad):
            parser.feed(c)
        parser.close()
    except StreamParseError as err:
        assert 0 <= err.position <= len(bad)
        return
    # The parser accepts a little more than json.loads (trailing commas, raw control
    # characters); whatever it accepts must agree with what a lenient reading gives.
    assert parser.done


@pytest.mark.parametrize("literal", ["0x" + "f" * 4_000, "-0X" + "F" * 3_600, "0x1" + "0" * 3_590])
def test_a_based_integer_too_long_to_print_fails_at_its_start(literal: str) -> None:
    """A hex or octal literal within MAX_TOKEN_CHARS can still be an int with more than 4,300
    decimal digits, which Python refuses to print: it fails at its start, like a long token."""
    text = "A(a=" + literal + ")"
    for chunks in ([text], [text[i : i + 7] for i in range(0, len(text), 7)]):
        parser = StreamParser("python")
        with pytest.raises(StreamParseError, match="more than 4300 decimal digits") as info:
            for c in chunks:
                parser.feed(c)
            parser.close()
        assert info.value.position == 4


@pytest.mark.parametrize(
    ("grammar", "text", "position"),
    [
        ("json", '{"a": ' + "1" * 5000 + "}", 6),
        ("json", "[" + "2" * 5000, 1),
        ("json", "[1.5e" + "7" * 4400 + "]", 1),
        ("python", "A(a=" + "3" * 5000 + ")", 4),
        ("python", "A(a=0x" + "f" * 20_000 + ")", 4),  # int() itself would accept this one
        ("python", "A(" + "b" * 5000 + "=1)", 2),
    ],
)
def test_numbers_and_names_longer_than_the_bound_fail(
    grammar: str, text: str, position: int
) -> None:
    """A number or name longer than MAX_TOKEN_CHARS is a parse error at its start, whether it
    arrives whole or a character at a time: nothing that long reaches int(), reprs or traces."""
    for chunks in ([text], list(text)):
        parser = StreamParser(grammar)  # type: ignore[arg-type]
        with pytest.raises(StreamParseError, match=f"longer than {MAX_TOKEN_CHARS}") as info:
            for c in chunks:
                parser.feed(c)
            parser.close()
        assert info.value.position == position


def test_numbers_up_to_the_bound_parse() -> None:
    digits = "9" * MAX_TOKEN_CHARS
    assert _run("json", ["[", digits[:100], digits[100:], "]"])[0] == [int(digits)]
    assert _run("python", ["[-", digits[1:], "]"])[0] == [int("-" + digits[1:])]


def test_the_response_length_is_bounded() -> None:
    parser = StreamParser("json", max_chars=100)
    parser.feed('{"a": "' + "x" * 80)
    with pytest.raises(StreamParseError, match="longer than 100 characters") as info:
        parser.feed("x" * 30)
    assert info.value.position == 100
    with pytest.raises(StreamParseError):
        parser.close()
    assert MAX_RESPONSE_CHARS == 1_000_000
    parser = StreamParser("json")
    parser.feed("x" * MAX_RESPONSE_CHARS)  # prose, up to the limit
    with pytest.raises(StreamParseError, match="longer than 1000000 characters"):
        parser.feed("{")


@pytest.mark.parametrize(
    ("grammar", "opener"), [("json", "["), ("json", '{"a":'), ("python", "["), ("python", "A(a=")]
)
def test_nesting_is_bounded(grammar: str, opener: str) -> None:
    """1000 levels parse; the 1001st opener fails at its position, so hostile "[[[[..." can't
    make the parser quadratic (every value's path is as long as its depth)."""
    ok = opener * 1000 + "1" + ("]" if opener == "[" else "}" if grammar == "json" else ")") * 1000
    value, _ = _run(grammar, [ok])
    for _ in range(999):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    assert value == [1] or value == {"a": 1}
    parser = StreamParser(grammar)  # type: ignore[arg-type]
    with pytest.raises(StreamParseError, match="deeper than 1000") as info:
        parser.feed(opener * 100_000)
    bracket = len(opener) - len(opener.lstrip("A"))  # a call fails at its "("
    assert info.value.position == len(opener) * 1000 + bracket


def test_unknown_grammar_is_rejected() -> None:
    with pytest.raises(ValueError, match="grammar"):
        StreamParser("yaml")  # type: ignore[arg-type]


@SETTINGS
@given(
    text=st.text(alphabet=st.sampled_from(list("{}[]()\"'\\,:=#`\n xyAZ019.-+_éu😀")), max_size=80),
    grammar=st.sampled_from(["json", "python"]),
    data=st.data(),
)
def test_arbitrary_text_never_raises_anything_else(
    text: str, grammar: str, data: st.DataObject
) -> None:
    parser = StreamParser(grammar)  # type: ignore[arg-type]
    try:
        for c in _chunks(data, text):
            parser.feed(c)
        parser.close()
    except StreamParseError as err:
        assert 0 <= err.position <= len(text)
    else:
        assert parser.done
