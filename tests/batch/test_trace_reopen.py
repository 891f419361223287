"""A run on a manifest whose stored trace an earlier run finished adds its rows to that
trace's rows, as stored, without reading the earlier records again; what it stores is the
trace the whole records give, as when they are read again (a run killed before its end, a
damaged stored trace)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic import trace_db
from langfx_nb.agentic.trace_db import STORE_TABLES, StoreWriter
from langfx_nb.batch.run_trace import drop_trace, trace_batches
from langfx_nb.batch.run_usage import trace_header
from langfx_nb.notebook.trace_explorer import TraceExplorer
from tests.stored_tables import edit_sqlite, stored_and_converted

from .test_manifest_owner import ENV, SCRIPT, _committed, _killed_after
from .test_trace_rows import steps


def _rows_added(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of records each ``StoreWriter.add_rows`` call is given, from now on."""
    added: list[int] = []
    add_rows = trace_db.StoreWriter.add_rows

    def counted(self: trace_db.StoreWriter, nodes: Any) -> int:
        added.append(len(nodes))
        return add_rows(self, nodes)

    monkeypatch.setattr(trace_db.StoreWriter, "add_rows", counted)
    return added


def _matches(path: Path, query: str) -> int:
    explorer = TraceExplorer(path)
    try:
        return int(explorer._reply({"start": 0, "count": 50, "query": query})["matches"])
    finally:
        explorer.close()


async def test_a_resume_with_more_items_reads_no_earlier_record_and_stores_the_same_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.sqlite"
    await lf.batch(steps, range(40), run=path, progress=False, max_concurrency=4)
    added = _rows_added(monkeypatch)
    second = await lf.batch(steps, range(60), run=path, progress=False, max_concurrency=4)
    assert len(second.failed) == 9  # 6 run again, 3 new
    # only this run's rows were made: its session and batch nodes, 26 items of 4 nodes
    assert sum(added) == 2 + 26 * 4
    assert _matches(path, "boom") == 6 + 9  # each failed item node, per run
    stored, converted = stored_and_converted(path)
    assert stored == converted
    assert len(stored["trace_rows"]) == 2 + 40 * 4 + 2 + 26 * 4


def _tables(conn: sqlite3.Connection) -> dict[str, Any]:
    return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in STORE_TABLES}


async def test_a_reopened_writer_writes_the_tables_one_fed_every_record_writes(
    tmp_path: Path,
) -> None:
    first = tmp_path / "first.sqlite"
    await lf.batch(steps, range(30), run=first, progress=False, max_concurrency=4)
    more = [
        {"id": "s2", "kind": "session", "name": "again", "start": 5.0, "end": 9.0},
        {"id": "n1", "parent_id": "s2", "kind": "log", "name": "log", "start": 6.0,
         "inputs": {"message": "Boom Later"}, "status": "failed", "error": "bad"},
        {"id": "n2", "parent_id": "n3", "kind": "action", "name": "first", "start": 7.0},
        {"id": "n3", "parent_id": "s2", "kind": "query", "name": "q", "start": 8.0,
         "usage": {"total_tokens": 12}, "cost": 0.5},
    ]  # fmt: skip
    stored: list[dict[str, Any]] = []
    for seeded in (True, False):  # the earlier rows as stored, or made from the records
        path = tmp_path / f"{seeded}.sqlite"
        shutil.copy(first, path)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        writer = StoreWriter.reopen(conn) if seeded else None
        assert (writer is not None) == seeded
        if writer is None:
            drop_trace(conn)
            writer = StoreWriter(conn)
            for nodes, _ in trace_batches(conn, path, in_place=True):
                writer.add_rows(nodes)
        writer.add_rows(more)
        writer.finish(trace_header(conn, from_rows=True))
        conn.execute("COMMIT")
        stored.append(_tables(conn))
        conn.close()
    assert stored[0] == stored[1]
    assert len(stored[0]["trace_rows"]) == 2 + 30 * 4 + 4


