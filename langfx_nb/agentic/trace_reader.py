"""Reading a stored trace (written by :mod:`langfx_nb.agentic.trace_db`): :class:`StoredTrace`
answers the explorer's questions (exact counts, a window of the rows the reader expanded, a
search with every match's ancestors, a node's full record, the timeline's counts) with a few
queries each; :class:`WindowedTrace` makes the page's window from them, stored or live. A file
from elsewhere is data: a damaged or hostile one raises one ``ValueError`` naming it; no answer
loops or holds more than a bounded part of the file.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import math
import operator
import os
import sqlite3
from abc import ABC, abstractmethod
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .trace import TraceNode, check_trace_header, short
from .trace_json import regular_file

__all__ = [
    "BAD_STATUSES",
    "DEFAULT_OPEN_DEPTH",
    "GROUPS",
    "LIVE",
    "MAX_TIME_BUCKETS",
    "MAX_WINDOW",
    "STORE_TABLES",
    "StoredTrace",
    "add_counts",
    "evicted_counts",
    "group_of",
    "is_store",
    "open_store",
    "row_summary",
    "time_buckets",
]

BAD_STATUSES = ("failed", "denied", "cancelled", "timed_out")
LIVE = ("running", "waiting")  # statuses of work not over yet
GROUPS = ("running", "ok", "failed")  # the timeline overview's groups (see group_of)
#: The most buckets one timeline request may ask for.
MAX_TIME_BUCKETS = 400
STORE_FORMAT = "langfx_nb.trace_store"
STORE_TABLES = (
    "trace_info", "trace_order", "trace_records", "trace_refs", "trace_rows", "trace_search",
    "trace_starts", "trace_tree",
)  # fmt: skip
STORE_VERSION = 3
DEFAULT_OPEN_DEPTH = 2  # as the page: depth 0 and 1 open unless the reader toggled them
MAX_WINDOW = 2_000  # rows one window may hold
MAX_RECORDS_BYTES = 256 << 20  # a stored block of records larger than this is refused
BLOCK = 1_000  # records (and search lines) per stored block
_CHUNK = 500  # values bound into one SQL statement
_MAX_COUNTS = 4_096  # (kind, status) pairs a header's summary.counts may hold
_NOT_MARKS = bytes(b for b in range(256) if b not in b"\n\xff")
_NEWLINE_0 = bytes.maketrans(b"\n", b"\x00")
_NONZERO = bytes(min(b, 1) for b in range(256))  # translate tables of bytes: 0 or 1
_SHOWN = bytes(int(d <= DEFAULT_OPEN_DEPTH) for d in range(256))  # a depth shown at first
_LEVELS = 254  # depths told apart by a byte below the last (255: 255 or deeper)
_RANKS = 2_048  # ranks a listing counts at a time
_ROW = (
    "SELECT t.rank, r.id, t.parent, r.parent_id, t.depth, t.desc, r.kind, r.status, r.name,"
    " r.hint, r.start, r.end, r.cost, r.tokens, t.sub_tokens, t.sub_cost, t.sub_priced,"
    " t.sub_unpriced, r.extra, t.below, t.seq FROM trace_tree t JOIN trace_rows r ON r.seq = t.seq"
)


def db_text(text: str | None) -> str | bytes | None:
    """Text as SQLite keeps it: a ``str``, or its UTF-8 bytes when it holds a lone surrogate
    (JSON may: ``"\\ud800"``), which SQLite text cannot."""
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def py_text(value: Any) -> Any:
    """What :func:`db_text` stored, as text again."""
    return value.decode("utf-8", "surrogatepass") if type(value) is bytes else value


def malformed(where: str, exc: BaseException) -> ValueError:
    if isinstance(exc, KeyError):
        return ValueError(f"malformed trace: {where}: {exc.args[0]!r} is missing")
    return ValueError(f"malformed trace: {where}: {str(exc)[:199]}")


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that begins as an SQLite database does."""
    try:
        regular_file(Path(path))
        with open(path, "rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except (OSError, ValueError):
        return False


def open_store(path: str | os.PathLike[str]) -> StoredTrace:
    """The stored trace in the SQLite file at ``path`` (a ``save_trace`` file or a run
    manifest), opened read-only. ``ValueError`` for anything else."""
    where = Path(path)
    regular_file(where)
    try:
        uri = f"{where.resolve().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise ValueError(f"{where}: not a stored trace ({exc})") from exc
    try:
        return StoredTrace(conn, where=str(where))
    except BaseException:
        conn.close()
        raise


class Listing(Protocol):
    """The visible rows of one view, in order, as node handles (a stored trace's ranks, a
    live index's positions), counted and sliced without listing them all."""

    @property
    def total(self) -> int: ...

    def slice(self, start: int, stop: int) -> Sequence[int]: ...

    def index_of(self, node: int) -> int: ...  # -1: not listed


class Listed:
    """A listing held whole, in order."""

    def __init__(self, order: Sequence[int]) -> None:
        self.order = order
        self.total = len(order)

    def slice(self, start: int, stop: int) -> Sequence[int]:
        return self.order[start:stop]

    def index_of(self, node: int) -> int:
        return self.order.index(node) if node in self.order else -1


class WindowedTrace(ABC):
    """A trace shown through windows: a stored one (:class:`StoredTrace`, answered by SQL)
    or a live one (``notebook.trace_live.LiveIndex``, folded event by event). Each answers
    the primitives below; :meth:`window`, one body for both, makes the page's reply."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def counts(self) -> dict[str, dict[str, int]]:
        """Exact node counts by status and by kind (evicted nodes included)."""

    @abstractmethod
    def span(self) -> tuple[float, float] | None:
        """The earliest start and the latest start or end (``None``: no times at all)."""

    @abstractmethod
    def start_times(self) -> tuple[Mapping[str, Sequence[float]], int]:
        """Each timeline group's sorted start times, and how many nodes have none."""

    @abstractmethod
    def locate(self, node_id: str) -> int | None:
        """The handle of the node ``node_id`` (``None``: no such node)."""

    @abstractmethod
    def listing(self, expanded: Mapping[str, bool]) -> Listing:
        """The visible rows with nothing filtered: a node's children are listed when it is
        open (``expanded``, else open at depth < ``DEFAULT_OPEN_DEPTH``)."""

    @abstractmethod
    def search(self, query: str) -> tuple[Listing, Callable[[int], bool], int]:
        """Every node whose search text holds ``query`` (lowercase) and its ancestors, in
        tree order; whether a handle is a match; how many matches there are."""

    @abstractmethod
    def rows(self, nodes: Sequence[int], expanded: Mapping[str, bool]) -> list[dict[str, Any]]:
        """The window rows of ``nodes``, in order: ``{node, depth, kids, open, roll,
        below?}`` (``roll``: subtree tokens, cost, priced nodes, descendants, own tokens,
        unpriced nodes), ``open`` under ``expanded`` as :meth:`listing` reads it."""

    def timeline(self, lo: float, hi: float, buckets: int) -> dict[str, Any]:
        """Exact node counts per time bucket of ``[lo, hi]`` (see :func:`time_buckets`)."""
        return time_buckets(*self.start_times(), lo, hi, buckets)

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
        ``{start, total, nodes, rows, counts, matches?, selected_index?}`` (rows: see
        :meth:`rows`; under a query every listed ancestor is open, matches have
        ``match``). ``selected_index``: where ``selected`` is listed (-1: under a closed
        row), absent for an unknown id."""
        expanded = expanded or {}
        q = query.strip().lower()
        count = max(0, min(int(count), MAX_WINDOW))
        is_match: Callable[[int], bool] | None = None
        if q:
            listing, is_match, found = self.search(q)
        else:
            listing = self.listing(expanded)
        total = listing.total
        start = max(0, min(int(start), max(0, total - 1)))
        nodes = listing.slice(start, start + count + (is_match is not None))
        rows = self.rows(nodes, expanded)
        if is_match is not None:  # a row is open when the next listed one is its child
            for k, row in enumerate(rows):
                row["kids"] = row["open"] = (
                    k + 1 < len(rows) and rows[k + 1]["depth"] > row["depth"]
                )
                if is_match(nodes[k]):
                    row["match"] = True
            rows = rows[:count]
        out: dict[str, Any] = {
            "start": start,
            "total": total,
            "nodes": len(self),
            "rows": rows,
            "counts": self.counts(),
        }
        if is_match is not None:
            out["matches"] = found
        node = None if selected is None else self.locate(selected)
        if node is not None:
            out["selected_index"] = listing.index_of(node)
        return out


class StoredTrace(WindowedTrace):
    """A stored trace's reader. Nodes are handled by ``rank`` (depth first order); what is
    read whole (search texts, ``trace_order`` arrays, start times) is read once, when needed."""

    def __init__(self, conn: sqlite3.Connection, *, where: str = "") -> None:
        self.conn = conn
        self.where = where
        conn.execute("PRAGMA query_only=ON")
        info = {k: self._json(v, k) for k, v in self.query("SELECT key, value FROM trace_info")}
        if info.get("format") != STORE_FORMAT:
            raise self._error("not a stored langfx_nb trace")
        if info.get("version") != STORE_VERSION:
            version = short(info.get("version"))
            raise self._error(
                f"unsupported stored trace version: {version} (this langfx_nb reads version"
                f" {STORE_VERSION}: save the trace again from its source with lf.save_trace)"
            )
        try:
            self.header: dict[str, Any] = dict(info["header"])
            check_trace_header(self.header)
            self.nodes = int(info["nodes"])
            counts = info["counts"]
            self._counts = {
                f: {str(k): int(v) for k, v in counts[f].items()} for f in ("status", "kind")
            }
            span = info["span"]
            self._span = None if span is None else (float(span[0]), float(span[1]))
            if info.get("records", "own") not in ("own", "trace_nodes"):
                raise ValueError("records")
            self._external = info.get("records") == "trace_nodes"
            self._untimed = int(info.get("untimed", 0))
            self._counts = add_counts(self._counts, evicted_counts(self.header, self._counts))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
            raise self._error(f"damaged trace_info ({short(str(exc))})") from exc
        last = self.query("SELECT rank + 1 FROM trace_tree ORDER BY rank DESC LIMIT 1")
        if last != [(self.nodes,)]:
            raise self._error("damaged trace_info or trace_tree (their counts differ)")
        self._search: tuple[str, _Marked, bytearray, int] | None = None  # the last query's
        self._arrays: dict[str, Any] = {}
        self._block: tuple[int, Any] = (-1, None)  # the last block of records read

    def _error(self, message: str) -> ValueError:
        return ValueError(f"{self.where}: {message}" if self.where else message)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of ``sql`` (read only), an error as one ``ValueError`` naming the file.
        ``sql`` with ``{}``: ``IN ({})`` of every value in ``args``, a chunk at a time."""
        try:
            if "{}" not in sql:
                return self.conn.execute(sql, args).fetchall()
            out: list[Any] = []
            for at in range(0, len(args), _CHUNK):
                part = args[at : at + _CHUNK]
                out += self.conn.execute(sql.format(",".join("?" * len(part))), part)
            return out
        except sqlite3.Error as exc:
            raise self._error(f"not a readable stored trace ({exc})") from exc

    def _json(self, text: Any, what: str) -> Any:
        if not isinstance(text, str | bytes) or len(text) > MAX_RECORDS_BYTES:
            raise self._error(f"damaged {what}")
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise self._error(f"damaged {what} ({exc})") from exc

    def close(self) -> None:
        self.conn.close()

    def __len__(self) -> int:
        return self.nodes

    def span(self) -> tuple[float, float] | None:
        return self._span

    def counts(self) -> dict[str, dict[str, int]]:
        return self._counts

    def root_start(self) -> float | None:
        """When the first session root started (``None``: no time)."""
        row = self.query("SELECT start FROM trace_rows WHERE kind = 'session' ORDER BY seq LIMIT 1")
        return float(row[0][0]) if row and isinstance(row[0][0], float) else None

    def summary(self, node_id: str) -> dict[str, Any] | None:
        """What the node's row shows (``None``: no such node)."""
        rows = self._rows(self.query(f"{_ROW} WHERE r.id = ?", (db_text(node_id),)), {})
        return rows[0]["node"] if rows else None

    def first_rows(self, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` rows depth first with everything open, as a window's rows."""
        return self._rows(
            self.query(f"{_ROW} WHERE t.rank < ? ORDER BY t.rank", (max(0, limit),)), {}
        )

    def record(self, node_id: str) -> dict[str, Any] | None:
        """The node's full record, checked with the core's strict node reader (``ValueError``
        naming what is wrong), with its row ``hint``; ``None`` for an unknown id."""
        found = self.query("SELECT seq, hint FROM trace_rows WHERE id = ?", (db_text(node_id),))
        if not found:
            return None
        seq, hint = found[0][0], py_text(found[0][1])
        raw = self._record(seq)
        if raw is None:
            raise self._error(f"the record of node {short(node_id)} is missing or too large")
        try:
            node = TraceNode.from_json(raw)
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise malformed(f"nodes[{seq}]", exc) from exc
        if node.id != node_id:
            raise self._error(f"the record of node {short(node_id)} is another node's")
        return {**raw, "hint": hint} if hint else dict(raw)

    def _record(self, seq: int) -> Any:
        """The ``seq``-th record as stored (``None``: missing or too large): in a manifest,
        a row of ``trace_nodes``; else from its block, the last block read kept parsed."""
        if self._external:
            sql = "SELECT length(n.record), n.record FROM trace_refs r JOIN trace_nodes n"
            found = self.query(f"{sql} ON n.rowid = r.ref WHERE r.seq = ?", (seq,))
            return self._json(found[0][1], "records") if found and _bounded(found[0][0]) else None
        sql = "SELECT seq, length(body) FROM trace_records WHERE seq <= ? ORDER BY seq DESC"
        found = self.query(f"{sql} LIMIT 1", (seq,))
        if not found or not _bounded(found[0][1]):
            return None
        first = found[0][0]
        if self._block[0] != first:
            body = self.query("SELECT body FROM trace_records WHERE seq = ?", (first,))
            self._block = (first, self._json(body[0][0], "records"))
        block, at = self._block[1], seq - first
        return block[at] if isinstance(block, list) and 0 <= at < len(block) else None

    def records(self) -> Iterator[Any]:
        """Every node record in the order written (a block of records in memory at a time)."""
        if self._external:
            sql = "SELECT n.record, 0 FROM trace_refs r JOIN trace_nodes n ON n.rowid = r.ref"
            sql += " ORDER BY r.seq"
        else:
            sql = "SELECT body, 1 FROM trace_records ORDER BY seq"
        try:
            for text, is_block in self.conn.execute(sql):
                found = self._json(text, "records")
                if is_block and not isinstance(found, list):
                    raise self._error("damaged records")
                yield from found if is_block else [found]
        except sqlite3.Error as exc:
            raise self._error(f"not a readable stored trace ({exc})") from exc

    def trace_json(self) -> dict[str, Any]:
        """The whole trace as saved-trace data (every record in memory: a small trace)."""
        return {**self.header, "nodes": list(self.records())}

    def _order(self, name: str) -> Any:
        """``trace_order``'s array ``name``, read once: ``rank`` (each seq's rank), ``parent``
        (each rank's parent's rank, -1: none; checked whole: each before its rank, so a walk
        up ends), ``depth`` (each rank's depth, a byte: 255 for 255 or deeper)."""
        if name not in self._arrays:
            found = self.query("SELECT ranks FROM trace_order WHERE name = ?", (name,))
            blob = found[0][0] if found else None
            width = 1 if name == "depth" else 4
            if not isinstance(blob, bytes) or len(blob) != width * self.nodes:
                raise self._error("damaged trace_order")
            values = blob if width == 1 else array("i", blob)
            if name == "depth" and blob[:1] not in (b"", b"\x00"):  # rank 0 is a root
                raise self._error("damaged trace_order")
            if name == "parent" and not (
                min(values, default=-1) >= -1 and all(map(operator.lt, values, range(self.nodes)))
            ):
                raise self._error("damaged trace_order")
            self._arrays[name] = values
        return self._arrays[name]

    def _ranks_of(self, ids: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """``{id: (rank, depth, desc)}`` of the known ids among ``ids``; the tree row at a
        node's rank must be that node's (else: damaged)."""
        found = self.query(
            "SELECT id, seq FROM trace_rows WHERE id IN ({})", list(map(db_text, ids))
        )
        rank_of = self._order("rank") if found else array("i")
        if not all(type(s) is int and 0 <= s < len(rank_of) for _, s in found):
            raise self._error("damaged trace_rows")
        seqs = {py_text(i): s for i, s in found}
        ranks = [rank_of[s] for s in seqs.values()]
        sql = "SELECT rank, seq, depth, desc FROM trace_tree WHERE rank IN ({})"
        tree = {r: (s, d, n) for r, s, d, n in self.query(sql, ranks)}
        if not all(type(v) is int for v in itertools.chain.from_iterable(tree.values())):
            raise self._error("damaged trace_tree")
        if any(tree.get(r, (s,))[0] != s for r, s in zip(ranks, seqs.values(), strict=True)):
            raise self._error("damaged trace_order or trace_tree (they disagree)")
        return {i: (r, *tree[r][1:]) for i, r in zip(seqs, ranks, strict=True) if r in tree}

    def locate(self, node_id: str) -> int | None:
        found = self._ranks_of([node_id]).get(node_id)
        return None if found is None else found[0]

    def listing(self, expanded: Mapping[str, bool]) -> Listing:
        """The rows of depth ≤ 2, then in rank order each toggled row that is shown: the
        subtree of a row closed hidden, the children of a row opened shown."""
        depths = self._order("depth")
        toggled = self._ranks_of(list(expanded))
        if not toggled:
            return self._shown
        marks, counts = bytearray(self._shown.marks), list(self._shown.counts)
        for rank, depth, desc, node_id in sorted((*v, k) for k, v in toggled.items()):
            if marks[rank] and expanded[node_id] != (depth < DEFAULT_OPEN_DEPTH):
                end = max(rank + 1, min(self.nodes, rank + 1 + desc))  # in the tree, if damaged
                if not expanded[node_id]:
                    marks[rank + 1 : end] = bytes(end - rank - 1)
                elif depth + 1 < 255:
                    marks[rank + 1 : end] = depths[rank + 1 : end].translate(_equal(depth + 1))
                else:  # the depths do not tell a child apart below 255
                    marks[rank + 1 : end] = bytes(
                        map(rank.__eq__, self._order("parent")[rank + 1 : end])
                    )
                for chunk in range((rank + 1) // _RANKS, (end - 1) // _RANKS + 1):
                    counts[chunk] = marks.count(1, chunk * _RANKS, (chunk + 1) * _RANKS)
        return _Marked(marks, counts)

    @functools.cached_property
    def _shown(self) -> _Marked:
        """The listing with nothing toggled."""
        return _Marked(bytearray(self._order("depth").translate(_SHOWN)))

    def search(self, query: str) -> tuple[Listing, Callable[[int], bool], int]:
        if self._search is None or self._search[0] != query:
            hits, found = self._hits(query)
            self._search = (query, _Marked(self._with_ancestors(hits, found)), hits, found)
        _, listed, hits, found = self._search
        return listed, lambda rank: hits[rank] == 1, found

    def _hits(self, query: str) -> tuple[bytearray, int]:
        """A byte a rank: 1 if the node's search text holds ``query``, else 0 (every line
        of each block holding it marked at once); how many hold it."""
        needle = query.encode("utf-8", "surrogatepass")
        texts, hits, found = self._search_texts, bytearray(self.nodes), 0
        for first, block in texts if needle and b"\n" not in needle else ():
            if needle in block:
                marks = _lines_holding(block, needle)
                hits[first : first + len(marks)] = marks
                found += marks.count(1)
        return hits, found

    @functools.cached_property
    def _search_texts(self) -> list[tuple[int, bytes]]:
        """Every node's search text as stored: blocks of consecutive ranks, a line a node,
        each with its first rank (UTF-8: a match never spans two nodes; no byte 0xff, which
        UTF-8 never has)."""
        blocks, lines = [], 0
        for (block,) in self.query("SELECT text FROM trace_search ORDER BY rank"):
            if type(block) is not bytes or block[-1:] != b"\n" or b"\xff" in block:
                raise self._error("damaged trace_search")
            blocks.append((lines, block))
            lines += block.count(b"\n")
        if lines != self.nodes:
            raise self._error("damaged trace_search")
        return blocks

    def _with_ancestors(self, hits: bytearray, found: int) -> bytearray:
        """``hits`` (a byte a rank) with their ancestors marked too. Depth first, each node
        of depth ``k`` with children is followed by its subtree, a run of ranks deeper than
        ``k``: as one big integer, a byte a rank, 0xff in those runs plus the hits carries
        into the byte before each run holding a hit; a level of depth at a time. A level
        costs its range of ranks (C passes), a walk up from each hit its ancestors: levels
        are taken while cheaper, and a walk up from every hit does the rest."""
        n, depths, levels = self.nodes, self._order("depth"), self._levels
        listed, budget, done = 0, 64 * found, 0  # rank r: byte n - 1 - r
        for lo, hi in levels:
            budget -= hi - lo
            if budget < 0:
                break
            runs = int.from_bytes(depths[lo:hi].translate(_deeper(done)), "big")
            carried = (runs + int.from_bytes(hits[lo:hi], "big")) & ~runs
            listed |= carried << 8 * (n - hi)
            done += 1
        marks = bytearray(hits)
        if listed:
            listed |= int.from_bytes(hits, "big")
            marks = bytearray(listed.to_bytes(n, "big").translate(_NONZERO))
        if done < len(levels) or done == _LEVELS:  # (a trace 255 deep or more: always)
            parents, at = self._order("parent"), hits.find(1)
            while at >= 0:
                up = parents[at]
                while up >= 0 and not marks[up]:  # each parent before its child: it ends
                    marks[up] = 1
                    up = parents[up]
                at = hits.find(1, at + 1)
        return marks

    @functools.cached_property
    def _levels(self) -> list[tuple[int, int]]:
        """Per depth ``k`` (from 0, below ``_LEVELS``) up to the deepest node with children,
        the ranks ``[lo, hi)`` from the first node of depth ``k`` with a child to the last
        node deeper than ``k`` (read once, from the depths alone; the parents are checked
        then too, for the walk up)."""
        self._order("parent")
        depths, firsts = self._order("depth"), list[int]()
        while len(firsts) < _LEVELS:  # a node of depth k followed by a child
            lo = depths.find(bytes((len(firsts), len(firsts) + 1)))
            if lo < 0:
                break
            firsts.append(lo)
        end, ends = depths.rfind(255) + 1, list[int]()
        for k in reversed(range(len(firsts))):
            end = max(end, depths.rfind(k + 1) + 1)
            ends.append(end)
        return list(zip(firsts, reversed(ends), strict=True))

    def rows(self, nodes: Sequence[int], expanded: Mapping[str, bool]) -> list[dict[str, Any]]:
        found = {int(row[0]): row for row in self.query(f"{_ROW} WHERE t.rank IN ({{}})", nodes)}
        if len(found) < len(set(nodes)):
            raise self._error("damaged trace_tree")
        rank_of, depths = self._order("rank"), self._order("depth")
        for rank, row in found.items():  # the row is the node listed at that rank
            seq, depth = row[20], row[4]
            at_rank = type(seq) is int and 0 <= seq < self.nodes and rank_of[seq] == rank
            if not (at_rank and type(depth) is int and depths[rank] == min(depth, 255)):
                raise self._error("damaged trace_order or trace_tree (they disagree)")
        return self._rows([found[rank] for rank in nodes], expanded)

    def _rows(self, rows: Sequence[Sequence[Any]], expanded: Mapping[str, bool]) -> list[Any]:
        """The window rows of rows of ``_ROW`` (a damaged value: ``ValueError``)."""
        try:
            return [self._row(row, expanded) for row in rows]
        except (TypeError, ValueError, RecursionError, OverflowError) as exc:
            raise self._error(f"damaged trace_rows or trace_tree ({short(str(exc))})") from exc

    def _row(self, row: Sequence[Any], expanded: Mapping[str, bool]) -> dict[str, Any]:
        node = row_summary(
            str(py_text(row[1])), py_text(row[3]), str(row[6]), str(py_text(row[8])),
            str(row[7]), row[10], row[11], str(py_text(row[9])), row[12], int(row[13]),
            None if row[18] is None else _object(row[18]),
        )  # fmt: skip
        depth, desc = int(row[4]), int(row[5])
        entry: dict[str, Any] = {
            "node": node,
            "depth": depth,
            "kids": desc > 0,
            "open": desc > 0 and bool(expanded.get(py_text(row[1]), depth < DEFAULT_OPEN_DEPTH)),
            "roll": [row[14], row[15], row[16], desc, row[13], row[17]],
        }
        if row[19] is not None:
            entry["below"] = {str(k): int(n) for k, n in _object(row[19]).items()}
        return entry

    def start_times(self) -> tuple[dict[str, array[float]], int]:
        return self._starts, self._untimed

    @functools.cached_property
    def _starts(self) -> dict[str, array[float]]:
        """Each group's sorted start times, read once (8 bytes a node)."""
        starts = {g: array("d") for g in GROUPS}
        for group, blob in self.query("SELECT grp, starts FROM trace_starts"):
            if group not in GROUPS or not isinstance(blob, bytes):
                raise self._error("damaged trace_starts")
            if len(blob) % 8 or len(blob) > 8 * self.nodes:
                raise self._error("damaged trace_starts")
            starts[group] = array("d", blob)
        in_order = (all(map(operator.le, a, itertools.islice(a, 1, None))) for a in starts.values())
        if not all(in_order) or sum(map(len, starts.values())) + self._untimed != self.nodes:
            raise self._error("damaged trace_starts (not each node's start, sorted)")
        return starts


class _Marked:
    """Listed ranks as marks (``marks[rank]``: 1 if listed, else 0), counted a chunk at a
    time, so a window is sliced without listing every rank."""

    def __init__(self, marks: bytearray, counts: list[int] | None = None) -> None:
        self.marks = marks
        self.counts = counts or [
            marks.count(1, at, at + _RANKS) for at in range(0, len(marks), _RANKS)
        ]
        self.before = list(itertools.accumulate(self.counts, initial=0))  # before each chunk
        self.total = self.before[-1]

    def slice(self, start: int, stop: int) -> Sequence[int]:
        chunk = bisect.bisect_right(self.before, start) - 1
        skip, at, out = start - self.before[chunk], chunk * _RANKS - 1, list[int]()
        for _ in range(skip + max(0, stop - start)):
            at = self.marks.find(1, at + 1)
            if at < 0:
                break
            out.append(at)
        return out[skip:]

    def index_of(self, node: int) -> int:
        if not (0 <= node < len(self.marks) and self.marks[node]):
            return -1
        chunk = node // _RANKS
        return self.before[chunk] + self.marks.count(1, chunk * _RANKS, node)


def _lines_holding(text: bytes, needle: bytes) -> bytes:
    """A byte a line of ``text``: 1 if the line holds ``needle``, else 0 (neither holds
    0xff; ``needle`` no newline). Each match's first byte becomes 0xff and all else but
    newlines goes: a line holding it is 0xff and a newline, which become 1."""
    marks = text.replace(needle, b"\xff" + needle[1:]).translate(None, _NOT_MARKS)
    return marks.replace(b"\xff\n", b"\x01").translate(_NEWLINE_0, b"\xff")


@functools.cache
def _deeper(depth: int) -> bytes:
    """A ``translate`` table of depths: 0xff deeper than ``depth``, else 0."""
    return bytes(255 * (d > depth) for d in range(256))


@functools.cache
def _equal(depth: int) -> bytes:
    """A ``translate`` table of depths: 1 for ``depth``, else 0."""
    return bytes(int(d == depth) for d in range(256))


def _object(text: Any) -> dict[str, Any]:
    value = json.loads(text)
    if type(value) is not dict:
        raise TypeError("a row's JSON is not an object")
    return value


def _bounded(size: Any) -> bool:  # a stored block's length (SQLite's), within what is read
    return isinstance(size, int) and size <= MAX_RECORDS_BYTES


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
    return {**out, **(more or {}), "partial": True}


def evicted_counts(
    header: Mapping[str, Any], held: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """The counts by status and by kind of the nodes a session evicted, where a trace's
    ``header`` says it evicted some: its exact ``summary.counts`` (``{kind: {status: n}}``)
    less the ``held`` nodes' counts, where positive. An evicted node had ended, so these
    never change; a summary that is not a dict of dicts of bounded integers >= 0 (a file
    from elsewhere) gives none: the held nodes' counts are shown, and the trace still opens."""
    out: dict[str, dict[str, int]] = {"status": {}, "kind": {}}
    summary = header.get("summary")
    if not isinstance(summary, Mapping) or not _count(summary.get("evicted_nodes"), least=1):
        return out
    exact = summary.get("counts")
    if not isinstance(exact, Mapping) or len(exact) > _MAX_COUNTS:
        return out
    totals: dict[str, Counter[str]] = {"status": Counter(), "kind": Counter()}
    entries = 0
    for k, by_status in exact.items():
        if not isinstance(by_status, Mapping):
            return out
        entries += len(by_status)
        if entries > _MAX_COUNTS or not all(map(_count, by_status.values())):
            return out
        totals["status"].update({str(s): n for s, n in by_status.items()})
        totals["kind"][str(k)] += sum(by_status.values())
    for field, counts in totals.items():
        have = held.get(field, {})
        out[field] = {
            key: n - have.get(key, 0) for key, n in counts.items() if n > have.get(key, 0)
        }
    return out


def add_counts(
    a: Mapping[str, Mapping[str, int]], b: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Counts by status and by kind, ``a`` and ``b`` added up."""
    out = {field: dict(a.get(field, {})) for field in ("status", "kind")}
    for field, counts in out.items():
        for key, n in b.get(field, {}).items():
            counts[key] = counts.get(key, 0) + n
    return out


def _count(value: Any, *, least: int = 0) -> bool:
    """Whether ``value`` is an integer a count may be (not a bool; ``least`` to 2**53)."""
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= 1 << 53


def group_of(status: str) -> str:
    """The timeline overview's group of a node status: ``running`` (still running or
    waiting), ``failed`` (failed, denied, cancelled, timed out) or ``ok`` (the rest)."""
    return "running" if status in LIVE else "failed" if status in BAD_STATUSES else "ok"


def time_buckets(
    starts: Mapping[str, Sequence[float]], untimed: int, lo: float, hi: float, buckets: int
) -> dict[str, Any]:
    """Counts of nodes starting in each of ``buckets`` equal parts of ``[lo, hi]`` (the last
    bucket includes ``hi``), by status group, from each group's sorted start times:
    ``{lo, hi, buckets, in_range, before, after, untimed, counts: {group: [n, ...]}}``.
    Exact: every node is in exactly one count. Shared by stored and live traces."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"timeline range must be finite with lo <= hi, got [{lo}, {hi}]")
    buckets = max(1, min(int(buckets), MAX_TIME_BUCKETS))
    width = (hi - lo) / buckets
    counts: dict[str, list[int]] = {}
    before = after = in_range = 0
    for group, values in starts.items():
        first = bisect.bisect_left(values, lo)
        last = bisect.bisect_right(values, hi)
        before += first
        after += len(values) - last
        in_range += last - first
        edges = [bisect.bisect_left(values, lo + k * width, first, last) for k in range(buckets)]
        counts[group] = list(map(operator.sub, [*edges[1:], last], edges))
    out = {"lo": lo, "hi": hi, "buckets": buckets, "in_range": in_range, "before": before}
    return {**out, "after": after, "untimed": untimed, "counts": counts}
