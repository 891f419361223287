"""Incremental ``text/event-stream`` decoding (the WHATWG server-sent-events rules).

What a caller may rely on:

- Every split of the same bytes gives the same events: lines end at CR, LF or CRLF (a CR at
  the end of one chunk and a LF at the start of the next are one line break), a leading
  byte-order mark is skipped even when it is split, and lines are cut as bytes (a line-break
  byte never occurs inside a multi-byte UTF-8 character), so UTF-8 split across reads is
  fine.
- Each byte is handled a bounded number of times: an unfinished line is kept as a list of
  pieces and joined once when its line break arrives, so one huge event costs time linear
  in its size.
- Neither a line held across reads nor an event's data (its ``data:`` lines) may exceed
  ``max_event_bytes``: past it the stream ends with a ``StreamProtocolError`` naming the
  limit, before more memory is taken, so a hostile or broken server cannot make the client
  buffer without bound. (A long ``event:`` or comment line that arrives within one read is
  not rejected: it is already in memory and is not kept.)
- Comments, ``id`` and ``retry`` are ignored; an event without data is dropped; an event
  still unterminated at end of stream is discarded, as the standard says.
- Events are plain ``(name, data)`` tuples. Names are checked as UTF-8 here (invalid UTF-8
  is a ``StreamProtocolError``); data stays bytes, checked by whoever decodes it (the
  providers' JSON parser).
"""

from __future__ import annotations

from ..errors import StreamProtocolError

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSEEvent", "SSEParser"]

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


SSEEvent = tuple[str, bytes]
"""One event: its name (``"message"`` when the stream names none) and its data as UTF-8
bytes, several ``data:`` lines joined by ``\\n``."""


class SSEParser:
    """Feed it the body's chunks as they arrive; it returns the events each chunk completes."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self.max_event_bytes = max_event_bytes
        self._line: list[bytes] = []  # pieces of the line not yet ended
        self._line_size = 0
        self._data: list[bytes] = []  # data lines of the event not yet dispatched
        self._data_size = 0
        self._event = ""
        self._skip_lf = False  # the last chunk ended in CR: a LF starting the next is its pair
        self._started = False  # the byte-order mark check is done

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 10:
                chunk = chunk[1:]
        if not self._started:
            if self._line:  # at most two bytes of a possible byte-order mark
                chunk = self._line.pop() + chunk
                self._line_size = 0
            if len(chunk) < 3 and _BOM.startswith(chunk):
                if chunk:
                    self._line.append(chunk)
                    self._line_size = len(chunk)
                return []
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r")) + 1
        if end == 0:  # no line ends in this chunk
            self._line.append(chunk)
            self._line_size += len(chunk)
            if self._line_size > self.max_event_bytes:
                self._too_big("line")
            return []
        complete, rest = chunk[:end], chunk[end:]
        if self._line:
            first = min(i for i in (complete.find(b"\n"), complete.find(b"\r")) if i >= 0)
            if self._line_size + first > self.max_event_bytes:
                self._too_big("line")
            self._line.append(complete)
            complete = b"".join(self._line)
        self._line = [rest] if rest else []
        self._line_size = len(rest)
        self._skip_lf = not rest and complete[-1] == 13
        return self._lines(complete.splitlines())

    def close(self) -> list[SSEEvent]:
        """End of stream: an unterminated line or event is discarded."""
        self._line, self._data = [], []
        self._line_size = self._data_size = 0
        return []

    def _lines(self, lines: list[bytes]) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        data, size, name, limit = self._data, self._data_size, self._event, self.max_event_bytes
        for line in lines:
            if line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
            elif not line:  # a blank line dispatches the event
                if data:
                    out.append((name or "message", b"\n".join(data)))
                    data, size = [], 0
                name = ""
                continue
            else:  # "field: value", "field" alone, or ": a comment" (an empty field name)
                field, _, value = line.partition(b":")
                if value[:1] == b" ":
                    value = value[1:]
                if field == b"event":
                    try:
                        name = value.decode()
                    except UnicodeDecodeError as exc:
                        raise StreamProtocolError("event stream is not valid UTF-8") from exc
                if field != b"data":
                    continue  # event (done above), comments, id, retry, unknown fields
            size += len(value) + 1
            if size > limit:
                self._too_big("event")
            data.append(value)
        self._data, self._data_size, self._event = data, size, name
        return out

    def _too_big(self, what: str) -> None:
        limit = self.max_event_bytes
        self.close()
        raise StreamProtocolError(
            f"a server-sent {what} exceeds max_event_bytes={limit} ({_size(limit)}); "
            "pass a larger max_event_bytes= to the model if the server's events are that big"
        )


def _size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"
