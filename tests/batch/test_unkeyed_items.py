"""Items with no JSON form (a row holding a date, NaN, an object) need no key without a
run manifest: they run, and only ``run=`` refuses them before anything runs."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf

ITEMS: list[Any] = [{"day": datetime.date(2024, 1, 1)}, {"v": float("nan")}, {"ok": 1}, object()]


async def kind(x: Any) -> str:
    return type(x).__name__


async def test_items_with_no_json_form_run_without_a_manifest() -> None:
    result = await lf.batch(kind, ITEMS, progress=False)
    assert result.ok and result.results == ["dict", "dict", "dict", "object"]
    assert result.keys[0] == "item-0" and result.keys[3] == "item-3"
    assert len(set(result.keys)) == 4


async def test_run_still_refuses_them_before_anything_runs(tmp_path: Path) -> None:
    calls: list[Any] = []

    async def record(x: Any) -> None:
        calls.append(x)

    with pytest.raises(TypeError, match=r"items\[0\]: a date has no JSON form"):
        await lf.batch(record, ITEMS, run=tmp_path / "r.sqlite", progress=False)
    assert calls == []


async def test_an_item_that_contains_itself_is_named_so(tmp_path: Path) -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(TypeError, match=r"items\[0\] contains itself"):
        await lf.batch(kind, [loop], run=tmp_path / "r.sqlite", progress=False)
    result = await lf.batch(kind, [loop], progress=False)  # no manifest: it runs
    assert result.results == ["list"]
