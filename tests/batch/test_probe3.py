"""A run manifest killed mid-run (SIGKILL, a real process) opened in the trace explorer, then
resumed: what it shows agrees with the items the manifest kept, and with a plain index of its
own records."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_live import index_of

from .test_manifest_owner import ENV, SCRIPT, _committed, _killed_after


def _agrees_with_its_records(run: Path) -> None:
    """The explorer's windows equal those of a live index of the trace's own records."""
    explorer = TraceExplorer(run)
    records = lf.Session.load_trace(run).trace_json()["nodes"]
    plain = index_of(records)
    ids = [r["id"] for r in records]
    views: list[dict[str, Any]] = [
        {},
        {"start": 10**9},
        {"expanded": {ids[1]: False}},
        {"expanded": {ids[-1]: True, ids[2]: True}, "selected": ids[-1]},
        {"query": "label", "start": 500},
        {"query": "running"},
    ]
    for view in views:
        want = plain.window(count=2000, **view)
        got = explorer._reply({"count": 2000, **view})
        assert {k: got[k] for k in want} == want, view
    explorer.close()


def test_a_killed_run_opens_with_the_items_it_kept_and_resumes(tmp_path: Path) -> None:
    n = 4000  # killed after 1,000: far from its end
    run, asked = tmp_path / "run.sqlite", tmp_path / "asked.txt"
    args = [sys.executable, str(SCRIPT), f"fake:{asked}", str(run), str(n), "8"]
    _killed_after(args, run, 1000, tmp_path / "first.log")
    done = len(_committed(run))
    assert done < n
    explorer = TraceExplorer(run)
    first = explorer._reply({"start": 0, "count": 50})
    assert first["counts"]["kind"] == {"session": 1, "batch": 1, "item": done, "query": done}
    assert explorer._reply({"start": 0, "count": 50, "query": "label this"})["matches"] == done
    explorer.close()
    _agrees_with_its_records(run)

    again = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    explorer = TraceExplorer(run)
    after = explorer._reply({"start": 0, "count": 50})
    assert after["counts"]["kind"] == {"session": 2, "batch": 2, "item": n, "query": n}
    explorer.close()
    _agrees_with_its_records(run)
    assert len(lf.Session.load_trace(run).trace_json()["nodes"]) == 4 + 2 * n


async def _echo(item: int, session: lf.Session) -> int:
    with session.track("action", f"work {item}"):
        if item % 5 == 1:
            raise ValueError(f"bad item {item}")
    return item


async def test_a_manifest_of_the_previous_store_format_opens_and_resumes(tmp_path: Path) -> None:
    run = tmp_path / "old.sqlite"
    first = await lf.batch(_echo, list(range(20)), run=str(run), progress=False)
    assert first.totals.failed == 4
    conn = sqlite3.connect(run)  # as format 2 left it: version 2, no depth array
    conn.execute("UPDATE trace_info SET value = '2' WHERE key = 'version'")
    conn.execute("DELETE FROM trace_order WHERE name = 'depth'")
    conn.commit()
    conn.close()
    explorer = TraceExplorer(run)
    shown = explorer._reply({"start": 0, "count": 100, "query": "bad item"})
    assert shown["nodes"] == 42 and shown["matches"] == 8  # each failed item and its action
    explorer.close()
    again = await lf.batch(_echo, list(range(20)), run=str(run), progress=False)
    assert again.totals.resumed == 16 and again.totals.failed == 4
    explorer = TraceExplorer(again)
    shown = explorer._reply({"start": 0, "count": 100, "query": "bad item"})
    assert shown["nodes"] == 42 + 10 and shown["matches"] == 16
    explorer.close()


_STORED_TRACE = (
    "trace_info", "trace_records", "trace_refs", "trace_rows", "trace_search", "trace_starts",
    "trace_order", "trace_tree",
)  # fmt: skip


@pytest.mark.parametrize("opener", ["TraceExplorer", "Session.load_trace"])
async def test_a_killed_manifest_with_a_damaged_record_is_an_error_naming_it(
    tmp_path: Path, opener: str
) -> None:
    run = tmp_path / "run.sqlite"
    await lf.batch(_echo, list(range(5)), run=str(run), progress=False)
    conn = sqlite3.connect(run)
    for table in _STORED_TRACE:  # as a run killed before its end leaves it
        conn.execute(f"DELETE FROM {table}")
    # one record its own parent ("malformed trace: nodes[1]: the node is its own parent")
    conn.execute(
        "UPDATE trace_nodes SET record = json_set(record, '$.parent_id', id)"
        " WHERE rowid = (SELECT min(rowid) FROM trace_nodes WHERE id != '0')"
    )
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match=re.escape(str(run))):
        if opener == "TraceExplorer":
            TraceExplorer(run)
        else:
            lf.Session.load_trace(run)
