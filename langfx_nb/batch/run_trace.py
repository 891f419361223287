"""A run manifest's stored trace (``agentic/trace_db.py``), kept in the manifest's own file:
its rows written as the trace node records are (``finish_rows`` completes them at the end of
a batch), or written whole from the records (``write_trace``); ``open_trace`` opens it
read-only, converting the records of a manifest whose stored trace is missing or of an older
format. The records and the ``meta`` usage rows are the manifest's (``manifest.py``)."""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .run_usage import trace_header

if TYPE_CHECKING:
    from ..agentic.trace_db import StoredTrace, StoreWriter

__all__ = ["drop_trace", "finish_rows", "open_trace", "trace_batches", "write_trace"]


def open_trace(path: Path) -> StoredTrace:
    """The batch trace of the manifest at ``path``: its stored trace (written at the end of
    each batch, :meth:`Manifest.store_trace`), opened read-only; for a batch that never reached
    its end, or whose stored trace is of an older format, its node records converted into a
    temporary stored trace. ``ValueError`` for a file that is not a manifest with a trace."""
    from ..agentic.trace_db import open_store, temporary, write_store
    from ..agentic.trace_json import naming
    from ..agentic.trace_reader import STORE_VERSION

    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            version = None
            if "trace_info" in tables:
                row = conn.execute("SELECT value FROM trace_info WHERE key = 'version'").fetchone()
                version = None if row is None else row[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ValueError(f"{path}: not a run manifest with a trace ({exc})") from exc
    if version == str(STORE_VERSION) or ("trace_info" in tables and "trace_nodes" not in tables):
        return open_store(path)
    if "trace_nodes" not in tables:
        raise ValueError(f"{path}: not a run manifest with a trace")

    def write(target: sqlite3.Connection) -> None:
        source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            with naming(str(path)):  # a damaged record: named with its file
                header = trace_header(source)
                write_store(target, header, trace_batches(source, path, in_place=False))
        except sqlite3.Error as exc:
            raise ValueError(f"{path}: the trace cannot be read ({exc})") from exc
        finally:
            source.close()

    return temporary(write, str(path))


# A record as the stored trace's rows need it (in place): SQLite leaves out the parts no row
# shows (a node's outputs and metadata, a query's rendered prompt when it has its template,
# the inputs of a node whose row shows none of them), which Python would otherwise parse.
_ROW_RECORD = """CASE WHEN typeof(record) != 'text' OR NOT json_valid(record) THEN record
    WHEN json_extract(record, '$.kind') IN ('query', 'tool_call', 'log')
        THEN json_remove(record, '$.outputs', '$.metadata',
            iif(json_type(record, '$.inputs.prompt') IS NULL, '$.outputs',
                '$.inputs.rendered_prompt'))
    ELSE json_replace(json_remove(record, '$.outputs', '$.metadata'), '$.inputs', json('{}'))
    END"""


def trace_batches(
    conn: sqlite3.Connection, path: Path, *, in_place: bool
) -> Iterator[tuple[list[Any], bytes | list[int]]]:
    """The manifest's trace node records in the order written, a chunk at a time (a record
    rewritten later comes at the place of its last write), each chunk with its rowids
    (``in_place``: the records stay where they are, and are read as a row needs them) or
    its JSON array."""
    record = _ROW_RECORD if in_place else "record"
    rows = conn.execute(f"SELECT rowid, {record} FROM trace_nodes ORDER BY rowid")
    any_rows = False
    while chunk := rows.fetchmany(5_000):
        any_rows = True
        text = "[" + ",".join([str(r[1]) for r in chunk]) + "]"
        try:
            batch = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{path}: a trace record is not valid JSON ({exc})") from exc
        yield batch, ([r[0] for r in chunk] if in_place else text.encode("utf-8"))
    if not any_rows:
        raise ValueError(f"{path}: the run manifest holds no trace")


def finish_rows(conn: sqlite3.Connection, rows: StoreWriter, pending: list[Any]) -> bool:
    """Finish the stored trace whose rows ``rows`` wrote as the records were (the rows of
    the records ``pending``, the tree order, the records' places, the trace's info), in one
    transaction; ``False`` (its rows dropped) when they are not the records' in the order of
    their last write, or the tree is not one a stored trace can hold."""
    conn.execute("BEGIN IMMEDIATE")
    paused = gc.isenabled()
    gc.disable()  # as write_store: many new objects, none of them in a cycle
    try:
        rows.add_rows(pending)
        refs = conn.execute("SELECT rowid, id FROM trace_nodes ORDER BY rowid").fetchall()
        if [r[1] for r in refs] != rows.ids():
            raise ValueError("the rows are not the records'")
        rows.add_refs(0, [r[0] for r in refs])
        rows.finish(trace_header(conn, from_rows=True))
    except sqlite3.Error:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    except Exception:  # written again from the records (which names what is wrong)
        conn.execute("ROLLBACK")
        conn.execute("BEGIN IMMEDIATE")
        drop_trace(conn)
        conn.execute("COMMIT")
        return False
    finally:
        if paused:
            gc.enable()
    conn.execute("COMMIT")
    return True


def write_trace(conn: sqlite3.Connection, path: Path) -> None:
    """Write (or write again) the stored trace of every run's trace node records into the
    manifest itself, in one transaction."""
    from ..agentic.trace_db import write_store

    conn.execute("BEGIN IMMEDIATE")
    try:
        drop_trace(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    write_store(conn, trace_header(conn), trace_batches(conn, path, in_place=True))


def drop_trace(conn: sqlite3.Connection) -> None:
    """Drop the manifest's stored trace (its tables), in the caller's transaction; the trace
    node records stay, and the stored trace is written again from them."""
    from ..agentic.trace_db import STORE_TABLES

    for table in STORE_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
