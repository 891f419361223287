"""A second probe of the trace explorer after the rewrites of issue #39: what a user relies on
when a batch manifest, a live session and its saved trace show the same run."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.trace_explorer import TraceExplorer

from ._fakes import FakeClock


async def _work(item: int, session: Any) -> int:
    with session.track("action", f"work {item}") as tracked:
        await tracked.session.generate(f"hi {item}")
        if item % 4 == 1:
            raise ValueError(f"bad item {item}")
    return item


async def _batch(tmp_path: Path) -> tuple[lf.BatchResult, lf.Session, Path]:
    model = Scripted([f"answer {i}" for i in range(10)])
    session = lf.Session(model, prices={"fake:scripted": lf.Price(1.0, 2.0)})
    path = tmp_path / "run.sqlite"
    result = await lf.batch(_work, list(range(10)), session=session, run=str(path))
    return result, session, path


async def test_a_batch_manifest_shows_the_batch_total_cost(tmp_path: Path) -> None:
    result, session, path = await _batch(tmp_path)
    assert result.totals.cost is not None and result.totals.failed == 3
    saved = TraceExplorer(lf.save_trace(session, tmp_path / "saved.db"))
    assert saved.snapshot["summary"]["cost"] == pytest.approx(result.totals.cost)
    for source in (path, result):
        explorer = TraceExplorer(source)
        summary = explorer.snapshot.get("summary")
        explorer.close()
        assert summary is not None, source
        assert summary["cost"] == pytest.approx(result.totals.cost)
    saved.close()


async def test_a_live_batch_and_its_manifest_show_the_same_rows(tmp_path: Path) -> None:
    model = Scripted([f"answer {i}" for i in range(10)])
    session = lf.Session(model)
    live = TraceExplorer(session)
    path = tmp_path / "run.sqlite"
    result = await lf.batch(_work, list(range(10)), session=session, run=str(path))
    live.flush()
    stored = TraceExplorer(result)
    saved = TraceExplorer(lf.save_trace(session, tmp_path / "saved.db"))
    views: list[dict[str, Any]] = [
        {},
        {"expanded": {"1": True}},
        {"query": "bad"},
        {"query": "hi 3"},
    ]
    for view in views:
        want = live._reply({"start": 0, "count": 1000, **view})
        for other in (stored, saved):
            got = other._reply({"start": 0, "count": 1000, **view})
            for key in ("rows", "total", "counts", "nodes", "matches"):
                assert got.get(key) == want.get(key), (view, key)
    for explorer in (live, stored, saved):
        explorer.close()
    await asyncio.sleep(0)


async def test_cancel_run_from_the_explorer_stops_a_whole_batch() -> None:
    session = lf.Session()
    explorer = TraceExplorer(session)
    gate = asyncio.Event()  # never set while the batch runs: items 3..5 wait on it

    async def fn(item: int) -> int:
        if item > 2:
            await gate.wait()
        return item

    task = asyncio.create_task(lf.batch(fn, list(range(6)), session=session, max_concurrency=6))
    for _ in range(200):  # until every item started
        await asyncio.sleep(0)
        if sum(n["kind"] == "item" for n in explorer.nodes) == 6:
            break
    try:
        assert explorer.cancel()
        for _ in range(50):
            await asyncio.sleep(0)
        assert task.done()  # the run stopped, as the Cancel-run button promises
    finally:
        gate.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        explorer.close()
    items = {n["name"]: n["status"] for n in session.trace_json()["nodes"] if n["kind"] == "item"}
    assert [items[f"item {i}"] for i in (3, 4, 5)] == ["cancelled"] * 3


async def test_the_state_after_a_run_is_the_final_trace() -> None:
    async with lf.Session(Scripted(["hi"])) as session:
        # a clock whose timers fire only when advanced: what flush() itself does, and nothing else
        explorer = TraceExplorer(session, clock=FakeClock())
        await lf.Agent("hello").invoke(session)
        explorer.flush()
        shown = explorer.snapshot
        explorer.close()
    assert shown["windowed"]["nodes"] == len(session.trace_json()["nodes"])
    assert shown["summary"]["requests"] == 1
