"""A run manifest's stored trace as written during its batches, and as converted from its
records: what tests of the manifest's trace writer compare; and ``edit_sqlite``, which
edits a SQLite file as a damaged or hostile one from elsewhere would be."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langfx_nb.agentic.trace_db import STORE_TABLES
from langfx_nb.batch.run_trace import open_trace


def _tables(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every table of the stored trace but where its records are, as a reader sees it (the
    search texts joined: blocks of the same lines may be cut elsewhere)."""
    tables = [t for t in STORE_TABLES if t not in ("trace_refs", "trace_records")]
    out: dict[str, Any] = {
        t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables
    }
    out["trace_search"] = b"".join(r[1] for r in out["trace_search"])
    out["trace_info"] = [r for r in out["trace_info"] if r[0] != "records"]
    return out


def stored_and_converted(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tables of the manifest's stored trace as written, and as ``open_trace`` converts
    them from the whole records once they are dropped (the manifest is changed so). Asserts
    that ``trace_refs`` lists every record, in order."""
    with sqlite3.connect(path) as conn:
        stored = _tables(conn)
        refs = conn.execute("SELECT ref FROM trace_refs ORDER BY seq").fetchall()
        assert refs == conn.execute("SELECT rowid FROM trace_nodes ORDER BY rowid").fetchall()
        for table in STORE_TABLES:
            conn.execute(f"DROP TABLE {table}")
    index = open_trace(path)
    try:
        return stored, _tables(index.conn)
    finally:
        index.close()


def edit_sqlite(path: Path, sql: str) -> None:
    """Run ``sql`` (one or more statements) on the SQLite file at ``path`` and commit."""
    conn = sqlite3.connect(path)
    try:
        conn.executescript(sql)
        conn.commit()
    finally:
        conn.close()
