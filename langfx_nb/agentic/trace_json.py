"""A saved trace's JSON read as a stream: the header and the node records in batches, with
memory bounded by a batch (about a megabyte of records), not by the file.

A batch is parsed by one ``json.loads`` when it ends where the next record begins with
``"id"`` (as the core writes them): such a cut is never inside a string, and one inside a
record never parses. What no such cut takes (the last record, a record larger than a batch,
records in another key order) is read one record at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from .trace import check_trace_header

__all__ = ["Progress", "naming", "parse_trace", "read_batches", "regular_file"]

Progress = Callable[[int, int], None]  # progress(bytes_read, file_size)

_READ = 4 << 20  # characters read from the file at a time
_BATCH = 1 << 20  # characters of node records in a batch
_MAX_VALUE = 256 << 20  # a single header value or record larger than this is refused
_SPACE = re.compile(r"[ \t\r\n]*")
_CUT = re.compile(r'\}\s*,\s*\{\s*"id"')  # where a record ends and the next begins
_DECODER = json.JSONDecoder()


def _bad(what: str) -> ValueError:
    return ValueError(f"not a langfx_nb trace: not valid JSON ({what})")


class _Text:
    """The file's text, read as needed, and a cursor (``at``) in what is not parsed."""

    def __init__(self, file: TextIO) -> None:
        self.file = file
        self.text = ""
        self.at = 0
        self.done = 0  # characters before text[0]
        self.eof = False

    def more(self, ahead: int) -> None:
        """Read until ``ahead`` characters are left to parse, or the file ends."""
        while len(self.text) - self.at < ahead and not self.eof:
            try:
                data = self.file.read(_READ)
            except UnicodeDecodeError as exc:
                raise ValueError("not a langfx_nb trace: not valid UTF-8") from exc
            self.eof = not data
            self.done += self.at
            self.text = self.text[self.at :] + data
            self.at = 0

    def peek(self) -> str:
        """The next character that is not white space (``""`` at the end)."""
        while True:
            self.at = _SPACE.match(self.text, self.at).end()  # type: ignore[union-attr]
            if self.at < len(self.text) or self.eof:
                return self.text[self.at : self.at + 1]
            self.more(1)

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise _bad(f"expected {char!r} at character {self.done + self.at}")
        self.at += 1

    def value(self) -> tuple[Any, str]:
        """The next JSON value, and its text."""
        self.peek()
        while True:
            start = self.at
            try:
                value, end = _DECODER.raw_decode(self.text, start)
                if end < len(self.text) or self.eof:  # else a number may go on
                    self.at = end
                    return value, self.text[start:end]
            except RecursionError as exc:
                raise _bad("nested too deeply") from exc
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise _bad(str(exc)) from exc
            if len(self.text) - start >= _MAX_VALUE:
                raise _bad(f"a value larger than {_MAX_VALUE >> 20} MB")
            self.more(2 * (len(self.text) - start))


def _records(reader: _Text) -> tuple[list[Any], bytes]:
    """The next records of the ``nodes`` list (about ``_BATCH`` characters of them), and
    their JSON array as read."""
    reader.peek()
    reader.more(_BATCH)
    text, at = reader.text, reader.at
    end = min(len(text), at + _BATCH)  # the last cuts: in the last 64 kB
    ends = [m.start() + 1 for m in _CUT.finditer(text, max(at, end - (1 << 16)), end)]
    if ends:
        body = f"[{text[at : ends[-1]]}]"
        try:
            records = json.loads(body)
            reader.at = ends[-1]
            return records, body.encode()
        except RecursionError as exc:
            raise _bad("nested too deeply") from exc
        except json.JSONDecodeError:
            pass  # the cut is inside a record
    records, texts, size = [], [], 0
    while True:
        record, record_text = reader.value()
        records.append(record)
        texts.append(record_text)
        size += len(record_text)
        if size >= _BATCH or reader.peek() != ",":
            break
        reader.at += 1
    return records, f"[{','.join(texts)}]".encode()


def read_batches(
    path: str | Path, header: dict[str, Any], progress: Progress | None = None
) -> Iterator[tuple[list[Any], bytes]]:
    """The node records of the trace file at ``path``, in batches (each with its JSON array
    as read); ``header`` is filled with the other top-level fields (complete once the
    batches are exhausted, then checked). ``progress(bytes_read, file_size)`` after each
    batch. A file that is not a trace, or not valid JSON, raises ``ValueError`` naming what
    is wrong."""
    path = Path(path)
    regular_file(path)
    saw_nodes = False
    with path.open(encoding="utf-8", newline="") as file:
        size = os.fstat(file.fileno()).st_size
        reader = _Text(file)
        reader.expect("{")
        while True:
            key, _ = reader.value()
            reader.expect(":")
            if key == "nodes":
                if saw_nodes:
                    raise ValueError("malformed trace: 'nodes' given twice")
                saw_nodes = True
                if reader.peek() != "[":  # valid JSON, but not a list: as the strict reader says
                    raise ValueError("malformed trace: 'nodes' must be a list")
                reader.expect("[")
                more = reader.peek() != "]"
                while more:
                    yield _records(reader)
                    if progress is not None:
                        progress(os.lseek(file.fileno(), 0, os.SEEK_CUR), size)  # bytes read
                    more = reader.peek() == ","
                    if more:
                        reader.at += 1
                reader.expect("]")
            elif isinstance(key, str):
                header[key] = reader.value()[0]
                check_trace_header(header, whole=False)
            else:
                raise _bad("a key that is not a string")
            if reader.peek() != ",":
                break
            reader.at += 1
        reader.expect("}")
        if reader.peek() != "":
            raise _bad("data after the trace")
    check_trace_header(header)
    if not saw_nodes:
        raise ValueError("malformed trace: 'nodes' must be a list")


def parse_trace(text: str) -> Any:
    """A whole trace's JSON text parsed; ``ValueError`` (never quoting the text) when it is
    not valid JSON."""
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise _bad("nested too deeply") from exc
    except ValueError as exc:  # a JSONDecodeError, or an integer of too many digits
        raise _bad(str(exc)[:200]) from exc


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


@contextlib.contextmanager
def naming(where: str) -> Iterator[None]:
    """A plain ``ValueError`` raised inside (a damaged trace read from the file ``where``)
    names the file, once; ``where`` empty: left as it is."""
    try:
        yield
    except ValueError as exc:
        if not where or type(exc) is not ValueError or where in str(exc):
            raise
        raise ValueError(f"{where}: {exc}") from exc
