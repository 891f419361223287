"""A saved trace file indexed in place: :func:`open_index` reads it in chunks of about a
megabyte, keeps each node's row values in a :class:`TraceIndex` and where each chunk of
records lies in the file, and reads a record back (with the core's strict node reader) when
the detail pane asks for it.

Cost (``benchmarks/widgets_browser.py --big``): parsing is one ``json.loads`` per chunk of
records, not one call per node, with the garbage collector paused (millions of new dicts
would trigger it over and over); a node is checked for what its row needs (docs/decisions.md
"Saved traces of batch size: checked for the row at open, strictly at detail").

The index sidecar: the first open writes what it built (the index's flat arrays and strings,
where each chunk of records lies) beside the trace as ``<trace>.lfxidx``; a later open of the
unchanged file (same size, modification and change time) reads that back instead of parsing the
trace (docs/decisions.md "An index sidecar for large saved traces"). A sidecar that does not
match, or cannot be read or written, is ignored: the trace is indexed from its records.
:func:`save_trace` writes a trace file and its sidecar together, from the records in memory,
so even the first open of a trace saved that way reads no record.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import hashlib
import json
import os
import re
import weakref
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..agentic.trace import TraceNode, check_trace_header, saved_nodes
from .trace_data import view_node
from .trace_index import INDEX_FILE_BYTES, TraceIndex

__all__ = [
    "SIDECAR_SUFFIX",
    "SIDECAR_VERSION",
    "Prefix",
    "checked_record",
    "index_file",
    "load_index",
    "open_index",
    "open_prefix",
    "read_index_sidecar",
    "save_trace",
    "sidecar_cache_dir",
    "sidecar_places",
    "write_index_sidecar",
]

SIDECAR_SUFFIX = ".lfxidx"
_SIDECAR_MAGIC = "langfx_nb.trace_index"
SIDECAR_VERSION = 4  # 4: "shown" and "search" offsets count UTF-8 bytes (3: characters)
# the index's flat arrays saved as bytes, in this order ("s": a UTF-8 string)
_ARRAYS = (
    "parent", "kind", "status", "start", "end", "tokens", "cost", "shown_at", "line",
    "first", "roots", "child", "by_rank", "rank", "depth", "sub_tokens", "sub_cost",
    "sub_priced", "sub_unpriced", "desc",
)  # fmt: skip

_READ = 4 << 20  # bytes read from the file at a time
_BATCH = 1 << 20  # bytes of node records parsed by one json.loads
_NEXT = re.compile(rb'\}\s*,\s*\{\s*"id"')  # a record ends, the next begins
_WS = b" \t\r\n"
_SPACE = re.compile(r"[ \t\r\n]*")  # JSON white space, in decoded text
_DECODER = json.JSONDecoder()
_CACHED = 4  # chunks of records kept parsed (a window's rows are near each other)


class _Bytes:
    """The file's bytes, read on demand, with the file offset of what is parsed."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.buf = b""
        self.at = 0  # cursor in buf
        self.base = 0  # file offset of buf[0]
        self.eof = False
        #: where a record may end and the next begin: the next one's first key is "id" (the
        #: core's order) until a record read on its own shows the file's own first key
        self.next = _NEXT

    def more(self) -> bool:
        if self.eof:
            return False
        data = self.file.read(_READ)
        if not data:
            self.eof = True
            return False
        self.base += self.at
        self.buf = self.buf[self.at :] + data
        self.at = 0
        return True

    def ensure(self, n: int) -> None:
        while len(self.buf) - self.at < n and self.more():
            pass

    def peek(self) -> bytes:
        """The next byte that is not white space (``b""`` at the end)."""
        while True:
            buf, at = self.buf, self.at
            while at < len(buf) and buf[at] in _WS:
                at += 1
            self.at = at
            if at < len(buf):
                return buf[at : at + 1]
            if not self.more():
                return b""

    def expect(self, char: bytes) -> None:
        if self.peek() != char:
            raise ValueError(f"not a langfx_nb trace: not valid JSON (expected {char.decode()!r})")
        self.at += 1

    def value(self) -> Any:
        """The next JSON value (a header field, or a record read on its own)."""
        self.peek()
        size = 1 << 16
        while True:
            data = self.buf[self.at : self.at + size]
            text = _decode(data, final=self.eof and self.at + size >= len(self.buf))
            try:
                value, end = _DECODER.raw_decode(text)
            except json.JSONDecodeError as exc:
                if self.at + size < len(self.buf) or self.more():
                    size *= 4
                    continue
                raise ValueError(f"not a langfx_nb trace: not valid JSON ({exc})") from None
            if end == len(text) and (self.at + size < len(self.buf) or self.more()):
                size *= 4
                continue  # a number may go on
            self.at += len(text[:end].encode("utf-8"))
            return value


