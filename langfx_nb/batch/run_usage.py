"""A batch run's model usage as its run manifest keeps it: each run's ``UsageMeter`` is
committed as a ``meta`` row ``usage:<run>`` with its trace records (``manifest.py``), and
``trace_header`` sums the rows of every run into the header of the manifest's stored trace,
the usage summary ``TraceExplorer(path)``'s bar and ``Session.load_trace(path)`` show."""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from typing import Any

from ..agentic.usage import ModelUsage, UsageSummary
from ..messages import USAGE_FIELDS, Usage

__all__ = ["read_cost", "read_count", "read_usage", "trace_header"]

#: the longest usage row read (a longer one, from a damaged file, is left out: no summary)
MAX_USAGE_CHARS = 1_000_000


#: the nodes per kind and status, counted from the records, or from the stored trace's rows
#: when they are written (one per record: no JSON to parse)
_COUNT_RECORDS = (
    "SELECT json_extract(record, '$.kind'), json_extract(record, '$.status'), count(*)"
    " FROM trace_nodes WHERE json_valid(record) GROUP BY 1, 2"
)
_COUNT_ROWS = "SELECT kind, status, count(*) FROM trace_rows GROUP BY 1, 2"


def trace_header(conn: sqlite3.Connection, *, from_rows: bool = False) -> dict[str, Any]:
    """The stored trace's header, as ``Session.trace_json`` writes one: the nodes per kind
    and status (from the records; ``from_rows``: from the stored trace's rows, which hold
    every record's), and the usage summary of every run's model requests (each run's
    ``usage:<run>`` row in ``meta``, summed; none when no run wrote one, or one is damaged:
    unknown, not zero)."""
    from ..agentic.trace import OPEN_STATUSES, TRACE_FORMAT, TRACE_VERSION

    started: dict[str, int] = {}
    finished: dict[str, dict[str, int]] = {}
    counts: dict[str, dict[str, int]] = {}
    rows = conn.execute(_COUNT_ROWS if from_rows else _COUNT_RECORDS)
    for kind, status, n in rows:
        if isinstance(kind, str) and isinstance(status, str):
            started[kind] = started.get(kind, 0) + n
            shown = counts.setdefault(kind, {})
            key = "running" if status in OPEN_STATUSES else status
            shown[key] = shown.get(key, 0) + n
            if status not in OPEN_STATUSES:
                finished.setdefault(kind, {})[status] = n
    header: dict[str, Any] = {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "session": {},
        "counts": {"started": started, "finished": finished},
    }
    runs = conn.execute(
        "SELECT value FROM meta WHERE name LIKE 'usage:%' AND length(value) <= ?",
        (MAX_USAGE_CHARS,),
    ).fetchall()
    if runs:
        damaged = (AttributeError, KeyError, OverflowError, RecursionError, TypeError, ValueError)
        with contextlib.suppress(*damaged):
            limit, summary = _usage_summary([json.loads(r[0]) for r in runs], counts)
            header["session"] = {"max_trace_nodes": limit}
            header["summary"] = summary.to_json()
    return header


def _usage_summary(
    runs: list[dict[str, Any]], counts: dict[str, dict[str, int]]
) -> tuple[int, UsageSummary]:
    """The runs' usage rows (``UsageMeter.to_json``) summed, and the largest of their
    ``max_trace_nodes``. ``ValueError`` for a row a meter cannot have written (a count that
    is not an integer from 0 to 2**53, a cost that is not a finite number >= 0)."""
    requests: dict[str, int] = {}
    tokens: dict[str, Usage] = {}
    costs: dict[str, float] = {}
    unpriced: dict[str, int] = {}
    limit = 1
    for run in runs:
        limit = max(limit, read_count(run["max_trace_nodes"]))
        for model, entry in run["by_model"].items():
            requests[model] = requests.get(model, 0) + read_count(entry["requests"])
            tokens[model] = tokens.get(model, Usage()) + read_usage(entry["usage"])
            if entry.get("cost") is not None:
                costs[model] = costs.get(model, 0.0) + read_cost(entry["cost"])
        for model, n in run["unpriced"].items():
            unpriced[model] = unpriced.get(model, 0) + read_count(n)
    total = Usage()
    for usage in tokens.values():
        total = total + usage
    summary = UsageSummary(
        requests=sum(requests.values()),
        usage=total,
        cost=sum(costs.values()) if costs else None,
        by_model={m: ModelUsage(n, tokens[m], costs.get(m)) for m, n in requests.items()},
        unpriced_models=tuple(m for m in requests if unpriced.get(m)),
        counts=counts,
        unpriced_requests=sum(unpriced.values()),
    )
    return limit, summary


def read_count(value: Any) -> int:
    """``value``, an integer a count may be (not a bool; 0 to 2**53), else ``ValueError``:
    a count read back from a file, which a meter could have written."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1 << 53:
        return value
    raise ValueError(f"not a count: {value!r}")


def read_cost(value: Any) -> float:
    """``value``, a cost (a finite number >= 0, not a bool), else ``ValueError``."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and math.isfinite(value) and value >= 0:
        return float(value)
    raise ValueError(f"not a cost: {value!r}")


def read_usage(data: Any) -> Usage:
    """A ``Usage`` read back from its JSON (``Usage.to_json``), each token count checked by
    ``read_count``; ``ValueError`` (or ``AttributeError`` for a non-object) otherwise."""
    return Usage(**{f: read_count(data[f]) for f in USAGE_FIELDS if data.get(f) is not None})
