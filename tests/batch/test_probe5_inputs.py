"""The input stored with each result (``BatchResult.load(run).inputs``) for the items a data
scientist passes: unicode, huge, bytes, pydantic models, dataclasses, plain objects, objects
whose ``repr`` fails, deep nesting; and a file name that is not UTF-8."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.batch.codec import MAX_INPUT_CHARS
from langfx_nb.llms import Echo


class Row(pydantic.BaseModel):
    text: str
    n: int


@dataclasses.dataclass
class Ticket:
    text: str
    tags: list[str]


class Plain:
    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Plain({self.value!r})"


class NoRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr")


def nested(depth: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(depth):
        out = [out]
    return out


async def done(item: Any) -> str:
    return "ok"


async def test_every_kind_of_input_is_stored_bounded_and_readable(tmp_path: Path) -> None:
    text = "héllo wörld 日本語 😀 مرحبا e\u0301"
    items: list[Any] = [
        {"t": text},
        "😀" * 5000,
        b"raw\x00bytes\xff",
        Row(text="hi", n=1),
        Ticket("x", ["a"]),
        Plain("p"),
        NoRepr(),
        nested(5000),
        {"big": "x" * 5_000_000},
    ]
    run = tmp_path / "inputs.sqlite"
    # bytes have no JSON form: keyed by the caller
    result = await lf.batch(done, items, run=run, key=lambda item: str(id(item)), progress=False)
    assert result.ok and result.inputs == items  # this run: the items themselves
    stored = lf.BatchResult.load(run)
    by_key = dict(zip(stored.keys, stored.inputs, strict=True))
    got = [by_key[k] for k in result.keys]
    assert got[0] == {"t": text}  # unicode kept exactly
    assert isinstance(got[1], str) and len(got[1]) == MAX_INPUT_CHARS and got[1].endswith("…")
    assert got[2] == repr(items[2])  # no JSON form: its repr
    assert got[3] == {"__class__": "Row", "text": "hi", "n": 1}
    assert got[4] == {"__class__": "Ticket", "text": "x", "tags": ["a"]}
    assert got[5] == "Plain('p')"
    assert got[6] == "<NoRepr>"  # a repr that raises: its class
    assert got[7] == "<list>"  # too deep for JSON and for repr
    assert isinstance(got[8], str) and got[8].startswith('{"big":"xxx')
    assert len(got[8]) == MAX_INPUT_CHARS
    assert run.stat().st_size < 1_000_000  # the 5 MB item is not in the file


async def test_an_item_with_no_json_form_needs_a_key_before_anything_runs(tmp_path: Path) -> None:
    ran: list[Any] = []

    async def fn(item: Any) -> str:
        ran.append(item)
        return "ok"

    with pytest.raises(TypeError, match=r"items\[1\]: a bytes has no JSON form"):
        await lf.batch(fn, ["a", b"b"], run=tmp_path / "nokey.sqlite", progress=False)
    assert ran == []


async def test_a_non_utf8_file_name_as_input_is_stored(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # what os.listdir gives for a Latin-1 file name
    run = tmp_path / "names.sqlite"
    result = await asyncio.wait_for(lf.batch(done, [name], run=run, progress=False), 5)
    assert result.ok
    [stored] = lf.BatchResult.load(run).inputs
    assert isinstance(stored, str) and stored.startswith("caf")


async def upper(text: str) -> str:
    return text.upper()


async def test_a_manifest_resumed_with_a_row_added_first_still_loads(tmp_path: Path) -> None:
    run = tmp_path / "grown.sqlite"
    await lf.batch(upper, ["a", "b", "c"], run=run, progress=False)
    grown = await lf.batch(upper, ["x", "a", "b", "c"], run=run, progress=False)
    assert grown.resumed == [False, True, True, True]
    stored = lf.BatchResult.load(run)
    assert dict(zip(stored.inputs, stored.results, strict=True)) == {
        "x": "X",
        "a": "A",
        "b": "B",
        "c": "C",
    }


async def generate(word: str, session: lf.Session) -> lf.AIMessage[Any]:
    return await session.generate(f"say {word}")  # the library's own answer type


async def test_an_answer_message_result_fails_with_a_type_error_saying_why(
    tmp_path: Path,
) -> None:
    run = tmp_path / "message.sqlite"
    result = await lf.batch(generate, ["a"], run=run, session=lf.Session(Echo()), progress=False)
    error = result.errors[0]
    assert error is not None and error.type == "TypeError"
    assert "run manifest" in error.message


async def file_name(index: int) -> str:
    return os.fsdecode(b"caf\xe9-%d.txt" % index)  # a result with a lone surrogate


async def test_a_result_naming_a_non_utf8_file_is_stored(tmp_path: Path) -> None:
    run = tmp_path / "results.sqlite"
    result = await asyncio.wait_for(lf.batch(file_name, [1], run=run, progress=False), 5)
    assert result.ok
    again = await asyncio.wait_for(lf.batch(file_name, [1], run=run, progress=False), 5)
    assert again.resumed == [True] and again.results == result.results


class Scored(pydantic.BaseModel):
    ratio: float


async def ratio(x: int) -> Scored:
    return Scored(ratio=float("inf") if x == 0 else 1 / x)  # a division by zero, guarded


async def test_a_result_holding_infinity_does_not_make_the_manifest_unusable(
    tmp_path: Path,
) -> None:
    run = tmp_path / "inf.sqlite"
    first = await lf.batch(ratio, [0, 1, 2], run=run, progress=False)
    assert first.results == [Scored(ratio=float("inf")), Scored(ratio=1.0), Scored(ratio=0.5)]
    again = await lf.batch(ratio, [0, 1, 2], run=run, progress=False)
    assert again.resumed == [True, True, True]  # the infinite ratio too, read back as it was
    assert again.results == first.results


async def test_a_custom_key_holding_a_lone_surrogate_is_found_again(tmp_path: Path) -> None:
    # a key= naming files by their (non-UTF-8) names: stored as its escape, found on resume
    names = [os.fsdecode(b"caf\xe9.txt"), "plain.txt"]
    run = tmp_path / "keys.sqlite"
    first = await asyncio.wait_for(
        lf.batch(done, names, key=lambda name: name, run=run, progress=False), 5
    )
    assert first.ok
    again = await asyncio.wait_for(
        lf.batch(done, names, key=lambda name: name, run=run, progress=False), 5
    )
    assert again.resumed == [True, True]
