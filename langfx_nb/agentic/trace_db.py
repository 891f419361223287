"""The stored trace: a trace in SQLite tables, written once, read by windows of rows.

A stored trace is three tables, in a file of its own (:func:`save_trace`) or in a batch's run
manifest (the same file as its items):

- ``trace_info``: the format and version, the saved trace's header (session, summary, counts)
  and what the whole trace's view needs at once (node count, counts by status and kind, time
  span);
- ``trace_rows``: one row per node in tree order (``rank``: depth first, children in the order
  written), with what a row shows (id, kind, status, name, hint, times, tokens, cost), its
  place in the tree (parent's rank, depth, descendants: the subtree is the ranks
  ``(rank, rank + desc]``), its subtree sums and a lowercase search text;
- ``trace_records``: the full node records, as JSON arrays of consecutive records (``seq``: the
  first record's position in the order written; a row's ``seq`` finds its record).

:class:`StoredTrace` answers the explorer's questions with a few queries each: the exact counts,
a window of visible rows for what the reader expanded or collapsed (default: depth 0 and 1
open), a search (every match and its ancestors), a node's full record, the timeline's counts.
A file from elsewhere is data: a damaged or hostile one raises one ``ValueError``; no answer
loops or holds more than a bounded part of the file.
"""

from __future__ import annotations

import bisect
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
from typing import Any, TypeGuard, get_args

from .trace import NodeKind, NodeStatus, TraceNode, check_trace_header, saved_nodes
from .trace_json import read_batches, regular_file

__all__ = [
    "DEFAULT_OPEN_DEPTH",
    "MAX_WINDOW",
    "StoredTrace",
    "is_store",
    "node_hint",
    "open_store",
    "row_summary",
    "save_trace",
    "write_store",
]

STORE_FORMAT = "langfx_nb.trace_store"
STORE_TABLES = ("trace_info", "trace_records", "trace_refs", "trace_rows", "trace_tree")
STORE_VERSION = 1
DEFAULT_OPEN_DEPTH = 2  # as the page: depth 0 and 1 open unless the reader toggled them
MAX_WINDOW = 2_000  # rows one window may hold
HINT_CHARS = 80  # what a row can show
MAX_RECORDS_BYTES = 256 << 20  # a stored block of records larger than this is refused
_BLOCK = 1_000  # records per stored block, when written from records in memory
_CHUNK = 500  # values bound into one SQL statement
_KINDS = frozenset(get_args(NodeKind))
_STATUSES = frozenset(get_args(NodeStatus))
_BAD = ("failed", "denied", "cancelled", "timed_out")
_LIVE = ("running", "waiting")
_SQLITE_MAGIC = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE trace_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE trace_records (seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE trace_refs (seq INTEGER PRIMARY KEY, ref INTEGER NOT NULL);
CREATE TABLE trace_rows (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, parent_id TEXT, kind TEXT NOT NULL,
    status TEXT NOT NULL, name TEXT NOT NULL, hint TEXT NOT NULL, start REAL, end REAL,
    cost REAL, tokens INTEGER NOT NULL, extra TEXT, search TEXT NOT NULL);
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
_ROW = (
    "SELECT t.rank, r.id, t.parent, r.parent_id, t.depth, t.desc, r.kind, r.status, r.name,"
    " r.hint, r.start, r.end, r.cost, r.tokens, t.sub_tokens, t.sub_cost, t.sub_priced,"
    " t.sub_unpriced, r.extra, t.below FROM trace_tree t JOIN trace_rows r ON r.seq = t.seq"
)


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
        raise ValueError(f"unknown kind or status: {_short(kind)}, {_short(status)}")
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
        seq, _db(node_id), _db(parent), kind, status, _db(name), _db(hint), start, end, cost,
        tokens, extra, search.encode("utf-8", "surrogatepass"),
    )  # fmt: skip


def _db(text: str | None) -> str | bytes | None:
    """Text as SQLite keeps it: a ``str``, or its UTF-8 bytes when it holds a lone surrogate
    (JSON may: ``"\\ud800"``), which SQLite text cannot."""
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _py(value: Any) -> Any:
    """What :func:`_db` stored, as text again."""
    return value.decode("utf-8", "surrogatepass") if type(value) is bytes else value


_STR: frozenset[type] = frozenset({str})
_STR_NONE: frozenset[type] = frozenset({str, type(None)})
_FLOAT: frozenset[type] = frozenset({float})
_FLOAT_NONE: frozenset[type] = frozenset({float, type(None)})
_DICT_NONE: frozenset[type] = frozenset({dict, type(None)})
_RARE = ("error", "decision", "evicted_children")


