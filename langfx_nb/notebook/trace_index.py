"""A compact index of a large saved trace, and the windows of rows the explorer's page asks for.

A trace of 1,000,000 nodes as Python dicts is gigabytes; here each node is a few numbers in
flat arrays (parent, kind, status, start, end, own and subtree tokens/cost, descendants) plus
one lowercase search string, and its full record stays in the file: :func:`open_index` reads
a trace file in chunks, checks every node with the core's strict node reader
(``TraceNode.from_json``) and remembers where each record starts, so the detail pane reads one
record back on demand. A trace already in memory (:meth:`TraceIndex.from_nodes`) keeps its
records instead.

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
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ..agentic.trace import TRACE_FORMAT, TRACE_VERSION, TraceNode
from .trace_data import node_hint, view_node
from .trace_rows import BAD_STATUSES, tokens_of

__all__ = ["WINDOW_NODES", "TraceIndex", "open_index"]

#: Above this many nodes a saved trace is shown through windows (the page holds what it
#: shows); below it the page gets every node summary and works on its own.
WINDOW_NODES = 20_000
#: A trace file at least this large is read by :func:`open_index` (records left in the file).
INDEX_FILE_BYTES = 4 << 20
DEFAULT_OPEN_DEPTH = 2  # as the page: depth 0 and 1 open unless the reader toggled them
MAX_WINDOW = 2_000  # rows one window request may ask for
SUMMARY_CACHE = 20_000  # row summaries kept (scrolling back needs no file reads)
_CHUNK = 8 << 20
_DECODER = json.JSONDecoder()
_NAN = float("nan")
_NUM = (int, float)


def _search_text(node: Mapping[str, Any], hint: str) -> str:
    err = node.get("error")
    # as the page's search (JSON.stringify) writes it
    err_text = (
        ""
        if err is None
        else err
        if isinstance(err, str)
        else json.dumps(err, ensure_ascii=False, separators=(",", ":"))
    )
    return (
        f"{node.get('name', '')} {node.get('kind', '')} {node.get('status', '')} {hint} {err_text}"
    ).lower()


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
        self._texts: list[str] = []  # search texts while building; then one string
        self.search = ""
        self.line = array("q")  # where each node's search text starts in ``search``
        self.header: dict[str, Any] = {}
        self._parents: list[str | None] = []  # parent ids while building
        self._record: Callable[[int], dict[str, Any]] = lambda i: {}
        self._codes: dict[str, dict[str, int]] = {"kind": {}, "status": {}}
        self._file: BinaryIO | None = None  # the trace file, open while records are read
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

    def _add(self, node: Mapping[str, Any], where: str, hint: str | None = None) -> None:
        """Append one node's row values (``hint``: the row's hint when ``node`` has none)."""
        node_id = str(node["id"])
        pos = self.pos
        if node_id in pos:
            raise ValueError(f"malformed trace: {where}: the id {node_id[:40]!r} is used twice")
        pos[node_id] = len(self.ids)
        self.ids.append(node_id)
        get = node.get
        parent = get("parent_id")
        self.parent.append(-1)  # resolved in _finish (a parent may come after its child)
        self._parents.append(None if parent is None else str(parent))
        kind, status = str(get("kind", "")), str(get("status", ""))
        codes = self._codes
        k = codes["kind"].get(kind)
        self.kind.append(self._code(self.kinds, "kind", kind) if k is None else k)
        c = codes["status"].get(status)
        self.status.append(self._code(self.statuses, "status", status) if c is None else c)
        start, end, cost = get("start"), get("end"), get("cost")
        self.start.append(float(start) if isinstance(start, _NUM) else _NAN)
        self.end.append(float(end) if isinstance(end, _NUM) else _NAN)
        self.tokens.append(tokens_of(node) if "usage" in node else 0)
        self.cost.append(float(cost) if isinstance(cost, _NUM) else _NAN)
        text = _search_text(node, get("hint", "") if hint is None else hint)
        self._texts.append(text.replace("\n", " ") if "\n" in text else text)

    def _finish(self) -> None:
        n = len(self.ids)
        pos = self.pos
        for i, parent in enumerate(self._parents):
            if parent is not None and parent != self.ids[i]:
                self.parent[i] = pos.get(parent, -1)
        self._parents = []
        self.search = "\n".join(self._texts) + "\n"
        at = 0
        line = self.line
        for text in self._texts:
            line.append(at)
            at += len(text) + 1
        self._texts = []
        # children lists as one flat array (CSR): kids of i are child[first[i]:first[i + 1]]
        counts = array("i", bytes(4 * (n + 1)))
        for p in self.parent:
            if p >= 0:
                counts[p + 1] += 1
        for i in range(n):
            counts[i + 1] += counts[i]
        self.first = array("i", counts)
        fill = array("i", counts)
        self.child = array("i", bytes(4 * n))
        roots = array("i")
        for i, p in enumerate(self.parent):
            if p >= 0:
                self.child[fill[p]] = i
                fill[p] += 1
            else:
                roots.append(i)
        self.roots = roots
        # subtree sums, bottom up over a breadth-first order (cycle-safe: unreachable nodes
        # keep their own values)
        order = array("i", roots)
        k = 0
        first, child = self.first, self.child
        while k < len(order):
            i = order[k]
            order.extend(child[first[i] : first[i + 1]])
            k += 1
        self.sub_tokens = array("q", self.tokens)
        self.sub_cost = array("d", (0.0 if math.isnan(c) else c for c in self.cost))
        self.sub_priced = array("i", (0 if math.isnan(c) else 1 for c in self.cost))
        self.desc = array("i", bytes(4 * n))
        sub_t, sub_c, sub_p, desc, parent_of = (
            self.sub_tokens,
            self.sub_cost,
            self.sub_priced,
            self.desc,
            self.parent,
        )
        for i in reversed(order):
            p = parent_of[i]
            if p >= 0:
                sub_t[p] += sub_t[i]
                sub_c[p] += sub_c[i]
                sub_p[p] += sub_p[i]
                desc[p] += desc[i] + 1
        # depth and depth-first rank (everything open): a filter's rows are its kept nodes
        # sorted by rank
        self.depth = array("i", bytes(4 * n))
        self.rank = array("i", bytes(4 * n))
        self.by_rank = array("i", bytes(4 * n))
        stack = list(reversed(roots))
        k = 0
        depth_of = self.depth
        while stack:
            i = stack.pop()
            self.rank[i] = k
            self.by_rank[k] = i
            k += 1
            kids = child[first[i] : first[i + 1]]
            if kids:
                d = depth_of[i] + 1
                for c in kids:
                    depth_of[c] = d
                stack.extend(reversed(kids))
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
        if "session" not in self.kinds:
            raise ValueError("malformed trace: it has no session root node")

    @classmethod
    def from_nodes(
        cls, nodes: Iterable[Mapping[str, Any]], header: Mapping[str, Any] | None = None
    ) -> TraceIndex:
        """An index of node records already read (as the views keep them, with ``hint``)."""
        index = cls()
        records: list[Mapping[str, Any]] = []
        for i, node in enumerate(nodes):
            index._add(node, f"nodes[{i}]")
            records.append(node)
        index._finish()
        index.header = dict(header or {})
        index._record = lambda i: dict(records[i])
        return index

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    def record(self, node_id: str) -> dict[str, Any] | None:
        """The node's full record as the views keep it (with ``hint``), or ``None``."""
        i = self.pos.get(node_id)
        return None if i is None else self._record(i)

    def counts(self) -> dict[str, dict[str, int]]:
        """Exact node counts by status and by kind."""
        by_status: dict[str, int] = {}
        for code in self.status:
            name = self.statuses[code]
            by_status[name] = by_status.get(name, 0) + 1
        by_kind: dict[str, int] = {}
        for code in self.kind:
            name = self.kinds[code]
            by_kind[name] = by_kind.get(name, 0) + 1
        return {"status": by_status, "kind": by_kind}

    def span(self) -> tuple[float, float] | None:
        starts = [s for s in self.start if s == s]
        if not starts:
            return None
        ends = [e for e in self.end if e == e]
        return min(starts), max([*ends, *starts])

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
        if self._file is not None:
            self._file.close()
            self._file = None

    def _summary(self, i: int) -> dict[str, Any]:
        record = self._record(i)
        out: dict[str, Any] = {
            k: record[k]
            for k in ("id", "parent_id", "kind", "name", "status", "start", "end", "hint")
            if k in record
        }
        for k in ("error", "cost", "evicted_children"):
            if record.get(k) is not None:
                out[k] = record[k]
        if self.tokens[i]:
            out["usage"] = {"total_tokens": self.tokens[i]}
        decision = record.get("decision")
        if isinstance(decision, Mapping):
            out["decision"] = {
                k: decision[k] for k in ("outcome", "by", "asked_at", "decided_at") if k in decision
            }
        out["partial"] = True
        return out

    def _matches(self, query: str) -> tuple[bytearray, bytearray, array[int], int]:
        """Every node whose search text holds ``query`` (lowercase), and their ancestors:
        marks per node (1 = a match / kept), the kept nodes in tree order, the match count."""
        cached = self._match_cache
        if cached is not None and cached[0] == query:
            return cached[1]
        text, line, n = self.search, self.line, len(self.ids)
        hits, keep, in_order = bytearray(n), bytearray(n), bytearray(n)
        parent_of, rank, find, where = self.parent, self.rank, text.find, bisect.bisect_right
        found = 0
        at = find(query)
        while at >= 0:
            i = where(line, at) - 1
            hits[i] = 1
            found += 1
            j = i
            while j >= 0 and not keep[j]:
                keep[j] = 1
                in_order[rank[j]] = 1
                j = parent_of[j]
            at = find(query, line[i + 1] if i + 1 < n else len(text))
        rows = array("i", itertools.compress(self.by_rank, in_order))
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
            kids = child[first[i] : first[i + 1]]
            has_kids = bool(kids) if keep is None else any(keep[c] for c in kids)
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


