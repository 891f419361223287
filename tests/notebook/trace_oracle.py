"""Reference computations of a whole trace's roll-ups, problems below and tree order, written
plainly over node records: the oracle the stored and live windows are checked against; and
:func:`trace_rows`, the rows a reader sees of node records."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from langfx_nb.agentic.trace_reader import BAD_STATUSES
from langfx_nb.notebook.trace_live import index_of
from langfx_nb.notebook.trace_rows import row_values, tokens_of


def _cost_of(node: Mapping[str, Any]) -> float | None:
    cost = node.get("cost")
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


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
    nodes: Iterable[Mapping[str, Any]], *, ended: bool = False, gone: bool = False
) -> list[dict[str, Any]]:
    """The rows of node records in tree order, all expanded, with the values the live view
    shows (``row_values`` of their window rows)."""
    index = index_of(nodes)
    return [row_values(row, ended=ended, gone=gone) for row in index.first_rows(len(index))]
