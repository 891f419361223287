"""Writing a stored trace: a trace in SQLite tables (:data:`SCHEMA`), written once, in a file
of its own (:func:`save_trace`) or in a batch's run manifest (the same file as its items), and
read by windows of rows (:mod:`langfx_nb.agentic.trace_reader`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import json
import os
import sqlite3
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard, get_args

from .._sqlite import insert_flat
from .trace import NodeKind, NodeStatus, saved_nodes, short
from .trace_json import Progress, naming, parse_trace, read_batches
from .trace_reader import (
    BAD_STATUSES,
    BLOCK,
    DEFAULT_OPEN_DEPTH,
    GROUPS,
    STORE_FORMAT,
    STORE_TABLES,
    STORE_VERSION,
    StoredTrace,
    db_text,
    group_of,
    is_store,
    malformed,
    open_store,
)

__all__ = [
    "DEFAULT_OPEN_DEPTH",
    "STORE_TABLES",
    "StoreWriter",
    "StoredTrace",
    "convert",
    "error_text",
    "is_store",
    "node_hint",
    "open_store",
    "save_trace",
    "temporary",
    "write_store",
]

HINT_CHARS = 80  # what a row can show
DECISION_KEYS = ("outcome", "by", "asked_at", "decided_at")  # what a row shows of a decision
# one string object per kind and status, whatever object a record holds (kept per node)
_KINDS = {k: k for k in get_args(NodeKind)}
_STATUSES = {s: s for s in get_args(NodeStatus)}
_NAN = float("nan")
_MAX_TOKENS = 1 << 53
SCHEMA = """
-- the format and version, the saved trace's header (session, summary, counts) and what the
-- whole trace's view needs at once (node count, counts by status and kind, time span, ...)
CREATE TABLE trace_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- the full node records, JSON arrays of consecutive records (seq: the first one's), or in a
-- run manifest each record's rowid in trace_nodes (trace_refs)
CREATE TABLE trace_records (seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE trace_refs (seq INTEGER PRIMARY KEY, ref INTEGER NOT NULL);
-- per node in the order written (seq), what a row shows
CREATE TABLE trace_rows (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, parent_id TEXT, kind TEXT NOT NULL,
    status TEXT NOT NULL, name TEXT NOT NULL, hint TEXT NOT NULL, start REAL, end REAL,
    cost REAL, tokens INTEGER NOT NULL, extra TEXT);
-- each node's lowercase search text, a line a node in rank order, in UTF-8 blocks of BLOCK
-- nodes (rank: the first one's), read whole at the first search
CREATE TABLE trace_search (rank INTEGER PRIMARY KEY, text BLOB NOT NULL);
-- each timeline group's sorted start times (doubles)
CREATE TABLE trace_starts (grp TEXT PRIMARY KEY, starts BLOB NOT NULL);
-- each node's rank by seq ('rank') and each rank's parent's rank ('parent', -1: none), as
-- 32-bit integers, and each rank's depth ('depth', a byte: 255 for 255 or deeper): what a
-- window, a search and a lookup by id need, without an index
CREATE TABLE trace_order (name TEXT PRIMARY KEY, ranks BLOB NOT NULL);
-- per node in tree order (rank: depth first, children in the order written): its subtree is
-- the ranks (rank, rank + desc]
CREATE TABLE trace_tree (
    rank INTEGER PRIMARY KEY, seq INTEGER NOT NULL, parent INTEGER, depth INTEGER NOT NULL,
    desc INTEGER NOT NULL, sub_tokens INTEGER NOT NULL,
    sub_cost REAL NOT NULL, sub_priced INTEGER NOT NULL, sub_unpriced INTEGER NOT NULL,
    below TEXT);
"""
_SLICE = 50_000  # rows bound at a time (bounded memory)
# rows bound into one INSERT (about a third cheaper than one at a time): few enough that the
# rows a run manifest writes at a time (its ROWS_CHUNK, 128 or a few more) mostly go so
_PER_INSERT = 64
# A None costs far more to bind than a number (the sqlite3 module looks for an adapter), and
# a string more than a number (SQLite copies it): a missing value is bound as NaN, which
# SQLite stores as NULL.
_ROW_VALUES = "(?,?,?,?,?,?,?,?,?,?,?,?)"
# the table of rows as SQLite keeps its statement (a writer that reopens a trace adds to it)
_ROWS_TABLE = SCHEMA[SCHEMA.index("CREATE TABLE trace_rows") :].split(";", 1)[0]
_TREE_VALUES = "(?,?,nullif(?,-1),?,?,?,?,?,?,?)"
_dumps = functools.partial(json.dumps, ensure_ascii=False)


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
    text = value if kind is str else str(value) if kind is int else _dumps(value, default=str)
    return text if len(text) <= 30 else text[:29] + "…"


def node_hint(node: Mapping[str, Any]) -> str:
    """One line that tells same-named rows apart: a log's message, a query's prompt (and
    vars), a tool call's arguments. ``""`` when the record has nothing to show."""
    kind = node.get("kind")
    if kind != "query" and kind != "tool_call" and kind != "log":
        return ""  # (most rows)
    inputs = node.get("inputs")
    if not _is_map(inputs):
        return ""
    if kind == "query":
        prompt = inputs["prompt"] if "prompt" in inputs else inputs.get("rendered_prompt")
        text = prompt if type(prompt) is str else _text_of(prompt)
        variables = inputs.get("vars")
        if variables and _is_map(variables):
            four = itertools.islice(variables.items(), 4)
            shown = ", ".join([f"{k}={_short_value(v)}" for k, v in four])
            text = f"{shown} · {text}" if text else shown
    elif kind == "tool_call":
        args = inputs.get("args")
        if not _is_map(args):
            return ""
        text = ", ".join([f"{k}={_short_value(v)}" for k, v in args.items()])
    else:
        text = str(inputs.get("message", ""))
    text = " ".join(text.split())
    return text if len(text) <= HINT_CHARS else text[: HINT_CHARS - 1] + "…"


def _number(value: Any, field: str) -> float:
    """A time or cost as bound: NaN (see ``_ROW_VALUES``) for none, an infinity or NaN."""
    if value is None:
        return _NAN
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field!r} must be a number or null")
    number = float(value)
    return number if number - number == 0.0 else _NAN


def _tokens(usage: Any) -> int:
    """The usage's total, from 0 to below 2**53 (what the page's numbers hold exactly)."""
    if not _is_map(usage):
        raise TypeError("'usage' must be an object")
    total = usage.get("total_tokens")
    if type(total) is not int:
        parts = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
        total = sum(v for v in parts if type(v) is int and v >= 0)
    if not 0 <= total < _MAX_TOKENS:
        raise ValueError("a token count must be from 0 to below 2**53")
    return total


def error_text(err: Any) -> str:
    """What a search finds of a recorded error: its text, or the texts and numbers in its
    JSON data (not the JSON: a Windows path's backslashes are searched as they are shown)."""
    if isinstance(err, str):
        return err
    if _is_map(err):
        err = list(err.values())
    if isinstance(err, list):
        return " ".join(filter(None, map(error_text, err)))
    return "" if err is None or isinstance(err, bool) else str(err)


def _extra(err: Any, decision: Any, evicted: Any) -> tuple[str, str]:
    """A record's rarer fields a row shows, as JSON, and its error's text."""
    more: dict[str, Any] = {}
    text = ""
    if err is not None:
        more["error"] = err
        text = error_text(err)
    if decision is not None:
        if not _is_map(decision):
            raise TypeError("'decision' must be an object")
        more["decision"] = {k: decision[k] for k in DECISION_KEYS if k in decision}
    if evicted:
        if isinstance(evicted, bool) or not isinstance(evicted, int):
            raise TypeError("'evicted_children' must be an integer")
        more["evicted_children"] = evicted
    return json.dumps(more), text.replace("\n", " ")


def _row(seq: int, x: Any) -> tuple[tuple[Any, ...], str]:
    """What a row shows of record ``x`` (its ``trace_rows`` values, ``seq`` first), checked,
    and its search line (before lowering): ids and names as text, numbers as floats, the
    usage's total, the hint in place of the inputs; no value holds a newline."""
    if type(x) is not dict:
        raise TypeError("must be an object")
    get = x.get
    node_id, parent = str(x["id"]), get("parent_id")
    kind, status = _KINDS.get(x["kind"]), _STATUSES.get(get("status", "ok"))
    if kind is None or status is None:
        shown = f"{short(x['kind'])}, {short(get('status', 'ok'))}"
        raise ValueError(f"unknown kind or status: {shown}")
    parent = None if parent is None else str(parent)
    if parent == node_id:
        raise ValueError("the node is its own parent")
    name = str(get("name", "")).replace("\n", " ")
    # a hint node_hint makes holds no newline
    hint = node_hint(x) if "inputs" in x else str(get("hint", "")).replace("\n", " ")
    err, decision, evicted = get("error"), get("decision"), get("evicted_children")
    extra: str | float = _NAN  # none (see _ROW_VALUES)
    err_text = ""
    if err is not None or decision is not None or evicted:
        extra, err_text = _extra(err, decision, evicted)
    start, end, cost, usage = get("start", 0.0), get("end"), get("cost"), get("usage")
    row = (
        seq, node_id, parent, kind, status, name, hint,
        start if type(start) is float and start - start == 0.0 else _number(start, "start"),
        end if type(end) is float and end - end == 0.0 else _number(end, "end"),
        cost if type(cost) is float and cost - cost == 0.0 else _number(cost, "cost"),
        0 if usage is None else _tokens(usage), extra,
    )  # fmt: skip
    return row, f"{name} {kind} {status} {hint} {err_text}"


class StoreWriter:
    """Writes one trace's tables into ``conn``: records and row values as they come (a batch
    at a time, in one transaction or several: a run manifest writes each record's row with
    it), then the tree order once every node is known (:meth:`finish`)."""

    def __init__(self, conn: sqlite3.Connection, *, rows_kept: bool = False) -> None:
        self.conn = conn
        for statement in SCHEMA.split(";")[:-1]:  # in the transaction under way
            if not (rows_kept and _ROWS_TABLE in statement):
                conn.execute(statement)
        self.pos: dict[str, int] = {}
        self.parent: list[int | str] = []  # the parent's position (-1: none), or its id
        self.status: list[str] = []
        self.kinds: Counter[str] = Counter()
        self.tokens: list[int] = []
        self.cost: list[float] = []  # NaN: none
        self.start: list[float] = []  # NaN: none
        self.refs = False  # the records stay in the file's trace_nodes
        self.search: list[bytes] = []  # the search lines in the order added, a block a batch

    @classmethod
    def reopen(cls, conn: sqlite3.Connection) -> StoreWriter | None:
        """A writer that adds rows to the stored trace :meth:`finish` completed in ``conn``
        (a run manifest's: its records stay in ``trace_nodes``), in the caller's transaction,
        as if it had added that trace's rows itself: they stay, and what it needs of them is
        read back from the stored tables (not from the records); the tables derived from
        them (the tree order, the search blocks, the info, the records' places) are dropped,
        to be written again by :meth:`finish`. ``None``, with nothing changed, when there is
        no such trace (one of another version, one whose writing never finished) or it does
        not read back as :meth:`finish` writes one (a damaged file)."""
        paused = gc.isenabled()
        gc.disable()  # as write_store: many new objects, none of them in a cycle
        try:
            state = _stored_state(conn)
        except sqlite3.Error:
            return None
        finally:
            if paused:
                gc.enable()
        if state is None:
            return None
        for table in STORE_TABLES:
            if table != "trace_rows":
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("DROP INDEX IF EXISTS trace_rows_id")
        writer = cls(conn, rows_kept=True)
        writer.pos, writer.parent, writer.status, writer.kinds = state[:4]
        writer.tokens, writer.cost, writer.start, writer.search = state[4:]
        return writer

    def add_rows(self, nodes: Sequence[Any]) -> int:
        """Write the rows of the next node records (their records are written apart:
        :meth:`add_refs`); the position of the first. A record a row cannot show, or an id
        used twice, raises ``ValueError`` naming it."""
        at = len(self.parent)
        if not nodes:
            return at
        rows, lines = [], []
        for seq, x in enumerate(nodes, at):
            try:
                row, line = _row(seq, x)
            except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
                raise malformed(f"nodes[{seq}]", exc) from exc
            rows.append(row)
            lines.append(line)
        columns = list(zip(*rows, strict=True))
        ids = columns[1]
        pos = self.pos
        for seq, node_id in enumerate(ids, at):
            if pos.setdefault(node_id, seq) != seq:
                raise ValueError(
                    f"malformed trace: nodes[{seq}]: the id {short(node_id)} is used twice"
                )
        get = pos.get
        self.parent += [-1 if p is None else get(p, p) for p in columns[2]]
        self.kinds.update(columns[3])
        self.status += columns[4]
        self.start += columns[7]
        self.cost += columns[9]
        self.tokens += columns[10]
        try:
            _insert(self.conn, "trace_rows", _ROW_VALUES, columns)
        except UnicodeEncodeError:  # a lone surrogate (JSON may hold one): kept as UTF-8 bytes
            self.conn.execute("DELETE FROM trace_rows WHERE seq >= ?", (at,))
            kept = [[db_text(v) if type(v) is str else v for v in c] for c in columns]
            _insert(self.conn, "trace_rows", _ROW_VALUES, kept)
        text = ("\n".join(lines).lower() + "\n").encode("utf-8", "surrogatepass")
        self.search.append(text)  # written in rank order at the end
        return at

    def add_refs(self, first: int, refs: Sequence[int]) -> None:
        """Where the records from position ``first`` on stay: their rowids in the file's
        ``trace_nodes``."""
        self.refs = True
        _insert(self.conn, "trace_refs", "(?,?)", [range(first, first + len(refs)), refs])

    def ids(self) -> list[str]:
        """The ids of the nodes added so far, in the order added."""
        return list(self.pos)

    def _write_search(self, order: list[int], depth: list[int]) -> None:
        """Write the search lines in rank order (``order``: the node at each rank), in blocks
        of ``BLOCK``, and each rank's depth, so that a search marks ranks, not nodes."""
        lines = b"".join(self.search).split(b"\n")
        self.search = []
        rows = [
            (at, b"\n".join(map(lines.__getitem__, order[at : at + BLOCK])) + b"\n")
            for at in range(0, len(order), BLOCK)
        ]
        self.conn.executemany("INSERT INTO trace_search VALUES (?, ?)", rows)
        del lines, rows
        try:
            depths = bytes(depth)
        except ValueError:  # a node 256 deep or more
            depths = bytes(map(min, depth, itertools.repeat(255)))
        self.conn.execute("INSERT INTO trace_order VALUES ('depth', ?)", (depths,))

    def finish(self, header: Mapping[str, Any]) -> int:
        """Derive the tree order, write it and the trace's info; the number of nodes."""
        n = len(self.parent)
        if "session" not in self.kinds:
            raise ValueError("malformed trace: it has no session root node")
        if sum(self.tokens) >= 1 << 63:  # then every subtree's sum fits SQLite's integer
            raise ValueError("malformed trace: its token counts add up to 2**63 or more")
        conn = self.conn
        conn.execute("CREATE UNIQUE INDEX trace_rows_id ON trace_rows(id)")
        # a parent not in the trace: a root
        parent = [p if isinstance(p, int) else self.pos.get(p, -1) for p in self.parent]
        self.pos, self.parent = {}, []  # freed
        # One walk depth first (children in the order written): the node at each rank.
        child = sorted(range(n - 1, -1, -1), key=parent.__getitem__)  # by parent, last first
        kids = {p: list(group) for p, group in itertools.groupby(child, parent.__getitem__)}
        del child
        order: list[int] = []
        stack = kids.get(-1, [])  # nodes to visit, the next last
        while stack:
            i = stack.pop()
            order.append(i)
            stack += kids.get(i, ())
        if len(order) < n:
            raise ValueError("malformed trace: some nodes' parents form a cycle")
        del kids, stack
        rank = [0] * n + [-1]  # by node; a root's parent (-1): -1
        deque(map(rank.__setitem__, order, range(n)), maxlen=0)
        up = list(map(rank.__getitem__, map(parent.__getitem__, order)))
        rank.pop()
        depth = [0] * n + [-1]  # a root's parent (-1): -1
        for r, p in enumerate(up):
            depth[r] = depth[p] + 1
        depth.pop()
        self._write_search(order, depth)
        # Per rank, from the last up: descendants, subtree sums, and whether a problem is
        # below (a problem is counted once, where it started, in the "below" of each ancestor:
        # a node with a problem below it failed because of it, and is not counted again).
        status = list(map(self.status.__getitem__, order))
        cost = list(map(self.cost.__getitem__, order))
        desc = [0] * n
        sub_t = list(map(self.tokens.__getitem__, order))
        sub_c = [0.0 if c != c else c for c in cost]
        sub_p = [0 if c != c else 1 for c in cost]
        sub_u = [1 if c != c and t else 0 for c, t in zip(cost, sub_t, strict=True)]
        del cost
        above_a_problem = bytearray(n)
        for r in range(n - 1, -1, -1):
            p = up[r]
            if p >= 0:
                desc[p] += desc[r] + 1
                sub_t[p] += sub_t[r]
                sub_c[p] += sub_c[r]
                sub_p[p] += sub_p[r]
                sub_u[p] += sub_u[r]
                if above_a_problem[r] or status[r] in BAD_STATUSES:
                    above_a_problem[p] = 1
        counts = Counter(self.status)  # in the order first seen
        below: dict[int, Counter[str]] = {}  # by rank
        for bad in filter(BAD_STATUSES.__contains__, counts):
            for r in itertools.compress(range(n), map(bad.__eq__, status)):
                if not above_a_problem[r]:
                    p = up[r]
                    while p >= 0:
                        below.setdefault(p, Counter())[bad] += 1
                        p = up[p]
        below_json: list[str | float] = [_NAN] * n  # NaN: no problem below
        for r, found in below.items():
            below_json[r] = json.dumps(found)
        columns = (order, up, depth, desc, sub_t, sub_c, sub_p, sub_u, below_json)
        _insert(conn, "trace_tree", _TREE_VALUES, [range(n), *columns])
        ranks = [("rank", array("i", rank).tobytes()), ("parent", array("i", up).tobytes())]
        conn.executemany("INSERT INTO trace_order VALUES (?, ?)", ranks)
        del columns, order, up, depth, desc, sub_t, sub_c, sub_p, sub_u, rank, ranks, status
        del below, below_json
        starts: dict[str, list[float]] = {g: [] for g in GROUPS}
        for name in counts:
            mine = itertools.compress(self.start, map(name.__eq__, self.status))
            starts[group_of(name)] += [s for s in mine if s == s]  # not NaN
        conn.executemany(
            "INSERT INTO trace_starts VALUES (?, ?)",
            [(g, array("d", sorted(v)).tobytes()) for g, v in starts.items()],
        )
        span = "SELECT min(start), max(max(coalesce(end, start)), start) FROM trace_rows"
        row = conn.execute(span).fetchone()
        info = {
            "format": STORE_FORMAT,
            "version": STORE_VERSION,
            "header": {k: v for k, v in header.items() if k != "nodes"},
            "nodes": n,
            "counts": {"status": counts, "kind": self.kinds},
            "span": None if row[0] is None else [row[0], max(row[0], row[1])],
            "records": "trace_nodes" if self.refs else "own",
            "untimed": n - sum(map(len, starts.values())),
        }
        conn.executemany(
            "INSERT INTO trace_info VALUES (?, ?)",
            [(k, _dumps(v)) for k, v in info.items()],
        )
        return n


#: a writer's state (see StoreWriter.__init__): pos, parent, status, kinds, tokens, cost,
#: start, search
_State = tuple[
    dict[str, int],
    list[int | str],
    list[str],
    Counter[str],
    list[int],
    list[float],
    list[float],
    list[bytes],
]


def _stored_state(conn: sqlite3.Connection) -> _State | None:
    """What a :class:`StoreWriter` holds once it has added the rows of the finished stored
    trace in ``conn`` (see :meth:`StoreWriter.reopen`), read from the stored tables and
    checked as its own rows would have been; ``None`` when they do not read back so."""
    # the rows' table as finish left it (rows go on being added to it), and nothing else on it
    kept = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE tbl_name = 'trace_rows'"))
    if kept.get("trace_rows") != _ROWS_TABLE or kept.keys() - {"trace_rows", "trace_rows_id"}:
        return None
    keys = ("format", "version", "records", "nodes")
    info = dict(conn.execute("SELECT key, value FROM trace_info WHERE key IN (?,?,?,?)", keys))
    try:
        format_, version, records, n = [json.loads(info[k]) for k in keys]
    except (KeyError, TypeError, ValueError, RecursionError):
        return None
    if (format_, version, records) != (STORE_FORMAT, STORE_VERSION, "trace_nodes"):
        return None
    seqs = conn.execute("SELECT count(*), min(seq), max(seq) FROM trace_rows").fetchone()
    if type(n) is not int or n == 0 or seqs != (n, 0, n - 1):  # each of 0 .. n - 1 once
        return None
    rows = conn.execute(
        "SELECT id, parent_id, kind, status, tokens, cost, start FROM trace_rows ORDER BY seq"
    ).fetchall()
    ids, parents, kinds, statuses, tokens, costs, starts = zip(*rows, strict=True)
    del rows
    if len(ids) != n or not set(map(type, ids)) <= {str}:
        return None
    pos = dict(zip(ids, range(n), strict=True))
    if len(pos) != n or not set(map(type, parents)) <= {str, type(None)}:
        return None
    if not (set(kinds) <= _KINDS.keys() and set(statuses) <= _STATUSES.keys()):
        return None
    if not set(map(type, tokens)) <= {int} or min(tokens) < 0 or max(tokens) >= _MAX_TOKENS:
        return None
    cost, start = _stored_numbers(costs), _stored_numbers(starts)
    search = _stored_search(conn, n)
    if cost is None or start is None or search is None:
        return None
    get = pos.get
    return (
        pos,
        [-1 if p is None else get(p, p) for p in parents],
        list(map(_STATUSES.__getitem__, statuses)),
        Counter(map(_KINDS.__getitem__, kinds)),
        list(tokens),
        cost,
        start,
        search,
    )


def _stored_numbers(column: Sequence[Any]) -> list[float] | None:
    """A stored column of times or costs as a writer holds it (NaN: none); ``None`` when a
    value is not one a row holds (a finite float, or NULL)."""
    out = [_NAN if v is None else v for v in column]
    if not set(map(type, out)) <= {float} or not all(v - v == 0.0 or v != v for v in out):
        return None
    return out


def _stored_search(conn: sqlite3.Connection, n: int) -> list[bytes] | None:
    """The search lines of the stored trace's ``n`` nodes, in the order the nodes were added
    (its blocks hold them in rank order: ``trace_order``'s rank of each node puts them back)."""
    blocks = conn.execute("SELECT rank, text FROM trace_search ORDER BY rank").fetchall()
    row = conn.execute("SELECT ranks FROM trace_order WHERE name = 'rank'").fetchone()
    if [b[0] for b in blocks] != list(range(0, n, BLOCK)) or row is None:
        return None
    texts = [b[1] for b in blocks]
    if not set(map(type, texts)) <= {bytes} or type(row[0]) is not bytes or len(row[0]) != 4 * n:
        return None
    lines = b"".join(texts).split(b"\n")
    rank = array("i", row[0])
    if len(lines) != n + 1 or lines[-1] or sorted(rank) != list(range(n)):
        return None
    return [b"\n".join(map(lines.__getitem__, rank)) + b"\n"]


def _insert(
    conn: sqlite3.Connection, table: str, values: str, columns: Sequence[Sequence[Any]]
) -> None:
    """Insert the rows whose values are ``columns`` (of one length) into ``table``, each row
    as ``values`` (``"(?,?)"``) takes it: many rows a statement, a slice at a time."""
    k, n = len(columns), len(columns[0])
    for first in range(0, n, _SLICE):
        m = min(n - first, _SLICE)
        flat: list[Any] = [None] * (k * m)
        for j, column in enumerate(columns):
            flat[j::k] = column[first : first + m]
        insert_flat(conn, f"INSERT INTO {table} VALUES ", values, flat, k, _PER_INSERT)


def write_store(
    conn: sqlite3.Connection,
    header: Mapping[str, Any],
    batches: Iterable[tuple[Sequence[Any], bytes | Sequence[int]]],
) -> int:
    """Write a trace's tables into ``conn`` (which holds none yet) in one transaction: its
    node records come in ``batches``, each with its JSON array or the rowids of its records
    in ``conn``'s ``trace_nodes`` (where they stay); its other top-level fields in ``header``
    (read once every batch is written). Returns the number of nodes. A node a row cannot
    show raises ``ValueError`` naming it (nothing is written)."""
    paused = gc.isenabled()
    gc.disable()  # millions of new objects would trigger it over and over
    if not conn.in_transaction:
        conn.execute("BEGIN")
    writer = StoreWriter(conn)
    try:
        for nodes, body in batches:
            first = writer.add_rows(nodes)
            if not isinstance(body, bytes):
                writer.add_refs(first, body)
            elif nodes:
                conn.execute("INSERT INTO trace_records VALUES (?, ?)", (first, body))
        n = writer.finish(header)
    except BaseException:
        conn.rollback()
        raise
    finally:
        if paused:
            gc.enable()
    conn.commit()
    return n


def save_trace(
    source: Any, path: str | os.PathLike[str], *, progress: Progress | None = None
) -> Path:
    """Write a stored trace to ``path`` (replaced as a whole once written) and return it.

    ``source`` is a ``Session`` (its ``trace_json()``), a saved trace's data or JSON text, or
    the path of a trace JSON file written elsewhere, converted as a stream in bounded memory
    (``progress(bytes_read, file_size)`` after each batch of records). A source that is not a
    langfx_nb trace, or a node a row cannot show, raises ``ValueError`` before ``path`` is
    touched; so does a ``path`` that is the source file itself (it would be replaced)."""
    path, file = Path(path), _file_of(source)
    if file is not None:
        with contextlib.suppress(OSError):
            if path.samefile(file):
                raise ValueError(f"{short(str(path))}: is the trace file to read: name another")
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    temp.touch(exist_ok=False)  # an OSError naming it (a missing folder), not sqlite3's
    try:
        with contextlib.closing(_scratch(temp)) as conn:
            _write_source(conn, source, progress)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return path


def _file_of(source: Any) -> Path | None:
    """The file ``source`` names, if it is a path (not a trace's JSON text)."""
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return None
    return Path(source) if isinstance(source, str | os.PathLike) else None


def _write_source(conn: sqlite3.Connection, source: Any, progress: Progress | None) -> int:
    file = _file_of(source)
    if file is not None:
        header: dict[str, Any] = {}
        with naming(str(file)):
            return write_store(conn, header, read_batches(file, header, progress))
    if isinstance(source, str):
        source = parse_trace(source)
    data = source.trace_json() if callable(getattr(source, "trace_json", None)) else source
    nodes = saved_nodes(data)
    blocks = (nodes[at : at + BLOCK] for at in range(0, len(nodes), BLOCK))
    # a lone surrogate (only in a JSON string) is written as its escape
    bodies = ((b, _dumps(b).encode("utf-8", "backslashreplace")) for b in blocks)
    return write_store(conn, data, bodies)


def convert(source: Any, progress: Progress | None = None) -> StoredTrace:
    """``source`` (what :func:`save_trace` takes) converted into a store that lives as long
    as the returned reader: a private temporary database, deleted when closed, so nothing is
    written beside a file or in a cache, and a file changed later is never read stale."""
    where = str(_file_of(source) or "")
    return temporary(lambda conn: _write_source(conn, source, progress), where)


def temporary(write: Callable[[sqlite3.Connection], Any], where: str = "") -> StoredTrace:
    """A stored trace that ``write(conn)`` writes into a private temporary database."""
    conn = _scratch("")
    try:
        write(conn)
        return StoredTrace(conn, where=where)
    except BaseException:
        conn.close()
        raise


def _scratch(path: str | Path) -> sqlite3.Connection:
    """A new database that only this process writes and that is dropped if writing fails
    (``save_trace`` replaces its file once written): no journal, no syncing, and pages and a
    cache large enough that writing and indexing it take few system calls."""
    conn = sqlite3.connect(path, check_same_thread=False)
    for pragma in ("journal_mode=OFF", "synchronous=OFF", "page_size=16384", "cache_size=-16384"):
        conn.execute(f"PRAGMA {pragma}")
    return conn