def _decode(data: bytes, *, final: bool) -> str:
    """UTF-8 text of ``data``; unless ``final``, a sequence cut at the end is left out."""
    cut = len(data)
    if not final:
        for back in range(1, min(4, len(data)) + 1):
            b = data[-back]
            if b & 0xC0 != 0x80:
                need = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
                if need > back:
                    cut = len(data) - back
                break
    try:
        return data[:cut].decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a langfx_nb trace: not valid UTF-8") from None


def _records(reader: _Bytes) -> tuple[list[Any], int, int]:
    """The next records of the ``nodes`` list and their byte extent: as many whole records
    as end within about ``_BATCH`` bytes, parsed by one ``json.loads``. A cut is tried where
    a record may end and the next begins (the core writes ``"id"`` first), the last two of
    the region, last first; a cut that parses holds whole records only (an object cut in the
    middle never parses). What no such cut takes (the list's last record, a record larger
    than a chunk, records in another key order) is read one record at a time, and the key
    that record begins with is looked for from then on."""
    reader.peek()
    reader.ensure(_BATCH + 1)
    buf, at = reader.buf, reader.at
    for cut in reversed(_last_cuts(reader.next, buf, at, min(len(buf), at + _BATCH))):
        try:
            batch = json.loads(b"[" + buf[at:cut] + b"]")
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(batch, list):
            reader.at = cut
            return batch, reader.base + at, reader.base + cut
    return _one_by_one(reader)


def _last_cuts(pattern: re.Pattern[bytes], buf: bytes, at: int, end: int) -> list[int]:
    """The last two places in ``buf[at:end]`` where a record may end and the next begin,
    looked for in the region's tail first (a scan of the whole region is most of a chunk's
    cost when records are small)."""
    tail = 1 << 14
    while True:
        lo = max(at, end - tail)
        cuts = [m.start() + 1 for m in pattern.finditer(buf, lo, end)]
        if len(cuts) >= 2 or lo == at:
            return cuts[-2:]
        tail *= 8


def _one_by_one(reader: _Bytes) -> tuple[list[Any], int, int]:
    """Records read one at a time (``raw_decode``) up to about ``_BATCH`` bytes: the region
    is decoded once and each record parsed where the last one ended. A first record that
    does not end within the region is read on its own, however large (and one that is not
    valid JSON raises the error naming it)."""
    reader.peek()
    reader.ensure(_BATCH + 1)
    buf, at = reader.buf, reader.at
    start = reader.base + at
    text = _decode(buf[at : at + _BATCH], final=reader.eof and at + _BATCH >= len(buf))
    out: list[Any] = []
    done = pos = 0  # characters of ``text``: taken by whole records, and where the next is
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            break  # cut by the region's end (or not JSON: read again on its own below)
        out.append(value)
        done = end
        pos = _skip_space(text, end)
        if pos >= len(text) or text[pos] != ",":
            break
        pos = _skip_space(text, pos + 1)
    if not out:
        out.append(reader.value())
    else:
        reader.at = at + len(text[:done].encode("utf-8"))
    record = out[-1]
    if type(record) is dict and record:  # cut the next chunks before records begun this way
        key = json.dumps(next(iter(record)), ensure_ascii=False).encode("utf-8")
        reader.next = re.compile(rb"\}\s*,\s*\{\s*" + re.escape(key))
    return out, start, reader.base + reader.at


