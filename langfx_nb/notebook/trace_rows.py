"""What a trace row shows: status labels, token and cost sums, durations, human wait, problems
below. The static copy (``render.py``) draws its rows from :func:`trace_rows`; the live view
computes the same values in ``js/src/tree.ts`` (``traceRows``), and the shared fixture
``js/test/fixtures/trace_parity.json`` holds the two to the same output.

Input: the node records of a view's snapshot, with the core's field names (``id``,
``parent_id``, ``kind``, ``status``, ``start``, ``end``, ``usage``, ``decision``; see "The
node contract" in docs/agentic.md). Nothing here reads a name the core does not write, except
``hint`` (derived by ``trace_data``) and ``cost`` (no core field yet: unpriced without it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypeGuard

from ..agentic.trace_reader import BAD_STATUSES, LIVE

__all__ = [
    "BAD_STATUSES",
    "WAITING_LABEL",
    "below_text",
    "cost_text",
    "fmt_duration",
    "human_wait",
    "problems_below",
    "status_label",
    "trace_rows",
]

WAITING_LABEL = "waiting for approval"


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
    return WAITING_LABEL if status == "waiting" else status


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


def _cost_of(node: Mapping[str, Any]) -> float | None:
    cost = node.get("cost")
    return float(cost) if _number(cost) else None


def _parents(nodes: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """Each node's parent (only parents in the list) and the ids in list order."""
    ids = [str(n["id"]) for n in nodes]
    known = set(ids)
    parent_of: dict[str, str] = {}
    for n in nodes:
        node_id, parent = str(n["id"]), n.get("parent_id")
        if parent is not None and str(parent) in known and str(parent) != node_id:
            parent_of[node_id] = str(parent)
    return parent_of, ids


def sums(nodes: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, float, int, int]]:
    """Per node, over the node and all its descendants: tokens, cost, how many nodes carry a
    known cost, and how many used tokens with no known cost (a model call with no price:
    what the cost leaves out). Cycle-safe: a parent cycle never loops."""
    parent_of, ids = _parents(nodes)
    own: dict[str, tuple[int, float, int, int]] = {}
    for n in nodes:
        cost, tokens = _cost_of(n), tokens_of(n)
        priced = 0 if cost is None else 1
        own[str(n["id"])] = (tokens, cost or 0.0, priced, int(bool(tokens) and not priced))
    out = {node_id: list(values) for node_id, values in own.items()}
    for node_id in ids:  # add each node's own values to every ancestor (cycle-safe)
        values = own[node_id]
        seen = {node_id}
        cur = parent_of.get(node_id)
        while cur is not None and cur not in seen:
            seen.add(cur)
            acc = out[cur]
            for k in range(4):
                acc[k] += values[k]
            cur = parent_of.get(cur)
    return {k: (int(v[0]), v[1], int(v[2]), int(v[3])) for k, v in out.items()}


def problems_below(nodes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per node: how many problems below it ended failed / denied / cancelled / timed out,
    so a parent can say what went wrong beneath it. A problem is counted once, where it
    started: a node that failed because a descendant failed (an item whose query failed, an
    agent stopped by a denied call) is not counted again."""
    parent_of, _ids = _parents(nodes)

    def ancestors(node_id: str) -> Iterator[str]:
        seen = {node_id}
        cur = parent_of.get(node_id)
        while cur is not None and cur not in seen:
            seen.add(cur)
            yield cur
            cur = parent_of.get(cur)

    bad = [n for n in nodes if str(n.get("status", "")) in BAD_STATUSES]
    above_a_problem = {a for n in bad for a in ancestors(str(n["id"]))}
    out: dict[str, dict[str, int]] = {}
    for node in bad:
        node_id = str(node["id"])
        if node_id in above_a_problem:
            continue  # it failed because of what failed below it: counted there
        status = str(node["status"])
        for a in ancestors(node_id):
            counts = out.setdefault(a, {})
            counts[status] = counts.get(status, 0) + 1
    return out


def below_text(counts: Mapping[str, int] | None) -> str:
    if not counts:
        return ""
    return ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(counts.items())) + " below"


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


def fmt_cost(cost: float) -> str:
    if not cost:
        return ""
    return f"${_fixed(cost, 4 if cost < 0.01 else 2)}"


def cost_text(tokens: int, cost: float, priced: int, unpriced: int = 0) -> str:
    """A subtree's cost as a reader should see it: "—" when no node in it has a known
    price; ``≥ $1.23 (3 calls unpriced)`` when ``unpriced`` nodes in it used tokens
    without a known price (the sum leaves them out)."""
    if not priced:
        return "—" if tokens else ""
    text = fmt_cost(cost) or "$0"
    if unpriced:
        return f"≥ {text} ({unpriced:,} call{'' if unpriced == 1 else 's'} unpriced)"
    return text


def tokens_text(tokens: int) -> str:
    return f"{tokens:,} tok" if tokens else ""


def duration_ms(node: Mapping[str, Any]) -> float | None:
    start, end = node.get("start"), node.get("end")
    if not _number(start) or not _number(end):
        return None
    return max(0.0, (float(end) - float(start)) * 1000)


def tree_order(nodes: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Mapping[str, Any], int]]:
    """Nodes depth first (children in list order) with their depth; a node whose parent is
    not in the list is a root."""
    parent_of, _ids = _parents(nodes)
    children: dict[str | None, list[Mapping[str, Any]]] = {}
    for node in nodes:
        children.setdefault(parent_of.get(str(node["id"])), []).append(node)
    stack = [(n, 0) for n in reversed(children.get(None, []))]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        stack.extend((k, depth + 1) for k in reversed(children.get(str(node["id"]), [])))


def trace_rows(
    nodes: Sequence[Mapping[str, Any]],
    *,
    ended: bool = False,
    gone: bool = False,
    roll: bool = True,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The rows in tree order (the first ``limit``), as the live view draws them with all rows
    expanded: ``id``, ``depth``, ``kind``, ``name``, ``hint``, ``status`` (the label),
    ``duration``, ``tokens`` and ``cost`` (this node and all below it; its own only when
    ``roll`` is false), ``below`` (what went wrong below it) and ``wait`` (a person's decision
    time)."""
    totals = sums(nodes) if roll else {}
    below = problems_below(nodes) if roll else {}
    rows = []
    for node, depth in itertools.islice(tree_order(nodes), limit):
        node_id = str(node["id"])
        tokens, cost, priced, left_out = (
            totals[node_id] if roll else sums([{**node, "parent_id": None}])[node_id]
        )
        wait = human_wait(node)
        rows.append(
            {
                "id": node_id,
                "depth": depth,
                "kind": str(node.get("kind", "")),
                "name": str(node.get("name", "")),
                "hint": str(node.get("hint", "")),
                "status": status_label(node, ended=ended, gone=gone),
                "duration": fmt_duration(duration_ms(node)),
                "tokens": tokens_text(tokens),
                "cost": cost_text(tokens, cost, priced, left_out),
                "below": below_text(below.get(node_id)),
                "wait": "" if wait is None else fmt_duration(wait * 1000),
            }
        )
    return rows
