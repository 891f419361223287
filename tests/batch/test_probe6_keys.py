"""Items as a user hands them to ``lf.batch(run=...)`` and ``lf.eval.run``: read another way
the second time (a CSV's column as text, then as numbers), an item's key is "a hash of its
canonical JSON form" (``batch/codec.py``), so the text ``"1"`` and the number ``1`` are two
items and neither is given the other's stored result; a pandas table runs over its rows (or
is refused), never over its column names."""

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


@pytest.mark.xfail(
    strict=True,
    reason="lf.batch (batch/runner.py run_batch: list(items)) and lf.eval.run (Dataset(...)) "
    "iterate a pandas DataFrame as Python does, over its column names: a table of 3 rows "
    "runs 2 items named 'text' and 'id'",
)
async def test_a_dataframe_runs_over_its_rows_or_is_refused() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"text": ["a", "b", "c"], "id": [1, 2, 3]})
    seen: list[Any] = []

    async def fn(row: Any) -> Any:
        seen.append(row)
        return row

    for run in (
        lambda: lf.batch(fn, frame, progress=False),
        lambda: lf.eval.run(fn, frame, [lf.eval.exact], progress=False, live=False),
    ):
        seen.clear()
        try:
            result = await run()
        except TypeError:  # refused, naming what to pass instead
            assert seen == []
            continue
        assert len(result) == 3 and "text" not in seen
