"""A batch's trace in its run manifest: ``lf.batch(run=...)`` writes every node of the batch
into the SQLite file as it finishes, and ``TraceExplorer(path)`` (or the ``BatchResult``)
windows it from there: exact counts, records read back strictly, every run of the manifest."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.notebook import trace_explorer as te
from langfx_nb.notebook.trace_store import open_store_index

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
    assert explorer.windowed
    index = open_store_index(path)  # what the explorer windows from
    assert len(index) == 2 + 2 * n
    counts = index.counts()
    assert counts["kind"] == {"session": 1, "batch": 1, "item": n, "action": n}
    # the batch node ends "failed" too: its items failed
    assert counts["status"] == {"ok": 2 * n - failed, "failed": failed + 1, "running": 1}
    # the same nodes as the session holds (all of them here: under max_trace_nodes)
    held = {node["id"]: node for node in session.trace_json()["nodes"]}
    assert set(index.ids) == set(held)
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
    assert from_result.windowed and len(from_result.state) < 200_000
    explorer.close()
    from_result.close()


def test_every_run_of_a_manifest_is_in_its_trace(tmp_path: Path) -> None:
    path = tmp_path / "again.sqlite"
    n = 500
    run(path, n)
    failed = len(range(0, n, FAIL_EVERY))
    second = run(path, n)  # only the failed items run again (and fail again)
    assert second.totals.failed == failed
    index = open_store_index(path)
    counts = index.counts()["kind"]
    assert counts == {"session": 2, "batch": 2, "item": n + failed, "action": n + failed}
    assert sum(1 for i in index.ids if i.startswith("2:")) == 2 + 2 * failed
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
    index = open_store_index(path)
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
