"""The run manifest of ``lf.batch(run=...)``: one SQLite file per named run.

Where: a name (letters, digits, ``.``, ``_``, ``-``) is ``./.langfx_runs/NAME.sqlite``
under the current directory (``LANGFX_RUNS_DIR`` overrides the directory); anything with a
path separator or ending in ``.sqlite``/``.sqlite3``/``.db`` is used as the path itself.

What it holds: a ``meta`` table (format, version, the run's identity as JSON:
``identity.py``), a ``types`` table (each stored result class and the hash of its JSON
schema) and one ``items`` row per finished item: its key, input index, status (``ok`` or
``failed``), the result's tag and JSON, or the error's class, message and traceback, and a
preview of its input (``codec.input_preview``). Items in flight have no row, so after a
crash they run again. With ``engine=lf.engines.ProviderBatch()`` a
``provider_batches`` row per batch submitted to a provider (its id, the account, the items'
custom ids, ``submitted`` or ``collected``) is committed as soon as the provider accepts
the batch, so a new process polls it instead of submitting again. The runner commits each
item's row before its worker takes the next item (``commit``: the rows queued in one turn
of the event loop share a transaction); other rows and the trace records go in
transactions at most ``FLUSH_INTERVAL_S`` apart, or of ``FLUSH_ROWS`` rows (``flush``).
WAL journal with ``synchronous=NORMAL``: a killed process loses nothing committed. One
run owns the file at a time (``owner``).

A manifest made by a run of another identity (its ``fn``, version or source, models,
templates: the error names what changed), by an older langfx_nb (format version 1, before
identities and inputs were stored), or whose stored result classes changed schema is
refused before anything is written to it. Format 2 (its items under a unique index of their
keys, where format 3 appends them and keeps the key of each row in memory) is read and
resumed as it is.

Item traces: a ``trace_nodes`` row per trace node of the batch (the session root, the
``batch`` node, each item's nodes as they finish), keyed by the run number (each
``lf.batch`` call on the manifest is one run) and the node's id, the record as the core
writes it (``TraceNode.to_json``), committed with the item rows. Node ids of a later run are
``"<run>:<id>"``, and their times placed after the earlier runs', so the runs of one
manifest form one trace (one session root per run). Each run's model usage (requests,
tokens, cost per model: ``UsageMeter.to_json``) is a ``meta`` row ``usage:<run>``,
committed with its records; the trace's header sums them (its usage summary).
They make a stored trace (``agentic/trace_db.py``; ``run_trace.py`` writes and opens it) in
the same file, which ``TraceExplorer(path)`` and ``Session.load_trace(path)`` read: its rows
are written from the records committed, ``ROWS_CHUNK`` at a time (an earlier run's at the
start of the next), the rest with the tree order and the trace's info at the end of each
batch (until then, the records are read).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from .._sqlite import insert_flat
from ..agentic.trace_json import regular_file
from ..agentic.tracebacks import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS
from ..errors import RunManifestError
from .codec import JSON_TAG, MAX_INPUT_CHARS, ResultCodec, storable_text
from .identity import RunIdentity
from .run_trace import drop_trace, finish_rows, trace_batches, write_trace

if TYPE_CHECKING:
    from ..agentic.trace_db import StoreWriter

__all__ = [
    "FLUSH_INTERVAL_S",
    "FLUSH_ROWS",
    "Manifest",
    "StoredItem",
    "TraceSource",
    "manifest_path",
    "read_run",
]

FORMAT = "langfx_nb.batch_run"
VERSION = "3"
#: versions this one reads and resumes: 2 differs only in its items' key index
READABLE = ("2", VERSION)
FLUSH_INTERVAL_S = 0.05
FLUSH_ROWS = 512
#: the stored trace's rows are written once this many records wait, and at the end of the
#: batch: no reader needs them before, and fewer records a write cost more per row; but
#: records held longer outlive the garbage collector's young generations, and every full
#: collection then walks them
ROWS_CHUNK = 128
#: item rows and trace records inserted at a time by one statement in a commit
PER_INSERT = 8
#: an ok item's missing error fields, bound as NaN, which SQLite stores as NULL: the sqlite3
#: module binds a None only after looking for an adapter, which costs more than binding the
#: rest of the row
_NULL = float("nan")
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_SUFFIXES = (".sqlite", ".sqlite3", ".db")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS types (tag TEXT PRIMARY KEY, schema_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    key TEXT NOT NULL,
    idx INTEGER NOT NULL,
    status TEXT NOT NULL,
    tag TEXT,
    value TEXT,
    error_type TEXT,
    error_message TEXT,
    at REAL NOT NULL,
    traceback TEXT,
    input TEXT
);
CREATE TABLE IF NOT EXISTS trace_nodes (
    run INTEGER NOT NULL,
    id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (run, id)
);
CREATE TABLE IF NOT EXISTS provider_batches (
    batch_id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    custom_ids TEXT NOT NULL,
    status TEXT NOT NULL,
    at REAL NOT NULL
);
"""


