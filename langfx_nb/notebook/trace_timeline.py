"""The explorer's timeline overview: exact node counts per time bucket over the whole trace.

When the timeline's visible time range holds more nodes than the page can draw as bars, the
page shows this histogram instead of individual bars (the rows' own bars still follow the
zoomed axis). Each node is counted once, in the bucket its start falls in, grouped by status
(``running``: still running or waiting; ``failed``: failed, denied, cancelled, timed out;
``ok``: the rest). Nodes starting before or after the range, and nodes with no start time,
are counted apart, so ``before + in range + after + untimed`` is the trace's node count.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .trace_rows import BAD_STATUSES, LIVE

__all__ = ["GROUPS", "MAX_BUCKETS", "StartsByGroup", "bucket_counts", "group_of"]

GROUPS = ("running", "ok", "failed")
MAX_BUCKETS = 400  # buckets one request may ask for


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
    """Counts of nodes starting in each of ``buckets`` equal parts of ``[lo, hi]`` (the last
    bucket includes ``hi``), by group: ``{lo, hi, buckets, in_range, before, after, untimed,
    counts: {group: [n, ...]}}``. Exact: every node is in exactly one count."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"timeline range must be finite with lo <= hi, got [{lo}, {hi}]")
    buckets = max(1, min(int(buckets), MAX_BUCKETS))
    width = (hi - lo) / buckets
    counts: dict[str, list[int]] = {}
    before = after = in_range = 0
    for group in GROUPS:
        values = starts.by[group]
        first = bisect.bisect_left(values, lo)
        last = bisect.bisect_right(values, hi)
        before += first
        after += len(values) - last
        row = []
        at = first
        for b in range(1, buckets + 1):
            edge = bisect.bisect_left(values, lo + b * width, at, last) if b < buckets else last
            row.append(edge - at)
            at = edge
        in_range += last - first
        counts[group] = row
    return {
        "lo": lo,
        "hi": hi,
        "buckets": buckets,
        "in_range": in_range,
        "before": before,
        "after": after,
        "untimed": starts.untimed,
        "counts": counts,
    }
