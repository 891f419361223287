"""A compact index of a large saved trace, and the windows of rows the explorer's page asks for.

A trace of 1,000,000 nodes as Python dicts is gigabytes; here each node is a few numbers in
flat arrays (parent, kind, status, start, end, own and subtree tokens/cost, descendants) plus
its row text and lowercase search text in two UTF-8 byte strings, and its full record stays in
the file: :func:`open_index` reads a trace file in chunks, checks every node with the core's
strict node reader (``TraceNode.from_json``) and remembers where each record starts, so the
detail pane reads one record back on demand. A trace already in memory
(:meth:`TraceIndex.from_nodes`) keeps its records instead.

The page never holds the whole trace: it sends what it shows (expanded rows, filter, the range
of rows on screen plus a margin) and gets :meth:`TraceIndex.window` back: exact counts (nodes,
visible rows, matches, by status and kind) and the rows of that range with their roll-ups, so
every count the page shows is exact and a collapsed row says how many nodes it holds.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import operator
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any, get_args

from ..agentic.trace import NodeKind, NodeStatus
from .trace_data import node_hint
from .trace_rows import BAD_STATUSES, tokens_of
from .trace_timeline import StartsByGroup, bucket_counts

__all__ = ["WINDOW_NODES", "TraceIndex"]

#: Above this many nodes a saved trace is shown through windows (the page holds what it
#: shows); below it the page gets every node summary and works on its own.
WINDOW_NODES = 20_000
#: A trace file at least this large is read by :func:`open_index` (records left in the file).
INDEX_FILE_BYTES = 4 << 20
DEFAULT_OPEN_DEPTH = 2  # as the page: depth 0 and 1 open unless the reader toggled them
MAX_WINDOW = 2_000  # rows one window request may ask for
SUMMARY_CACHE = 20_000  # row summaries kept (scrolling back needs no file reads)
_KINDS = frozenset(get_args(NodeKind))
_STATUSES = frozenset(get_args(NodeStatus))
_NAN = float("nan")
_NUM = (int, float)
_ID, _KIND = operator.itemgetter("id"), operator.itemgetter("kind")
# the exact types a batch's column may hold for the fast path (``_all_of``)
_DICT: frozenset[type] = frozenset({dict})
_STR: frozenset[type] = frozenset({str})
_INT: frozenset[type] = frozenset({int})
_FLOAT: frozenset[type] = frozenset({float})
_STR_NONE: frozenset[type] = frozenset({str, type(None)})
_FLOAT_NONE: frozenset[type] = frozenset({float, type(None)})


def _all_of(values: Iterable[Any], types: frozenset[type]) -> bool:
    """Whether every value's exact type is one of ``types`` (``bool`` is not ``int``)."""
    return set(map(type, values)) <= types


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _number(value: Any, field: str) -> float:
    if type(value) is float:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field!r} must be a number or null")
    return float(value)


def _usage_tokens(usage: Any) -> int:
    if not isinstance(usage, Mapping):
        raise TypeError("'usage' must be an object")
    total = usage.get("total_tokens")
    if type(total) is int:
        return total
    return tokens_of({"usage": usage})