_DAMAGES = {
    "a search block cut short": "UPDATE trace_search SET text = substr(text, 1, 40)",
    "a rank array cut short": "UPDATE trace_order SET ranks = substr(ranks, 5) WHERE name = 'rank'",
    "no rank array": "DELETE FROM trace_order WHERE name = 'rank'",
    "a rank twice": "UPDATE trace_order SET ranks = zeroblob(length(ranks)) WHERE name = 'rank'",
    "an unknown kind": "UPDATE trace_rows SET kind = 'bogus' WHERE seq = 3",
    "a token count as text": "UPDATE trace_rows SET tokens = 'many' WHERE seq = 3",
    "an infinite cost": "UPDATE trace_rows SET cost = 9e999 WHERE seq = 3",
    "an id twice": "DROP INDEX trace_rows_id; UPDATE trace_rows"
    " SET id = (SELECT id FROM trace_rows WHERE seq = 1) WHERE seq = 2",
    "a row missing": "DELETE FROM trace_rows WHERE seq = 5",
    "a wrong node count": "UPDATE trace_info SET value = '7' WHERE key = 'nodes'",
    "an older version": "UPDATE trace_info SET value = '2' WHERE key = 'version'",
    "info that is not JSON": "UPDATE trace_info SET value = '{' WHERE key = 'format'",
    "no info": "DROP TABLE trace_info",
    "no search table": "DROP TABLE trace_search",
    "an index on the rows": "CREATE INDEX extra ON trace_rows(name)",
    "rows of another shape": "DROP TABLE trace_rows; CREATE TABLE trace_rows (seq INTEGER);",
}


@pytest.mark.parametrize("damage", sorted(_DAMAGES))
async def test_a_damaged_stored_trace_is_written_again_from_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    path = tmp_path / "run.sqlite"
    await lf.batch(steps, range(20), run=path, progress=False, max_concurrency=4)
    edit_sqlite(path, _DAMAGES[damage])
    added = _rows_added(monkeypatch)
    second = await lf.batch(steps, range(30), run=path, progress=False, max_concurrency=4)
    assert len(second.failed) == 4  # 3 run again, 1 new
    assert sum(added) == 2 + 20 * 4 + 2 + 13 * 4  # the earlier rows made again, from records
    stored, converted = stored_and_converted(path)
    assert stored == converted


def test_a_run_killed_after_a_finished_one_is_resumed_with_the_whole_trace(
    tmp_path: Path,
) -> None:
    run, asked = tmp_path / "run.sqlite", tmp_path / "asked.txt"
    args = [sys.executable, str(SCRIPT), f"fake:{asked}", str(run)]
    done = subprocess.run([*args, "300", "8"], env=ENV, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # the second run (its rows added to the finished trace's) killed before its end: its
    # stored trace is never finished, and the third reads every record again
    _killed_after([*args, "3000", "8"], run, 1000, tmp_path / "second.log")
    assert len(_committed(run)) < 3000
    with sqlite3.connect(run) as conn:
        assert conn.execute("SELECT count(*) FROM trace_info").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM trace_rows").fetchone()[0] > 2 + 300 * 2
    again = subprocess.run([*args, "3000", "8"], env=ENV, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    stored, converted = stored_and_converted(run)
    assert stored == converted
    with sqlite3.connect(run) as conn:
        assert conn.execute("SELECT count(*) FROM trace_nodes").fetchone()[0] == len(
            stored["trace_rows"]
        )


async def test_a_finished_trace_gives_the_end_the_records_give(tmp_path: Path) -> None:
    from langfx_nb.batch.codec import ResultCodec
    from langfx_nb.batch.identity import run_identity
    from langfx_nb.batch.manifest import Manifest

    run = tmp_path / "end.sqlite"
    await lf.batch(steps, range(20), run=run, progress=False, on_error="collect")
    with sqlite3.connect(run) as conn:
        records = [json.loads(r) for (r,) in conn.execute("SELECT record FROM trace_nodes")]
    from_records = max(max(r.get("end") or 0, r.get("start") or 0) for r in records)
    manifest = Manifest.open(run, run_identity(steps), ResultCodec(steps))
    try:
        assert manifest.trace_end() == from_records > 0
    finally:
        manifest.close()
    edit_sqlite(run, "DELETE FROM trace_info")  # as a killed run leaves it: the records say
    manifest = Manifest.open(run, run_identity(steps), ResultCodec(steps))
    try:
        assert manifest.trace_end() == from_records
    finally:
        manifest.close()
