"""The rows of a live trace, kept up to date event by event.

A :class:`LiveIndex` folds node patches (:func:`row_patch` of core events)
into flat per-node columns and keeps every total exact as it goes: node counts by status and
kind, subtree sums (tokens, cost, descendants), what went wrong below each node. It answers
the primitives of a ``WindowedTrace`` from them, so its windows come from the same function
as a stored trace's (``agentic.trace_reader``), and the saved-notebook copy reads it the same
way.

Costs: a patch is O(depth) (its ancestors' sums); a window is O(visible rows) for the tree
order (a filter: O(matching nodes and their ancestors' children)), so the explorer spaces its
live pushes by what a window costs.
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


_NAN = float("nan")
_FIELDS = ("error", "decision", "evicted_children")
_DECISION = ("outcome", "by", "asked_at", "decided_at")


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _NAN
    return float(value)


class LiveIndex(WindowedTrace):
    """Per-node row values and exact totals of a growing trace (nodes by arrival)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent = array("i")
        self.depth = array("i")
        self.kind: list[str] = []
        self.status: list[str] = []
        self.name: list[str] = []
        self.hint: list[str] = []
        self.start = array("d")
        self.end = array("d")
        self.tokens = array("q")
        self.cost = array("d")  # NaN: no price known
        self.sub_tokens = array("q")
        self.sub_cost = array("d")
        self.sub_priced = array("i")
        #: nodes at and below that used tokens with no known price (a partial roll-up)
        self.sub_unpriced = array("i")
        self.desc = array("i")
        #: a row's rarer fields by node: error, decision (what a row shows), evicted_children
        self.extra: dict[int, dict[str, Any]] = {}
        self.kids: dict[int, list[int]] = {}
        self.roots: list[int] = []
        self.orphans: dict[int, str] = {}  # parent id not (yet) seen, by node
        self._waiting: dict[str, list[int]] = {}  # the same, by the missing parent's id
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
        self.ids.append(node_id)
        self.pos[node_id] = i
        kind = str(patch.get("kind", "") or "")
        status = str(patch.get("status", "ok") or "ok")
        self.kind.append(kind)
        self.status.append(status)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        self.by_status[status] = self.by_status.get(status, 0) + 1
        name, hint = patch.get("name", ""), patch.get("hint", "")
        self.name.append(name if type(name) is str else str(name))
        self.hint.append(hint if type(hint) is str else str(hint or ""))
        start, end = patch.get("start"), patch.get("end")
        start = start if type(start) is float else _float(start)
        end = end if type(end) is float else _float(end)
        self.start.append(start)
        self.end.append(end)
        if start < self.lo or start > self.hi or end > self.hi:  # NaN compares False
            self._widen(start, end)
        usage, cost = patch.get("usage"), patch.get("cost")
        tokens = 0 if usage is None else tokens_of(patch)
        cost = _NAN if cost is None else _float(cost)
        self.tokens.append(tokens)
        self.cost.append(cost)
        self.sub_tokens.append(tokens)
        self.sub_cost.append(0.0 if cost != cost else cost)
        self.sub_priced.append(0 if cost != cost else 1)
        self.sub_unpriced.append(1 if cost != cost and tokens else 0)
        self.desc.append(0)
        if "error" in patch or "decision" in patch or "evicted_children" in patch:
            self._set_extra(i, patch)
        parent_id = patch.get("parent_id")
        p = -1 if parent_id is None else self.pos.get(str(parent_id), -2)
        self.parent.append(-1)
        self.depth.append(0)
        if p == -2:
            self.orphans[i] = str(parent_id)
            self._waiting.setdefault(str(parent_id), []).append(i)
            p = -1
        self._attach(i, p)
        self._touched.add(i)
        for child in self._waiting.pop(node_id, ()):  # children that came before their parent
            if child in self._ancestors(i):
                continue  # a parent cycle (never from a Session): the child stays a root
            self.orphans.pop(child, None)
            self.roots.remove(child)  # rare: a child written before its parent
            self._attach(child, i)

    def _attach(self, i: int, p: int) -> None:
        """Hang node ``i`` (and what is already below it) under ``p`` (-1: a root)."""
        self.parent[i] = p
        if p < 0:
            self.roots.append(i)
            self._set_depths(i, 0)
            return
        self.kids.setdefault(p, []).append(i)
        if i in self.kids:
            self._set_depths(i, self.depth[p] + 1)
        else:
            self.depth[i] = self.depth[p] + 1  # the common case: a new leaf
        bad = self._bad_counts(i) if i in self.below or self.status[i] in BAD_STATUSES else {}
        n, t, c, k = self.desc[i] + 1, self.sub_tokens[i], self.sub_cost[i], self.sub_priced[i]
        u = self.sub_unpriced[i]
        desc, sub_t, sub_c, sub_p = self.desc, self.sub_tokens, self.sub_cost, self.sub_priced
        for a in self._ancestors(i):
            desc[a] += n
            if t:
                sub_t[a] += t
            if k:
                sub_c[a] += c
                sub_p[a] += k
            if u:
                self.sub_unpriced[a] += u
        if bad:
            self._count_problems(i, bad)

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
                counts[label] = counts.get(label, 0) + m
                if not counts[label]:
                    del counts[label]
            if counts:
                self.below[a] = counts
            else:
                self.below.pop(a, None)
            own = self.status[a]
            if had != bool(counts) and own in BAD_STATUSES:
                delta = dict(delta)
                delta[own] = delta.get(own, 0) + (-1 if counts else 1)
                delta = {k: v for k, v in delta.items() if v}
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
                self.by_status[old] -= 1
                if not self.by_status[old]:
                    del self.by_status[old]
                self.by_status[new] = self.by_status.get(new, 0) + 1
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
        self._widen(self.start[i], self.end[i])
        was_unpriced = self.cost[i] != self.cost[i] and bool(self.tokens[i])
        if "usage" in patch:
            step = tokens_of(patch) - self.tokens[i]
            if step:
                self.tokens[i] += step
                self.sub_tokens[i] += step
                for a in self._ancestors(i):
                    self.sub_tokens[a] += step
        if "cost" in patch:
            old_c, new_c = self.cost[i], _float(patch["cost"])
            if not (old_c == new_c or (old_c != old_c and new_c != new_c)):
                self.cost[i] = new_c
                dc = (0.0 if new_c != new_c else new_c) - (0.0 if old_c != old_c else old_c)
                dp = (new_c == new_c) - (old_c == old_c)
                for a in (i, *self._ancestors(i)):
                    self.sub_cost[a] += dc
                    self.sub_priced[a] += dp
        du = (self.cost[i] != self.cost[i] and bool(self.tokens[i])) - was_unpriced
        if du:
            for a in (i, *self._ancestors(i)):
                self.sub_unpriced[a] += du
        if any(f in patch for f in _FIELDS):
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

    def _widen(self, start: float, end: float) -> None:
        for t in (start, end):
            if t == t:
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
        parent = self.parent[i]
        return row_summary(
            self.ids[i],
            self.ids[parent] if parent >= 0 else self.orphans.get(i),
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
        return _Listing(self, expanded)

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
        return Listed(order, ascending=False), hits.__contains__, len(hits)

    def rows(self, nodes: Sequence[int], expanded: Mapping[str, bool]) -> list[dict[str, Any]]:
        return [self._row(i, expanded) for i in nodes]

    def _row(self, i: int, expanded: Mapping[str, bool]) -> dict[str, Any]:
        has_kids = bool(self.kids.get(i))
        row: dict[str, Any] = {
            "node": self.summary(i),
            "depth": self.depth[i],
            "kids": has_kids,
            "open": has_kids and self.is_open(i, expanded),
            "roll": [
                self.sub_tokens[i],
                self.sub_cost[i],
                self.sub_priced[i],
                self.desc[i],
                self.tokens[i],
                self.sub_unpriced[i],
            ],
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


class _Listing:
    """The visible rows of a :class:`LiveIndex` with nothing filtered, for one expansion
    state, counted and sliced without listing them: a listed, open node's rows are its
    children (one row each) plus the rows below its open children, and only open nodes with
    children are visited (a batch node's 100,000 closed items are one subtraction)."""

    def __init__(self, index: LiveIndex, expanded: Mapping[str, bool]) -> None:
        self.index = index
        self.expanded = expanded
        self.sizes: dict[int, int] = {}
        # kids at depth >= DEFAULT_OPEN_DEPTH are closed unless the reader opened them
        self.opened: dict[int, list[int]] = {}
        pos, depth, kids, parent = index.pos, index.depth, index.kids, index.parent
        for node_id, is_open in expanded.items():
            j = pos.get(node_id)
            if is_open and j is not None and depth[j] >= DEFAULT_OPEN_DEPTH and j in kids:
                self.opened.setdefault(parent[j], []).append(j)

    def _open(self, i: int) -> bool:
        index = self.index
        return i in index.kids and index.is_open(i, self.expanded)

    def open_kids(self, i: int) -> list[tuple[int, int]]:
        """(position in the kid list, node) of ``i``'s children that are open with kids, in
        order (``i = -1``: the roots)."""
        index = self.index
        kids = index.roots if i < 0 else index.kids.get(i, [])
        if i < 0 or index.depth[i] + 1 < DEFAULT_OPEN_DEPTH:
            return [(k, c) for k, c in enumerate(kids) if self._open(c)]
        found = self.opened.get(i, [])
        return sorted((kids.index(c), c) for c in found)

    def size(self, i: int) -> int:
        """Rows below open node ``i`` (``-1``: every row)."""
        cached = self.sizes.get(i)
        if cached is not None:
            return cached
        index = self.index
        kids = index.roots if i < 0 else index.kids.get(i, [])
        n = len(kids) + sum(self.size(c) for _k, c in self.open_kids(i))
        self.sizes[i] = n
        return n

    @property
    def total(self) -> int:
        return self.size(-1)

    def slice(self, start: int, stop: int) -> list[int]:
        out: list[int] = []
        if stop > start:
            self._emit(-1, start, stop - start, out)
        return out

    def _emit(self, i: int, skip: int, need: int, out: list[int]) -> tuple[int, int]:
        """Rows below open node ``i``, ``skip`` of them left out, at most ``need`` taken."""
        index = self.index
        kids = index.roots if i < 0 else index.kids.get(i, [])
        at = 0
        for k, c in [*self.open_kids(i), (len(kids), -1)]:
            run = k - at  # closed (or childless) kids: one row each
            if skip >= run:
                skip -= run
            else:
                take = min(run - skip, need)
                out.extend(kids[at + skip : at + skip + take])
                need -= take
                skip = 0
                if not need:
                    return 0, 0
            if c < 0:
                break
            if skip:
                skip -= 1
            else:
                out.append(c)
                need -= 1
                if not need:
                    return 0, 0
            below = self.size(c)
            if skip >= below:
                skip -= below
            else:
                skip, need = self._emit(c, skip, need, out)
                if not need:
                    return 0, 0
            at = k + 1
        return skip, need

    def index_of(self, i: int) -> int:
        """Where node ``i`` is listed (-1: under a closed row)."""
        index = self.index
        chain = [i]
        p = index.parent[i]
        while p >= 0:
            if not self._open(p):
                return -1
            chain.append(p)
            p = index.parent[p]
        chain.reverse()
        at = -1  # the row of the (virtual) parent of the roots
        parent = -1
        for node in chain:
            kids = index.roots if parent < 0 else index.kids.get(parent, [])
            k = kids.index(node)
            before = k + sum(self.size(c) for kk, c in self.open_kids(parent) if kk < k)
            at += 1 + before
            parent = node
        return at
