"""Writing a stored trace: a trace in SQLite tables, written once, read by windows of rows
(:mod:`langfx_nb.agentic.trace_reader`).

A stored trace, in a file of its own (:func:`save_trace`) or in a batch's run manifest (the
same file as its items), is these tables:

- ``trace_info``: the format and version, the saved trace's header (session, summary, counts)
  and what the whole trace's view needs at once (node count, counts by status and kind, time
  span, where the records are);
- ``trace_rows``: per node in the order written (``seq``), what a row shows (id, parent id,
  kind, status, name, hint, times, cost, tokens, its rarer fields); ``trace_search`` its
  lowercase search text (a narrow table: a search scans only it);
- ``trace_tree``: per node in tree order (``rank``: depth first, children in the order
  written), its place in the tree (parent's rank, depth, descendants: the subtree is the ranks
  ``(rank, rank + desc]``, its number among rows of depth ≤ 2), subtree sums, "below" counts;
- ``trace_records``: the full node records as JSON arrays of consecutive records (``seq``: the
  first one's), or in a run manifest ``trace_refs``: each record's rowid in ``trace_nodes``.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import operator
import os
import sqlite3
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard, get_args

from .trace import NodeKind, NodeStatus, saved_nodes
from .trace_json import read_batches
from .trace_reader import (
    BLOCK,
    DEFAULT_OPEN_DEPTH,
    MAX_WINDOW,
    STORE_FORMAT,
    STORE_TABLES,
    STORE_VERSION,
    StoredTrace,
    db_text,
    is_store,
    malformed,
    open_store,
    py_text,
    row_summary,
    short,
)

__all__ = [
    "DEFAULT_OPEN_DEPTH",
    "MAX_WINDOW",
    "STORE_TABLES",
    "StoreWriter",
    "StoredTrace",
    "convert",
    "is_store",
    "node_hint",
    "open_store",
    "row_summary",
    "save_trace",
    "temporary",
    "write_store",
]

HINT_CHARS = 80  # what a row can show
_KINDS = frozenset(get_args(NodeKind))
_STATUSES = frozenset(get_args(NodeStatus))
_BAD = ("failed", "denied", "cancelled", "timed_out")
SCHEMA = """
CREATE TABLE trace_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE trace_records (seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE trace_refs (seq INTEGER PRIMARY KEY, ref INTEGER NOT NULL);
CREATE TABLE trace_rows (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, parent_id TEXT, kind TEXT NOT NULL,
    status TEXT NOT NULL, name TEXT NOT NULL, hint TEXT NOT NULL, start REAL, end REAL,
    cost REAL, tokens INTEGER NOT NULL, extra TEXT);
CREATE TABLE trace_search (seq INTEGER PRIMARY KEY, text BLOB NOT NULL);
CREATE TABLE trace_starts (grp TEXT PRIMARY KEY, starts BLOB NOT NULL);
CREATE TABLE trace_tree (
    rank INTEGER PRIMARY KEY, seq INTEGER NOT NULL, parent INTEGER, depth INTEGER NOT NULL,
    desc INTEGER NOT NULL, shallow_at INTEGER NOT NULL, sub_tokens INTEGER NOT NULL,
    sub_cost REAL NOT NULL, sub_priced INTEGER NOT NULL, sub_unpriced INTEGER NOT NULL,
    below TEXT);
"""
# built after the rows are written (faster than keeping them up to date row by row)
_INDEXES = """
CREATE UNIQUE INDEX trace_rows_id ON trace_rows(id);
CREATE UNIQUE INDEX trace_tree_seq ON trace_tree(seq);
CREATE INDEX trace_tree_parent ON trace_tree(parent);
CREATE INDEX trace_tree_shallow ON trace_tree(shallow_at) WHERE depth <= 2;
"""
# -- row values --------------------------------------------------------------------------------


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _text_of(value: Any) -> str:
    """The readable text of a message preview (``{role, text}``, a list of them) or a value."""
    if isinstance(value, str):
        return value
    if _is_map(value):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        if isinstance(value.get("turns"), list):
            return _text_of(value["turns"])
    if isinstance(value, list):
        texts = [_text_of(v) for v in value if _is_map(v)]
        users = [_text_of(v) for v in value if _is_map(v) and v.get("role") == "user"]
        return (users or texts or [""])[-1]
    return ""


def _short_value(value: Any) -> str:
    kind = type(value)
    if kind is int:
        text = str(value)
    elif kind is str:
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 30 else text[:29] + "…"


def node_hint(node: Mapping[str, Any]) -> str:
    """One line that tells same-named rows apart: a log's message, a query's prompt (and
    vars), a tool call's arguments. ``""`` when the record has nothing to show."""
    inputs = node.get("inputs")
    if not _is_map(inputs):
        return ""
    kind = node.get("kind")
    text = ""
    if kind == "log":
        text = str(inputs.get("message", ""))
    elif kind == "query":
        text = _text_of(inputs.get("prompt", inputs.get("rendered_prompt")))
        variables = inputs.get("vars")
        if _is_map(variables) and variables:
            shown = ", ".join(f"{k}={_short_value(v)}" for k, v in list(variables.items())[:4])
            text = f"{shown} · {text}" if text else shown
    elif kind == "tool_call":
        args = inputs.get("args")
        if _is_map(args):
            text = ", ".join([f"{k}={_short_value(v)}" for k, v in args.items()])
    if len(text) <= HINT_CHARS and text.isprintable() and "  " not in text:
        return text.strip()
    text = " ".join(text.split())
    return text if len(text) <= HINT_CHARS else text[: HINT_CHARS - 1] + "…"


def _number(value: Any, field: str) -> float | None:
    if value is None or type(value) is float:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field!r} must be a number or null")
    return float(value)


