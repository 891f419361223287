"""A batch's trace in its run manifest (SQLite), indexed in place: :func:`open_store_index`
reads the ``trace_nodes`` rows in chunks into a :class:`TraceIndex` (row values only; each
record stays in the file) and reads a record back, strictly, when the detail pane asks.

The index sidecar (as a large trace file has, notebook/trace_file.py): the first open writes
the index and each node's rowid beside the manifest as ``<manifest>.lfxidx`` (else in the
per-user cache, ``trace_file.sidecar_places``); a later open of
the unchanged manifest reads that back instead of parsing every record (docs/decisions.md
"A run manifest's index sidecar"). Unchanged means the same file (size, modification and
change time) and the same write-ahead log (``-wal``: its size and modification time), so a
batch that runs again into the manifest, or is still running, makes it stale. A sidecar that
does not match or is damaged is ignored, and one that cannot be written is not written.
"""

from __future__ import annotations

import gc
import json
import os
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..batch.manifest import trace_record, trace_records, trace_rowid_end
from .trace_file import (
    SIDECAR_VERSION,
    checked_record,
    read_index_sidecar,
    sidecar_places,
    write_index_sidecar,
)
from .trace_index import TraceIndex

__all__ = ["index_store", "load_store_index", "open_store_index", "store_extent"]

_MAGIC = "langfx_nb.store_index"
_VERSION = [SIDECAR_VERSION, 1]  # the index's layout, and this module's part (the rowids)


def open_store_index(
    path: str | Path, *, limit: int | None = None, sidecar: bool = True
) -> TraceIndex:
    """Index the trace a batch wrote into its run manifest at ``path`` (every run of it).
    Raises ``ValueError`` for a file that is not a manifest or holds no trace.

    ``limit``: index only the first ``limit`` records in the order written (a quick first
    view of a large manifest; a node whose parent is not among them is a root); no sidecar is
    read or written for it. ``sidecar``: read the index from ``<path>.lfxidx`` when it was
    made from the manifest as it is now, else build it and write it there."""
    path = Path(path)
    key = _key(path) if sidecar and limit is None else None
    restored = None if key is None else _restore(path, key)
    if restored is not None:
        return restored
    index, rowids = _build(path, limit)
    if key is not None:  # taken before the build: a write since then makes it stale
        _write_sidecar(path, key, index, rowids)
    return _with_records(index, path, rowids)


def load_store_index(path: str | Path) -> TraceIndex | None:
    """The index from the sidecar of the manifest at ``path`` if it was made from the
    manifest as it is now, else ``None``; never reads a record."""
    path = Path(path)
    key = _key(path)
    return None if key is None else _restore(path, key)


def index_store(path: str | Path, progress: Callable[[int], None] | None = None) -> Path | None:
    """Index the whole trace of the manifest at ``path`` and write its sidecar; return the
    sidecar's path, ``None`` if it could not be written. ``progress(rowid)``: the last record
    read so far, after each chunk (see :func:`store_extent`). A manifest with no trace or a
    record that is not JSON raises ``ValueError`` as :func:`open_store_index` does."""
    path = Path(path)
    key = _key(path)
    index, rowids = _build(path, None, progress)
    where = None if key is None else _write_sidecar(path, key, index, rowids)
    index.close()
    return where


def store_extent(path: str | Path) -> int:
    """How far :func:`index_store`'s ``progress`` goes: the manifest's last record's rowid."""
    return trace_rowid_end(Path(path))


def _write_sidecar(
    path: Path, key: dict[str, Any], index: TraceIndex, rowids: array[int]
) -> Path | None:
    """Write the sidecar beside the manifest, else in the per-user cache; where, or None."""
    for target in sidecar_places(path):
        if write_index_sidecar(target, key, index, {"rowids": rowids}):
            return target
    return None


def _restore(path: Path, key: dict[str, Any]) -> TraceIndex | None:
    for target in sidecar_places(path):
        restored = read_index_sidecar(target, key)
        if restored is not None and len(restored[1].get("rowids", ())) == len(restored[0]):
            return _with_records(restored[0], path, restored[1]["rowids"])
    return None


def _with_records(index: TraceIndex, path: Path, rowids: array[int]) -> TraceIndex:
    """``index``, reading each node's record back from its row of the manifest."""
    read, close = trace_record(path)

    def record(i: int) -> dict[str, Any]:
        return checked_record(json.loads(read(rowids[i])), i)

    index.read_records_with(record, close)
    return index


def _key(path: Path) -> dict[str, Any] | None:
    """What the sidecar must have been made from: the manifest file and its write-ahead log
    as they are now (``None``: not known, no sidecar). An empty log is no log: it holds no
    frames (a read-only open leaves one behind where there was none)."""
    try:
        stat = path.stat()
        try:
            log = os.stat(f"{path}-wal")
        except FileNotFoundError:
            wal = None
        else:
            wal = [log.st_size, log.st_mtime_ns] if log.st_size else None
    except OSError:
        return None
    return {
        "magic": _MAGIC,
        "version": _VERSION,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "wal": wal,
    }


def _build(
    path: Path, limit: int | None, progress: Callable[[int], None] | None = None
) -> tuple[TraceIndex, array[int]]:
    """The index of the manifest's records (the first ``limit`` of them), and each node's
    rowid (where its record is read back from); ``progress(rowid)`` after each chunk."""
    index = TraceIndex()
    rowids = array("q")
    n = 0
    paused = gc.isenabled()
    gc.disable()  # millions of new dicts would trigger it over and over
    try:
        for chunk in trace_records(path, limit=limit):
            try:
                batch = json.loads("[" + ",".join(text for _r, text in chunk) + "]")
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: a trace record is not valid JSON ({exc})") from None
            index.add_batch(batch, n)
            rowids.extend(r for r, _t in chunk)
            n += len(batch)
            del batch
            if progress is not None:
                progress(rowids[-1])
        if not n:
            raise ValueError(f"{path}: the run manifest holds no trace")
        try:
            index.finish()
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    finally:
        if paused:
            gc.enable()
    return index, rowids
