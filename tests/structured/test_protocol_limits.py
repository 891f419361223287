"""Odd and hostile python-protocol answers a real model may write: each is either read as
the answer or refused with a bounded ``MappingError`` — never a bare ``TypeError``, never
a value that breaks a later request, a trace or the cache."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import InMemoryCache, StaticResponse
from langfx_nb.llms.cache import SQLiteCache
from langfx_nb.schema import Schema
from langfx_nb.structured.protocols import (
    MAX_INT_DIGITS,
    MAX_PYTHON_CHARS,
    MAX_RESPONSE_CHARS,
    JsonProtocol,
    PythonProtocol,
)

TERMINALS = (lf.GenerationComplete, lf.ParsingFailed, lf.GenerationFailed, lf.Cancelled)


class Item(BaseModel):
    name: str


class Answer(BaseModel):
    name: str
    n: int = 0
    items: list[Item] = []


def parse(text: str, schema: object = Answer) -> object:
    return PythonProtocol().parse(text, Schema.of(schema))


# -- the assignment form ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "output = Answer(name='x', n=2)",
        "Here you go:\n```python\noutput = Answer(name='x', n=2)\n```\nAnything else?",
        "```python\nresult: Answer = Answer(name='x', n=2)\n```",
        "```py\nanswer = Answer(\n  name='x',\n  n=2,\n)\n```",
        "The answer is\n\noutput = Answer(name='x', n=2)",
    ],
)
def test_assignment_form_is_read_as_the_answer(text: str) -> None:
    assert parse(text) == Answer(name="x", n=2)


async def test_assignment_form_through_query_and_query_stream() -> None:
    lm = StaticResponse("Sure:\n```python\noutput = Answer(name='x', n=2)\n```\nDone.")
    assert await lf.query("q", Answer, lm=lm) == Answer(name="x", n=2)
    events = [e async for e in lf.query_stream("q", Answer, lm=lm)]
    assert isinstance(events[-1], lf.GenerationComplete)
    assert events[-1].value == Answer(name="x", n=2)


@pytest.mark.parametrize(
    "text",
    [
        "a = b = Answer(name='x')",  # a chain is not one assignment
        "output = Answer(name='x')\nprint(output)",  # a second statement
        "os.x = Answer(name='x')",  # an attribute target
        "output += Answer(name='x')",
        "output = __import__('os')",
    ],
)
def test_assignment_form_stays_strict(text: str) -> None:
    """Only ``name = <expression>`` is unwrapped; the expression is read as strictly as ever
    (unfenced prose may still hold an answer, so these are fenced)."""
    with pytest.raises(lf.MappingError):
        parse(f"```python\n{text}\n```")


# -- unhashable tuple keys -------------------------------------------------------------------
@pytest.mark.parametrize(
    "key", ["([1], 2)", "({'a': 1},)", "(Item(name='a'),)", "((1, [2]),)", "Item(name='a')"]
)
def test_dict_key_holding_an_unhashable_value_is_a_mapping_error(key: str) -> None:
    with pytest.raises(lf.MappingError, match="dict key"):
        parse(f"{{{key}: Item(name='v')}}", dict[tuple[int, ...], Item])


def test_hashable_tuple_key_still_parses() -> None:
    assert parse("{(1, 2): 3}", dict[tuple[int, int], int]) == {(1, 2): 3}


async def test_unhashable_key_ends_query_stream_with_parsing_failed() -> None:
    lm = StaticResponse("```python\n{([1], 2): 1}\n```")
    events = [e async for e in lf.query_stream("q", dict[tuple[int, ...], int], lm=lm)]
    assert isinstance(events[-1], lf.ParsingFailed)
    assert sum(isinstance(e, TERMINALS) for e in events) == 1


async def test_unhashable_key_answer_is_not_cached() -> None:
    cache = InMemoryCache()
    lm = StaticResponse("```python\n{([1], 2): 1}\n```", cache=cache)
    with pytest.raises(lf.MappingError):
        await lf.query("q", dict[tuple[int, ...], int], lm=lm)
    assert len(cache) == 0


# -- huge integers -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "literal",
    [
        "0x" + "f" * 20_000,
        "0o" + "7" * 400,
        "0b" + "1" * 400,
        "1" + "0" * MAX_INT_DIGITS,
        "-1" + "0" * MAX_INT_DIGITS,
        "1_" * 200 + "1",
    ],
)
def test_integer_beyond_the_digit_bound_is_a_mapping_error(literal: str) -> None:
    with pytest.raises(lf.MappingError, match="digits"):
        parse(f"Answer(name='x', n={literal})")


def test_integer_at_the_digit_bound_parses_and_serializes() -> None:
    big = int("9" * MAX_INT_DIGITS)
    value = parse(f"Answer(name='x', n=-{big})")
    assert isinstance(value, Answer) and value.n == -big
    json.dumps(value.model_dump())  # str(int) works for every accepted integer


async def test_huge_integer_never_reaches_the_trace() -> None:
    lm = StaticResponse("Answer(name='x', n=0x" + "f" * 20_000 + ")")
    session = lf.Session(lm)
    with pytest.raises(lf.MappingError):
        await session.query("q", Answer)
    json.dumps(session.trace_json())


# -- lone surrogates ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "protocol"),
    [
        ("Answer(name='a\\ud800b')", PythonProtocol()),
        ("Answer(name='\\udfff', items=[Item(name='\\ud83d')])", PythonProtocol()),
        ('{"result": {"name": "a\\ud800b"}}', JsonProtocol()),
        ('{"result": {"name": "x", "items": [{"name": "\\udc00"}]}}', JsonProtocol()),
    ],
)
def test_lone_surrogate_is_repaired(text: str, protocol: PythonProtocol | JsonProtocol) -> None:
    value = protocol.parse(text, Schema.of(Answer))
    assert isinstance(value, Answer)
    dumped = json.dumps(value.model_dump(), ensure_ascii=False)
    dumped.encode()  # no UnicodeEncodeError
    assert "\ufffd" in dumped


def test_surrogate_pair_written_as_two_escapes_is_kept() -> None:
    value = parse("Answer(name='\\ud83d\\ude00')")
    assert isinstance(value, Answer) and value.name == "😀"


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 100])
@pytest.mark.parametrize(
    ("text", "protocol", "name"),
    [
        ("Answer(name='a\\ud800b\\ud83d\\ude00\\udfff')", "python", "a\ufffdb😀\ufffd"),
        ('{"result": {"name": "a\\ud800b\\ud83d\\ude00\\udfff"}}', "json", "a\ufffdb😀\ufffd"),
    ],
)
async def test_streamed_deltas_never_carry_a_lone_surrogate(
    text: str, protocol: str, name: str, chunk_size: int
) -> None:
    """A delta goes to widgets over the kernel's comm, whose UTF-8 encoding a lone
    surrogate would break; deltas agree with the repaired final value."""
    lm = StaticResponse(text, chunk_size=chunk_size)
    events = [e async for e in lf.query_stream("q", Answer, lm=lm, protocol=protocol)]
    deltas = "".join(e.delta for e in events if isinstance(e, lf.StringFieldDelta))
    deltas.encode()
    assert deltas == name
    assert isinstance(events[-1], lf.GenerationComplete) and events[-1].value.name == name


async def test_answer_with_a_lone_surrogate_can_be_sent_on(tmp_path: Path) -> None:
    """The value goes into the next prompt of an HTTP model with a SQLite cache: no
    UnicodeEncodeError on the cache key, the cache row or the request body."""
    first = StaticResponse("Answer(name='\\ud800')")
    value = await lf.query("q", Answer, lm=first)
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        body = {
            "choices": [
                {"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ]
        }
        return httpx.Response(200, json=body)

    lm = lf.llms.OpenAI(
        "m",
        api_key="k",
        transport=httpx.MockTransport(handler),
        cache=SQLiteCache(tmp_path / "c.sqlite"),
    )
    assert await lf.query("Say {{x}} \ud800 back", lm=lm, vars={"x": value.name}) == "ok"
    assert seen and seen[0].decode()


# -- bounded messages and cost -----------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Answer(name=" + "x" * 500_000 + ")",
        "Answer(" + "y" * 50_000 + "=1)",
        "Answer(name='x', n='" + "9x" * 20_000 + "')",
        "Nope" + "n" * 50_000 + "(name='x')",
    ],
)
def test_mapping_error_message_is_bounded(text: str) -> None:
    with pytest.raises(lf.MappingError) as info:
        parse(text)
    assert len(str(info.value)) <= 1000
    assert len(repr(info.value.detail)) <= 2000


def test_python_answer_beyond_its_size_limit_is_refused_before_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ast

    def boom(*a: object, **k: object) -> object:
        raise AssertionError("ast.parse must not see oversized input")

    assert MAX_PYTHON_CHARS < MAX_RESPONSE_CHARS
    monkeypatch.setattr(ast, "parse", boom)
    text = "[" + "1," * (MAX_PYTHON_CHARS // 2) + "]"
    with pytest.raises(lf.MappingError, match="protocol='json'"):
        parse(text, list[int])


def test_json_protocol_keeps_the_larger_limit() -> None:
    text = json.dumps({"result": [1] * (MAX_PYTHON_CHARS // 2)})
    assert len(text) > MAX_PYTHON_CHARS
    assert JsonProtocol().parse(text, Schema.of(list[int])) == [1] * (MAX_PYTHON_CHARS // 2)