def _tokens(usage: Any) -> int:
    if usage is None:
        return 0
    if not _is_map(usage):
        raise TypeError("'usage' must be an object")
    total = usage.get("total_tokens")
    if type(total) is int:
        return total
    return sum(
        v
        for k in ("prompt_tokens", "completion_tokens")
        if type(v := usage.get(k)) is int and v >= 0
    )


def _row_values(x: Any, seq: int) -> tuple[Any, ...]:
    """What a stored row keeps of node record ``x`` (the ``seq``-th written), checked for
    what a row shows; anything else is checked when its record is read."""
    if type(x) is not dict:
        raise TypeError("must be an object")
    node_id = x["id"]
    if type(node_id) is not str:
        node_id = str(node_id)
    kind, status = x["kind"], x.get("status", "ok")
    if kind not in _KINDS or status not in _STATUSES:
        raise ValueError(f"unknown kind or status: {short(kind)}, {short(status)}")
    parent = x.get("parent_id")
    if parent is not None and type(parent) is not str:
        parent = str(parent)
    if parent == node_id:
        raise ValueError("the node is its own parent")
    name = x.get("name", "")
    if type(name) is not str:
        name = str(name)
    name = name.replace("\n", " ")  # a row is one line
    hint = (node_hint(x) if "inputs" in x else str(x.get("hint", ""))).replace("\n", " ")
    start = _number(x.get("start", 0.0), "start")
    end = _number(x.get("end"), "end")
    cost = _number(x.get("cost"), "cost")
    tokens = _tokens(x.get("usage"))
    err, decision, evicted = x.get("error"), x.get("decision"), x.get("evicted_children")
    extra = None
    err_text = ""
    if err is not None or decision is not None or evicted:
        more: dict[str, Any] = {}
        if err is not None:
            more["error"] = err
            err_text = (
                err
                if type(err) is str
                else json.dumps(err, ensure_ascii=False, separators=(",", ":"))
            )
        if decision is not None:
            if not _is_map(decision):
                raise TypeError("'decision' must be an object")
            more["decision"] = {
                k: decision[k] for k in ("outcome", "by", "asked_at", "decided_at") if k in decision
            }
        if evicted:
            if isinstance(evicted, bool) or not isinstance(evicted, int):
                raise TypeError("'evicted_children' must be an integer")
            more["evicted_children"] = evicted
        extra = json.dumps(more)
    search = f"{name} {kind} {status} {hint} {err_text}".replace("\n", " ").lower()
    return (
        seq, db_text(node_id), db_text(parent), kind, status, db_text(name), db_text(hint),
        start, end, cost, tokens, extra, search.encode("utf-8", "surrogatepass"),
    )  # fmt: skip


