"""The explorer's timeline overview: exact node counts per time bucket over the whole trace.

When the timeline's visible time range holds more nodes than the page can draw as bars, the
page shows this histogram instead of individual bars (the rows' own bars still follow the
zoomed axis). Each node is counted once, in the bucket its start falls in, grouped by status
(``running``: still running or waiting; ``failed``: failed, denied, cancelled, timed out;
``ok``: the rest). Nodes starting before or after the range, and nodes with no start time,
are counted apart, so ``before + in range + after + untimed`` is the trace's node count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..agentic.trace_reader import time_buckets
from .trace_rows import BAD_STATUSES, LIVE

__all__ = ["GROUPS", "StartsByGroup", "bucket_counts", "group_of"]

GROUPS = ("running", "ok", "failed")


def group_of(status: str) -> str:
    """The overview's group of a node status."""
    if status in LIVE:
        return "running"
    if status in BAD_STATUSES:
        return "failed"
    return "ok"


class StartsByGroup:
    """Node start times sorted per status group (what :func:`bucket_counts` bisects)."""

    def __init__(self, starts: Iterable[float], statuses: Iterable[str]) -> None:
        by: dict[str, list[float]] = {g: [] for g in GROUPS}
        self.untimed = 0
        for start, status in zip(starts, statuses, strict=True):
            if start != start:  # NaN: no start time
                self.untimed += 1
            else:
                by[group_of(status)].append(start)
        for values in by.values():
            values.sort()
        self.by: Mapping[str, Sequence[float]] = by


def bucket_counts(starts: StartsByGroup, lo: float, hi: float, buckets: int) -> dict[str, Any]:
    """Counts of nodes starting in each of ``buckets`` equal parts of ``[lo, hi]`` by group
    (``agentic.trace_reader.time_buckets``, which a stored trace answers with too)."""
    return time_buckets(starts.by, starts.untimed, lo, hi, buckets)
