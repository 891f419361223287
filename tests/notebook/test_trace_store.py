"""A batch's trace in its run manifest: ``lf.batch(run=...)`` writes every node of the batch
into the SQLite file as it finishes, then the whole trace as a stored trace at the end, and
``TraceExplorer(path)`` (or the ``BatchResult``) windows it from there: exact counts, records
read back strictly, every run of the manifest."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.agentic.trace_db import STORE_TABLES
from langfx_nb.batch.run_trace import open_trace
from langfx_nb.notebook import trace_explorer as te
from tests.stored_tables import stored_and_converted

from ._fakes import record_sends

FAIL_EVERY = 97


async def work(item: int, view: Any) -> int:
    with view.track("action", "step", inputs={"item": item}):
        pass
    if item % FAIL_EVERY == 0:
        raise ValueError(f"boom {item}")
    return item


def run(path: Path, n: int, session: Session | None = None) -> Any:
    return asyncio.run(lf.batch(work, range(n), run=path, session=session, progress=False))


def test_a_batch_trace_is_windowed_from_its_run_manifest(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    n = 3000
    session = Session()
    result = run(path, n, session)
    failed = len(range(0, n, FAIL_EVERY))
    assert result.totals.failed == failed
    explorer = te.TraceExplorer(path)
    index = open_trace(path)  # what the explorer windows from
    assert len(index) == 2 + 2 * n
    counts = index.counts()
    assert counts["kind"] == {"session": 1, "batch": 1, "item": n, "action": n}
    # the batch node ends "failed" too: its items failed
    assert counts["status"] == {"ok": 2 * n - failed, "failed": failed + 1, "running": 1}
    # the same nodes as the session holds (all of them here: under max_trace_nodes)
    held = {node["id"]: node for node in session.trace_json()["nodes"]}
    assert {r["id"] for r in index.records()} == set(held)
    # a filter runs over every item in the file, exactly
    window = index.window(query="boom 9")
    assert window["matches"] == sum(1 for i in range(0, n, FAIL_EVERY) if "boom 9" in f"boom {i}")
    # the detail pane reads a record back, strictly, with what the row does not hold
    sent = record_sends(explorer)
    step = next(i for i in held.values() if i["kind"] == "action")
    explorer._on_view_message(explorer, {"kind": "detail_request", "id": step["id"]}, [])
    assert sent[-1]["node"]["inputs"] == step["inputs"]
    # the BatchResult opens the same store; the page's first state is one window
    from_result = te.TraceExplorer(result)
    assert len(from_result.state) < 200_000
    explorer.close()
    from_result.close()
    index.close()


def test_every_run_of_a_manifest_is_in_its_trace(tmp_path: Path) -> None:
    path = tmp_path / "again.sqlite"
    n = 500
    run(path, n)
    failed = len(range(0, n, FAIL_EVERY))
    second = run(path, n)  # only the failed items run again (and fail again)
    assert second.totals.failed == failed
    index = open_trace(path)
    counts = index.counts()["kind"]
    assert counts == {"session": 2, "batch": 2, "item": n + failed, "action": n + failed}
    assert sum(1 for r in index.records() if r["id"].startswith("2:")) == 2 + 2 * failed
    index.close()


def test_a_file_that_is_not_a_manifest_with_a_trace_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(ValueError, match="not a run manifest with a trace"):
        te.TraceExplorer(path)


def test_each_node_is_stored_as_it_was_at_its_end_even_once_evicted(tmp_path: Path) -> None:
    """Nodes are encoded when the manifest flushes, from their records taken at their end:
    an item whose children the session evicted before the flush is stored as it ended (no
    evicted children), and every log of an action is a row of its own."""
    path = tmp_path / "small.sqlite"
    session = Session(max_trace_nodes=8)  # far fewer than the nodes between two flushes

    async def logs(item: int, view: Any) -> int:
        with view.track("action", "step", inputs={"item": item}) as t:
            for k in range(3):
                t.session.log("info", f"log {k} of {item}")
        return item

    n = 200
    result = asyncio.run(lf.batch(logs, range(n), run=path, session=session, progress=False))
    assert result.ok
    index = open_trace(path)
    assert index.counts()["kind"] == {
        "session": 1,
        "batch": 1,
        "item": n,
        "action": n,
        "log": 3 * n,
    }
    with sqlite3.connect(path) as conn:
        records = [r for (r,) in conn.execute("SELECT record FROM trace_nodes")]
    items = [r for r in records if '"kind":"item"' in r]
    assert len(items) == n and not any("evicted_children" in r for r in items)
    index.close()


def test_the_batch_writes_its_stored_trace_into_the_manifest_and_nothing_beside(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    n = 300
    run(path, n)
    with sqlite3.connect(path) as conn:
        stored = dict(conn.execute("SELECT key, value FROM trace_info"))
    assert int(stored["nodes"]) == 2 + 2 * n
    explorer = te.TraceExplorer(path)
    try:
        assert explorer.snapshot["windowed"]["nodes"] == 2 + 2 * n
        assert "reading" not in explorer.snapshot
    finally:
        explorer.close()
    assert {p.name for p in tmp_path.iterdir()} <= {
        "run.sqlite",
        "run.sqlite.lock",  # the run's ownership lock (batch/owner.py), not an index
        "run.sqlite-wal",
        "run.sqlite-shm",
    }
    run(path, n)  # a second run into the manifest: its stored trace is written again
    with sqlite3.connect(path) as conn:
        stored = dict(conn.execute("SELECT key, value FROM trace_info"))
    failed = len(range(0, n, FAIL_EVERY))
    assert int(stored["nodes"]) == 2 + 2 * n + 2 + 2 * failed


def test_a_batch_that_never_reached_its_end_is_read_from_its_records(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 200)
    with sqlite3.connect(path) as conn:  # as a batch killed before its end leaves it
        for table in STORE_TABLES:
            conn.execute(f"DROP TABLE {table}")
    index = open_trace(path)
    try:
        assert len(index) == 2 + 2 * 200 and index.where == str(path)
    finally:
        index.close()
    assert lf.Session.load_trace(path).trace_json()["nodes"]  # a script reads it too


def test_a_manifest_whose_stored_trace_is_of_an_older_format_is_read_from_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 200)
    with sqlite3.connect(path) as conn:  # as a batch written by an earlier release leaves it
        conn.execute("UPDATE trace_info SET value = '1' WHERE key = 'version'")
    index = open_trace(path)
    try:
        assert len(index) == 2 + 2 * 200 and index.counts()["kind"]["item"] == 200
    finally:
        index.close()


async def shown(item: int, view: Any) -> int:
    """Nodes whose rows show part of their inputs (a hint) beside parts no row shows."""
    prompt = {"role": "user", "text": f"rendered {item}"}
    with view.track("query", "q", inputs={"prompt": "p {x}", "vars": {"x": item}}) as t:
        t.outputs = {"text": "x" * 500}
    with view.track("query", "r", inputs={"rendered_prompt": prompt}):
        pass
    with view.track("tool_call", "lookup", inputs={"args": {"key": item, "deep": [1, 2]}}):
        pass
    view.log("info", f"done\n{item}")
    return item


def test_the_rows_stored_in_a_manifest_are_those_its_whole_records_give(tmp_path: Path) -> None:
    """The stored trace reads a record's parts a row shows (SQLite leaves the rest out):
    its rows are exactly those converted from the whole records."""
    path = tmp_path / "run.sqlite"
    asyncio.run(lf.batch(shown, range(50), run=path, progress=False))
    rows = "SELECT * FROM trace_rows ORDER BY seq"
    with sqlite3.connect(path) as conn:
        stored = conn.execute(rows).fetchall()
        for table in STORE_TABLES:
            conn.execute(f"DROP TABLE {table}")
    index = open_trace(path)  # converted from the whole records
    try:
        assert index.conn.execute(rows).fetchall() == stored
    finally:
        index.close()
    assert len(stored) == 2 + 50 * 5
    assert {r[6] for r in stored if r[3] == "query"} >= {"x=3 · p {x}", "rendered 3"}


@pytest.mark.parametrize("record", [b'{"id": "x"}', "not json", "[" * 5000 + "]" * 5000])
def test_a_damaged_record_leaves_the_trace_as_records_and_the_batch_stands(
    tmp_path: Path, record: Any
) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 10)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO trace_nodes VALUES (1, 'bad', ?)", (record,))
    result = asyncio.run(lf.batch(work, range(20), run=path, progress=False))
    assert len(result) == 20 and result.failed == [0]  # item 0 fails (FAIL_EVERY)
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "trace_info" not in tables  # not stored: the records stay
    with pytest.raises(ValueError, match="not valid JSON"):
        open_trace(path)


async def mixed(item: int, view: Any) -> int:
    await shown(item, view)
    return await work(item, view)


def test_the_stored_trace_written_as_items_finish_is_the_one_its_records_give(
    tmp_path: Path,
) -> None:
    """Rows are written with the records as items finish, over two runs of one manifest
    (the first run's read back at the second's start): every table of the stored trace is
    as converted from the whole records at the end."""
    path = tmp_path / "run.sqlite"
    asyncio.run(lf.batch(mixed, range(150), run=path, progress=False))
    asyncio.run(lf.batch(mixed, range(300), run=path, progress=False))
    stored, converted = stored_and_converted(path)
    assert stored == converted
    failed = len(range(0, 150, FAIL_EVERY))
    assert len(stored["trace_rows"]) == 2 + 150 * 6 + 2 + (150 + failed) * 6