_STR: frozenset[type] = frozenset({str})
_STR_NONE: frozenset[type] = frozenset({str, type(None)})
_FLOAT: frozenset[type] = frozenset({float})
_FLOAT_NONE: frozenset[type] = frozenset({float, type(None)})
_DICT_NONE: frozenset[type] = frozenset({dict, type(None)})
_DICT: frozenset[type] = frozenset({dict})
_INT: frozenset[type] = frozenset({int})


class _Batch(NamedTuple):
    """A batch of nodes' stored rows (``trace_rows`` values) and search texts, with the
    columns the tree order is derived from."""

    rows: list[tuple[Any, ...]]
    searches: list[str | bytes]
    ids: list[str]
    parents: list[str | None]
    kinds: list[str]
    statuses: list[str]
    starts: list[float]  # NaN: none
    costs: list[float]  # NaN: none
    tokens: list[int]


def _columns(nodes: Sequence[Any], first: int) -> _Batch | None:
    """:func:`_row_values` of every node a field at a time, for records as the core writes
    them (ASCII ids, string names, float times and costs, usage totals); ``None`` for
    anything else, which is read node by node."""
    if not set(map(type, nodes)) <= _DICT:
        return None
    try:
        ids = [x["id"] for x in nodes]
        kinds = [x["kind"] for x in nodes]
    except KeyError:
        return None
    statuses = [x.get("status", "ok") for x in nodes]
    parents = [x.get("parent_id") for x in nodes]
    names = [x.get("name", "") for x in nodes]
    starts = [x.get("start", 0.0) for x in nodes]
    ends = [x.get("end") for x in nodes]
    costs = [x.get("cost") for x in nodes]
    usages = [x.get("usage") for x in nodes]
    if not (
        set(map(type, ids)) <= _STR
        and set(map(type, parents)) <= _STR_NONE
        and set(kinds) <= _KINDS
        and set(statuses) <= _STATUSES
        and set(map(type, names)) <= _STR
        and set(map(type, starts)) <= _FLOAT
        and set(map(type, ends)) <= _FLOAT_NONE
        and set(map(type, costs)) <= _FLOAT_NONE
        and set(map(type, usages)) <= _DICT_NONE
        and "".join(ids).isascii()
        and "".join(filter(None, parents)).isascii()
        and not any(map(operator.eq, ids, parents))
    ):
        return None
    tokens = [0 if u is None else u.get("total_tokens") for u in usages]
    if not set(map(type, tokens)) <= _INT:
        return None
    hints = [node_hint(x) if "inputs" in x else x.get("hint", "") for x in nodes]
    if not set(map(type, hints)) <= _STR:
        return None
    all_names, all_hints = "".join(names), "".join(hints)
    if "\n" in all_names or "\n" in all_hints:
        return None
    extras = [""] * len(nodes)  # "": none
    errors = [""] * len(nodes)
    for k, x in enumerate(nodes):
        if "error" in x or "decision" in x or "evicted_children" in x:
            try:
                row = _row_values(x, first + k)
            except (KeyError, TypeError, ValueError, OverflowError):
                return None
            extras[k] = row[11] or ""
            err = x.get("error")
            if err is not None:
                text = err if type(err) is str else json.dumps(err, separators=(",", ":"))
                errors[k] = text.replace("\n", " ")
    # one lowercase text a node, lowered as one string (no row holds a newline)
    text = "\n".join(map(" ".join, zip(names, kinds, statuses, hints, errors, strict=True)))
    text = text.lower()
    searches: list[str | bytes] = list(text.split("\n"))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: kept as it is, in bytes
            searches = [t.encode("utf-8", "surrogatepass") for t in text.split("\n")]
    # NaN for a missing number (SQLite stores NULL): a None costs more to bind
    nan = math.nan
    ends = [nan if t is None else t for t in ends]
    costs = [nan if c is None else c for c in costs]
    rows = list(
        zip(
            range(first, first + len(nodes)), ids, parents, kinds, statuses,
            names if all_names.isascii() else map(db_text, names),
            hints if all_hints.isascii() else map(db_text, hints),
            starts, ends, costs, tokens, extras, strict=True,
        )
    )  # fmt: skip
    return _Batch(rows, searches, ids, parents, kinds, statuses, starts, costs, tokens)