# -- reading a trace file in chunks -------------------------------------------------------------


class _Reader:
    """The text of a file, decoded chunk by chunk, with byte offsets of what is parsed."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("rb")
        self.buf = ""
        self.at = 0  # cursor in buf (characters)
        self.base = 0  # byte offset of buf[0]
        self.eof = False
        self._tail = b""
        self.ascii = True
        self._known = (0, 0)  # (char position in buf, its byte offset in the file)

    def more(self) -> bool:
        if self.eof:
            return False
        data = self._tail + self.file.read(_CHUNK)
        if len(data) == len(self._tail):
            self.eof = True
            if self._tail:
                raise ValueError("not a langfx_nb trace: not valid UTF-8")
            return False
        # keep an incomplete UTF-8 sequence at the end for the next chunk
        cut = len(data)
        for back in range(1, min(4, len(data)) + 1):
            b = data[-back]
            if b & 0xC0 != 0x80:
                need = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
                if need > back:
                    cut = len(data) - back
                break
        self._tail = data[cut:]
        rest = self.buf[self.at :]
        self.base += len(self.buf[: self.at].encode("utf-8"))
        try:
            self.buf = rest + data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not a langfx_nb trace: not valid UTF-8") from None
        self.at = 0
        self.ascii = self.buf.isascii()
        self._known = (0, self.base)
        return True

    def skip_ws(self) -> str:
        while True:
            buf, at = self.buf, self.at
            while at < len(buf) and buf[at] in " \t\r\n":
                at += 1
            self.at = at
            if at < len(buf):
                return buf[at]
            if not self.more():
                return ""

    def expect(self, char: str) -> None:
        if self.skip_ws() != char:
            raise ValueError(f"not a langfx_nb trace: not valid JSON (expected {char!r})")
        self.at += 1

    def value(self) -> tuple[Any, int, int]:
        """The next JSON value and its byte extent in the file."""
        self.skip_ws()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.at)
            except json.JSONDecodeError as exc:
                if self.more():
                    continue
                raise ValueError(f"not a langfx_nb trace: not valid JSON ({exc})") from None
            if end == len(self.buf) and not self.eof and self.more():
                continue  # a number may go on in the next chunk
            start_b = self.byte(self.at)
            end_b = start_b + len(self.buf[self.at : end].encode("utf-8"))
            self.at = end
            return value, start_b, end_b

    def byte(self, at: int) -> int:
        if self.ascii:
            return self.base + at
        char, byte = self._known
        if at < char:
            char, byte = 0, self.base
        byte += len(self.buf[char:at].encode("utf-8"))
        self._known = (at, byte)
        return byte


def open_index(path: str | Path) -> TraceIndex:
    """Index a saved trace file without holding its records: each node is checked with the
    core's strict node reader and only its row values and file offset are kept. A malformed
    file raises one ``ValueError`` naming what is wrong (``nodes[3]: 'kind' is missing``)."""
    path = Path(path)
    index = TraceIndex()
    saw_nodes = False
    offsets = array("q")
    header: dict[str, Any] = {}
    reader = _Reader(path)
    try:
        reader.expect("{")
        while True:
            if reader.skip_ws() == "}":
                break
            key, _, _ = reader.value()
            reader.expect(":")
            if key != "nodes":
                header[str(key)] = reader.value()[0]
            else:
                if header.get("format") != TRACE_FORMAT:
                    raise ValueError("not a langfx_nb trace")
                if header.get("version") != TRACE_VERSION:
                    raise ValueError(f"unsupported trace version: {header.get('version')!r}")
                saw_nodes = True
                reader.expect("[")
                i = 0
                more = reader.skip_ws() != "]"
                if not more:
                    reader.at += 1
                while more:
                    raw, start_b, end_b = reader.value()
                    where = f"nodes[{i}]"
                    if not isinstance(raw, dict):
                        raise ValueError(f"malformed trace: {where}: must be an object")
                    try:
                        TraceNode.from_json(raw)  # the core's strict node reader
                        if raw.get("parent_id") is not None and str(raw["parent_id"]) == str(
                            raw["id"]
                        ):
                            raise ValueError("the node is its own parent")
                    except (KeyError, TypeError, ValueError, OverflowError) as exc:
                        raise _malformed(where, exc) from None
                    index._add(raw, where, node_hint(raw))
                    offsets.append(start_b)
                    offsets.append(end_b)
                    i += 1
                    sep = reader.skip_ws()
                    if sep not in (",", "]"):
                        raise ValueError("not a langfx_nb trace: not valid JSON in 'nodes'")
                    reader.at += 1
                    more = sep == ","
            if reader.skip_ws() == ",":
                reader.at += 1
        if not saw_nodes:
            if header.get("format") != TRACE_FORMAT:
                raise ValueError("not a langfx_nb trace")
            raise ValueError("malformed trace: 'nodes' must be a list")
    finally:
        reader.file.close()
    index._finish()
    index.header = header

    def record(i: int) -> dict[str, Any]:
        f = index._file
        if f is None or f.closed:
            f = index._file = path.open("rb")
            weakref.finalize(index, f.close)  # closed with the index if nobody closes it
        f.seek(offsets[2 * i])
        raw = f.read(offsets[2 * i + 1] - offsets[2 * i])
        return view_node(json.loads(raw), plain=True)

    index._record = record
    return index