def _skip_space(text: str, at: int) -> int:
    """Where the next character that is not JSON white space is, from ``at``."""
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]  # matches ""


def open_index(path: str | Path, *, sidecar: bool = True) -> TraceIndex:
    """Index a saved trace file without holding its records. A malformed file raises one
    ``ValueError`` naming what is wrong (``nodes[3]: 'kind' is missing``). ``sidecar``: read
    the index from its sidecar when it matches the file (:func:`load_index`), else build it
    and write the sidecar for the next open."""
    path = Path(path)
    if sidecar:
        index = load_index(path)
        if index is not None:
            return index
    stat = path.stat()
    built = _build(path)
    _read_back(built.index, path, built.spans, built.firsts)
    if sidecar:
        _save_sidecar(path, stat, built.index, built.spans, built.firsts)
    return built.index


@dataclass(frozen=True)
class Prefix:
    """The index of the first records of a trace file (:func:`open_prefix`), or of a run
    manifest's trace (``store``: notebook/trace_open.py ``open_trace_store``)."""

    path: Path  #: the trace file (or the manifest)
    #: the records read, their rows and tree as far as they go (a node whose parent was not
    #: read is a root; records are read back for the detail pane as from a whole index)
    index: TraceIndex
    #: where reading stopped: a file offset (a manifest: the last record's rowid)
    read_to: int
    size: int  #: the file's size when it was opened (a manifest: its last record's rowid)
    #: every record was read: ``index`` is the whole trace (and its sidecar was written)
    complete: bool
    store: bool = False  #: a run manifest's trace (notebook/trace_store.py), not a file


def open_prefix(path: str | Path, max_bytes: int) -> Prefix:
    """Index the records in about the first ``max_bytes`` bytes of a trace file (whole chunks
    of records: a little more is read). A malformed header or record among them raises the
    ``ValueError`` :func:`open_index` would. A file read to its end is checked whole, and its
    sidecar written as by :func:`open_index`."""
    path = Path(path)
    stat = path.stat()
    built = _build(path, limit=max_bytes)
    _read_back(built.index, path, built.spans, built.firsts)
    if built.complete:
        _save_sidecar(path, stat, built.index, built.spans, built.firsts)
    return Prefix(path, built.index, built.read_to, stat.st_size, built.complete)


def index_file(path: str | Path, progress: Callable[[int], None] | None = None) -> Path | None:
    """Index a whole trace file and write its sidecar; return where the sidecar was written
    (beside the trace, else the per-user cache: :func:`sidecar_cache_dir`), ``None`` if
    nowhere. ``progress(offset)``: the file offset read so far, after each chunk of records.
    A malformed file raises ``ValueError`` as :func:`open_index` does."""
    path = Path(path)
    stat = path.stat()
    built = _build(path, progress=progress)
    where = _save_sidecar(path, stat, built.index, built.spans, built.firsts)
    built.index.close()
    return where


def load_index(path: str | Path) -> TraceIndex | None:
    """The index from the sidecar of ``path`` (beside it or in the cache) if it matches the
    file as it is now, else ``None``; never parses the trace."""
    path = Path(path)
    restored = _load_sidecar(path)
    if restored is None:
        return None
    index, spans, firsts = restored
    _read_back(index, path, spans, firsts)
    return index