# -- writing -----------------------------------------------------------------------------------


class StoreWriter:
    """Writes one trace's tables into ``conn``: records and row values as they come (a batch
    at a time, in one transaction or several: a run manifest writes each record's row with
    it), then the tree order once every node is known (:meth:`finish`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        _script(conn, SCHEMA)
        self.pos: dict[str, int] = {}
        # per node, in lists: an array parses every item stored in it (PyArg_Parse), lists and
        # bytes do not (as in finish)
        self.parent: list[int] = []  # the parent's position; -1: none, -2: not seen yet
        self.later: dict[int, str] = {}  # parents written after their child
        self.status = bytearray()
        self.statuses: dict[str, int] = {}
        self.tokens: list[int] = []
        self.cost: list[float] = []
        self.kinds: dict[str, int] = {}
        self.refs = False  # the records stay in the file's trace_nodes
        self.start: list[float] = []  # NaN: no start time

    def add(self, nodes: Sequence[Any], body: bytes | Sequence[int] | None = None) -> None:
        """Add the next node records. ``body``: their JSON array as written (else made), or
        where each record stays: its rowid in the file's ``trace_nodes`` (a run manifest)."""
        if not nodes:
            return
        first = self.add_rows(nodes)
        if body is not None and not isinstance(body, bytes):
            self.add_refs(first, body)
            return
        if body is None:
            text = json.dumps(list(nodes), ensure_ascii=False)
            try:
                body = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: as a JSON escape
                body = json.dumps(list(nodes)).encode("ascii")
        self.conn.execute("INSERT INTO trace_records VALUES (?, ?)", (first, body))

    def add_rows(self, nodes: Sequence[Any]) -> int:
        """Write the rows of the next node records (their records are written apart:
        :meth:`add_refs`); the position of the first."""
        first = len(self.parent)
        try:
            batch = _columns(nodes, first)
        except RecursionError:  # a value nested too deeply: named node by node
            batch = None
        if batch is None or not self._take(batch):
            batch = self._checked(nodes, first)
            self._take(batch)
        conn = self.conn
        _insert(conn, "trace_rows", _ROW_VALUES, batch.rows)
        _insert(
            conn, "trace_search", _SEARCH_VALUES, list(zip(itertools.count(first), batch.searches))
        )
        return first

    def add_refs(self, first: int, refs: Sequence[int]) -> None:
        """Where the records from position ``first`` on stay: their rowids in the file's
        ``trace_nodes``."""
        self.refs = True
        _insert(self.conn, "trace_refs", "(?,?)", list(zip(itertools.count(first), refs)))

    def ids(self) -> list[str]:
        """The ids of the nodes added so far, in the order added."""
        return list(self.pos)

    def _take(self, batch: _Batch) -> bool:
        """Keep what the tree order needs of ``batch``, a column at a time; ``False``
        (nothing taken) when an id is used twice (:meth:`_checked` names it)."""
        pos, at, ids = self.pos, len(self.parent), batch.ids
        if len(set(ids)) != len(ids) or any(map(pos.__contains__, ids)):
            return False
        pos.update(zip(ids, itertools.count(at)))
        get = pos.get
        parents = [-1 if p is None else get(p, -2) for p in batch.parents]
        if -2 in parents:  # parents written after their child
            pairs = zip(parents, batch.parents, strict=True)
            for k, (p, parent_id) in enumerate(pairs, at):
                if p == -2 and parent_id is not None:
                    self.later[k] = parent_id
        self.parent.extend(parents)
        statuses = self.statuses
        for status in dict.fromkeys(batch.statuses):  # in the order first seen
            statuses.setdefault(status, len(statuses))
        self.status.extend(map(statuses.__getitem__, batch.statuses))
        for kind, n in Counter(batch.kinds).items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        self.tokens.extend(batch.tokens)
        self.cost.extend(batch.costs)
        self.start.extend(batch.starts)
        return True

    def _checked(self, nodes: Sequence[Any], first: int) -> _Batch:
        """Any records, node by node, checking each (a bad one raises, named)."""
        rows, searches, seen, pos = [], [], set(), self.pos
        for seq, x in enumerate(nodes, first):
            try:
                row = _row_values(x, seq)
            except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
                raise malformed(f"nodes[{seq}]", exc) from exc
            node_id = py_text(row[1])
            if node_id in seen or node_id in pos:
                raise ValueError(
                    f"malformed trace: nodes[{seq}]: the id {short(node_id)} is used twice"
                )
            seen.add(node_id)
            rows.append(row[:12])
            searches.append(row[12])
        _, ids, parents, kinds, statuses, _, _, starts, _, costs, tokens, _ = zip(
            *rows, strict=True
        )
        nan = math.nan
        return _Batch(
            rows, searches, [py_text(i) for i in ids], [py_text(p) for p in parents],
            list(kinds), list(statuses), [nan if t is None else t for t in starts],
            [nan if c is None else c for c in costs], list(tokens),
        )  # fmt: skip

    def finish(self, header: Mapping[str, Any]) -> int:
        """Derive the tree order, write it and the trace's info; the number of nodes."""
        n = len(self.parent)
        if "session" not in self.kinds:
            raise ValueError("malformed trace: it has no session root node")
        parent = self.parent
        for i, parent_id in self.later.items():  # a parent not in the trace: a root
            parent[i] = self.pos.get(parent_id, -1)
        self.pos, self.later = {}, {}
        # The children of i are child[first[i]:first[i + 1]], after the roots (parent -1).
        kids = [0] * (n + 1)
        for p in parent:
            kids[p] += 1  # a root (-1) counts in the last slot
        roots_n = kids[n]
        first = list(itertools.accumulate(kids[:n], initial=roots_n))
        del kids
        child = sorted(range(n), key=parent.__getitem__)
        # One walk depth first: per rank, the node, its parent's rank and its depth.
        order: list[int] = []
        up: list[int] = []  # -1: a root
        depth: list[int] = []
        stack = child[:roots_n][::-1]  # nodes to visit, the next last
        ups = [-1] * roots_n  # the rank of each one's parent
        pop, push, pop_up, push_up = stack.pop, stack.extend, ups.pop, ups.extend
        r = 0
        while stack:
            i, p = pop(), pop_up()
            order.append(i)
            up.append(p)
            depth.append(0 if p < 0 else depth[p] + 1)
            a, b = first[i], first[i + 1]
            if a != b:
                push(reversed(child[a:b]))
                push_up([r] * (b - a))
            r += 1
        if r < n:
            raise ValueError("malformed trace: some nodes' parents form a cycle")
        del child, first, stack, ups
        # Per rank, from the last up: descendants, subtree sums, and whether a problem is
        # below (a problem is counted once, where it started, as trace_rows.problems_below:
        # a node with a problem below it failed because of it, and is not counted again).
        bad_codes = {c for s, c in self.statuses.items() if s in _BAD}
        status = bytes(map(self.status.__getitem__, order))
        cost = list(map(self.cost.__getitem__, order))
        desc = [0] * n
        sub_t = list(map(self.tokens.__getitem__, order))
        sub_c = [0.0 if c != c else c for c in cost]
        sub_p = [0 if c != c else 1 for c in cost]
        sub_u = [1 if c != c and t else 0 for c, t in zip(cost, sub_t, strict=True)]
        del cost
        priced, unpriced = any(sub_p), any(sub_u)
        above_a_problem = bytearray(n)
        for r in range(n - 1, -1, -1):
            p = up[r]
            if p >= 0:
                desc[p] += desc[r] + 1
                sub_t[p] += sub_t[r]
                if priced:
                    sub_c[p] += sub_c[r]
                    sub_p[p] += sub_p[r]
                if unpriced:
                    sub_u[p] += sub_u[r]
                if above_a_problem[r] or status[r] in bad_codes:
                    above_a_problem[p] = 1
        names = {code: name for name, code in self.statuses.items()}
        by_status = {names[c]: self.status.count(c) for c in names}
        below: dict[int, dict[str, int]] = {}  # by rank
        for code in bad_codes:
            name = names[code]
            at = status.find(code)
            while at >= 0:
                if not above_a_problem[at]:
                    p = up[at]
                    while p >= 0:
                        counts = below.setdefault(p, {})
                        counts[name] = counts.get(name, 0) + 1
                        p = up[p]
                at = status.find(code, at + 1)
        below_at = {r: json.dumps(b) for r, b in below.items()}
        # a row's number among rows of depth <= 2 (counting those before it)
        shallow_at = list(itertools.accumulate((d <= 2 for d in depth), initial=0))
        conn = self.conn
        for at in range(0, n, _TREE_SLICE):  # the tree's rows in rank order, a slice at a time
            to = min(n, at + _TREE_SLICE)
            rows = list(
                zip(
                    range(at, to), order[at:to], up[at:to], depth[at:to], desc[at:to],
                    shallow_at[at:to], sub_t[at:to], sub_c[at:to], sub_p[at:to], sub_u[at:to],
                    map(below_at.get, range(at, to), itertools.repeat("")),
                    strict=True,
                )
            )  # fmt: skip
            _insert(conn, "trace_tree", _TREE_VALUES, rows)
        group_of = {c: _group(s) for s, c in self.statuses.items()}
        by_group: dict[str, list[float]] = {"running": [], "ok": [], "failed": []}
        for code, start in zip(self.status, self.start, strict=True):
            if start == start:
                by_group[group_of[code]].append(start)
        untimed = n - sum(map(len, by_group.values()))
        conn.executemany(
            "INSERT INTO trace_starts VALUES (?, ?)",
            [(g, array("d", sorted(v)).tobytes()) for g, v in by_group.items()],
        )
        _script(conn, _INDEXES)
        shallow = shallow_at[n]
        row = conn.execute(
            "SELECT min(start), max(max(coalesce(end, start)), start) FROM trace_rows"
        ).fetchone()
        span = None if row[0] is None else [row[0], max(row[0], row[1])]
        info = {
            "format": STORE_FORMAT,
            "version": STORE_VERSION,
            "header": {k: v for k, v in header.items() if k != "nodes"},
            "nodes": n,
            "counts": {"status": by_status, "kind": self.kinds},
            "shallow": shallow,
            "span": span,
            "records": "trace_nodes" if self.refs else "own",
            "untimed": untimed,
        }
        conn.executemany(
            "INSERT INTO trace_info VALUES (?, ?)",
            [(k, json.dumps(v, ensure_ascii=False)) for k, v in info.items()],
        )
        return n