def _columns(nodes: Sequence[Any], first: int) -> list[tuple[Any, ...]] | None:
    """:func:`_row_values` of every node a field at a time, for records as the core writes
    them (ASCII ids, string names, float times and costs, usage totals); ``None`` for
    anything else, which is read node by node."""
    if not all(type(x) is dict for x in nodes):
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
        and all(map(str.isascii, ids))
        and set(map(type, parents)) <= _STR_NONE
        and set(kinds) <= _KINDS
        and set(statuses) <= _STATUSES
        and set(map(type, names)) <= _STR
        and set(map(type, starts)) <= _FLOAT
        and set(map(type, ends)) <= _FLOAT_NONE
        and set(map(type, costs)) <= _FLOAT_NONE
        and set(map(type, usages)) <= _DICT_NONE
        and not any(map(operator.eq, ids, parents))
    ):
        return None
    tokens = [0 if u is None else u.get("total_tokens") for u in usages]
    if not set(map(type, tokens)) <= {int} or not all(p is None or p.isascii() for p in parents):
        return None
    hints = [node_hint(x) if "inputs" in x else x.get("hint", "") for x in nodes]
    if not set(map(type, hints)) <= _STR:
        return None
    if any("\n" in t for t in names) or any("\n" in t for t in hints):
        return None
    extras: list[str | None] = [None] * len(nodes)
    errors = [""] * len(nodes)
    for k, x in enumerate(nodes):
        if "error" in x or "decision" in x or "evicted_children" in x:
            try:
                row = _row_values(x, first + k)
            except (KeyError, TypeError, ValueError, OverflowError):
                return None
            extras[k] = row[11]
            err = x.get("error")
            if err is not None:
                errors[k] = err if type(err) is str else json.dumps(err, separators=(",", ":"))
    searches = [
        f"{a} {k} {s} {h} {e}".replace("\n", " ").lower().encode("utf-8", "surrogatepass")
        for a, k, s, h, e in zip(names, kinds, statuses, hints, errors, strict=True)
    ]
    return list(
        zip(
            range(first, first + len(nodes)), ids, parents, kinds, statuses,
            [n if n.isascii() else _db(n) for n in names],
            [_db(h) for h in hints], starts, ends, costs, tokens, extras, searches,
            strict=True,
        )
    )  # fmt: skip


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _malformed(where: str, exc: BaseException) -> ValueError:
    if isinstance(exc, KeyError):
        return ValueError(f"malformed trace: {where}: {exc.args[0]!r} is missing")
    return ValueError(f"malformed trace: {where}: {str(exc)[:199]}")


# -- writing -----------------------------------------------------------------------------------


