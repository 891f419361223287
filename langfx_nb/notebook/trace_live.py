"""A live trace as the views get it. A :class:`LiveIndex` folds node patches (:func:`row_patch`
of core events) into its columns, its counts exact as it goes, and answers a
``WindowedTrace``'s primitives, so its windows come from the same code as a stored trace's.
The views read the node JSON the core writes ("The node contract" in docs/agentic.md) under
the same names, plus ``hint`` (one line that tells same-named rows apart, :func:`view_node`)
and, in window rows, ``partial`` (cut to what a row needs: the detail pane asks for the rest).

Costs: a patch is O(1) (a child that came before its parent: its subtree's depths). A row's
subtree sums are brought up to date when rows are read, for the nodes changed since and the
ancestors whose sums that changes, each once. A listing visits only open nodes with children
(closed children are copied as one run); a search, the matches and their ancestors.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from ..agentic.trace_db import DECISION_KEYS, error_text, node_hint
from ..agentic.trace_reader import (
    BAD_STATUSES,
    DEFAULT_OPEN_DEPTH,
    GROUPS,
    LIVE,
    Listed,
    Listing,
    WindowedTrace,
    add_counts,
    evicted_counts,
    group_of,
    row_summary,
)
from .bridge import to_jsonable
from .trace_rows import tokens_of

__all__ = ["LiveIndex", "index_of", "row_patch", "subtrace", "view_node"]

#: What a row, its roll-ups and the search read of a node record.
ROW_FIELDS = (
    "id", "parent_id", "kind", "name", "status", "start", "end", "usage", "cost", "error",
    "decision", "evicted_children",
)  # fmt: skip
_EXTRA = ("error", "decision", "evicted_children")  # shown by a row when present
#: how many, tokens, cost, nodes priced, nodes that used tokens with no known price
Sums = tuple[float, ...]
_NO_SUMS: Sums = (0, 0, 0.0, 0, 0)
_NO_PROBLEMS: dict[str, int] = {}  # (never changed)
_NAN = float("nan")


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


def _bump(counts: dict[str, int], key: str, by: int) -> None:
    counts[key] = counts.get(key, 0) + by
    if not counts[key]:
        del counts[key]


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _NAN
    return float(value)


class LiveIndex(WindowedTrace):
    """The rows and exact totals of a growing trace: a column a field, nodes by arrival
    (columns, not an object a node, which the garbage collector would walk again and again)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent_id: list[str | None] = []  # as recorded (a parent not seen is no row)
        self.parent = array("i")  # the parent's row (-1: a root)
        self.depth = array("i")
        self.kids: dict[int, array[int]] = {}  # children's rows, by arrival
        self.roots = array("i")
        self.kind: list[str] = []
        self.status: list[str] = []
        self.name: list[str] = []
        self.hint: list[str] = []
        self.start = array("d")  # NaN: no time
        self.end = array("d")
        self.tokens = array("q")
        self.cost = array("d")  # NaN: no known price
        self.extra: dict[int, dict[str, Any]] = {}  # error, decision, evicted_children
        self.sums: list[Sums] = []  # over each node's descendants (see Sums)
        #: problems below each node by status, each counted once, where it started (an item
        #: that failed because its query failed is not counted again)
        self.below: dict[int, dict[str, int]] = {}
        self.sent: list[Sums] = []  # what each node's parent has of it (as last added)
        self.sent_below: dict[int, dict[str, int]] = {}
        self._waiting: dict[str, list[int]] = {}  # nodes whose parent is not seen yet
        self._stale: set[int] = set()  # nodes changed since their parents' sums were
        self.by_status: dict[str, int] = {}
        self.by_kind: dict[str, int] = {}
        #: counts of the nodes the session evicted before (they ended: these never change)
        self.evicted: dict[str, dict[str, int]] = {"status": {}, "kind": {}}
        self.lo = float("inf")
        self.hi = float("-inf")
        self._match: tuple[str, set[int]] | None = None
        self._starts: tuple[dict[str, list[float]], int] | None = None
        self._touched: set[int] = set()  # nodes changed since the last search

    def __len__(self) -> int:
        return len(self.ids)

    def apply(self, patch: Mapping[str, Any]) -> None:
        """Fold one node patch (``{"id", <fields>}``, a whole record or a change set)."""
        node_id = str(patch["id"])
        i = self.pos.get(node_id)
        if i is None:
            i = self._add(node_id, patch)
        old = self.status[i]
        self._update(i, patch)
        if old != self.status[i]:
            _bump(self.by_status, old, -1)
            _bump(self.by_status, self.status[i], 1)
        self._stale.add(i)
        if self._match is not None:
            self._touched.add(i)
        self._starts = None

    def _add(self, node_id: str, patch: Mapping[str, Any]) -> int:
        i = len(self.ids)
        parent_id = patch.get("parent_id")
        parent_id = None if parent_id is None else str(parent_id)
        p = -1 if parent_id is None else self.pos.get(parent_id)
        if p is None:  # a parent not seen yet (or never: a root)
            self._waiting.setdefault(str(parent_id), []).append(i)
            p = -1
        kind = str(patch.get("kind", "") or "")
        status = str(patch.get("status", "ok") or "ok")
        self.ids.append(node_id)
        self.pos[node_id] = i
        self.parent_id.append(parent_id)
        self.kind.append(kind)
        self.status.append(status)
        _bump(self.by_kind, kind, 1)
        _bump(self.by_status, status, 1)
        self.name.append("")
        self.hint.append("")
        for column in (self.start, self.end, self.cost):
            column.append(_NAN)
        self.tokens.append(0)
        self.sums.append(_NO_SUMS)
        self.sent.append(_NO_SUMS)
        self.parent.append(-1)
        self.depth.append(0)
        self._attach(i, p)
        for child in self._waiting.pop(node_id, ()):  # rare: children written before it
            if child != i and child not in self._ancestors(i):  # (else a cycle: a root)
                self.roots.remove(child)
                self._attach(child, i)
        return i

    def _attach(self, i: int, p: int) -> None:
        """Hang node ``i`` (and what is already below it) under ``p`` (-1: a root)."""
        self.parent[i], self.sent[i] = p, _NO_SUMS
        self.sent_below.pop(i, None)
        if p < 0:
            self.roots.append(i)
        else:
            self.kids.setdefault(p, array("i")).append(i)
            self._stale.add(i)
        stack = [(i, self.depth[p] + 1 if p >= 0 else 0)]
        while stack:  # (the common case: a new leaf)
            j, depth = stack.pop()
            self.depth[j] = depth
            stack.extend((k, depth + 1) for k in self.kids.get(j, ()))

    def _update(self, i: int, patch: Mapping[str, Any]) -> None:
        if "status" in patch:
            self.status[i] = str(patch["status"] or "ok")
        if "name" in patch:
            self.name[i] = str(patch["name"]).replace("\n", " ")  # a row is one line
        if "hint" in patch:
            self.hint[i] = str(patch["hint"] or "")
        if "start" in patch:
            self.start[i] = _float(patch["start"])
        if "end" in patch:
            self.end[i] = _float(patch["end"])
        for t in (self.start[i], self.end[i]):
            if t == t:  # NaN: no time
                self.lo, self.hi = min(self.lo, t), max(self.hi, t)
        if "usage" in patch:
            self.tokens[i] = tokens_of(patch)
        if "cost" in patch:
            self.cost[i] = _float(patch["cost"])
        for field in _EXTRA:
            if field not in patch:
                continue
            value = patch[field]
            if field == "decision" and isinstance(value, Mapping):
                value = {k: value[k] for k in DECISION_KEYS if k in value}
            extra = self.extra.pop(i, {})
            if value is None or value == 0:
                extra.pop(field, None)
            else:
                extra[field] = to_jsonable(value)
            if extra:
                self.extra[i] = extra

    def _ancestors(self, i: int) -> list[int]:
        out: list[int] = []
        p = self.parent[i]
        while p >= 0:
            out.append(p)
            p = self.parent[p]
        return out

    def _share(self, i: int) -> Sums:
        """What node ``i`` and all below it add to its parent's sums."""
        n, tokens, cost, priced, unpriced = self.sums[i]
        own_tokens, own_cost = self.tokens[i], self.cost[i]
        if own_cost == own_cost:  # (NaN: no known price)
            return n + 1, tokens + own_tokens, cost + own_cost, priced + 1, unpriced
        return n + 1, tokens + own_tokens, cost, priced, unpriced + (own_tokens > 0)

    def _problems(self, i: int) -> dict[str, int]:
        """What ``i``'s parent counts as gone wrong at or below it: what went wrong below
        it, else its own status if bad."""
        if i in self.below:
            return dict(self.below[i])
        return {self.status[i]: 1} if self.status[i] in BAD_STATUSES else _NO_PROBLEMS

    def _settle(self) -> None:
        """Bring the sums up to date, deepest nodes first: a changed node adds to its
        parent's sums what changed of its share since it last did, and its parent is
        looked at next (up to the first node whose share is as it was)."""
        levels = dict[int, set[int]]()
        for i in self._stale:
            levels.setdefault(self.depth[i], set()).add(i)
        self._stale = set()
        while levels:
            for i in levels.pop(max(levels)):
                p = self.parent[i]
                if p < 0:
                    continue
                share, problems = self._share(i), self._problems(i)
                old, old_problems = self.sent[i], self.sent_below.get(i, _NO_PROBLEMS)
                if share == old and problems == old_problems:
                    continue  # as it was: nothing above it changes
                if share != old:
                    self.sent[i] = share
                    self.sums[p] = tuple(
                        a + b - c for a, b, c in zip(self.sums[p], share, old, strict=True)
                    )
                if problems != old_problems:
                    self.sent_below[i] = problems
                    below = self.below.pop(p, {})
                    for label, n in problems.items():
                        _bump(below, label, n)
                    for label, n in old_problems.items():
                        _bump(below, label, -n)
                    if below:
                        self.below[p] = below
                levels.setdefault(self.depth[p], set()).add(p)

    def span(self) -> tuple[float, float] | None:
        return None if self.lo > self.hi else (self.lo, self.hi)

    def counts(self) -> dict[str, dict[str, int]]:
        return add_counts({"status": self.by_status, "kind": self.by_kind}, self.evicted)

    def start_times(self) -> tuple[dict[str, list[float]], int]:
        if self._starts is None:
            by: dict[str, list[float]] = {g: [] for g in GROUPS}
            untimed = 0
            for start, status in zip(self.start, self.status, strict=True):
                if start != start:  # NaN: no start time
                    untimed += 1
                else:
                    by[group_of(status)].append(start)
            for values in by.values():
                values.sort()
            self._starts = (by, untimed)
        return self._starts

    def roots_running(self) -> int:
        """Roots still running (the session root runs until disposed)."""
        return sum(1 for r in self.roots if self.status[r] in LIVE)

    def summary(self, i: int) -> dict[str, Any]:
        """What a row shows of node ``i`` (``partial``: the detail pane asks for the rest)."""
        return row_summary(
            self.ids[i], self.parent_id[i], self.kind[i], self.name[i], self.status[i],
            self.start[i], self.end[i], self.hint[i], self.cost[i], self.tokens[i],
            self.extra.get(i),
        )  # fmt: skip

    def _text(self, i: int) -> str:
        err = error_text(self.extra.get(i, {}).get("error"))
        name, kind, status, hint = self.name[i], self.kind[i], self.status[i], self.hint[i]
        text = f"{name} {kind} {status} {hint} {err}".lower()
        return text.replace("\n", " ")  # as stored: a query holding a newline finds nothing

    def _hits(self, query: str) -> set[int]:
        """Every node whose search text holds ``query`` (lowercase): the nodes changed since
        the last call for the same query are checked again, a new query checks them all."""
        if self._match is not None and self._match[0] == query:
            hits = self._match[1]
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
        """An open node's closed (or childless) children are copied as one run: only open
        nodes with children are visited (a batch node's 100,000 closed items are one copy)."""
        opened: dict[int, list[int]] = {}  # nodes at DEFAULT_OPEN_DEPTH or deeper, opened
        for node_id, is_open in expanded.items():
            j = self.pos.get(node_id)
            if is_open and j is not None and self.depth[j] >= DEFAULT_OPEN_DEPTH:
                opened.setdefault(self.parent[j], []).append(j)

        def open_kids(kids: array[int], i: int) -> list[int]:
            """Where the open children with kids are in ``kids`` (``i``'s), last first."""
            if i >= 0 and self.depth[i] + 1 >= DEFAULT_OPEN_DEPTH:
                at = (kids.index(c) for c in opened.get(i, ()) if c in self.kids)
            else:
                at = (k for k, c in enumerate(kids) if c in self.kids and self.is_open(c, expanded))
            return sorted(at, reverse=True)

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

    def _walk(self, keep: Callable[[int], bool] | None = None) -> Iterator[int]:
        """Nodes depth first (children by arrival), only those ``keep`` takes (and below)."""
        stack = [r for r in reversed(self.roots) if keep is None or keep(r)]
        while stack:
            i = stack.pop()
            yield i
            kids = reversed(self.kids.get(i, ()))
            stack.extend(kids if keep is None else (k for k in kids if keep(k)))

    def search(self, query: str) -> tuple[Listing, Callable[[int], bool], int]:
        hits = self._hits(query)
        keep: set[int] = set()
        for i in hits:
            while i >= 0 and i not in keep:
                keep.add(i)
                i = self.parent[i]
        order = array("i", self._walk(keep.__contains__))
        return Listed(order), hits.__contains__, len(hits)

    def rows(self, nodes: Sequence[int], expanded: Mapping[str, bool]) -> list[dict[str, Any]]:
        self._settle()
        return [self._row(i, expanded) for i in nodes]

    def _row(self, i: int, expanded: Mapping[str, bool]) -> dict[str, Any]:
        has_kids = i in self.kids
        _n, tokens, cost, priced, unpriced = self._share(i)
        row: dict[str, Any] = {
            "node": self.summary(i),
            "depth": self.depth[i],
            "kids": has_kids,
            "open": has_kids and self.is_open(i, expanded),
            "roll": [tokens, cost, priced, self.sums[i][0], self.tokens[i], unpriced],
        }
        if i in self.below:
            row["below"] = dict(self.below[i])
        return row

    def first_rows(self, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` rows depth first with everything open, as a window's rows."""
        return self.rows(list(islice(self._walk(), max(0, limit))), {})


def index_of(
    records: Iterable[Mapping[str, Any]], header: Mapping[str, Any] | None = None
) -> LiveIndex:
    """A :class:`LiveIndex` of whole node records (a session's trace so far), its counts
    exact when ``header`` (the trace's, as ``session.trace_json()``) says nodes were evicted."""
    index = LiveIndex()
    for record in records:
        patch = row_patch({"type": "node_start", "node": record})
        if patch is not None:
            index.apply(patch)
    if header is not None:
        index.evicted = evicted_counts(header, index.counts())
    return index


def subtrace(session: Any, node_ids: Iterable[str]) -> dict[str, Any] | None:
    """A saved-trace dict of the subtrees of ``node_ids`` in a live ``session``, with their
    ancestors up to the session root, so the strict reader takes it like any saved trace
    (the batch view's error groups, the evaluation report's trials). ``None`` when the
    session holds none of them any more."""
    from ..agentic.trace import TRACE_FORMAT, TRACE_VERSION

    records: dict[str, dict[str, Any]] = {}
    for node_id in node_ids:
        node = session.find(str(node_id))
        if node is None:
            continue
        chain = []  # its ancestors not listed yet, nearest first
        up = node.parent_id
        while up is not None and up not in records:
            parent = session.find(up)
            if parent is None:
                break
            chain.append(parent)
            up = parent.parent_id
        for n in reversed(chain):
            records[n.id] = n.to_json()
        for n in node.walk():
            records.setdefault(n.id, n.to_json())
    if not records:
        return None
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "session": {"id": session.id, "metadata": {}},
        "nodes": to_jsonable(list(records.values())),
    }


def view_node(raw: Mapping[str, Any], *, plain: bool = False) -> dict[str, Any]:
    """A core node record (an event's node, a change set, a saved node) as the views keep it:
    the same fields under the same names, plus ``hint``. ``plain``: already JSON data (a saved
    trace), used as is; otherwise copied, so later changes to a live record do not leak in."""
    node = dict(raw) if plain else to_jsonable(dict(raw))
    hint = node_hint(node)
    if hint:
        node["hint"] = hint
    return node