class TraceSource(Protocol):
    """Where a manifest gets the trace records it commits with its rows (the batch
    runner's trace writer): ``len`` is how many are waiting, ``records`` hands them over
    as ``(run, node id, JSON text)`` and forgets them, with the same records as objects
    for the stored trace's rows, in the same order, leaving out a record that will be
    written again (the batch node while it runs). ``usage`` is the run's model usage (see
    ``UsageMeter.to_json``) with its session's ``max_trace_nodes``, or ``None`` when
    unchanged since the last call; ``run`` is the run's number."""

    run: int

    def __len__(self) -> int: ...

    def usage(self) -> dict[str, Any] | None: ...

    def records(self) -> tuple[list[tuple[int, str, str]], list[dict[str, Any]]]: ...


def manifest_path(run: str | os.PathLike[str]) -> Path:
    """The file a ``run=`` value names (see the module docstring)."""
    text = os.fspath(run)
    if not text:
        raise ValueError("run= must be a name or a path, not an empty string")
    if isinstance(run, os.PathLike) or os.sep in text or "/" in text or text.endswith(_SUFFIXES):
        return Path(text).expanduser()
    if not _NAME.fullmatch(text) or text in (".", ".."):
        raise ValueError(
            f"run={text!r}: a run name may hold letters, digits, '.', '_' and '-' only "
            "(or pass a path ending in .sqlite)"
        )
    base = os.environ.get("LANGFX_RUNS_DIR") or os.path.join(os.getcwd(), ".langfx_runs")
    return Path(base) / f"{text}.sqlite"


def _regular(path: Path) -> None:
    """``RunManifestError`` unless ``path`` is a regular file: SQLite would wait forever on
    a FIFO's open."""
    try:
        regular_file(path)
    except ValueError as exc:
        raise RunManifestError(f"run manifest {exc}", path=str(path)) from exc


def _unusable(path: Path, exc: BaseException, doing: str) -> RunManifestError:
    return RunManifestError(
        f"run manifest {path}: cannot {doing} ({type(exc).__name__}: {exc})", path=str(path)
    )