class _Writer:
    """Writes one trace's tables into ``conn``: records and row values as they come (a batch
    at a time), then the tree order once every node is known (:meth:`finish`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        _script(conn, SCHEMA)
        self.pos: dict[str, int] = {}
        self.parent = array("i")  # the parent's position; -1: none, -2: not seen yet
        self.later: dict[int, str] = {}  # parents written after their child
        self.status = bytearray()
        self.statuses: dict[str, int] = {}
        self.tokens = array("q")
        self.cost = array("d")
        self.kinds: dict[str, int] = {}
        self.refs = False  # the records stay in the file's trace_nodes

    def add(self, nodes: Sequence[Any], body: bytes | Sequence[int] | None = None) -> None:
        """Add the next node records. ``body``: their JSON array as written (else made), or
        where each record stays: its rowid in the file's ``trace_nodes`` (a run manifest)."""
        if not nodes:
            return
        first = len(self.parent)
        rows = _columns(nodes, first)
        if rows is None or not self._add_rows(rows):
            rows = self._add_nodes(nodes, first)
        self.conn.executemany("INSERT INTO trace_rows VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        if body is not None and not isinstance(body, bytes):
            self.refs = True
            refs = zip(range(first, first + len(nodes)), body, strict=True)
            self.conn.executemany("INSERT INTO trace_refs VALUES (?, ?)", refs)
            return
        if body is None:
            text = json.dumps(list(nodes), ensure_ascii=False)
            try:
                body = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: as a JSON escape
                body = json.dumps(list(nodes)).encode("ascii")
        self.conn.execute("INSERT INTO trace_records VALUES (?, ?)", (first, body))

    def _add_rows(self, rows: list[tuple[Any, ...]]) -> bool:
        """Take the rows :func:`_columns` made, a column at a time; ``False`` (nothing
        taken) when an id is used twice (the node-by-node path names it)."""
        pos, at = self.pos, len(self.parent)
        ids = [r[1] for r in rows]
        if len(set(ids)) != len(ids) or any(map(pos.__contains__, ids)):
            return False
        pos.update(zip(ids, range(at, at + len(ids)), strict=True))
        get, later = pos.get, self.later
        for k, r in enumerate(rows):
            parent = r[2]
            if parent is None:
                self.parent.append(-1)
            else:
                p = get(parent, -2)
                self.parent.append(p)
                if p == -2:
                    later[at + k] = parent
        statuses = self.statuses
        for status in {r[4] for r in rows}:
            statuses.setdefault(status, len(statuses))
        self.status.extend([statuses[r[4]] for r in rows])
        for kind, n in Counter([r[3] for r in rows]).items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        self.tokens.extend([r[10] for r in rows])
        self.cost.extend([math.nan if r[9] is None else r[9] for r in rows])
        return True

    def _add_nodes(self, nodes: Sequence[Any], first: int) -> list[tuple[Any, ...]]:
        """Any records, node by node, checking each (a bad one raises, named)."""
        rows = []
        pos, later, parent_a = self.pos, self.later, self.parent
        statuses, status_a, kinds = self.statuses, self.status, self.kinds
        tokens_a, cost_a = self.tokens, self.cost
        seq = first
        for x in nodes:
            try:
                row = _row_values(x, seq)
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                raise _malformed(f"nodes[{seq}]", exc) from exc
            node_id, parent = _py(row[1]), _py(row[2])
            if node_id in pos:
                raise ValueError(
                    f"malformed trace: nodes[{seq}]: the id {_short(node_id)} is used twice"
                )
            pos[node_id] = seq
            if parent is None:
                parent_a.append(-1)
            else:
                p = pos.get(parent, -2)
                parent_a.append(p)
                if p == -2:
                    later[seq] = parent
            code = statuses.get(row[4])
            if code is None:
                code = statuses[row[4]] = len(statuses)
            status_a.append(code)
            kinds[row[3]] = kinds.get(row[3], 0) + 1
            tokens_a.append(row[10])
            cost_a.append(math.nan if row[9] is None else row[9])
            rows.append(row)
            seq += 1
        return rows

    def finish(self, header: Mapping[str, Any]) -> int:
        """Derive the tree order, write it and the trace's info; the number of nodes."""
        n = len(self.parent)
        if "session" not in self.kinds:
            raise ValueError("malformed trace: it has no session root node")
        parent = self.parent
        for i, parent_id in self.later.items():  # a parent not in the trace: a root
            parent[i] = self.pos.get(parent_id, -1)
        self.pos, self.later = {}, {}
        # children as one flat array (CSR): the kids of i are child[first[i]:first[i + 1]]
        kids = [0] * (n + 1)
        for p in parent:
            kids[p] += 1  # a root (-1) counts in the last slot
        roots_n = kids[n]
        first = array("i", itertools.accumulate(kids[:n], initial=0))
        del kids
        by_parent = sorted(range(n), key=parent.__getitem__)
        roots, child = by_parent[:roots_n], array("i", by_parent[roots_n:])
        del by_parent
        order = array("i")  # nodes depth first
        visit = order.append
        stack = list(reversed(roots))
        pop, push = stack.pop, stack.extend
        while stack:
            i = pop()
            visit(i)
            a, b = first[i], first[i + 1]
            if a != b:
                push(reversed(child[a:b]))
        if len(order) < n:
            raise ValueError("malformed trace: some nodes' parents form a cycle")
        del child, first, stack
        depth = array("i", bytes(4 * n))
        for i in order:
            p = parent[i]
            if p >= 0:
                depth[i] = depth[p] + 1
        desc = array("i", bytes(4 * n))
        sub_t = array("q", self.tokens)
        sub_c = array("d", [0.0 if c != c else c for c in self.cost])
        sub_p = array("i", [0 if c != c else 1 for c in self.cost])
        sub_u = array(
            "i", [1 if c != c and t else 0 for c, t in zip(self.cost, self.tokens, strict=True)]
        )
        priced, unpriced = any(sub_p), any(sub_u)
        for i in reversed(order):
            p = parent[i]
            if p >= 0:
                desc[p] += desc[i] + 1
                sub_t[p] += sub_t[i]
                if priced:
                    sub_c[p] += sub_c[i]
                    sub_p[p] += sub_p[i]
                if unpriced:
                    sub_u[p] += sub_u[i]
        names = {code: status for status, code in self.statuses.items()}
        by_status = {names[c]: self.status.count(c) for c in names}
        below: dict[int, dict[str, int]] = {}
        for code in (c for s, c in self.statuses.items() if s in _BAD):
            status = names[code]
            at = self.status.find(code)
            while at >= 0:
                p = parent[at]
                while p >= 0:
                    counts = below.setdefault(p, {})
                    counts[status] = counts.get(status, 0) + 1
                    p = parent[p]
                at = self.status.find(code, at + 1)

        rank = array("i", bytes(4 * n))
        for r, i in enumerate(order):
            rank[i] = r

        def tree() -> Iterator[tuple[Any, ...]]:
            shallow = 0
            for r, i in enumerate(order):
                p = parent[i]
                p = rank[p] if p >= 0 else -1
                b = below.get(i)
                d = depth[i]
                yield (
                    r, i, None if p < 0 else p, d, desc[i], shallow, sub_t[i], sub_c[i],
                    sub_p[i], sub_u[i], None if b is None else json.dumps(b),
                )  # fmt: skip
                if d <= 2:
                    shallow += 1

        conn = self.conn
        conn.executemany("INSERT INTO trace_tree VALUES (?,?,?,?,?,?,?,?,?,?,?)", tree())
        _script(conn, _INDEXES)
        shallow = sum(1 for d in depth if d <= 2)
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
        }
        conn.executemany(
            "INSERT INTO trace_info VALUES (?, ?)",
            [(k, json.dumps(v, ensure_ascii=False)) for k, v in info.items()],
        )
        return n


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
        writer = _Writer(conn)
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
    for at in range(0, len(nodes), _BLOCK):
        yield nodes[at : at + _BLOCK]


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
        write(conn)
        return StoredTrace(conn, where=where)
    except BaseException:
        conn.close()
        raise


