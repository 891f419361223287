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


async def test_a_refused_dataframe_names_the_call_that_runs_its_rows() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"text": ["a", "b", "c"], "answer": ["a", "x", "c"]})

    async def fn(row: Any) -> Any:
        return row["text"] if isinstance(row, dict) else row

    with pytest.raises(TypeError, match=r"df\.to_dict\('records'\)"):
        await lf.batch(fn, frame, progress=False)
    result = await lf.batch(fn, frame.to_dict("records"), progress=False)
    assert result.results == ["a", "b", "c"]

    with pytest.raises(TypeError, match=r"Dataset\.from_pandas\(df, expected="):
        await lf.eval.run(fn, frame, [lf.eval.exact], progress=False, live=False)
    cases = lf.eval.Dataset.from_pandas(frame, expected="answer")
    report = await lf.eval.run(fn, cases, [lf.eval.exact], progress=False, live=False)
    assert len(report.results) == 3
