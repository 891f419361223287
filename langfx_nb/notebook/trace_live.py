"""The rows of a live trace, kept up to date event by event.

A :class:`LiveIndex` folds node patches (:func:`row_patch` of core events) into flat per-node
columns and keeps every total exact as it goes: node counts by status and kind, subtree sums
(tokens, cost, descendants), what went wrong below each node. It answers the primitives of a
``WindowedTrace`` from them, so its windows come from the same function as a stored trace's
(``agentic.trace_reader``), and the saved-notebook copy reads it the same way.

Costs: a patch is O(depth) (its ancestors' sums); a window lists the visible rows (closed
children in one C-speed copy: only open nodes with children are visited; a filter:
O(matching nodes and their ancestors' children)), so the explorer spaces its live pushes by
what a window costs.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..agentic.trace_db import node_hint
from ..agentic.trace_reader import (
    BAD_STATUSES,
    DEFAULT_OPEN_DEPTH,
    GROUPS,
    LIVE,
    Listed,
    Listing,
    WindowedTrace,
    group_of,
    row_summary,
    time_buckets,
)
from .bridge import to_jsonable
from .trace_rows import tokens_of

__all__ = ["LiveIndex", "index_of", "row_patch"]

#: What a row, its roll-ups and the search read of a node record.
ROW_FIELDS = (
    "id", "parent_id", "kind", "name", "status", "start", "end", "usage", "cost", "error",
    "decision", "evicted_children",
)  # fmt: skip


def row_patch(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a core trace event changes of a node's row (``{"id", <row fields>, "hint"?}``),
    or ``None``. The event's record is read, not copied: only the row fields are taken (the
    error and decision as JSON data when kept), the hint as ``view_node`` derives it."""
    kind = event.get("type")
    if kind == "node_update":
        body = event.get("changes")
        node_id = event.get("node_id")
    elif kind in ("node_start", "node_end", "log"):
        body = event.get("node")
        node_id = body.get("id") if isinstance(body, Mapping) else None
    else:
        return None
    if not isinstance(body, Mapping) or node_id is None:
        return None
    out = {k: body[k] for k in ROW_FIELDS if k in body}
    hint = node_hint(body)
    if hint:
        out["hint"] = hint
    if not out or list(out) == ["id"]:
        return None  # streamed text only
    out["id"] = str(node_id)
    return out


_FIELDS = ("error", "decision", "evicted_children")
_DECISION = ("outcome", "by", "asked_at", "decided_at")


def _bump(counts: dict[str, int], key: str, by: int) -> None:
    counts[key] = counts.get(key, 0) + by
    if not counts[key]:
        del counts[key]


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return float("nan")
    return float(value)


