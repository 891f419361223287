"""A batch's trace in its run manifest (SQLite), indexed in place: :func:`open_store_index`
reads the ``trace_nodes`` rows in chunks into a :class:`TraceIndex` (row values only; each
record stays in the file) and reads a record back, strictly, when the detail pane asks.
"""

from __future__ import annotations

import gc
import json
from array import array
from pathlib import Path
from typing import Any

from ..agentic.trace import TraceNode
from ..batch.manifest import trace_record, trace_records
from .trace_data import view_node
from .trace_index import TraceIndex

__all__ = ["open_store_index"]


def open_store_index(path: str | Path) -> TraceIndex:
    """Index the trace a batch wrote into its run manifest at ``path`` (every run of it).
    Raises ``ValueError`` for a file that is not a manifest or holds no trace."""
    path = Path(path)
    index = TraceIndex()
    rowids = array("q")
    n = 0
    paused = gc.isenabled()
    gc.disable()  # millions of new dicts would trigger it over and over
    try:
        for chunk in trace_records(path):
            try:
                batch = json.loads("[" + ",".join(text for _r, text in chunk) + "]")
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: a trace record is not valid JSON ({exc})") from None
            index.add_batch(batch, n)
            rowids.extend(r for r, _t in chunk)
            n += len(batch)
            del batch
        if not n:
            raise ValueError(f"{path}: the run manifest holds no trace")
        try:
            index.finish()
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    finally:
        if paused:
            gc.enable()
    read, close = trace_record(path)

    def record(i: int) -> dict[str, Any]:
        raw = json.loads(read(rowids[i]))
        try:
            TraceNode.from_json(raw)  # the core's strict node reader
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            missing = f"{exc.args[0]!r} is missing" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"malformed trace: nodes[{i}]: {missing[:199]}") from None
        return view_node(raw, plain=True)

    index.read_records_with(record, close)
    return index
