"""A saved trace's JSON read as a stream: the header and the node records in batches, with
memory bounded by a batch (about a megabyte of records), not by the file.

Parsing is one ``json.loads`` per batch of records, not one call per node: a cut is tried
where a record may end and the next begin (the core writes ``"id"`` first), and a cut that
parses holds whole records only (an object cut in the middle never parses). What no such cut
takes (the last record, a record larger than a batch, records in another key order) is read
one record at a time, and the key that record begins with is looked for from then on.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .trace import check_trace_header

__all__ = ["read_batches", "regular_file"]

_READ = 4 << 20  # bytes read from the file at a time
_BATCH = 1 << 20  # bytes of node records parsed by one json.loads
_MAX_VALUE = 256 << 20  # a single header value or record larger than this is refused
_NEXT = re.compile(rb'\}\s*,\s*\{\s*"id"')  # a record ends, the next begins
_WS = b" \t\r\n"
_SPACE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


def _bad(what: str) -> ValueError:
    return ValueError(f"not a langfx_nb trace: not valid JSON ({what})")


class _Bytes:
    """The file's bytes, read on demand, with the file offset of what is parsed."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.buf = b""
        self.at = 0  # cursor in buf
        self.base = 0  # file offset of buf[0]
        self.eof = False
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
            raise _bad(f"expected {char.decode()!r} at byte {self.base + self.at}")
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
            except RecursionError as exc:
                raise _bad("nested too deeply") from exc
            except json.JSONDecodeError as exc:
                if size < _MAX_VALUE and (self.at + size < len(self.buf) or self.more()):
                    size *= 4
                    continue
                raise _bad(str(exc)) from exc
            if end == len(text) and (self.at + size < len(self.buf) or self.more()):
                if size >= _MAX_VALUE:
                    raise _bad(f"a value larger than {_MAX_VALUE >> 20} MB")
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
    except UnicodeDecodeError as exc:
        raise ValueError("not a langfx_nb trace: not valid UTF-8") from exc


def _records(reader: _Bytes) -> tuple[list[Any], bytes]:
    """The next records of the ``nodes`` list: as many whole records as end within about
    ``_BATCH`` bytes, parsed by one ``json.loads`` (else one at a time), and their JSON
    array as read."""
    reader.peek()
    reader.ensure(_BATCH + 1)
    buf, at = reader.buf, reader.at
    for cut in reversed(_last_cuts(reader.next, buf, at, min(len(buf), at + _BATCH))):
        body = b"[" + buf[at:cut] + b"]"
        try:
            batch = json.loads(body)
        except RecursionError as exc:
            raise _bad("nested too deeply") from exc
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(batch, list):
            reader.at = cut
            return batch, body
    return _one_by_one(reader)


def _last_cuts(pattern: re.Pattern[bytes], buf: bytes, at: int, end: int) -> list[int]:
    """The last two places in ``buf[at:end]`` where a record may end and the next begin."""
    tail = 1 << 14
    while True:
        lo = max(at, end - tail)
        cuts = [m.start() + 1 for m in pattern.finditer(buf, lo, end)]
        if len(cuts) >= 2 or lo == at:
            return cuts[-2:]
        tail *= 8


def _one_by_one(reader: _Bytes) -> tuple[list[Any], bytes]:
    """Records read one at a time (``raw_decode``) up to about ``_BATCH`` bytes; a first
    record that does not end within the region is read on its own."""
    buf, at = reader.buf, reader.at
    text = _decode(buf[at : at + _BATCH], final=reader.eof and at + _BATCH >= len(buf))
    out: list[Any] = []
    done = pos = 0
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except RecursionError as exc:
            raise _bad("nested too deeply") from exc
        except json.JSONDecodeError:
            break
        out.append(value)
        done = end
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]  # matches ""
        if pos >= len(text) or text[pos] != ",":
            break
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    if not out:
        out.append(reader.value())
        body = json.dumps(out, ensure_ascii=False).encode("utf-8")
    else:
        taken = text[:done].encode("utf-8")
        reader.at = at + len(taken)
        body = b"[" + taken + b"]"
    record = out[-1]
    if type(record) is dict and record:
        key = json.dumps(next(iter(record)), ensure_ascii=False).encode("utf-8")
        reader.next = re.compile(rb"\}\s*,\s*\{\s*" + re.escape(key))
    return out, body


def read_batches(
    path: str | Path,
    header: dict[str, Any],
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[list[Any], bytes]]:
    """The node records of the trace file at ``path``, in batches (each with its JSON array
    as read); ``header`` is filled with
    the other top-level fields (complete once the batches are exhausted, then checked).
    ``progress(bytes_read, file_size)`` after each batch. A file that is not a trace, or
    not valid JSON, raises ``ValueError`` naming what is wrong."""
    path = Path(path)
    regular_file(path)
    saw_nodes = False
    with path.open("rb") as file:
        size = _size(file)
        reader = _Bytes(file)
        reader.expect(b"{")
        while reader.peek() != b"}":
            key = reader.value()
            reader.expect(b":")
            if key != "nodes":
                if not isinstance(key, str):
                    raise _bad("a key that is not a string")
                header[key] = reader.value()
                check_trace_header(header, whole=False)
            else:
                if saw_nodes:
                    raise ValueError("malformed trace: 'nodes' given twice")
                saw_nodes = True
                reader.expect(b"[")
                more = reader.peek() != b"]"
                if not more:
                    reader.at += 1
                while more:
                    yield _records(reader)
                    if progress is not None:
                        progress(reader.base + reader.at, size)
                    sep = reader.peek()
                    if sep not in (b",", b"]"):
                        raise _bad("in 'nodes'")
                    reader.at += 1
                    more = sep == b","
            if reader.peek() == b",":
                reader.at += 1
            elif reader.peek() != b"}":
                raise _bad("expected ','")
        reader.at += 1
        if reader.peek() != b"":
            raise _bad("data after the trace")
    check_trace_header(header)
    if not saw_nodes:
        raise ValueError("malformed trace: 'nodes' must be a list")


def regular_file(path: Path) -> None:
    """``ValueError`` unless ``path`` is a regular file (after links): a device, a pipe or
    a folder is never opened (a read of ``/dev/zero`` never ends, a FIFO's open waits)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from exc
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: not a regular file")


def _size(file: BinaryIO) -> int:
    return os.fstat(file.fileno()).st_size