# -- reading -----------------------------------------------------------------------------------


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that begins as an SQLite database does."""
    try:
        regular_file(Path(path))
        with open(path, "rb") as file:
            return file.read(16) == _SQLITE_MAGIC
    except (OSError, ValueError):
        return False


def open_store(path: str | os.PathLike[str]) -> StoredTrace:
    """The stored trace in the SQLite file at ``path`` (a ``save_trace`` file or a run
    manifest), opened read-only. ``ValueError`` for anything else."""
    where = Path(path)
    regular_file(where)
    try:
        conn = sqlite3.connect(
            f"{where.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise ValueError(f"{where}: not a stored trace ({exc})") from exc
    try:
        return StoredTrace(conn, where=str(where))
    except BaseException:
        conn.close()
        raise


class StoredTrace:
    """A stored trace's reader: counts, windows, search and records, each a few queries."""

    def __init__(self, conn: sqlite3.Connection, *, where: str = "") -> None:
        self.conn = conn
        self.where = where
        conn.execute("PRAGMA query_only=ON")
        info = {k: self._json(v, k) for k, v in self._query("SELECT key, value FROM trace_info")}
        if info.get("format") != STORE_FORMAT:
            raise self._error("not a stored langfx_nb trace")
        if info.get("version") != STORE_VERSION:
            raise self._error(f"unsupported stored trace version: {_short(info.get('version'))}")
        try:
            self.header: dict[str, Any] = dict(info["header"])
            check_trace_header(self.header)
            self.nodes = int(info["nodes"])
            self.shallow = int(info["shallow"])
            counts = info["counts"]
            self._counts = {
                f: {str(k): int(v) for k, v in counts[f].items()} for f in ("status", "kind")
            }
            span = info["span"]
            self._span = None if span is None else (float(span[0]), float(span[1]))
            if info.get("records", "own") not in ("own", "trace_nodes"):
                raise ValueError("records")
            self._external = info.get("records") == "trace_nodes"
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise self._error(f"damaged trace_info ({_short(str(exc))})") from exc
        self._search: tuple[str, array[int], bytearray, int] | None = None

    # -- plumbing ----------------------------------------------------------------------------

    def _error(self, message: str) -> ValueError:
        return ValueError(f"{self.where}: {message}" if self.where else message)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise self._error(f"not a readable stored trace ({exc})") from exc

    def _json(self, text: Any, what: str) -> Any:
        if not isinstance(text, str | bytes) or len(text) > MAX_RECORDS_BYTES:
            raise self._error(f"damaged {what}")
        try:
            return json.loads(text)
        except ValueError as exc:
            raise self._error(f"damaged {what} ({exc})") from exc

    def close(self) -> None:
        self.conn.close()

    def __len__(self) -> int:
        return self.nodes

    def span(self) -> tuple[float, float] | None:
        """The earliest start and the latest start or end (``None``: no times at all)."""
        return self._span

    def counts(self) -> dict[str, dict[str, int]]:
        """Exact node counts by status and by kind."""
        return self._counts

    counts_cached = counts

    def root_start(self) -> float | None:
        """When the first session root started (``None``: no time)."""
        row = self._query(
            "SELECT start FROM trace_rows WHERE kind = 'session' ORDER BY seq LIMIT 1"
        )
        return float(row[0][0]) if row and isinstance(row[0][0], float) else None

    def summary(self, node_id: str) -> dict[str, Any] | None:
        """What the node's row shows (``None``: no such node)."""
        rows = self._query(f"{_ROW} WHERE r.id = ?", (_db(node_id),))
        return self._summary(rows[0]) if rows else None

    def first_rows(self, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` rows depth first with everything open, as a window's rows."""
        rows = self._query(f"{_ROW} WHERE t.rank < ? ORDER BY t.rank", (max(0, limit),))
        return [self._row(row, {}, None, None) for row in rows]

    # -- records -----------------------------------------------------------------------------

    def record(self, node_id: str) -> dict[str, Any] | None:
        """The node's full record, checked with the core's strict node reader (``ValueError``
        naming what is wrong), with its row ``hint``; ``None`` for an unknown id."""
        found = self._query("SELECT seq, hint FROM trace_rows WHERE id = ?", (_db(node_id),))
        if not found:
            return None
        seq, hint = found[0][0], _py(found[0][1])
        if self._external:
            raw = self._external_record(seq, node_id)
        else:
            raw = self._own_record(seq, node_id)
        try:
            node = TraceNode.from_json(raw)
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise _malformed(f"nodes[{seq}]", exc) from exc
        if node.id != node_id:
            raise self._error(f"the record of node {_short(node_id)} is another node's")
        out = dict(raw)
        if hint:
            out["hint"] = hint
        return out

    def _external_record(self, seq: int, node_id: str) -> Any:
        found = self._query(
            "SELECT length(n.record), n.record FROM trace_refs r"
            " JOIN trace_nodes n ON n.rowid = r.ref WHERE r.seq = ?",
            (seq,),
        )
        if not found or not isinstance(found[0][0], int) or found[0][0] > MAX_RECORDS_BYTES:
            raise self._error(f"the record of node {_short(node_id)} is missing or too large")
        return self._json(found[0][1], "records")

    def _own_record(self, seq: int, node_id: str) -> Any:
        block = self._query(
            "SELECT seq, length(body), body FROM trace_records WHERE seq <= ?"
            " ORDER BY seq DESC LIMIT 1",
            (seq,),
        )
        if not block or not isinstance(block[0][1], int) or block[0][1] > MAX_RECORDS_BYTES:
            raise self._error(f"the record of node {_short(node_id)} is missing or too large")
        records = self._json(block[0][2], "records")
        at = seq - block[0][0]
        if not isinstance(records, list) or not 0 <= at < len(records):
            raise self._error(f"the record of node {_short(node_id)} is missing")
        return records[at]

    def records(self) -> Iterator[Any]:
        """Every node record in the order written (a block of records in memory at a time)."""
        if self._external:
            try:
                cursor = self.conn.execute(
                    "SELECT n.record FROM trace_refs r JOIN trace_nodes n ON n.rowid = r.ref"
                    " ORDER BY r.seq"
                )
                while chunk := cursor.fetchmany(_BLOCK):
                    yield from (self._json(text, "records") for (text,) in chunk)
            except sqlite3.Error as exc:
                raise self._error(f"not a readable stored trace ({exc})") from exc
            return
        at = -1
        while True:
            block = self._query(
                "SELECT seq, body FROM trace_records WHERE seq > ? ORDER BY seq LIMIT 1", (at,)
            )
            if not block:
                return
            at = block[0][0]
            records = self._json(block[0][1], "records")
            if not isinstance(records, list):
                raise self._error("damaged records")
            yield from records

    def trace_json(self) -> dict[str, Any]:
        """The whole trace as saved-trace data (every record in memory: a small trace)."""
        return {**self.header, "nodes": list(self.records())}

    # -- windows -----------------------------------------------------------------------------

    def _ranks_of(self, ids: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """``{id: (rank, depth, desc)}`` of the known ids among ``ids``."""
        out: dict[str, tuple[int, int, int]] = {}
        for at in range(0, len(ids), _CHUNK):
            part = ids[at : at + _CHUNK]
            marks = ",".join("?" * len(part))
            for node_id, rank, depth, desc in self._query(
                "SELECT r.id, t.rank, t.depth, t.desc FROM trace_rows r JOIN trace_tree t"
                f" ON t.seq = r.seq WHERE r.id IN ({marks})",
                [_db(k) for k in part],
            ):
                out[_py(node_id)] = (int(rank), int(depth), int(desc))
        return out

    def _children(self, rank: int, desc: int) -> list[tuple[int, int]]:
        """The children of the node at ``rank`` as ``(rank, desc)``, in order (only ranks
        inside its subtree: a damaged parent column never loops)."""
        return [
            (int(r), int(d))
            for r, d in self._query(
                "SELECT rank, desc FROM trace_tree WHERE parent = ? AND rank > ? AND rank <= ?"
                " ORDER BY rank",
                (rank, rank, rank + desc),
            )
        ]

    def _shallow_before(self, rank: int) -> int:
        """How many rows of depth ≤ 2 come before ``rank``."""
        if rank >= self.nodes:
            return self.shallow
        row = self._query("SELECT shallow_at FROM trace_tree WHERE rank = ?", (max(0, rank),))
        return int(row[0][0]) if row else self.shallow

    def _segments(self, expanded: Mapping[str, bool]) -> list[tuple[int, int] | list[int]]:
        """The visible rows as segments in order: ``(a, b)``, the rows of depth ≤ 2 numbered
        ``a`` to ``b - 1`` among them; a list: the ranks below a row opened at depth ≥ 2."""
        known = self._ranks_of([k for k in expanded])
        cuts: list[tuple[int, int, bool]] = []  # (rank, desc, opened)
        opened: set[int] = set()
        for node_id, (rank, depth, desc) in known.items():
            want = expanded[node_id]
            if desc <= 0:
                continue
            if depth < DEFAULT_OPEN_DEPTH and not want:
                cuts.append((rank, desc, False))
            elif depth >= DEFAULT_OPEN_DEPTH and want:
                opened.add(rank)
                if depth == DEFAULT_OPEN_DEPTH:
                    cuts.append((rank, desc, True))
        cuts.sort()
        out: list[tuple[int, int] | list[int]] = []
        next_rank = 0
        for rank, desc, is_open in cuts:
            if rank < next_rank:
                continue  # inside a collapsed row, or inside an opened row's subtree
            upto = self._shallow_before(rank + 1)
            out.append((self._shallow_before(next_rank), upto))
            if is_open:
                out.append(self._below(rank, desc, opened))
            next_rank = rank + desc + 1
        out.append((self._shallow_before(next_rank), self.shallow))
        return [s for s in out if (s[1] > s[0] if isinstance(s, tuple) else s)]

    def _below(self, rank: int, desc: int, opened: set[int]) -> list[int]:
        """The visible ranks below the opened row at ``rank`` (its children, and theirs for
        each opened child), in order."""
        out: list[int] = []
        stack = [list(reversed(self._children(rank, desc)))]
        while stack:
            level = stack[-1]
            if not level:
                stack.pop()
                continue
            r, d = level.pop()
            out.append(r)
            if r in opened and d > 0:
                stack.append(list(reversed(self._children(r, d))))
        return out

    def _matches(self, query: str) -> tuple[array[int], bytearray, int]:
        """The ranks of every node whose search text holds ``query`` and of their ancestors,
        in order, a mark per rank of the matches, and how many there are."""
        cached = self._search
        if cached is not None and cached[0] == query:
            return cached[1], cached[2], cached[3]
        found = 0
        hits = bytearray(self.nodes)
        keep = bytearray(self.nodes)
        parents: list[int] = []
        try:
            cursor = self.conn.execute(
                "SELECT t.rank, t.parent FROM trace_rows r JOIN trace_tree t ON t.seq = r.seq"
                " WHERE instr(r.search, ?) > 0",
                (query.encode("utf-8", "surrogatepass"),),
            )
            for rank, parent in cursor:
                if 0 <= rank < self.nodes and not hits[rank]:
                    found += 1
                    hits[rank] = keep[rank] = 1
                    if parent is not None and 0 <= parent < rank and not keep[parent]:
                        parents.append(parent)
            while parents:  # ancestors, a level at a time (each strictly before its child)
                level = sorted({p for p in parents if not keep[p]})
                parents = []
                for p in level:
                    keep[p] = 1
                for at in range(0, len(level), _CHUNK):
                    part = level[at : at + _CHUNK]
                    marks = ",".join("?" * len(part))
                    for rank, parent in self.conn.execute(
                        f"SELECT rank, parent FROM trace_tree WHERE rank IN ({marks})", part
                    ):
                        if parent is not None and 0 <= parent < rank and not keep[parent]:
                            parents.append(parent)
        except sqlite3.Error as exc:
            raise self._error(f"not a readable stored trace ({exc})") from exc
        kept = array("i", (i for i, k in enumerate(keep) if k)) if any(keep) else array("i")
        self._search = (query, kept, hits, found)
        return kept, hits, found

    def _rows(self, ranks: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        out: dict[int, tuple[Any, ...]] = {}
        for at in range(0, len(ranks), _CHUNK):
            part = list(ranks[at : at + _CHUNK])
            marks = ",".join("?" * len(part))
            for row in self._query(f"{_ROW} WHERE t.rank IN ({marks})", part):
                out[int(row[0])] = row
        return out

    def _shallow_rows(self, a: int, b: int) -> list[tuple[Any, ...]]:
        return self._query(
            f"{_ROW} WHERE t.depth <= 2 AND t.shallow_at >= ? AND t.shallow_at < ?"
            " ORDER BY t.shallow_at",
            (a, b),
        )

    def window(
        self,
        *,
        start: int = 0,
        count: int = 200,
        expanded: Mapping[str, bool] | None = None,
        query: str = "",
        selected: str | None = None,
    ) -> dict[str, Any]:
        """Rows ``[start, start + count)`` of the visible list, with exact totals:
        ``{start, total, nodes, rows, counts, matches?, selected_index?}``; each row is
        ``{node, depth, kids, open, roll, match?, below?}`` (``roll``: subtree tokens,
        cost, priced nodes, descendants, own tokens, unpriced nodes)."""
        expanded = expanded or {}
        q = query.strip().lower()
        count = max(0, min(int(count), MAX_WINDOW))
        picked: list[tuple[Any, ...]] = []
        hits: bytearray | None = None
        found = 0
        nxt: dict[int, int | None] = {}
        sel = None if selected is None else self._ranks_of([selected]).get(selected)
        selected_index: int | None = None
        if q:
            kept, hits, found = self._matches(q)
            total = len(kept)
            start = max(0, min(int(start), max(0, total - 1)))
            ranks = kept[start : start + count + 1]  # one more: whether the last has kids
            rows = self._rows(ranks)
            picked = [rows[r] for r in ranks[:count] if r in rows]
            nxt = {r: ranks[k + 1] if k + 1 < len(ranks) else None for k, r in enumerate(ranks)}
            if sel is not None:
                selected_index = _index(kept, sel[0])
        else:
            segments = self._segments(expanded)
            total = sum(len(s) if isinstance(s, list) else s[1] - s[0] for s in segments)
            start = max(0, min(int(start), max(0, total - 1)))
            at = 0
            for seg in segments:
                size = len(seg) if isinstance(seg, list) else seg[1] - seg[0]
                lo, hi = max(start, at), min(start + count, at + size)
                if lo < hi:
                    if isinstance(seg, list):
                        rows = self._rows(seg[lo - at : hi - at])
                        picked.extend(rows[r] for r in seg[lo - at : hi - at] if r in rows)
                    else:
                        picked.extend(self._shallow_rows(seg[0] + lo - at, seg[0] + hi - at))
                if sel is not None and selected_index is None:
                    selected_index = self._find(seg, at, sel)
                at += size
            if sel is not None and selected_index is None:
                selected_index = -1
        out: dict[str, Any] = {
            "start": start,
            "total": total,
            "nodes": self.nodes,
            "rows": [self._row(row, expanded, hits, nxt) for row in picked],
            "counts": self._counts,
        }
        if hits is not None:
            out["matches"] = found
        if sel is not None:  # an unknown id: no place at all
            out["selected_index"] = -1 if selected_index is None else selected_index
        return out

    def _row(
        self,
        row: Sequence[Any],
        expanded: Mapping[str, bool],
        hits: bytearray | None,
        nxt: Mapping[int, int | None] | None,
    ) -> dict[str, Any]:
        """A window's row (``hits``, ``nxt``: a search's matches and each row's next)."""
        rank, depth, desc = int(row[0]), int(row[4]), int(row[5])
        if hits is None or nxt is None:
            kids = desc > 0
            is_open = kids and bool(expanded.get(_py(row[1]), depth < DEFAULT_OPEN_DEPTH))
        else:
            following = nxt.get(rank)
            kids = is_open = following is not None and rank < following <= rank + desc
        entry: dict[str, Any] = {
            "node": self._summary(row),
            "depth": depth,
            "kids": kids,
            "open": is_open,
            "roll": [row[14], row[15], row[16], desc, row[13], row[17]],
        }
        if hits is not None and 0 <= rank < len(hits) and hits[rank]:
            entry["match"] = True
        if row[19] is not None:
            entry["below"] = self._json(row[19], "row")
        return entry

    def _find(
        self, seg: tuple[int, int] | list[int], at: int, sel: tuple[int, int, int]
    ) -> int | None:
        """Where the node ``sel`` (rank, depth, desc) is in the visible list, if in ``seg``."""
        rank, depth, _desc = sel
        if isinstance(seg, list):
            k = _index(seg, rank)
            return None if k < 0 else at + k
        if depth > 2:
            return None
        row = self._query("SELECT shallow_at FROM trace_tree WHERE rank = ?", (rank,))
        if row and seg[0] <= row[0][0] < seg[1]:
            return at + int(row[0][0]) - seg[0]
        return None

    def _summary(self, row: Sequence[Any]) -> dict[str, Any]:
        extra = None if row[18] is None else self._json(row[18], "row")
        return row_summary(
            str(_py(row[1])), _py(row[3]), str(row[6]), str(_py(row[8])), str(row[7]), row[10],
            row[11], str(_py(row[9])), row[12], int(row[13]),
            extra if isinstance(extra, dict) else None,
        )  # fmt: skip

    def timeline(self, lo: float, hi: float, buckets: int) -> dict[str, Any]:
        """Exact node counts per time bucket of ``[lo, hi]`` by status group (``running``,
        ``ok``, ``failed``), and how many start before, after, or have no start time."""
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
            raise ValueError(f"timeline range must be finite with lo <= hi, got [{lo}, {hi}]")
        buckets = max(1, min(int(buckets), 400))
        width = (hi - lo) / buckets
        counts = {g: [0] * buckets for g in ("running", "ok", "failed")}
        before = after = untimed = in_range = 0
        for status, bucket, n in self._query(
            "SELECT status, CASE WHEN start IS NULL THEN -3 WHEN start < ?1 THEN -1"
            " WHEN start > ?2 THEN -2 WHEN ?3 <= 0 THEN ?4 - 1"
            " ELSE min(CAST((start - ?1) / ?3 AS INTEGER), ?4 - 1) END AS b, count(*)"
            " FROM trace_rows GROUP BY status, b",
            (lo, hi, width, buckets),
        ):
            if bucket == -3:
                untimed += n
            elif bucket == -1:
                before += n
            elif bucket == -2:
                after += n
            else:
                group = "running" if status in _LIVE else "failed" if status in _BAD else "ok"
                counts[group][max(0, min(int(bucket), buckets - 1))] += n
                in_range += n
        return {
            "lo": lo,
            "hi": hi,
            "buckets": buckets,
            "in_range": in_range,
            "before": before,
            "after": after,
            "untimed": untimed,
            "counts": counts,
        }


def _index(values: Sequence[int], value: int) -> int:
    """Where ``value`` is in the sorted ``values`` (-1: not there)."""
    k = bisect.bisect_left(values, value)
    return k if k < len(values) and values[k] == value else -1


def row_summary(
    node_id: str,
    parent_id: str | None,
    kind: str,
    name: str,
    status: str,
    start: float | None,
    end: float | None,
    hint: str,
    cost: float | None,
    tokens: int,
    more: dict[str, Any] | None,
) -> dict[str, Any]:
    """What a row shows of a node (``partial``: the detail pane asks for the rest), the same
    for a stored trace and a live one."""
    out: dict[str, Any] = {
        "id": node_id,
        "parent_id": parent_id,
        "kind": kind,
        "name": name,
        "status": status,
        "start": None if start is None or start != start else start,
        "end": None if end is None or end != end else end,
    }
    if hint:
        out["hint"] = hint
    if cost is not None and cost == cost:
        out["cost"] = cost
    if tokens:
        out["usage"] = {"total_tokens": tokens}
    if more:
        out.update(more)
    out["partial"] = True
    return out