class Manifest:
    """An open run manifest. ``open`` checks it belongs to the run's identity; ``stored``
    reads the results of items already done; ``add_*`` queue rows that ``flush`` commits."""

    def __init__(self, path: Path, conn: sqlite3.Connection, codec: ResultCodec) -> None:
        self.path = path
        self._conn = conn
        self.codec = codec
        self._pending: list[tuple[Any, ...]] = []
        self._trace_pending: list[tuple[int, str, str]] = []
        self._trace: TraceSource | None = None
        #: the stored trace's rows, written with the trace records they are made of (the
        #: end of the batch then only orders them); ``None``: written at the end from the
        #: records (an earlier run's record a row cannot show, a record written twice)
        self._rows: StoreWriter | None = None
        self._rows_pending: list[dict[str, Any]] = []
        self._usage_pending: tuple[str, str] | None = None  # a ``meta`` row: the run's usage
        self._last_flush = time.monotonic()
        #: a transaction is committed once this many rows wait, or ``flush_interval``
        #: seconds after the last (a crash loses at most these; the runner widens them
        #: where a lost row costs no second request: a provider batch's replay)
        self.flush_rows = FLUSH_ROWS
        self.flush_interval = FLUSH_INTERVAL_S
        self._known_tags: set[str] = set()
        #: each stored item's rowid by key: a new key gets the next one (the rows append,
        #: so a commit writes the table's last pages, not an index's random ones)
        self._rowids: dict[str, int] = {}
        self._last_rowid = 0
        self._commit_waiters: list[asyncio.Future[None]] = []
        self.broken: RunManifestError | None = None

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path, identity: RunIdentity, codec: ResultCodec) -> Manifest:
        """Open or create the manifest at ``path`` for a run of ``identity``;
        ``RunManifestError`` when it belongs to another run (naming what changed) or cannot
        be written (nothing is changed then)."""
        if path.exists():
            _regular(path)
            cls._check_existing(path, identity, codec)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise _unusable(path, exc, "create it") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR IGNORE INTO meta VALUES (?, ?)",
                [
                    ("format", FORMAT),
                    ("version", VERSION),
                    ("identity", json.dumps(identity.to_json(), sort_keys=True)),
                ],
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.close()
            raise _unusable(path, exc, "write to it") from exc
        manifest = cls(path, conn, codec)
        manifest._known_tags = {row[0] for row in conn.execute("SELECT tag FROM types")}
        manifest._rowids = dict(conn.execute("SELECT key, rowid FROM items"))
        manifest._last_rowid = max(manifest._rowids.values(), default=0)
        return manifest

    @staticmethod
    def _check_existing(path: Path, identity: RunIdentity, codec: ResultCodec) -> None:
        """Read-only checks of an existing file: format, identity, result schemas."""
        try:
            ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise _unusable(path, exc, "read it") from exc
        try:
            try:
                meta = _meta(ro)
                types = ro.execute("SELECT tag, schema_hash FROM types").fetchall()
            except sqlite3.DatabaseError as exc:
                code = getattr(exc, "sqlite_errorcode", None) or 0  # (set by SQLite itself)
                if code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise RunManifestError(
                        f"run manifest {path} is locked by another program (busy): close it "
                        "there, or wait until it is done, then run again (left untouched)",
                        path=str(path),
                    ) from exc
                raise RunManifestError(
                    f"{path} is not a langfx_nb run manifest (refused, left untouched)",
                    path=str(path),
                ) from exc
        finally:
            ro.close()
        _check_format(meta, path)
        stored_identity = _identity(meta, path)
        changes = stored_identity.changes(identity)
        if changes:
            raise RunManifestError(
                f"run manifest {path} was made by another run: {'; '.join(changes)}. "
                "Refused, left untouched: its results may not be what this run would give. "
                "Use another run= name, or delete the file to start again (or pass version= "
                "and keep it when only the code's form changed).",
                path=str(path),
            )
        known = codec.known()
        for tag, stored in types:
            codec.schemas[tag] = stored  # (not written again)
            cls = known.get(tag)
            if cls is None:  # not this run's: items stored under it are refused if asked
                continue
            now = codec.schema_hash(cls)
            if now != stored:
                raise RunManifestError(
                    f"run manifest {path} holds {cls.__qualname__} results of another "
                    "schema (the class changed since): refused, left untouched. Use another "
                    "run= name, or delete the file to start again.",
                    path=str(path),
                )

    # -- reading -------------------------------------------------------------------------
    def stored(self, keys: Iterable[str] | Callable[[str], bool]) -> dict[str, Any]:
        """The result of each of ``keys`` (or of each key ``keys(key)`` accepts) done
        (``ok``) in an earlier run, read in one query and validated back (pydantic values
        into their class) before anything is sent: ``RunManifestError`` names the first
        stored result that is damaged or no longer validates, and nothing is changed."""
        wanted = keys if callable(keys) else set(keys).__contains__
        by_tag: dict[str | None, tuple[list[str], list[int], list[str | None]]] = {}
        rows = self._conn.execute("SELECT key, idx, tag, value FROM items WHERE status = 'ok'")
        for key, idx, tag, value in rows:
            if wanted(key):
                group = by_tag.get(tag)
                if group is None:
                    group = by_tag[tag] = ([], [], [])
                group[0].append(key)
                group[1].append(idx)
                group[2].append(value)
        out: dict[str, Any] = {}
        known = self.codec.known()
        for tag, (found, indices, texts) in by_tag.items():
            plain = [t for t in texts if isinstance(t, str)]
            if tag is None or len(plain) != len(texts):
                self._refuse_first_bad(tag, found, indices, texts)
            if tag == JSON_TAG and not self.codec.plain_allowed():
                self._refuse_class(found[0], indices[0], "a plain JSON value")
            if tag != JSON_TAG and tag not in known:
                self._refuse_class(found[0], indices[0], _tag_text(tag))
            try:
                values = self.codec.decode_many(tag, plain)
                if len(values) != len(found):
                    raise ValueError("stored values run into each other")
            except RunManifestError:
                raise
            except Exception:
                self._refuse_first_bad(tag, found, indices, texts)
            out.update(zip(found, values, strict=True))
        return out

    def _refuse_class(self, key: str, index: int, what: str) -> NoReturn:
        raise RunManifestError(
            f"run manifest {self.path}: the stored result of item {index} (key {key[:40]}) "
            f"is {what}, not of a class this run declares or returns: refused before any "
            "request, left untouched (nothing is imported). Annotate fn's return type "
            "with the class it returns, or use another run= name.",
            path=str(self.path),
        )

    def _refuse_first_bad(
        self, tag: str | None, keys: list[str], indices: list[int], texts: list[str | None]
    ) -> NoReturn:
        """Raise ``RunManifestError`` naming the first of these stored results that does not
        decode on its own (they failed together)."""
        what = "a result" if tag is None else (tag.partition(":")[2] or tag)[:100]
        for key, idx, text in zip(keys, indices, texts, strict=True):
            try:
                if tag is None or not isinstance(text, str):
                    raise ValueError("no stored value" if text is None else "not text")
                values = self.codec.decode_many(tag, [text])
                if len(values) != 1:
                    raise ValueError("more than one value")
            except RunManifestError:
                raise
            except Exception as exc:
                detail = str(exc).splitlines()[0] if str(exc) else ""
                raise RunManifestError(
                    f"run manifest {self.path}: the stored result of item {idx} (key "
                    f"{key[:40]}) does not validate as {what} ({type(exc).__name__}: "
                    f"{detail[:160]}): refused before any request, left untouched. Use "
                    "another run= name, or delete the file to start again.",
                    path=str(self.path),
                ) from exc
        raise RunManifestError(
            f"run manifest {self.path}: stored results no longer validate as {what}: "
            "refused before any request, left untouched",
            path=str(self.path),
        )

    # -- writing -------------------------------------------------------------------------
    def add_ok(self, key: str, index: int, tag: str, text: str, preview: str) -> None:
        """Queue the row of an item done: its result (``codec.encode``) and its input's
        ``input_preview``."""
        row = (self._rowid(key), key, index, "ok", tag, text, _NULL, _NULL, time.time(), _NULL)
        self._pending.append((*row, preview))
        self._due()

    def add_failed(
        self,
        key: str,
        index: int,
        error_type: str,
        message: str,
        traceback: str | None,
        preview: str,
    ) -> None:
        """Queue the row of a failed item: its error (class, message, traceback; see
        ``ItemError``) and its input's ``input_preview``."""
        row = (self._rowid(key), key, index, "failed", None, None, error_type, message)
        self._pending.append((*row, time.time(), traceback, preview))
        self._due()

    def _rowid(self, key: str) -> int:
        rowid = self._rowids.get(key)
        if rowid is None:
            rowid = self._rowids[key] = self._last_rowid = self._last_rowid + 1
        return rowid

    async def commit(self) -> None:
        """Commit every row queued so far; return once they are on disk. The rows that
        other workers queue in the same turn of the event loop share the transaction (one
        commit per turn, not per row). ``RunManifestError`` when the disk refuses. The
        runner awaits this after each item, before the worker takes the next one: a crash
        then loses only the items in flight, and the trace records of the items it kept
        are committed with them."""
        if not self._pending:
            return
        loop = asyncio.get_running_loop()
        if not self._commit_waiters:
            loop.call_soon(self._commit_now)
        waiter: asyncio.Future[None] = loop.create_future()
        self._commit_waiters.append(waiter)
        await waiter

    def _commit_now(self) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        error: Exception | None = None
        try:
            self.flush()
        except Exception as exc:  # every waiter hears of it: none waits for ever
            error = exc
        for waiter in waiters:
            if waiter.done():  # its worker was cancelled
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    def new_trace_run(self) -> int:
        """The number of the run about to record its trace (1, 2, … per ``lf.batch`` call)."""
        row = self._conn.execute("SELECT max(run) FROM trace_nodes").fetchone()
        return int(row[0] or 0) + 1

    def trace_end(self) -> float:
        """The latest time (start or end) of the trace records stored so far (0.0: none): a
        later run's nodes are placed after it, so the runs follow each other on a timeline.
        A finished stored trace says it (its span's end); else every record is read."""
        try:
            info = self._conn.execute(
                "SELECT substr(value, 1, 100) FROM trace_info WHERE key = 'span'"
            ).fetchone()
            span = json.loads(info[0]) if info is not None else None
        except (sqlite3.Error, ValueError, TypeError, RecursionError):
            span = None  # no finished stored trace, or not one that reads back
        if isinstance(span, list) and len(span) == 2 and type(span[1]) in (int, float):
            end = float(span[1])
            if math.isfinite(end):
                return max(0.0, end)
        row = self._conn.execute(
            "SELECT max(max(coalesce(json_extract(record, '$.end'), 0),"
            " coalesce(json_extract(record, '$.start'), 0))) FROM trace_nodes"
            " WHERE json_valid(record)"
        ).fetchone()
        value = row[0]
        return float(value) if type(value) in (int, float) and value == value else 0.0

    def record_trace_from(self, source: TraceSource | None) -> None:
        """Commit ``source``'s trace records with every later ``flush`` (``None``: stop);
        records with an id already stored replace it (a node written running, then
        finished). The stored trace of earlier runs is dropped now (it would be stale: it is
        written again at the end, :meth:`store_trace`; until then the records are read) but
        for its rows, which this run's follow; the rows of earlier runs whose stored trace
        was never finished (a run killed) are written again now from their records."""
        if source is not None:
            from ..agentic.trace_db import StoreWriter

            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._rows = StoreWriter.reopen(conn)
                    if self._rows is None:  # no finished stored trace: its rows from the records
                        drop_trace(conn)
                        self._rows = StoreWriter(conn)
                        if conn.execute("SELECT 1 FROM trace_nodes LIMIT 1").fetchone():
                            for nodes, _ in trace_batches(conn, self.path, in_place=True):
                                self._rows.add_rows(nodes)
                except ValueError:  # left to store_trace, from the records
                    self._rows = None
                    drop_trace(conn)
                except BaseException:
                    self._rows = None
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self.broken = _unusable(self.path, exc, "write its trace")
                raise self.broken from exc
        self._trace = source

    def _due(self) -> None:
        if (
            len(self._pending) >= self.flush_rows
            or time.monotonic() - self._last_flush >= self.flush_interval
        ):
            self.flush()

    @property
    def due(self) -> bool:
        """Rows or trace records wait and ``flush_interval`` has passed since the last
        flush (the runner's ticker flushes then)."""
        return bool(self.pending) and time.monotonic() - self._last_flush >= self.flush_interval

    def flush(self) -> None:
        """Commit the queued rows in one transaction, with the trace records waiting;
        ``RunManifestError`` when the disk refuses (the rows stay queued, nothing already
        committed is lost)."""
        if self.broken is not None:
            raise self.broken
        self._last_flush = time.monotonic()
        if self._trace is not None and len(self._trace):
            records, nodes = self._trace.records()
            self._trace_pending.extend(records)  # kept until committed
            if self._rows is not None:
                self._rows_pending.extend(nodes)
        if self._trace is not None and (usage := self._trace.usage()) is not None:
            self._usage_pending = (f"usage:{self._trace.run}", json.dumps(usage))
        if not (self._pending or self._trace_pending or self._usage_pending):
            return
        rows, traced = self._pending, self._trace_pending
        new_types = [(t, h) for t, h in self.codec.schemas.items() if t not in self._known_tags]
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if new_types:
                conn.executemany("INSERT OR IGNORE INTO types VALUES (?, ?)", new_types)
            try:
                self._insert(rows, traced)
            except UnicodeEncodeError:  # a lone surrogate (a file name that is not UTF-8)
                rows = self._pending = [_storable(row) for row in rows]
                traced = self._trace_pending = [_storable(row) for row in traced]
                self._insert(rows, traced)  # (rows already in: replaced)
            if self._usage_pending is not None:
                name, value = self._usage_pending
                # changed in place: the index of meta's keys is not written again each commit
                changed = conn.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name))
                if not changed.rowcount:
                    conn.execute("INSERT INTO meta VALUES (?, ?)", (name, value))
            if self._rows is not None and len(self._rows_pending) >= ROWS_CHUNK:
                try:
                    self._rows.add_rows(self._rows_pending)
                except sqlite3.Error:
                    raise
                except Exception:  # a record a row cannot show: store_trace names it
                    self._rows = None
                self._rows_pending = []
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rows = None  # its rows are rolled back
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.Error):
                raise
            self.broken = _unusable(self.path, exc, "write results to it")
            raise self.broken from exc
        self._known_tags.update(t for t, _ in new_types)
        self._pending, self._trace_pending = [], []
        self._usage_pending = None

    def _insert(self, rows: list[Any], traced: list[Any]) -> None:
        _insert_rows(
            self._conn,
            "INSERT OR REPLACE INTO items (rowid, key, idx, status, tag, value, error_type, "
            "error_message, at, traceback, input) VALUES ",
            "(?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        _insert_rows(self._conn, "INSERT OR REPLACE INTO trace_nodes VALUES ", "(?,?,?)", traced)

    @property
    def pending(self) -> int:
        """Rows and trace records waiting for ``flush``."""
        waiting = len(self._trace) if self._trace is not None else 0
        return len(self._pending) + len(self._trace_pending) + waiting

    def store_trace(self) -> None:
        """Write the trace of every run into this manifest as a stored trace (at the end of
        a batch), replacing the one an earlier run wrote; ``RunManifestError`` when the
        disk refuses (the trace node records stay). A record a row cannot show leaves the
        trace as records only: opening it names what is wrong, the batch's results stand."""
        rows, self._rows = self._rows, None
        pending, self._rows_pending = self._rows_pending, []
        try:
            if rows is None or not finish_rows(self._conn, rows, pending):
                write_trace(self._conn, self.path)
        except ValueError:
            return
        except sqlite3.Error as exc:
            self.broken = _unusable(self.path, exc, "write its trace")
            raise self.broken from exc

    def close(self) -> None:
        self._conn.close()

    # -- provider batches ------------------------------------------------------------------
    def add_provider_batch(self, batch_id: str, account: str, custom_ids: list[str]) -> None:
        """Record a batch the provider accepted, committed at once."""
        self._write(
            "INSERT OR REPLACE INTO provider_batches VALUES (?, ?, ?, 'submitted', ?)",
            (batch_id, account, json.dumps(custom_ids), time.time()),
        )

    def collected(self, batch_id: str) -> None:
        """Every item of the batch has its outcome: a resume need not poll it again."""
        self._write(
            "UPDATE provider_batches SET status = 'collected', at = ? WHERE batch_id = ?",
            (time.time(), batch_id),
        )

    def submitted_batches(self) -> list[tuple[str, str, list[str]]]:
        """(batch id, account, custom ids) of each batch submitted but not yet collected."""
        rows = self._conn.execute(
            "SELECT batch_id, account, custom_ids FROM provider_batches "
            "WHERE status = 'submitted' ORDER BY at"
        )
        return [(b, a, json.loads(c)) for b, a, c in rows]

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        try:
            self._conn.execute(sql, args)
        except sqlite3.Error as exc:
            self.broken = _unusable(self.path, exc, "record a provider batch in it")
            raise self.broken from exc

    def counts(self) -> dict[str, int]:
        """Rows per status (``ok``/``failed``) committed so far."""
        rows = self._conn.execute("SELECT status, count(*) FROM items GROUP BY status")
        return {status: n for status, n in rows}


#: The longest ``meta`` value read (the identity holds fn's source): a longer one, from a
#: damaged or hostile file, reads as missing, so the manifest is refused, not loaded whole.
MAX_META_CHARS = 1_000_000


def _meta(conn: sqlite3.Connection) -> dict[str, Any]:
    rows = conn.execute("SELECT name, value FROM meta WHERE length(value) <= ?", (MAX_META_CHARS,))
    return dict(rows.fetchall())


def _identity(meta: dict[str, Any], path: Path) -> RunIdentity:
    try:
        return RunIdentity.from_json(json.loads(meta.get("identity") or "null"))
    except (ValueError, RecursionError) as exc:
        raise RunManifestError(
            f"run manifest {path}: its run identity is damaged ({exc}): refused, left untouched",
            path=str(path),
        ) from exc


@dataclasses.dataclass(frozen=True, slots=True)
class StoredItem:
    """One item row of a manifest, as ``read_run`` reads it (see ``BatchResult.load``)."""

    key: str
    index: int
    status: str
    value: Any
    error_type: str | None
    error_message: str | None
    traceback: str | None
    input: Any


def _check_format(meta: dict[str, Any], path: Path) -> None:
    """``RunManifestError`` unless ``meta`` is a run manifest's of a format this reads."""
    if meta.get("format") != FORMAT:
        raise RunManifestError(
            f"{path} is not a langfx_nb run manifest (refused, left untouched)", path=str(path)
        )
    if meta.get("version") == "1":
        raise RunManifestError(
            f"run manifest {path} was written by an older langfx_nb (manifest format 1, "
            "before runs stored their identity and inputs): refused, left untouched. Use "
            "another run= name, or delete the file to start again.",
            path=str(path),
        )
    if meta.get("version") not in READABLE:
        raise RunManifestError(
            f"{path}: run manifest version {str(meta.get('version'))[:20]!r} is not "
            "supported (refused, left untouched)",
            path=str(path),
        )


def _insert_rows(conn: sqlite3.Connection, head: str, values: str, rows: list[Any]) -> None:
    """Run ``head`` for each of ``rows`` (tuples, ``values`` the placeholders of one), in
    order, ``PER_INSERT`` rows a statement."""
    if rows:
        flat = [value for row in rows for value in row]
        insert_flat(conn, head, values, flat, len(rows[0]), PER_INSERT)


def _storable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row`` with each text as SQLite can store it (``storable_text``)."""
    return tuple(storable_text(v) if type(v) is str else v for v in row)


def read_run(path: Path) -> tuple[RunIdentity, list[StoredItem]]:
    """The identity and the item rows (by input index) of the manifest at ``path``, read-only
    and without validating results into classes (their JSON values); ``RunManifestError``
    when it is not a manifest of this format."""
    if not path.exists():
        raise RunManifestError(f"run manifest {path} does not exist", path=str(path))
    _regular(path)
    try:
        ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise _unusable(path, exc, "read it") from exc
    try:
        meta = _meta(ro)
        _check_format(meta, path)
        identity = _identity(meta, path)
        # what the writer bounds is read bounded: a damaged row is never read whole
        rows = ro.execute(
            "SELECT key, idx, status, value, error_type, substr(error_message, 1, ?), "
            "substr(traceback, 1, ?), substr(input, 1, ?) FROM items ORDER BY idx, rowid",
            (MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, MAX_INPUT_CHARS + 1),
        ).fetchall()
    except sqlite3.Error as exc:
        raise _unusable(path, exc, "read it") from exc
    finally:
        ro.close()
    # two rows may share a position: a run that added a row before others keeps the
    # positions of the rows it resumed (rows are the items' own: key, input, outcome)
    if not all(type(row[1]) is int and row[1] >= 0 for row in rows):
        raise RunManifestError(
            f"run manifest {path} is damaged: its items' input positions are not whole numbers",
            path=str(path),
        )
    return identity, [
        StoredItem(k, i, st, _json_or_text(v), et, em, tb, _json_or_text(inp))
        for k, i, st, v, et, em, tb, inp in rows
    ]


def _json_or_text(text: str | None) -> Any:
    """A stored JSON text as its value; text that is not JSON (a cut preview) as it is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _tag_text(tag: str) -> str:
    """A stored tag as a message shows it (bounded: it is data from the file)."""
    module, _, qualname = tag.partition(":")
    return f"class {qualname[:100]!r} of module {module[:100]!r}"