class LiveIndex(WindowedTrace):
    """Per-node row values and exact totals of a growing trace (nodes by arrival)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent_id: list[str | None] = []  # as recorded (a parent not seen is no row)
        self.parent = array("i")  # the parent's row (-1: a root)
        self.depth = array("i")
        self.kind: list[str] = []
        self.status: list[str] = []
        self.name: list[str] = []
        self.hint: list[str] = []
        self.start = array("d")
        self.end = array("d")
        self.tokens = array("q")
        self.cost = array("d")  # NaN: no price known
        #: at and below each node: descendants, tokens, cost, nodes with a known price, and
        #: nodes that used tokens with no known price (the cost leaves them out)
        self.sums: tuple[array[Any], ...] = tuple(map(array, "iqdii"))
        #: a row's rarer fields by node: error, decision (what a row shows), evicted_children
        self.extra: dict[int, dict[str, Any]] = {}
        self.kids: dict[int, array[int]] = {}
        self.roots = array("i")
        self._waiting: dict[str, list[int]] = {}  # nodes whose parent is not seen yet
        #: what went wrong below each node: counts by bad status
        self.below: dict[int, dict[str, int]] = {}
        self.by_status: dict[str, int] = {}
        self.by_kind: dict[str, int] = {}
        self.lo = float("inf")
        self.hi = float("-inf")
        #: bumped by every change: a window computed at one version is current until the next
        self.version = 0
        self._match: tuple[str, set[int]] | None = None
        self._starts: tuple[int, dict[str, list[float]], int] | None = None
        self._touched: set[int] = set()  # nodes changed since the cached match set

    def __len__(self) -> int:
        return len(self.ids)

    # -- folding patches -------------------------------------------------------------------

    def apply(self, patch: Mapping[str, Any]) -> None:
        """Fold one node patch (``{"id", <fields>}``, a whole record or a change set)."""
        node_id = str(patch["id"])
        i = self.pos.get(node_id)
        if i is None:
            self._add(node_id, patch)
        else:
            self._update(i, patch)
        self.version += 1

    def _add(self, node_id: str, patch: Mapping[str, Any]) -> None:
        i = len(self.ids)
        parent_id = patch.get("parent_id")
        p = -1 if parent_id is None else self.pos.get(str(parent_id), -2)
        early = self._waiting.pop(node_id, ())  # children that came before their parent
        self.ids.append(node_id)
        self.pos[node_id] = i
        self.parent_id.append(None if parent_id is None else str(parent_id))
        kind = str(patch.get("kind", "") or "")
        status = str(patch.get("status", "ok") or "ok")
        self.kind.append(kind)
        self.status.append(status)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self.by_status[status] = self.by_status.get(status, 0) + 1
        name = patch.get("name", "")
        self.name.append(name if type(name) is str else str(name))
        self.hint.append(str(patch.get("hint") or ""))
        start, end = patch.get("start"), patch.get("end")
        start = start if type(start) is float else _float(start)
        end = end if type(end) is float else _float(end)
        self.start.append(start)
        self.end.append(end)
        if start < self.lo or start > self.hi or end > self.hi:  # (NaN compares false)
            self._widen(i)
        usage, cost = patch.get("usage"), patch.get("cost")
        tokens = 0 if usage is None else tokens_of(patch)
        cost = _float(cost) if cost is not None else float("nan")
        self.tokens.append(tokens)
        self.cost.append(cost)
        desc, sub_tokens, sub_cost, priced, unpriced = self.sums
        desc.append(0)
        sub_tokens.append(tokens)
        sub_cost.append(0.0 if cost != cost else cost)
        priced.append(int(cost == cost))
        unpriced.append(int(cost != cost and tokens > 0))
        if not patch.keys().isdisjoint(_FIELDS):
            self._set_extra(i, patch)
        self.parent.append(-1)
        self.depth.append(0)
        if p == -2:
            self._waiting.setdefault(str(parent_id), []).append(i)
        self._attach(i, max(p, -1))
        self._touched.add(i)
        for child in early:
            if child in self._ancestors(i):
                continue  # a parent cycle (never from a Session): the child stays a root
            self.roots.remove(child)  # rare: a child written before its parent
            self._attach(child, i)

    def _own(self, i: int) -> tuple[int, float, int, int]:
        """What node ``i`` adds to the sums (but descendants) at and above it."""
        tokens, cost = self.tokens[i], self.cost[i]
        priced = cost == cost  # NaN: no price known
        return tokens, cost if priced else 0.0, int(priced), int(not priced and tokens > 0)

    def _roll(self, nodes: Sequence[int], delta: Sequence[float]) -> None:
        """Add ``delta`` (descendants, tokens, cost, priced, unpriced) to the sums of
        ``nodes``."""
        for column, d in zip(self.sums, delta, strict=True):
            if d:
                for a in nodes:
                    column[a] += d

    def _attach(self, i: int, p: int) -> None:
        """Hang node ``i`` (and what is already below it) under ``p`` (-1: a root)."""
        self.parent[i] = p
        if p < 0:
            self.roots.append(i)
            self._set_depths(i, 0)
            return
        if p not in self.kids:
            self.kids[p] = array("i")
        self.kids[p].append(i)
        if i in self.kids:
            self._set_depths(i, self.depth[p] + 1)
        else:
            self.depth[i] = self.depth[p] + 1  # the common case: a new leaf
        desc, tokens, cost, priced, unpriced = self.sums
        n, t, c, k, u = desc[i] + 1, tokens[i], cost[i], priced[i], unpriced[i]
        for a in self._ancestors(i):  # (the common case: a new leaf, no tokens yet)
            desc[a] += n
            if t or k or u:
                tokens[a] += t
                cost[a] += c
                priced[a] += k
                unpriced[a] += u
        if i in self.below or self.status[i] in BAD_STATUSES:
            self._count_problems(i, self._bad_counts(i))

    def _count_problems(self, i: int, delta: dict[str, int]) -> None:
        """Add ``delta`` (problems by status) to what is below each ancestor of ``i``. A
        problem is counted once, where it started (as ``trace_rows.problems_below``): an
        ancestor that is itself failed counts as a problem only while nothing below it is
        one, so when its first problem below arrives (or its last one leaves) its own count
        leaves (or returns to) the ancestors above it, whatever order the ends came in."""
        for a in self._ancestors(i):
            counts = self.below.get(a, {})
            had = bool(counts)
            for label, m in delta.items():
                _bump(counts, label, m)
            if counts:
                self.below[a] = counts
            else:
                self.below.pop(a, None)
            own = self.status[a]
            if had != bool(counts) and own in BAD_STATUSES:
                delta = dict(delta)
                _bump(delta, own, -1 if counts else 1)
            if not delta:
                return

    def _bad_counts(self, i: int) -> dict[str, int]:
        """Problems in ``i``'s subtree, ``i`` included unless it is above one: a problem is
        counted once, where it started (as ``trace_rows.problems_below``)."""
        out = dict(self.below.get(i, {}))
        status = self.status[i]
        if status in BAD_STATUSES and not out:
            out[status] = 1
        return out

    def _set_depths(self, i: int, depth: int) -> None:
        stack = [(i, depth)]
        while stack:
            j, d = stack.pop()
            self.depth[j] = d
            stack.extend((k, d + 1) for k in self.kids.get(j, ()))

    def _ancestors(self, i: int) -> list[int]:
        parent = self.parent
        out: list[int] = []
        p = parent[i]
        while p >= 0:
            if p == i or len(out) > len(parent):
                break  # a cycle (a malformed trace): stop there
            out.append(p)
            p = parent[p]
        return out

    def _update(self, i: int, patch: Mapping[str, Any]) -> None:
        if "status" in patch:
            old, new = self.status[i], str(patch["status"] or "ok")
            if old != new:
                self.status[i] = new
                _bump(self.by_status, old, -1)
                _bump(self.by_status, new, 1)
                delta = {s: d for s, d in ((old, -1), (new, 1)) if s in BAD_STATUSES}
                if delta and not self.below.get(i):  # else its problem was counted below it
                    self._count_problems(i, delta)
        if "name" in patch:
            self.name[i] = str(patch["name"])
        if "hint" in patch:
            self.hint[i] = str(patch["hint"] or "")
        if "start" in patch:
            self.start[i] = _float(patch["start"])
        if "end" in patch:
            self.end[i] = _float(patch["end"])
        self._widen(i)
        if "usage" in patch or "cost" in patch:
            before = self._own(i)
            if "usage" in patch:
                self.tokens[i] = tokens_of(patch)
            if "cost" in patch:
                self.cost[i] = _float(patch["cost"])
            step = [0, *(new - old for new, old in zip(self._own(i), before, strict=True))]
            self._roll([i, *self._ancestors(i)], step)
        if not patch.keys().isdisjoint(_FIELDS):
            self._set_extra(i, patch)
        self._touched.add(i)

    def _set_extra(self, i: int, patch: Mapping[str, Any]) -> None:
        extra = dict(self.extra.get(i, {}))
        for field in _FIELDS:
            if field not in patch:
                continue
            value = patch[field]
            if field == "decision" and isinstance(value, Mapping):
                value = {k: to_jsonable(value[k]) for k in _DECISION if k in value}
            elif field == "error":
                value = to_jsonable(value)
            if value is None or value == 0:
                extra.pop(field, None)
            else:
                extra[field] = value
        if extra:
            self.extra[i] = extra
        else:
            self.extra.pop(i, None)

    def _widen(self, i: int) -> None:
        for t in (self.start[i], self.end[i]):
            if t == t:  # NaN: no time
                self.lo = min(self.lo, t)
                self.hi = max(self.hi, t)

    # -- reading ---------------------------------------------------------------------------

    def span(self) -> tuple[float, float] | None:
        return None if self.lo > self.hi else (self.lo, self.hi)

    def counts(self) -> dict[str, dict[str, int]]:
        """Exact node counts by status and by kind."""
        return {"status": dict(self.by_status), "kind": dict(self.by_kind)}

    def timeline(self, lo: float, hi: float, buckets: int) -> dict[str, Any]:
        # each group's start times, sorted once per version of the index
        if self._starts is None or self._starts[0] != self.version:
            by: dict[str, list[float]] = {g: [] for g in GROUPS}
            untimed = 0
            for start, status in zip(self.start, self.status, strict=True):
                if start != start:  # NaN: no start time
                    untimed += 1
                else:
                    by[group_of(status)].append(start)
            for values in by.values():
                values.sort()
            self._starts = (self.version, by, untimed)
        return time_buckets(self._starts[1], self._starts[2], lo, hi, buckets)

    def roots_running(self) -> int:
        """Roots still running (the session root runs until disposed)."""
        return sum(1 for r in self.roots if self.status[r] in LIVE)

    def summary(self, i: int) -> dict[str, Any]:
        """What a row shows of node ``i`` (``partial``: the detail pane asks for the rest)."""
        return row_summary(
            self.ids[i],
            self.parent_id[i],
            self.kind[i],
            self.name[i],
            self.status[i],
            self.start[i],
            self.end[i],
            self.hint[i],
            self.cost[i],
            self.tokens[i],
            self.extra.get(i),
        )

    def _text(self, i: int) -> str:
        err = self.extra.get(i, {}).get("error")
        if err is not None and type(err) is not str:
            err = json.dumps(err, ensure_ascii=False, separators=(",", ":"))
        return f"{self.name[i]} {self.kind[i]} {self.status[i]} {self.hint[i]} {err or ''}".lower()

    def _hits(self, query: str) -> set[int]:
        """Every node whose search text holds ``query`` (lowercase): the nodes changed since
        the last call for the same query are checked again, a new query checks them all."""
        cached = self._match
        if cached is not None and cached[0] == query:
            hits = cached[1]
            for i in self._touched:
                if query in self._text(i):
                    hits.add(i)
                else:
                    hits.discard(i)
        else:
            hits = {i for i in range(len(self.ids)) if query in self._text(i)}
        self._match = (query, hits)
        self._touched = set()
        return hits

    def is_open(self, i: int, expanded: Mapping[str, bool]) -> bool:
        """Whether node ``i`` shows its children under ``expanded`` (default: shallow ones)."""
        return expanded.get(self.ids[i], self.depth[i] < DEFAULT_OPEN_DEPTH)

    def locate(self, node_id: str) -> int | None:
        return self.pos.get(node_id)

    def listing(self, expanded: Mapping[str, bool]) -> Listing:
        """The visible rows, listed: an open node's closed (or childless) children are
        copied as one run, and only open nodes with children are visited (a batch node's
        100,000 closed items are one copy)."""
        opened: dict[int, list[int]] = {}  # kids at DEFAULT_OPEN_DEPTH or deeper, opened
        for node_id, is_open in expanded.items():
            j = self.pos.get(node_id)
            if is_open and j is not None and self.depth[j] >= DEFAULT_OPEN_DEPTH and j in self.kids:
                opened.setdefault(self.parent[j], []).append(j)

        def open_kids(kids: array[int], i: int) -> list[int]:
            """Where ``i``'s open children with kids are in ``kids``, last first."""
            if i >= 0 and self.depth[i] + 1 >= DEFAULT_OPEN_DEPTH:
                return sorted((kids.index(c) for c in opened.get(i, ())), reverse=True)
            is_open = self.is_open
            return [
                k
                for k in reversed(range(len(kids)))
                if kids[k] in self.kids and is_open(kids[k], expanded)
            ]

        order = array("i")
        stack = [(self.roots, open_kids(self.roots, -1), 0)]
        while stack:
            kids, todo, at = stack.pop()
            if not todo:
                order.extend(kids[at:])
                continue
            k = todo.pop()
            order.extend(kids[at : k + 1])
            stack.append((kids, todo, k + 1))
            below = self.kids[kids[k]]
            stack.append((below, open_kids(below, kids[k]), 0))
        return Listed(order)

    def search(self, query: str) -> tuple[Listing, Callable[[int], bool], int]:
        hits = self._hits(query)
        keep: set[int] = set()
        for i in hits:
            j = i
            while j >= 0 and j not in keep:
                keep.add(j)
                j = self.parent[j]
        order = array("i")
        stack = [r for r in reversed(self.roots) if r in keep]
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(k for k in reversed(self.kids.get(i, ())) if k in keep)
        return Listed(order), hits.__contains__, len(hits)

    def rows(self, nodes: Sequence[int], expanded: Mapping[str, bool]) -> list[dict[str, Any]]:
        return [self._row(i, expanded) for i in nodes]

    def _row(self, i: int, expanded: Mapping[str, bool]) -> dict[str, Any]:
        has_kids = i in self.kids
        desc, tokens, cost, priced, unpriced = (column[i] for column in self.sums)
        row: dict[str, Any] = {
            "node": self.summary(i),
            "depth": self.depth[i],
            "kids": has_kids,
            "open": has_kids and self.is_open(i, expanded),
            "roll": [tokens, cost, priced, desc, self.tokens[i], unpriced],
        }
        bad = self.below.get(i)
        if bad:
            row["below"] = dict(bad)
        return row

    def first_rows(self, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` rows depth first with everything open, as a window's rows."""
        stack: list[int] = list(reversed(self.roots))
        out: list[dict[str, Any]] = []
        while stack and len(out) < limit:
            i = stack.pop()
            out.append(self._row(i, {}))
            stack.extend(reversed(self.kids.get(i, ())))
        return out


def index_of(records: Iterable[Mapping[str, Any]]) -> LiveIndex:
    """A :class:`LiveIndex` of whole node records (a session's trace so far)."""
    index = LiveIndex()
    for record in records:
        patch = row_patch({"type": "node_start", "node": record})
        if patch is not None:
            index.apply(patch)
    return index
