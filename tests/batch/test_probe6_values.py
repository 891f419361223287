"""Results a data scientist's ``fn`` returns, stored with ``run=`` and read back on resume:
a plain number or dict holding an infinite or NaN float (a ratio over zero, a failed parse)
is stored as faithfully as a pydantic model holding one already is
(``test_probe5_inputs.py``), not refused with advice that does not fit it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import langfx_nb as lf


async def ratio(x: int) -> Any:
    value = float("inf") if x == 0 else (float("nan") if x < 0 else 1 / x)
    return value if x % 2 else {"ratio": value}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


async def test_a_plain_result_holding_a_non_finite_number_is_stored_and_resumed(
    tmp_path: Path,
) -> None:
    run = tmp_path / "ratios.sqlite"
    items = [0, 1, 2, -1, -2]
    first = await lf.batch(ratio, items, run=run, progress=False)
    assert first.errors == [None] * 5
    again = await lf.batch(ratio, items, run=run, progress=False)
    assert again.resumed == [True] * 5
    assert all(_same(a, b) for a, b in zip(first.results, again.results, strict=True))
    loaded = lf.BatchResult.load(run)  # the file read without running anything
    assert all(_same(a, b) for a, b in zip(first.results, loaded.results, strict=True))
