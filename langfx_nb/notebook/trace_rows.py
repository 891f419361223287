"""What a trace row shows as text: status labels, token and cost sums, durations, human wait,
problems below, from a window row (stored or live, ``agentic/trace_reader.py``) and its node
(the core's field names: "The node contract" in docs/agentic.md). The static copy
(``render.py``) writes rows with :func:`row_values`; the live view computes the same values
in ``js/src/tree.ts``, and ``js/test/fixtures/trace_parity.json`` holds the two to the same
output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypeGuard

from ..agentic.trace_reader import LIVE

__all__ = ["duration_ms", "human_wait", "row_values", "status_label", "tokens_of"]


def status_label(node: Mapping[str, Any], *, ended: bool = False, gone: bool = False) -> str:
    """The status a row shows. ``ended``: the trace is over (a saved file, a disposed
    session) — work recorded as running never finished. ``gone``: the kernel is gone (a saved
    notebook's copy, a view whose kernel stopped) — nothing shown can still run. A session
    shows ``open`` while its kernel can still run work under it, else ``closed``; a log
    entry shows its level (``warning``), not a status."""
    status = str(node.get("status", ""))
    kind = node.get("kind")
    if kind == "log":  # a log entry is not work that can fail: it shows its level
        return str(node.get("name") or "log")
    if status not in LIVE:
        return status
    if kind == "session":  # a container, never unfinished work: open until its trace is over
        return "closed" if ended or gone else "open"
    if ended or gone:
        return "unfinished"
    return "waiting for approval" if status == "waiting" else status


def human_wait(node: Mapping[str, Any]) -> float | None:
    """Seconds a person (or an approval policy) took to decide this tool call, from the
    node's decision record; ``None`` when no policy was asked or it has not answered."""
    decision = node.get("decision")
    if not isinstance(decision, Mapping):
        return None
    asked, decided = decision.get("asked_at"), decision.get("decided_at")
    if not _number(asked) or not _number(decided):
        return None
    return max(0.0, float(decided) - float(asked))


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def tokens_of(node: Mapping[str, Any]) -> int:
    usage = node.get("usage")
    if not isinstance(usage, Mapping):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    return sum(
        v for k in ("prompt_tokens", "completion_tokens") if isinstance(v := usage.get(k), int)
    )


def _fixed(value: float, digits: int) -> str:
    """``value.toFixed(digits)`` as JavaScript rounds it (half away from zero, exact value)."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def fmt_duration(ms: float | None) -> str:
    """Milliseconds as the live view writes them (``dom.ts`` ``fmtDuration``)."""
    if ms is None or not math.isfinite(ms):
        return ""
    if ms < 1000:
        return f"{_fixed(ms, 0)} ms"
    if ms < 60_000:
        return f"{_fixed(ms / 1000, 2 if ms < 10_000 else 1)} s"
    return f"{math.floor(ms / 60_000)}m{_fixed((ms % 60_000) / 1000, 0)}s"


def cost_text(tokens: int, cost: float, priced: int, unpriced: int = 0) -> str:
    """A subtree's cost as a reader should see it: "—" when no node in it has a known
    price; ``≥ $1.23 (3 calls unpriced)`` when ``unpriced`` nodes in it used tokens
    without a known price (the sum leaves them out)."""
    if not priced:
        return "—" if tokens else ""
    text = f"${_fixed(cost, 4 if cost < 0.01 else 2)}" if cost else "$0"
    if unpriced:
        return f"≥ {text} ({unpriced:,} call{'' if unpriced == 1 else 's'} unpriced)"
    return text


def duration_ms(node: Mapping[str, Any]) -> float | None:
    start, end = node.get("start"), node.get("end")
    if not _number(start) or not _number(end):
        return None
    return max(0.0, (float(end) - float(start)) * 1000)


def row_values(
    row: Mapping[str, Any], *, ended: bool = False, gone: bool = False
) -> dict[str, Any]:
    """What a window row (``WindowedTrace.window``'s rows, stored or live) shows, as text:
    ``id``, ``depth``, ``kind``, ``name``, ``hint``, ``status`` (the label), ``duration``,
    ``tokens`` and ``cost`` (this node and all below it), ``below`` (what went wrong below
    it) and ``wait`` (a person's decision time)."""
    node, counts = row["node"], sorted((row.get("below") or {}).items())
    below = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts)
    tokens, cost, priced, _desc, _own, unpriced = row["roll"]
    wait = human_wait(node)
    return {
        "id": str(node["id"]),
        "depth": row["depth"],
        "kind": str(node.get("kind", "")),
        "name": str(node.get("name", "")),
        "hint": str(node.get("hint", "")),
        "status": status_label(node, ended=ended, gone=gone),
        "duration": fmt_duration(duration_ms(node)),
        "tokens": f"{tokens:,} tok" if tokens else "",
        "cost": cost_text(tokens, cost, priced, unpriced),
        "below": f"{below} below" if below else "",
        "wait": "" if wait is None else fmt_duration(wait * 1000),
    }