_TREE_SLICE = 50_000  # tree rows made at a time (bounded memory)
_PER_INSERT = 200  # rows bound into one INSERT (about a third cheaper than one at a time)
# How a row's values are bound. A None costs far more to bind than a number or a string (the
# sqlite3 module looks for an adapter), so a missing number is bound as NaN (which SQLite
# stores as NULL), missing text as "" (nullif), and the search text as text (cast to a BLOB).
_ROW_VALUES = "(?,?,?,?,?,?,?,?,?,?,?,nullif(?,''))"
_SEARCH_VALUES = "(?,CAST(? AS BLOB))"
_TREE_VALUES = "(?,?,nullif(?,-1),?,?,?,?,?,?,?,nullif(?,''))"


def _insert(conn: sqlite3.Connection, table: str, values: str, rows: Sequence[Any]) -> None:
    """Insert ``rows`` into ``table``, each as ``values`` (``"(?,?)"``) takes it, many rows
    a statement."""
    full = len(rows) - len(rows) % _PER_INSERT
    if full:
        chain = itertools.chain.from_iterable
        conn.executemany(
            f"INSERT INTO {table} VALUES " + ",".join([values] * _PER_INSERT),
            [list(chain(rows[at : at + _PER_INSERT])) for at in range(0, full, _PER_INSERT)],
        )
    if full < len(rows):
        conn.executemany(f"INSERT INTO {table} VALUES {values}", rows[full:])