def save_trace(source: Any, path: str | Path) -> Path:
    """Write a trace to ``path`` with its index sidecar, and return the path.

    ``source`` is a ``Session`` (its ``trace_json()``) or a saved trace's data. The file holds
    the same JSON as ``json.dumps(data, ensure_ascii=False)`` (``Session.trace_json_str()``),
    written to a temporary name and renamed. For a file of ``INDEX_FILE_BYTES`` (4 MB) or
    more, the size ``TraceExplorer`` indexes in place, the sidecar is written beside it, built
    from the records in memory while they are written (no record is parsed back), so its
    first ``TraceExplorer(path)`` reads no record. A source that is not a langfx_nb trace, or a
    node that a row cannot show, raises ``ValueError`` before ``path`` is touched."""
    data = source.trace_json() if callable(getattr(source, "trace_json", None)) else source
    nodes = saved_nodes(data)
    header = {str(k): v for k, v in data.items() if k != "nodes"}
    path = Path(path)
    index = TraceIndex()
    spans, firsts = array("q"), array("q")
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    paused = gc.isenabled()
    gc.disable()
    try:
        with temp.open("wb") as out:
            head = json.dumps(header, ensure_ascii=False)
            at = out.write(f'{head[:-1]}{", " if header else ""}"nodes": ['.encode())
            n, step = 0, 1000
            while n < len(nodes):
                batch = nodes[n : n + step]
                if n:
                    at += out.write(b", ")
                raw = json.dumps(batch, ensure_ascii=False)[1:-1].encode()
                index.add_batch(batch, n)
                spans.extend((at, at + len(raw)))
                firsts.append(n)
                at += out.write(raw)
                n += len(batch)
                # about _BATCH bytes of records a chunk, as an open of the file would cut it
                step = max(1, min(10 * step, len(batch) * _BATCH // max(1, len(raw))))
            out.write(b"]}")
        index.finish()
        index.header = header
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    finally:
        if paused:
            gc.enable()
    stat = path.stat()
    if stat.st_size >= INDEX_FILE_BYTES:  # a smaller trace is read whole, never indexed
        _save_sidecar(path, stat, index, spans, firsts)
    index.close()
    return path


def _read_back(index: TraceIndex, path: Path, spans: array[int], firsts: array[int]) -> None:
    records = _RecordReader(path, spans, firsts)
    index.read_records_with(records.read, records.close)
    weakref.finalize(index, records.close)  # the file is closed with the index


@dataclass
class _Built:
    index: TraceIndex
    spans: array[int]  # where each chunk of records lies in the file
    firsts: array[int]  # the position of each chunk's first node
    read_to: int  # the file offset where reading stopped (the file's size when complete)
    complete: bool  # every record was read (else: stopped at ``limit``)


def _build(
    path: Path, *, limit: int | None = None, progress: Callable[[int], None] | None = None
) -> _Built:
    """Index the file's records. ``limit``: stop after the chunk of records that reaches this
    file offset (a prefix: the header after ``nodes`` unchecked, no session root required).
    ``progress(offset)``: called after each chunk of records with where it ended."""
    index = TraceIndex()
    saw_nodes = False
    stopped = False
    header: dict[str, Any] = {}
    # where each chunk of records lies in the file, and the position of its first node
    spans = array("q")
    firsts = array("q")
    paused = gc.isenabled()
    gc.disable()
    try:
        with path.open("rb") as file:
            reader = _Bytes(file)
            reader.expect(b"{")
            while reader.peek() != b"}":
                key = reader.value()
                reader.expect(b":")
                if key != "nodes":
                    header[str(key)] = reader.value()
                else:
                    check_trace_header(header, whole=False)  # keys after "nodes" are checked below
                    saw_nodes = True
                    reader.expect(b"[")
                    n = 0
                    more = reader.peek() != b"]"
                    if not more:
                        reader.at += 1
                    while more:
                        batch, start, end = _records(reader)
                        index.add_batch(batch, n)
                        spans.extend((start, end))
                        firsts.append(n)
                        n += len(batch)
                        del batch
                        if progress is not None:
                            progress(end)
                        sep = reader.peek()
                        if sep not in (b",", b"]"):
                            raise ValueError("not a langfx_nb trace: not valid JSON in 'nodes'")
                        reader.at += 1
                        more = sep == b","
                        if more and limit is not None and end >= limit:
                            stopped = True
                            break
                    if stopped:
                        break
                if reader.peek() == b",":
                    reader.at += 1
                elif reader.peek() != b"}":
                    raise ValueError("not a langfx_nb trace: not valid JSON (expected ',')")
            read_to = reader.base + reader.at
        if stopped:
            index.finish(whole=False)
        else:
            check_trace_header(header)
            if not saw_nodes:
                raise ValueError("malformed trace: 'nodes' must be a list")
            index.finish()
    finally:
        if paused:
            gc.enable()
    index.header = header
    return _Built(index, spans, firsts, read_to, not stopped)


def sidecar_cache_dir() -> Path:
    """Where a sidecar goes when it cannot be written beside its trace (a read-only
    directory): ``$XDG_CACHE_HOME/langfx_nb/trace_index`` (``~/.cache/...`` by default), one
    file per trace, named by a hash of the trace's absolute path."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "langfx_nb" / "trace_index"


def sidecar_places(path: Path) -> tuple[Path, Path]:
    """Where the index sidecar of the trace (or manifest) at ``path`` is written and looked
    for, in this order: beside it (``<path>.lfxidx``), then the per-user cache."""
    key = hashlib.sha256(os.fsencode(path.absolute())).hexdigest()[:32]
    return path.with_name(
        path.name + SIDECAR_SUFFIX
    ), sidecar_cache_dir() / f"{key}{SIDECAR_SUFFIX}"


def _file_key(stat: os.stat_result) -> dict[str, Any]:
    """What the trace file's sidecar must have been made from: this file, unchanged."""
    return {
        "magic": _SIDECAR_MAGIC,
        "version": SIDECAR_VERSION,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
    }


def _save_sidecar(
    path: Path, stat: os.stat_result, index: TraceIndex, spans: array[int], firsts: array[int]
) -> Path | None:
    """Write the index beside the trace, else in the per-user cache, and return where (best
    effort: ``None`` when neither place takes it, which is no error)."""
    extra = {"spans": spans, "firsts": firsts}
    for target in sidecar_places(path):
        if write_index_sidecar(target, _file_key(stat), index, extra):
            return target
    return None


def _load_sidecar(path: Path) -> tuple[TraceIndex, array[int], array[int]] | None:
    """The index saved beside ``path`` (else in the per-user cache), if it was made from the
    file as it is now."""
    try:
        stat = path.stat()
    except OSError:
        return None
    for target in sidecar_places(path):
        loaded = read_index_sidecar(target, _file_key(stat))
        if loaded is None:
            continue
        index, extra = loaded
        if "spans" in extra and "firsts" in extra:
            return index, extra["spans"], extra["firsts"]
    return None


# the head's fields that are not the key of what the sidecar was made from
_BODY = frozenset(("parts", "kinds", "statuses", "extra", "orphans", "below", "header", "span"))


def write_index_sidecar(
    target: Path, key: dict[str, Any], index: TraceIndex, arrays: dict[str, array[int]]
) -> bool:
    """Write ``index`` and the named ``arrays`` (what reads records back) to ``target``: a
    line of JSON (``key``, what must match for the sidecar to be read, and each part's size),
    then the parts as raw bytes. Written to a temporary name and renamed; best effort: False
    when it was not written (a read-only place is no error)."""
    ids = "\n".join(index.ids)
    if ids.count("\n") != max(0, len(index.ids) - 1):
        return False  # an id with a line break: not worth a format of its own
    # arrays and texts are written as they are (no copy: the buffer protocol), ids encoded
    parts: list[tuple[str, str, bytes | bytearray | array[Any]]]
    parts = [("ids", "s", ids.encode("utf-8", "surrogatepass"))]
    parts += [("shown", "s", index.shown), ("search", "s", index.search)]
    parts += [(name, value.typecode, value) for name, value in arrays.items()]
    rows = index.default_rows()
    if rows is None:
        rows = index.rows({})
    parts.append(("rows", "i", rows))
    for name in _ARRAYS:
        value = getattr(index, name)
        if isinstance(value, bytearray):
            parts.append((name, "B", value))
        else:
            parts.append((name, value.typecode, value))
    head = {
        **key,
        "parts": [[name, code, memoryview(data).nbytes] for name, code, data in parts],
        "kinds": index.kinds,
        "statuses": index.statuses,
        "extra": {str(k): v for k, v in index.extra.items()},
        "orphans": {str(k): v for k, v in index.orphans.items()},
        "below": {str(k): v for k, v in index.below.items()},
        "header": index.header,
        "span": list(index.span() or ()),
    }
    try:
        first = json.dumps(head, ensure_ascii=True).encode("ascii") + b"\n"
    except (TypeError, ValueError):
        return False
    temp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with temp.open("wb") as out:
            out.write(first)
            for _name, _code, data in parts:
                out.write(data)
        os.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
        return False
    return True


def read_index_sidecar(
    target: Path, key: dict[str, Any]
) -> tuple[TraceIndex, dict[str, array[int]]] | None:
    """The index written to ``target`` with exactly ``key``, and the arrays written with it
    by name; ``None`` for a sidecar that is missing, made from something else, or damaged."""
    try:
        with target.open("rb") as file:
            head = json.loads(file.readline())
            if (
                not isinstance(head, dict)
                or {k: v for k, v in head.items() if k not in _BODY} != key
            ):
                return None
            data = {name: file.read(size) for name, _code, size in head["parts"]}
            codes = {name: code for name, code, _size in head["parts"]}
        if any(len(data[name]) != size for name, _code, size in head["parts"]):
            return None  # cut short
        index = TraceIndex()
        index.ids = data.pop("ids").decode("utf-8", "surrogatepass").split("\n")
        if index.ids == [""]:
            index.ids = []
        index.pos = dict(zip(index.ids, range(len(index.ids)), strict=True))
        index.shown, index.search = data.pop("shown"), data.pop("search")
        for name in _ARRAYS:
            if codes[name] == "B":
                setattr(index, name, bytearray(data.pop(name)))
                continue
            value = array(codes[name])
            value.frombytes(data.pop(name))
            setattr(index, name, value)
        rows = array("i")
        rows.frombytes(data.pop("rows"))
        index.adopt_default_rows(rows)
        arrays: dict[str, array[int]] = {}
        for name, raw in data.items():  # the arrays written with the index
            arrays[name] = array(codes[name])
            arrays[name].frombytes(raw)
        index.kinds = list(head["kinds"])
        index.statuses = list(head["statuses"])
        index.restore_codes()
        index.extra = {int(k): v for k, v in head["extra"].items()}
        index.orphans = {int(k): v for k, v in head["orphans"].items()}
        index.below = {int(k): v for k, v in head["below"].items()}
        index.header = dict(head["header"])
        index.saved_span = [float(t) for t in head["span"]]
        if not (len(index.parent) == len(index.ids) == len(index.rank) == len(index.desc)):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return index, arrays


class _RecordReader:
    """Reads node ``i``'s record back: its chunk of records, parsed (the last few kept),
    checked with the core's strict node reader. The file stays open while records are read
    (reopened after :meth:`close`)."""

    def __init__(self, path: Path, spans: array[int], firsts: array[int]) -> None:
        self.path = path
        self.spans = spans
        self.firsts = firsts
        self.cache: dict[int, list[Any]] = {}
        self.file: BinaryIO | None = None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def read(self, i: int) -> dict[str, Any]:
        b = bisect.bisect_right(self.firsts, i) - 1
        batch = self.cache.get(b)
        if batch is None:
            if self.file is None:
                self.file = self.path.open("rb")
            self.file.seek(self.spans[2 * b])
            raw = self.file.read(self.spans[2 * b + 1] - self.spans[2 * b])
            batch = json.loads(b"[" + raw + b"]")
            if len(self.cache) >= _CACHED:
                self.cache.pop(next(iter(self.cache)))
            self.cache[b] = batch
        return checked_record(batch[i - self.firsts[b]], i)


def checked_record(raw: Any, i: int) -> dict[str, Any]:
    """Node ``i``'s record read back for the detail pane, checked with the core's strict node
    reader: as the views keep it, or a ``ValueError`` naming what is wrong."""
    try:
        TraceNode.from_json(raw)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        missing = f"{exc.args[0]!r} is missing" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"malformed trace: nodes[{i}]: {missing[:199]}") from None
    return view_node(raw, plain=True)
