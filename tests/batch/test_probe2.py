"""A second probe of batch runs after the trace-store rewrite (issue #39): what a user relies
on when a resumed run's ``BatchResult`` is opened in the trace explorer."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.trace_explorer import TraceExplorer


async def test_a_resumed_runs_node_ids_name_its_items_in_the_explorer(tmp_path: Path) -> None:
    fail = {"on": True}

    async def fn(item: int, session: Any) -> int:
        with session.track("action", f"work {item}"):
            if item == 1 and fail["on"]:
                raise ValueError("bad item 1")
        return item

    path = str(tmp_path / "run.sqlite")
    first = await lf.batch(fn, list(range(4)), run=path)
    assert first.statuses[1] == "failed"
    fail["on"] = False
    second = await lf.batch(fn, list(range(4)), run=path)
    assert second.statuses[1] == "ok" and not second.resumed[1]
    explorer = TraceExplorer(second)
    try:
        node_id = second.node_ids[1]
        assert node_id is not None
        record = explorer._record(node_id)
        assert record is not None
        assert (record["kind"], record["name"], record["status"]) == ("item", "item 1", "ok")
        batch = explorer._record(str(second.batch_node_id))
        assert batch is not None and batch["status"] == "ok"  # run 1's batch node failed
    finally:
        explorer.close()


async def test_load_trace_of_a_manifest_has_the_batch_usage(tmp_path: Path) -> None:
    async def work(item: int, session: Any) -> int:
        await session.generate(f"hi {item}")
        return item

    model = Scripted([f"a{i}" for i in range(12)])
    session = lf.Session(model, prices={"fake:scripted": lf.Price(1.0, 2.0)})
    path = tmp_path / "run.sqlite"
    result = await lf.batch(work, list(range(12)), session=session, run=str(path))
    loaded = lf.Session.load_trace(path)
    assert len(loaded.all_queries) == 12  # the nodes are all there
    summary = loaded.usage_summary
    assert summary.requests == result.totals.requests == 12
    assert summary.cost == pytest.approx(result.totals.cost)
    assert summary.counts["item"] == {"ok": 12}


async def test_an_interrupted_batch_shows_its_batch_node_cancelled(tmp_path: Path) -> None:
    gate = asyncio.Event()  # never set: item 3 is in flight when the cell is interrupted
    started = asyncio.Event()

    async def fn(item: int) -> int:
        if item == 3:
            started.set()
            await gate.wait()
        return item

    session = lf.Session()
    path = str(tmp_path / "run.sqlite")
    task = asyncio.create_task(
        lf.batch(fn, list(range(6)), session=session, run=path, max_concurrency=2)
    )
    await started.wait()
    for _ in range(20):  # the other worker finishes items 4 and 5
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    in_session = {n["kind"]: n["status"] for n in session.trace_json()["nodes"]}
    assert in_session["batch"] == "cancelled"
    explorer = TraceExplorer(path)
    try:
        shown = {n["kind"]: n["status"] for n in explorer.nodes}
        items = {n["name"]: n["status"] for n in explorer.nodes if n["kind"] == "item"}
    finally:
        explorer.close()
    assert items["item 0"] == "ok"
    assert shown["batch"] == "cancelled"


async def test_a_session_restored_from_a_manifest_keeps_the_saved_nodes(tmp_path: Path) -> None:
    async def fn(item: int) -> int:
        return item

    path = tmp_path / "run.sqlite"
    await lf.batch(fn, list(range(3)), run=str(path))
    session = lf.Session.restore(path)
    saved = {n["id"] for n in session.trace_json()["nodes"]}
    for name in ("one", "two"):
        with session.track("action", name):
            pass
    kept = {n["id"] for n in session.trace_json()["nodes"]}
    assert saved <= kept  # docs/agentic.md: restore continues a saved trace, its nodes kept
    assert session.usage_summary.evicted_nodes == 0


async def test_a_resumed_runs_nodes_come_after_the_first_run_on_the_timeline(
    tmp_path: Path,
) -> None:
    fail = {"on": True}

    async def fn(item: int) -> int:
        await asyncio.sleep(0.01)
        if item == 1 and fail["on"]:
            raise ValueError("bad item 1")
        return item

    path = str(tmp_path / "run.sqlite")
    await lf.batch(fn, list(range(3)), run=path)
    fail["on"] = False
    await asyncio.sleep(0.05)
    await lf.batch(fn, list(range(3)), run=path)
    explorer = TraceExplorer(path)
    try:
        batches = sorted(
            (n["id"], n["start"], n["end"]) for n in explorer.nodes if n["kind"] == "batch"
        )
    finally:
        explorer.close()
    (_, _, first_end), (second_id, second_start, _) = batches
    assert second_id.startswith("2:")
    assert second_start >= first_end


@pytest.mark.parametrize(
    "damaged",
    [
        '{"by_model": []}',
        '{"by_model": {}, "unpriced": {}, "max_trace_nodes": 1e999}',
        '{"by_model": {}, "unpriced": {}, "max_trace_nodes": 1000000000000000000000}',
        '{"by_model": {"m": {"requests": -3, "usage": {}}}, "unpriced": {}, "max_trace_nodes": 9}',
        '{"by_model": {"m": {"requests": true, "usage": {}}}, "unpriced": {},'
        ' "max_trace_nodes": 9}',
        '{"by_model": {"m": {"requests": 1, "usage": {"prompt_tokens": "x"}}}, "unpriced": {},'
        ' "max_trace_nodes": 9}',
        '{"by_model": {"m": {"requests": 1, "usage": {}, "cost": NaN}}, "unpriced": {},'
        ' "max_trace_nodes": 9}',
        '{"by_model": {"m": {"requests": 1, "usage": {}, "cost": "1"}}, "unpriced": {},'
        ' "max_trace_nodes": 9}',
        '{"by_model": {"m": {"requests": 1, "usage": {}}}, "unpriced": {"m": -1},'
        ' "max_trace_nodes": 9}',
    ],
)
async def test_a_manifest_with_a_damaged_usage_row_opens_without_a_summary(
    tmp_path: Path, damaged: str
) -> None:
    async def fn(item: int) -> int:
        return item

    path = tmp_path / "run.sqlite"
    await lf.batch(fn, list(range(3)), run=str(path))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE name = 'usage:1'", (damaged,))
        conn.execute("DROP TABLE trace_info")  # read again from the records
    conn.close()
    explorer = TraceExplorer(path)
    try:
        assert explorer.snapshot.get("summary") is None  # unknown, not zero
        assert sum(1 for n in explorer.nodes if n["kind"] == "item") == 3  # nothing lost
    finally:
        explorer.close()
    assert len(lf.Session.load_trace(path).trace_json()["nodes"]) == 5