def _group(status: str) -> str:
    """The timeline overview's group of a node status."""
    return "running" if status in ("running", "waiting") else "failed" if status in _BAD else "ok"


def write_store(
    conn: sqlite3.Connection,
    header: Mapping[str, Any],
    batches: Iterable[Sequence[Any] | tuple[Sequence[Any], bytes | Sequence[int]]],
) -> int:
    """Write a trace's tables into ``conn`` (which holds none yet) in one transaction: its
    node records come in ``batches`` (a batch, or a batch with its JSON array as written or
    the rowids of its records in ``conn``'s ``trace_nodes``, where they stay),
    its other top-level fields in ``header`` (read once every batch is written). Returns the
    number of nodes. A node a row cannot show raises ``ValueError`` naming it (nothing is
    written)."""
    paused = gc.isenabled()
    gc.disable()  # millions of new objects would trigger it over and over
    if not conn.in_transaction:
        conn.execute("BEGIN")
    try:
        writer = StoreWriter(conn)
        for batch in batches:
            if isinstance(batch, tuple):
                writer.add(*batch)
            else:
                writer.add(batch)
        n = writer.finish(header)
    except BaseException:
        conn.rollback()
        raise
    finally:
        if paused:
            gc.enable()
    conn.commit()
    return n


def _script(conn: sqlite3.Connection, script: str) -> None:
    """Each statement of ``script`` in the transaction under way (``executescript`` would
    commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _blocks(nodes: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for at in range(0, len(nodes), BLOCK):
        yield nodes[at : at + BLOCK]


def save_trace(
    source: Any,
    path: str | os.PathLike[str],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write a stored trace to ``path`` (replaced as a whole once written) and return it.

    ``source`` is a ``Session`` (its ``trace_json()``), a saved trace's data, or the path of a
    trace JSON file written elsewhere, converted as a stream in bounded memory
    (``progress(bytes_read, file_size)`` after each batch of records). A source that is not a
    langfx_nb trace, or a node a row cannot show, raises ``ValueError`` before ``path`` is
    touched."""
    path = Path(path)
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        temp.unlink()
    try:
        conn = sqlite3.connect(temp)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            _write_source(conn, source, progress)
        finally:
            conn.close()
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return path


