"""Resuming ``lf.batch(run=...)`` as a user does, with items read another way the second
time (a CSV's column as text, then as numbers): an item's key is "a hash of its canonical
JSON form" (``batch/codec.py``), so the text ``"1"`` and the number ``1`` are two items and
neither is given the other's stored result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf


async def describe(x: Any) -> str:
    return f"{type(x).__name__}:{x!r}"


@pytest.mark.parametrize(("first", "then"), [([1, 2], ["1", "2"]), ([[1], None], ["[1]", "null"])])
async def test_text_that_looks_like_json_is_not_resumed_as_that_value(
    tmp_path: Path, first: list[Any], then: list[Any]
) -> None:
    run = tmp_path / "items.sqlite"
    await lf.batch(describe, first, run=run, progress=False)
    again = await lf.batch(describe, then, run=run, progress=False)
    assert again.resumed == [False, False]
    assert again.results == [f"str:{t!r}" for t in then]


async def test_reordering_a_number_and_its_text_keeps_each_result(tmp_path: Path) -> None:
    run = tmp_path / "order.sqlite"
    await lf.batch(describe, [1, "1"], run=run, progress=False)
    again = await lf.batch(describe, ["1", 1], run=run, progress=False)
    assert again.results == ["str:'1'", "int:1"]
