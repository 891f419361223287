"""A saved trace's JSON read as a stream: the header and the node records in batches, with
memory bounded by a batch (about a megabyte of records), not by the file.

Parsing is one ``json.loads`` per batch of records, not one call per node: a cut is tried
where a record may end and the next begin (the core writes ``"id"`` first), and a cut that
parses holds whole records only (an object cut in the middle never parses). What no such cut
takes (the last record, a record larger than a batch, records in another key order) is read
one record at a time, and the key that record begins with is looked for from then on.
"""

from __future__ import annotations

import codecs
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
_SPACE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


def _bad(what: str) -> ValueError:
    return ValueError(f"not a langfx_nb trace: not valid JSON ({what})")


def _cut_before(key: bytes) -> re.Pattern[bytes]:
    """Where a record ends and the next, beginning with ``key``, begins."""
    return re.compile(rb"\}\s*,\s*\{\s*" + re.escape(key))


class _Bytes:
    """The file's bytes, read on demand, with the file offset of what is parsed."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.buf = b""
        self.at = 0  # cursor in buf
        self.base = 0  # file offset of buf[0]
        self.eof = False
        self.next = _cut_before(b'"id"')

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

    def fill(self, n: int) -> bool:
        """Read until ``n`` bytes are left to parse; whether they are (else: the end)."""
        while len(self.buf) - self.at < n:
            if not self.more():
                return False
        return True

    def peek(self) -> bytes:
        """The next byte that is not white space (``b""`` at the end)."""
        while True:
            buf, at = self.buf, self.at
            while at < len(buf) and buf[at] in b" \t\r\n":
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

    def text(self, size: int) -> tuple[str, bool]:
        """The text of the next ``size`` bytes (a UTF-8 sequence cut at their end left out),
        and whether it is all that is left."""
        more = self.fill(size + 1)
        data = self.buf[self.at : self.at + size]
        try:
            return codecs.getincrementaldecoder("utf-8")().decode(data, not more), not more
        except UnicodeDecodeError as exc:
            raise ValueError("not a langfx_nb trace: not valid UTF-8") from exc

    def value(self) -> Any:
        """The next JSON value (a header field, or a record read on its own)."""
        self.peek()
        size = 1 << 16
        while True:
            text, whole = self.text(size)
            try:
                value, end = _DECODER.raw_decode(text)
            except RecursionError as exc:
                raise _bad("nested too deeply") from exc
            except json.JSONDecodeError as exc:
                if whole or size >= _MAX_VALUE:
                    raise _bad(str(exc)) from exc
                size *= 4
                continue
            if end == len(text) and not whole:  # a number may go on
                if size >= _MAX_VALUE:
                    raise _bad(f"a value larger than {_MAX_VALUE >> 20} MB")
                size *= 4
                continue
            self.at += len(text[:end].encode("utf-8"))
            return value


def _records(reader: _Bytes) -> tuple[list[Any], bytes]:
    """The next records of the ``nodes`` list: as many whole records as end within about
    ``_BATCH`` bytes, parsed by one ``json.loads`` (else one at a time), and their JSON
    array as read."""
    reader.peek()
    reader.fill(_BATCH + 1)
    buf, at = reader.buf, reader.at
    end, tail = min(len(buf), at + _BATCH), 1 << 14
    while True:  # the last two cuts in buf[at:end]
        lo = max(at, end - tail)
        cuts = [m.start() + 1 for m in reader.next.finditer(buf, lo, end)]
        if len(cuts) >= 2 or lo == at:
            break
        tail *= 8
    for cut in reversed(cuts[-2:]):
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
    # one at a time, up to about _BATCH bytes; a first record that does not end within them
    # is read on its own
    text, _ = reader.text(_BATCH)
    out: list[Any] = []
    done = pos = 0
    while pos < len(text):
        try:
            value, done = _DECODER.raw_decode(text, pos)
        except RecursionError as exc:
            raise _bad("nested too deeply") from exc
        except json.JSONDecodeError:
            break
        out.append(value)
        pos = _SPACE.match(text, done).end()  # type: ignore[union-attr]  # matches ""
        if pos >= len(text) or text[pos] != ",":
            break
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    if out:
        taken = text[:done].encode("utf-8")
        reader.at += len(taken)
        body = b"[" + taken + b"]"
    else:
        out.append(reader.value())
        body = json.dumps(out).encode("ascii")
    if type(out[-1]) is dict and out[-1]:
        reader.next = _cut_before(json.dumps(next(iter(out[-1]))).encode())
    return out, body


def read_batches(
    path: str | Path,
    header: dict[str, Any],
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[list[Any], bytes]]:
    """The node records of the trace file at ``path``, in batches (each with its JSON array
    as read); ``header`` is filled with the other top-level fields (complete once the
    batches are exhausted, then checked). ``progress(bytes_read, file_size)`` after each
    batch. A file that is not a trace, or not valid JSON, raises ``ValueError`` naming what
    is wrong."""
    path = Path(path)
    regular_file(path)
    saw_nodes = False
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        reader = _Bytes(file)
        reader.expect(b"{")
        while reader.peek() != b"}":
            key = reader.value()
            reader.expect(b":")
            if key == "nodes":
                if saw_nodes:
                    raise ValueError("malformed trace: 'nodes' given twice")
                saw_nodes = True
                reader.expect(b"[")
                sep = reader.peek()
                if sep == b"]":  # no records
                    reader.at += 1
                while sep != b"]":
                    yield _records(reader)
                    if progress is not None:
                        progress(reader.base + reader.at, size)
                    sep = reader.peek()
                    if sep not in (b",", b"]"):
                        raise _bad("in 'nodes'")
                    reader.at += 1
            elif isinstance(key, str):
                header[key] = reader.value()
                check_trace_header(header, whole=False)
            else:
                raise _bad("a key that is not a string")
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