def _write_source(
    conn: sqlite3.Connection, source: Any, progress: Callable[[int, int], None] | None
) -> int:
    if isinstance(source, str | os.PathLike):
        file = Path(source)
        header: dict[str, Any] = {}
        try:
            return write_store(conn, header, read_batches(file, header, progress))
        except ValueError as exc:
            raise ValueError(f"{file}: {exc}") from exc
    data = source.trace_json() if callable(getattr(source, "trace_json", None)) else source
    nodes = saved_nodes(data)
    return write_store(conn, data, _blocks(nodes))


def convert(source: Any, progress: Callable[[int, int], None] | None = None) -> StoredTrace:
    """``source`` (what :func:`save_trace` takes) converted into a store that lives as long
    as the returned reader: a private temporary database, deleted when closed, so nothing is
    written beside a file or in a cache, and a file changed later is never read stale."""
    where = str(source) if isinstance(source, str | os.PathLike) else ""
    return temporary(lambda conn: _write_source(conn, source, progress), where)


def temporary(write: Callable[[sqlite3.Connection], Any], where: str = "") -> StoredTrace:
    """A stored trace that ``write(conn)`` writes into a private temporary database."""
    conn = sqlite3.connect("", check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=OFF")  # dropped, not rolled back, if writing fails
        write(conn)
        return StoredTrace(conn, where=where)
    except BaseException:
        conn.close()
        raise