def _extra(err: Any, decision: Any, evicted: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if err is not None:
        out["error"] = err
    if decision is not None:
        if not isinstance(decision, Mapping):
            raise TypeError(f"'decision' must be an object, got {type(decision).__name__}")
        out["decision"] = {
            k: decision[k] for k in ("outcome", "by", "asked_at", "decided_at") if k in decision
        }
    if evicted:
        if isinstance(evicted, bool) or not isinstance(evicted, int):
            raise TypeError("'evicted_children' must be an integer")
        out["evicted_children"] = evicted
    return out


def _error_text(err: Any) -> str:
    """An error as the page's search (``JSON.stringify``) writes it."""
    if err is None:
        return ""
    if type(err) is str:
        return err
    return json.dumps(err, ensure_ascii=False, separators=(",", ":"))


def _malformed(where: str, exc: BaseException) -> ValueError:
    if isinstance(exc, KeyError):
        return ValueError(f"malformed trace: {where}: {exc.args[0]!r} is missing")
    message = str(exc)
    return ValueError(f"malformed trace: {where}: {message[:199]}")


class TraceIndex:
    """The structure and row values of a trace in flat arrays; records fetched by position."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent = array("i")
        self.kind = bytearray()
        self.status = bytearray()
        self.kinds: list[str] = []
        self.statuses: list[str] = []
        self.start = array("d")
        self.end = array("d")
        self.tokens = array("q")
        self.cost = array("d")  # NaN: no price known
        # per node, one line each: "name\x1fhint" as a row shows them, and the search text,
        # in UTF-8 (a Python str of all nodes would take 2 or 4 bytes for every character if
        # one somewhere is wide: an em dash, a CJK or "…" takes 2, an emoji 4), grown in place
        # batch by batch (pieces joined at the end left as much freed memory resident)
        self.shown: bytes | bytearray = b""
        self.shown_at = array("q")  # where each node's line starts in ``shown`` (bytes)
        self.search: bytes | bytearray = b""
        self.line = array("q")  # where each node's search text starts in ``search`` (bytes)
        self._shown_text, self._search_text = bytearray(), bytearray()
        #: a row's rarer fields by node: error, decision (what a row shows), evicted_children
        self.extra: dict[int, dict[str, Any]] = {}
        self.orphans: dict[int, str] = {}  # nodes whose parent is not in the trace
        self.header: dict[str, Any] = {}
        #: ``span()`` as saved with the index (``[]``: no times), else ``None``
        self.saved_span: list[float] | None = None
        # while building: parents not seen yet (a parent written after its child), by node
        self._later: dict[int, str] = {}
        self._record: Callable[[int], dict[str, Any]] = lambda i: {}
        self._codes: dict[str, dict[str, int]] = {"kind": {}, "status": {}}
        self._close: Callable[[], None] | None = None  # closes what records are read from
        self._summaries: dict[int, dict[str, Any]] = {}  # the last rows shown (bounded)
        self._rows_cache: tuple[dict[str, bool], array[int]] | None = None
        self._match_cache: tuple[str, tuple[bytearray, bytearray, array[int], int]] | None = None

    # -- building --------------------------------------------------------------------------

    def _code(self, table: list[str], field: str, value: str) -> int:
        codes = self._codes[field]
        code = codes.get(value)
        if code is None:
            code = codes[value] = len(table)
            table.append(value)
        return code

    def add_batch(self, nodes: list[Any], first: int, *, hints: bool = True) -> None:
        """Append the row values of ``nodes`` (``nodes[first]`` onwards in the trace).

        Only what a row, a roll-up and the search need is read and checked here (id, kind,
        status, times, usage, cost, decision); the full strict reader checks a record when
        its detail is read. ``hints``: derive each row's hint (else a record's ``hint``).
        Records as the core writes them are taken a field at a time over the whole batch;
        any other batch node by node, which also names what is wrong in a bad one."""
        if not self._add_columns(nodes, hints):
            self._add_nodes(nodes, first, hints)

    def _add_columns(self, nodes: list[Any], hints: bool) -> bool:
        """The common case, one field at a time; ``False`` (nothing added) for anything
        else: ids or names not strings, times or costs not floats, a duplicate id…"""
        if not _all_of(nodes, _DICT):
            return False
        try:
            ids = list(map(_ID, nodes))
            kinds = list(map(_KIND, nodes))
        except KeyError:
            return False
        statuses = [x.get("status", "ok") for x in nodes]
        parents = [x.get("parent_id") for x in nodes]
        starts = [x.get("start", 0.0) for x in nodes]
        ends = [x.get("end") for x in nodes]
        costs = [x.get("cost") for x in nodes]
        names = [x.get("name", "") for x in nodes]
        usages = [x.get("usage") for x in nodes]
        used = [v for v in usages if v is not None]
        if not (
            _all_of(ids, _STR)
            and _all_of(names, _STR)
            and set(kinds) <= _KINDS
            and set(statuses) <= _STATUSES
            and _all_of(parents, _STR_NONE)
            and not any(map(operator.eq, ids, parents))
            and _all_of(starts, _FLOAT)
            and _all_of(ends, _FLOAT_NONE)
            and _all_of(costs, _FLOAT_NONE)
            and _all_of(used, _DICT)
            and _all_of([v.get("total_tokens") for v in used], _INT)
        ):
            return False
        pos, at = self.pos, len(self.ids)
        pos.update(zip(ids, range(at, at + len(ids)), strict=True))
        if len(pos) != at + len(ids):  # an id used twice: the node-by-node path names it
            for node_id in ids:
                if pos.get(node_id, -1) >= at:
                    del pos[node_id]
            return False
        rare = [
            k
            for k, x in enumerate(nodes)
            if "error" in x or "decision" in x or "evicted_children" in x
        ]
        extras: dict[int, dict[str, Any]] = {}
        err_texts: dict[int, str] = {}
        try:
            for k in rare:
                x = nodes[k]
                err, decision, evicted = (
                    x.get("error"),
                    x.get("decision"),
                    x.get("evicted_children"),
                )
                if err is not None or decision is not None or evicted:
                    extras[at + k] = _extra(err, decision, evicted)
                    err_texts[k] = _error_text(err)
        except (TypeError, ValueError):
            for node_id in ids:
                del pos[node_id]
            return False
        self.extra.update(extras)
        self.ids.extend(ids)
        get = pos.get
        self.parent.extend([-1 if v is None else get(v, -2) for v in parents])
        for k in itertools.compress(range(len(parents)), (v == -2 for v in self.parent[at:])):
            self._later[at + k] = str(parents[k])
        for value in set(kinds):
            self._code(self.kinds, "kind", value)
        for value in set(statuses):
            self._code(self.statuses, "status", value)
        self.kind.extend(map(self._codes["kind"].__getitem__, kinds))
        self.status.extend(map(self._codes["status"].__getitem__, statuses))
        self.start.extend(starts)
        self.end.extend([_NAN if v is None else v for v in ends])
        self.cost.extend([_NAN if v is None else v for v in costs])
        self.tokens.extend([0 if v is None else v["total_tokens"] for v in usages])
        if hints:
            hint_of = [node_hint(x) if "inputs" in x else "" for x in nodes]
        else:
            hint_of = [x.get("hint", "") for x in nodes]
        shown = [f"{a}\x1f{b}" for a, b in zip(names, hint_of, strict=True)]
        texts = [
            f"{a} {k} {s} {h} " for a, k, s, h in zip(names, kinds, statuses, hint_of, strict=True)
        ]
        for k, text in err_texts.items():
            texts[k] += text
        self._add_text(shown, texts)
        return True

    def _add_nodes(self, nodes: list[Any], first: int, hints: bool) -> None:
        """Any batch, node by node, checking each (a bad one raises, named)."""
        ids, pos, later, parent_a = self.ids, self.pos, self._later, self.parent
        kind_codes, status_codes = self._codes["kind"], self._codes["status"]
        kinds_a, status_a = self.kind, self.status
        start_a, end_a, tokens_a, cost_a = self.start, self.end, self.tokens, self.cost
        extra = self.extra
        shown: list[str] = []
        texts: list[str] = []
        show, text_add = shown.append, texts.append
        at = first
        for node in nodes:
            if type(node) is not dict:
                raise ValueError(f"malformed trace: nodes[{at}]: must be an object")
            try:
                get = node.get
                node_id = node["id"]
                if type(node_id) is not str:
                    node_id = str(node_id)
                if node_id in pos:
                    raise ValueError(f"the id {node_id[:40]!r} is used twice")
                kind, status = node["kind"], get("status", "ok")
                if kind not in _KINDS or status not in _STATUSES:
                    raise ValueError(f"unknown kind or status: {_short(kind)}, {_short(status)}")
                parent = get("parent_id")
                if parent is not None:
                    if type(parent) is not str:
                        parent = str(parent)
                    if parent == node_id:
                        raise ValueError("the node is its own parent")
                start, end, cost = get("start", 0.0), get("end"), get("cost")
                start_a.append(_NAN if start is None else _number(start, "start"))
                end_a.append(_NAN if end is None else _number(end, "end"))
                cost_a.append(_NAN if cost is None else _number(cost, "cost"))
                usage = get("usage")
                tokens_a.append(0 if usage is None else _usage_tokens(usage))
                name = get("name", "")
                if type(name) is not str:
                    name = str(name)
                hint = (node_hint(node) if "inputs" in node else "") if hints else get("hint", "")
                err, decision, evicted = get("error"), get("decision"), get("evicted_children")
                if err is not None or decision is not None or evicted:
                    extra[at] = _extra(err, decision, evicted)
                    err_text = _error_text(err)
                else:
                    err_text = ""
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                raise _malformed(f"nodes[{at}]", exc) from None
            pos[node_id] = at
            ids.append(node_id)
            p = -1 if parent is None else pos.get(parent, -2)
            if p == -2 and parent is not None:
                later[at] = parent
            parent_a.append(p)
            k = kind_codes.get(kind)
            kinds_a.append(self._code(self.kinds, "kind", kind) if k is None else k)
            c = status_codes.get(status)
            status_a.append(self._code(self.statuses, "status", status) if c is None else c)
            show(f"{name}\x1f{hint}")
            text_add(f"{name} {kind} {status} {hint} {err_text}")
            at += 1
        self._add_text(shown, texts)

    def _add_text(self, shown: list[str], texts: list[str]) -> None:
        """One batch's row texts: name and hint as shown, and the lowercase search text, each
        one line per node in UTF-8 (``shown_at`` / ``line``: where each line starts)."""
        for lines, text, items, lower in (
            (self.shown_at, self._shown_text, shown, False),
            (self.line, self._search_text, texts, True),
        ):
            if not items:
                return
            chunk = "\n".join(items) + "\n"
            if chunk.count("\n") != len(items):  # a name or an error with line breaks
                items = [t.replace("\n", " ") for t in items]
                chunk = "\n".join(items) + "\n"
            if lower:
                low = chunk.lower()
                if len(low) != len(chunk):  # lowercase longer than the text (rare letters)
                    items = [t.lower() for t in items]
                    low = "\n".join(items) + "\n"
                chunk = low
            data = chunk.encode("utf-8", "surrogatepass")
            # the lines, to count their bytes (as many as characters in an ASCII batch)
            split: Sequence[Sized] = items if len(data) == len(chunk) else data.split(b"\n")
            lines.extend(
                itertools.accumulate(
                    (len(t) + 1 for t in split[: len(items) - 1]), initial=len(text)
                )
            )
            text += data

    def finish(self, *, whole: bool = True) -> None:
        """Derive the tree (children, depths, order, subtree sums) once every node is added.
        ``whole=False``: the nodes are the first part of a trace (no session root needed; a
        node whose parent is not among them is a root, its parent id kept for its row)."""
        n = len(self.ids)
        # a parent id not in the trace: kept for the row (its parent_id), the node is a root
        for i, parent_id in self._later.items():
            p = self.pos.get(parent_id, -1)
            self.parent[i] = p
            if p < 0:
                self.orphans[i] = parent_id
        self._later = {}
        self.shown, self.search = self._shown_text, self._search_text
        # children lists as one flat array (CSR): kids of i are child[first[i]:first[i + 1]]
        parent_of = self.parent
        kids_of = [0] * (n + 1)
        for p in parent_of:
            kids_of[p] += 1  # a root (-1) counts in the last slot
        roots_n = kids_of[n]
        self.first = array("i", itertools.accumulate(kids_of[:n], initial=0))
        # nodes sorted by parent (stable: in trace order): the roots, then each node's kids
        by_parent = array("i", sorted(range(n), key=parent_of.__getitem__))
        self.roots = roots = by_parent[:roots_n]
        self.child = child = by_parent[roots_n:]
        first = self.first
        # depth-first order (everything open) from the roots: a filter's rows are its kept
        # nodes sorted by rank, and the reverse order sums subtrees bottom up (nodes in a
        # parent cycle are not reached: they keep their own values)
        by_rank = array("i")
        visit = by_rank.append
        stack = list(reversed(roots))
        pop, push = stack.pop, stack.extend
        while stack:
            i = pop()
            visit(i)
            a, b = first[i], first[i + 1]
            if a != b:
                push(reversed(child[a:b]))
        reached = len(by_rank)
        if reached < n:  # unreachable nodes last, so every node has a rank
            marks = bytearray(n)
            for i in by_rank:
                marks[i] = 1
            by_rank.extend(i for i in range(n) if not marks[i])
        self.by_rank = by_rank
        self.rank = array("i", sorted(range(n), key=by_rank.__getitem__))
        depth = self.depth = array("i", bytes(4 * n))
        for i in itertools.islice(by_rank, reached):
            p = parent_of[i]
            if p >= 0:
                depth[i] = depth[p] + 1
        self.sub_tokens = sub_t = array("q", self.tokens)
        self.sub_cost = sub_c = array("d", (0.0 if c != c else c for c in self.cost))
        self.sub_priced = sub_p = array("i", (0 if c != c else 1 for c in self.cost))
        # nodes that used tokens with no known price: what a partial roll-up leaves out
        self.sub_unpriced = sub_u = array(
            "i", (1 if c != c and t else 0 for c, t in zip(self.cost, self.tokens, strict=True))
        )
        self.desc = desc = array("i", bytes(4 * n))
        priced = any(sub_p)
        unpriced = any(sub_u)
        for i in reversed(by_rank[:reached]):
            p = parent_of[i]
            if p >= 0:
                sub_t[p] += sub_t[i]
                desc[p] += desc[i] + 1
                if priced:
                    sub_c[p] += sub_c[i]
                    sub_p[p] += sub_p[i]
                if unpriced:
                    sub_u[p] += sub_u[i]
        # what went wrong below each node (only ancestors of failed/denied/… nodes)
        self.below: dict[int, dict[str, int]] = {}
        bad = {self._codes["status"][s] for s in BAD_STATUSES if s in self._codes["status"]}
        if bad:
            for i, code in enumerate(self.status):
                if code not in bad:
                    continue
                label = self.statuses[code]
                seen = {i}
                p = parent_of[i]
                while p >= 0 and p not in seen:
                    seen.add(p)
                    counts_p = self.below.setdefault(p, {})
                    counts_p[label] = counts_p.get(label, 0) + 1
                    p = parent_of[p]
        if whole and "session" not in self.kinds:
            raise ValueError("malformed trace: it has no session root node")

    @classmethod
    def from_nodes(
        cls, nodes: Iterable[Mapping[str, Any]], header: Mapping[str, Any] | None = None
    ) -> TraceIndex:
        """An index of node records already read (as the views keep them, with ``hint``)."""
        index = cls()
        records = list(nodes)
        for at in range(0, len(records), 10_000):
            index.add_batch(records[at : at + 10_000], at, hints=False)
        index.finish()
        index.header = dict(header or {})
        index._record = lambda i: dict(records[i])
        return index

    # -- reading ---------------------------------------------------------------------------

    def restore_codes(self) -> None:
        """Rebuild the kind and status code tables from ``kinds`` and ``statuses`` (an index
        whose arrays were restored from its sidecar file)."""
        self._codes = {
            "kind": {v: k for k, v in enumerate(self.kinds)},
            "status": {v: k for k, v in enumerate(self.statuses)},
        }

    def read_records_with(
        self, read: Callable[[int], dict[str, Any]], close: Callable[[], None]
    ) -> None:
        """Where records come from: ``read(i)`` gives node ``i``'s record (``close`` ends it)."""
        self._record, self._close = read, close

    def __len__(self) -> int:
        return len(self.ids)

    def record(self, node_id: str) -> dict[str, Any] | None:
        """The node's full record as the views keep it (with ``hint``), or ``None``."""
        i = self.pos.get(node_id)
        return None if i is None else self._record(i)

    def counts(self) -> dict[str, dict[str, int]]:
        """Exact node counts by status and by kind."""
        out: dict[str, dict[str, int]] = {"status": {}, "kind": {}}
        for field, codes, names in (
            ("status", self.status, self.statuses),
            ("kind", self.kind, self.kinds),
        ):
            for code, name in enumerate(names):
                n = codes.count(code)  # one pass in C per value (a handful of them)
                if n:
                    out[field][name] = n
        return out

    def span(self) -> tuple[float, float] | None:
        """The earliest start and the latest start or end (``None``: no times at all)."""
        if self.saved_span is not None:
            return None if not self.saved_span else (self.saved_span[0], self.saved_span[1])
        starts = list(itertools.filterfalse(math.isnan, self.start))
        if not starts:
            return None
        ends = list(itertools.filterfalse(math.isnan, self.end))
        return min(starts), max(max(starts), max(ends, default=starts[0]))

    def default_rows(self) -> array[int] | None:
        """The visible rows with nothing toggled, if already listed (saved with the index)."""
        cached = self._rows_cache
        if cached is None or cached[0]:
            return None
        return cached[1]

    def adopt_default_rows(self, rows: array[int]) -> None:
        """Take ``rows`` as the visible rows with nothing toggled (from the index's sidecar)."""
        self._rows_cache = ({}, rows)

    def summary(self, i: int) -> dict[str, Any]:
        """What a row shows of node ``i`` (``partial``: the detail pane asks for the rest)."""
        cached = self._summaries.get(i)
        if cached is not None:
            return cached
        if len(self._summaries) >= SUMMARY_CACHE:
            self._summaries.clear()
        cached = self._summaries[i] = self._summary(i)
        return cached

    def close(self) -> None:
        """Close the trace file (reopened if a record is read again)."""
        if self._close is not None:
            self._close()

    def _summary(self, i: int) -> dict[str, Any]:
        at, shown = self.shown_at[i], self.shown
        line = shown[at : shown.index(b"\n", at)].decode("utf-8", "surrogatepass")
        name, _, hint = line.partition("\x1f")
        parent = self.parent[i]
        return row_summary(
            self.ids[i],
            self.ids[parent] if parent >= 0 else self.orphans.get(i),
            self.kinds[self.kind[i]],
            name,
            self.statuses[self.status[i]],
            self.start[i],
            self.end[i],
            hint,
            self.cost[i],
            self.tokens[i],
            self.extra.get(i),
        )

    def _matches(self, query: str) -> tuple[bytearray, bytearray, array[int], int]:
        """Every node whose search text holds ``query`` (lowercase), and their ancestors:
        marks per node (1 = a match / kept), the kept nodes in tree order, the match count.

        Searched in UTF-8, which finds the same nodes: a character's bytes never appear
        inside another's, so bytes match only where the characters do. A match lies inside
        one node's line (lines hold no line break; a query with one matches nothing)."""
        cached = self._match_cache
        if cached is not None and cached[0] == query:
            return cached[1]
        text, line, n = self.search, self.line, len(self.ids)
        hits, keep = bytearray(n), bytearray(n)
        parent_of, rank, find, where = self.parent, self.rank, text.find, bisect.bisect_right
        kept: list[int] = []  # ranks of the kept nodes
        found = 0
        needle = query.encode("utf-8", "surrogatepass")
        at = find(needle) if "\n" not in query else -1
        while at >= 0:
            i = where(line, at) - 1
            hits[i] = 1
            found += 1
            j = i
            while j >= 0 and not keep[j]:
                keep[j] = 1
                kept.append(rank[j])
                j = parent_of[j]
            at = find(needle, line[i + 1] if i + 1 < n else len(text))
        kept.sort()
        rows = array("i", map(self.by_rank.__getitem__, kept))
        result = (hits, keep, rows, found)
        self._match_cache = (query, result)
        return result

    def _is_open(self, i: int, expanded: Mapping[str, bool]) -> bool:
        return expanded.get(self.ids[i], self.depth[i] < DEFAULT_OPEN_DEPTH)

    def _subtree_rows(self, top: int, expanded: Mapping[str, bool], out: array[int]) -> None:
        """The visible rows below open node ``top`` (not itself), in tree order."""
        first, child = self.first, self.child
        stack = list(reversed(child[first[top] : first[top + 1]]))
        ids, depth_of, pos = self.ids, self.depth, self._is_open
        while stack:
            i = stack.pop()
            out.append(i)
            if first[i] != first[i + 1] and pos(i, expanded):
                stack.extend(reversed(child[first[i] : first[i + 1]]))
        del ids, depth_of

    def rows(self, expanded: Mapping[str, bool], query: str = "") -> array[int]:
        """The visible rows (node positions) in tree order, as the page lists them: without a
        query a node's children follow it when it is open (the reader's choice, else depth
        < 2); with one, every match and its ancestors, all open. A toggle of one row
        splices its subtree in or out of the last list instead of walking the whole tree."""
        q = query.strip().lower()
        if q:
            return self._matches(q)[2]
        cached = self._rows_cache
        if cached is None:
            out = array("i")
            for r in self.roots:
                out.append(r)
                if self._is_open(r, expanded):
                    self._subtree_rows(r, expanded, out)
            self._rows_cache = (dict(expanded), out)
            return out
        before, out = cached
        changed = [k for k in set(before) | set(expanded) if before.get(k) != expanded.get(k)]
        depth_of = self.depth
        for node_id in changed:
            i = self.pos.get(node_id)
            if i is None or self.first[i] == self.first[i + 1]:
                continue
            try:
                at = out.index(i)
            except ValueError:
                continue  # inside a closed row: nothing shown changes
            d = depth_of[i]
            shown_open = at + 1 < len(out) and depth_of[out[at + 1]] > d
            want_open = self._is_open(i, expanded)
            if want_open and not shown_open:
                below = array("i")
                self._subtree_rows(i, expanded, below)
                out[at + 1 : at + 1] = below
            elif shown_open and not want_open:
                end = at + 1
                while end < len(out) and depth_of[out[end]] > d:
                    end += 1
                del out[at + 1 : end]
        self._rows_cache = (dict(expanded), out)
        return out

    def window(
        self,
        *,
        start: int = 0,
        count: int = 200,
        expanded: Mapping[str, bool] | None = None,
        query: str = "",
        selected: str | None = None,
    ) -> dict[str, Any]:
        """Rows ``[start, start + count)`` of the visible list, with exact totals."""
        expanded = expanded or {}
        q = query.strip().lower()
        order = self.rows(expanded, q)
        hits, keep, _rows, found = self._matches(q) if q else (None, None, None, 0)
        depths = self.depth
        total = len(order)
        start = max(0, min(int(start), max(0, total - 1)))
        count = max(0, min(int(count), MAX_WINDOW))
        first, child = self.first, self.child
        rows = []
        for k in range(start, min(total, start + count)):
            i = order[k]
            depth = depths[i]
            a, b = first[i], first[i + 1]
            has_kids = a != b if keep is None else any(keep[c] for c in child[a:b])
            is_open = has_kids and (
                keep is not None or expanded.get(self.ids[i], depth < DEFAULT_OPEN_DEPTH)
            )
            row: dict[str, Any] = {
                "node": self.summary(i),
                "depth": depth,
                "kids": has_kids,
                "open": is_open,
                "roll": [
                    self.sub_tokens[i],
                    self.sub_cost[i],
                    self.sub_priced[i],
                    self.desc[i],
                    self.tokens[i],
                    self.sub_unpriced[i],
                ],
            }
            if hits is not None and hits[i]:
                row["match"] = True
            below = self.below.get(i)
            if below:
                row["below"] = below
            rows.append(row)
        out: dict[str, Any] = {
            "start": start,
            "total": total,
            "nodes": len(self.ids),
            "rows": rows,
            "counts": self.counts_cached(),
        }
        if hits is not None:
            out["matches"] = found
        if selected is not None and selected in self.pos:
            try:
                out["selected_index"] = order.index(self.pos[selected])
            except ValueError:
                out["selected_index"] = -1
        return out

    def timeline(self, lo: float, hi: float, buckets: int) -> dict[str, Any]:
        """Exact node counts per time bucket of ``[lo, hi]`` (see :func:`bucket_counts`)."""
        starts = getattr(self, "_starts", None)
        if starts is None:
            labels = self.statuses
            starts = self._starts = StartsByGroup(self.start, map(labels.__getitem__, self.status))
        return bucket_counts(starts, lo, hi, buckets)

    def counts_cached(self) -> dict[str, dict[str, int]]:
        cached = getattr(self, "_counts", None)
        if cached is None:
            cached = self._counts = self.counts()
        return cached

    def first_rows(self, limit: int) -> Iterator[tuple[int, int]]:
        """The first ``limit`` nodes depth first (everything open), with their depths."""
        first, child = self.first, self.child
        stack: list[tuple[int, int]] = [(r, 0) for r in reversed(self.roots)]
        shown = 0
        while stack and shown < limit:
            i, depth = stack.pop()
            yield i, depth
            shown += 1
            stack.extend((k, depth + 1) for k in reversed(child[first[i] : first[i + 1]]))


def row_summary(
    node_id: str,
    parent_id: str | None,
    kind: str,
    name: str,
    status: str,
    start: float,
    end: float,
    hint: str,
    cost: float,
    tokens: int,
    more: dict[str, Any] | None,
) -> dict[str, Any]:
    """What a row shows of a node (NaN: no time or price; ``partial``: the detail pane asks
    for the rest), the same for a saved trace's index and a live one."""
    out: dict[str, Any] = {
        "id": node_id,
        "parent_id": parent_id,
        "kind": kind,
        "name": name,
        "status": status,
        "start": None if start != start else start,
        "end": None if end != end else end,
    }
    if hint:
        out["hint"] = hint
    if cost == cost:
        out["cost"] = cost
    if tokens:
        out["usage"] = {"total_tokens": tokens}
    if more:
        out.update(more)
    out["partial"] = True
    return out
