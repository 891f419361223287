"""Single-pass push parser: model text chunks in, field events out (JSON or Python literals).

``StreamParser(grammar).feed(chunk)`` returns the events that chunk completes; ``close()``
finishes the document. Each chunk costs time proportional to its own length: the parser keeps
an explicit stack of open containers and never re-reads text it has consumed. The only text
it carries between chunks is a held-back fragment that cannot be decided yet (at most an
escape sequence, a possible closing triple quote, or a possible code fence): everything else,
including long strings and long numbers, is kept as pieces and joined once.

String contents are scanned in runs with ``str.find`` and decoded in C (``json`` scanstring)
for the JSON grammar, so a string costs one ``StringFieldDelta`` per chunk, not per character.
An escape split across chunks (``\\u00e9``, surrogate pairs ``\\ud83d\\ude00``, Python's
``\\N{...}``) is held back until complete: a delta never contains half an escape.

Two grammars share one event vocabulary (see ``events``):

* ``"json"``: the first top-level ``{``/``[`` in the text, or the first value after a code fence
  line (```` ```json ````). Prose before and anything after the value are ignored.
* ``"python"``: restricted Python literals: ``Answer(items=[Item(name='a')], n=-3, ok=True)``.
  A call with keyword arguments is an object (``ObjectStart.name`` is the class name); lists
  and tuples are arrays; dicts with str/int keys are objects; strings may be single, double or
  triple quoted, with ``r``/``u`` prefixes and implicit concatenation; numbers; ``True``,
  ``False``, ``None``. The value starts after a code fence line, or at the start of the text
  when it begins with something expression-like (``Name(``, a bracket, quote or digit).

The parser is lenient where that costs nothing (trailing commas, raw control characters in
JSON strings): it reports progress for display. The value a query returns always comes from
the same non-streaming parser ``lf.query`` uses.

The implementation is split by concept: ``_stream_core`` (state, events, shared steps),
``_stream_json`` (the JSON state machine) and ``_stream_python`` (the Python-literal grammar).
The JSON grammar is also compiled (``_cjson.c``, built at install time when a C compiler is
there): the same state machine, giving the same events and errors, at a fraction of the cost
per chunk. ``ACCELERATED`` says whether it is in use; the tests run both and compare them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ._stream_core import (
    _BARE,
    _COMMENT,
    _DONE,
    _FENCE_INFO,
    _PRE,
    _PROSE,
    _STR,
    _STR_AFTER,
    _STR_OPEN,
    StreamParseError,
    _DeltaShell,
)
from ._stream_core import (
    Grammar as Grammar,  # re-exported: the grammar names
)
from ._stream_core import (
    _delta_event as _delta_event,  # re-exported: benchmarks
)
from ._stream_json import _JsonParser
from ._stream_python import _PythonParser
from .events import (
    ArrayEnd,
    ArrayStart,
    FieldEnd,
    FieldEvent,
    FieldStart,
    ObjectEnd,
    ObjectStart,
    StringFieldDelta,
)

try:
    from . import _cjson as _compiled
except ImportError:  # installed without a C compiler: the Python grammar does the same work
    _compiled = None  # type: ignore[assignment]
else:
    _compiled.configure(
        StreamParseError,
        StringFieldDelta,
        FieldStart,
        FieldEnd,
        ObjectStart,
        ObjectEnd,
        ArrayStart,
        ArrayEnd,
    )

ACCELERATED = _compiled is not None
"""JSON documents are parsed by the compiled grammar (``_cjson.c``)."""

__all__ = ["StreamParseError", "StreamParser"]

# Defined in ``_stream_core`` (the grammars raise it); users meet it here, so tracebacks and
# pickles name the public module, as before the split.
StreamParseError.__module__ = __name__


class StreamParser(_JsonParser, _PythonParser):
    """Incremental parser for one document. Not thread-safe; one instance per stream."""

    def __init__(
        self, grammar: Grammar = "json", *, object_root: bool = False, unwrap_result: bool = False
    ) -> None:
        """``unwrap_result=True`` (JSON): the document may be the JSON protocol's
        ``{"result": ...}``; if the root object's first key is ``result``, events are reported
        relative to it and everything outside it is dropped (``value`` stays the whole
        document)."""
        super().__init__(grammar, object_root=object_root)
        self._core = None
        if grammar == "json" and _compiled is not None:
            core = self._core = _compiled.JsonCore(object_root, unwrap_result)
            # The instance's feed and close are the compiled methods themselves, not Python
            # wrappers around them: a wrapper's call would cost as much as the compiled work
            # on a typical chunk.
            self.__dict__.update(feed=core.feed, close=core.close)
        elif unwrap_result and not self._py:
            unwrap = _ResultUnwrapper()
            self.__dict__.update(feed=unwrap.around(self.feed), close=unwrap.around(self.close))

    # -- public API ---------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The top-level value is complete (later text is ignored)."""
        return self._core.done if self._core is not None else self._state == _DONE

    @property
    def value(self) -> Any:
        """The complete top-level value (plain data); ``None`` until ``done``."""
        return self._core.value if self._core is not None else self._value

    @property
    def error(self) -> StreamParseError | None:
        return self._core.error if self._core is not None else self._error

    def feed(self, chunk: str) -> list[FieldEvent]:
        """Consume one chunk; return the events it completes. Raises ``StreamParseError``."""
        if self._json_str:
            # Inside a JSON string value with nothing held back: the common case by far.
            if '"' not in chunk and "\\" not in chunk:  # plain text: the string goes on
                if not chunk:
                    return []
                self._hot.append(chunk)  # counted and moved to _pieces by _flush_hot
                ev = _DeltaShell()
                ev.path = self._path
                ev.delta = chunk
                ev.__class__ = StringFieldDelta
                return [ev]
            if self._hot:
                self._flush_hot()
            events = self._string_chunk(chunk)
            if events is not None:
                return events
        if self._hot:
            self._flush_hot()
        if self._error is not None:
            raise self._error
        if self._state == _DONE:
            self._fed += len(chunk)
            return []
        tail = self._tail
        buf = tail + chunk if tail else chunk
        base = self._fed - len(tail)
        self._fed += len(chunk)
        self._tail = ""
        out: list[FieldEvent] = []
        try:
            if self._py:
                self._run(buf, base, out, False)
            else:
                self._run_json(buf, 0, base, out, False)
        except StreamParseError as exc:
            self._failed(exc, out)
            raise
        return out

    def _flush_hot(self) -> None:
        """Move the fast path's chunks into the string's pieces and count them as fed."""
        hot = self._hot
        joined = "".join(hot)
        hot.clear()
        self._fed += len(joined)
        pieces = self._pieces
        pieces.append(joined)
        if len(pieces) > 255:  # bound the number of live pieces
            self._blocks.append("".join(pieces))
            pieces.clear()

    def close(self) -> list[FieldEvent]:
        """End of input: finish a trailing token or raise ``StreamParseError`` if incomplete."""
        if self._error is not None:
            raise self._error
        out: list[FieldEvent] = []
        if self._hot:
            self._flush_hot()
        try:
            tail, self._tail = self._tail, ""
            base = self._fed - len(tail)
            if tail:
                if self._py:
                    self._run(tail, base, out, True)
                else:
                    self._run_json(tail, 0, base, out, True)
            if self._state == _COMMENT:
                self._state = self._resume
            state = self._state
            if state == _BARE:
                self._finish_bare(None, base + len(tail), "", 0, out)
                state = self._state
            elif state == _STR_AFTER:
                self._finish_string_value(out)
                state = self._state
            if state != _DONE:
                if state in (_PRE, _PROSE, _FENCE_INFO):
                    what = "JSON value" if not self._py else "Python expression"
                    raise self._fail(f"no {what} found", self._fed, tail, len(tail))
                if state in (_STR, _STR_OPEN):
                    raise self._fail("unterminated string", self._fed, tail, len(tail))
                raise self._fail("unexpected end of input", self._fed, tail, len(tail))
        except StreamParseError as exc:
            self._failed(exc, out)
            raise
        return out


class _ResultUnwrapper:
    """Hides the JSON protocol's ``{"result": ...}`` wrapper: when the root object's first key
    is ``result``, events are re-rooted under it and everything outside it is dropped; any
    other first key means there is no wrapper and events pass through unchanged."""

    __slots__ = ("_error", "_held", "_mode")

    def __init__(self) -> None:
        self._mode = 0  # 0 undecided, 1 unwrapping, 2 pass-through
        self._held: list[FieldEvent] = []
        self._error: StreamParseError | None = None

    def around(self, step: Callable[..., list[FieldEvent]]) -> Callable[..., list[FieldEvent]]:
        """``step`` (a parser's feed or close) with its events, and those of its error,
        unwrapped."""

        def unwrapped(*args: str) -> list[FieldEvent]:
            try:
                return self(step(*args))
            except StreamParseError as exc:
                if exc is not self._error:  # a failed parser raises the same error again
                    self._error = exc
                    exc.events = self(exc.events)
                raise

        return unwrapped

    def __call__(self, events: list[FieldEvent]) -> list[FieldEvent]:
        if self._mode == 2:
            return events
        out: list[FieldEvent] = []
        for ev in events:
            mode = self._mode
            if mode == 0:
                path = ev.path
                if not path and isinstance(ev, (FieldStart, ObjectStart)):
                    self._held.append(ev)
                    continue
                if path == ("result",) and isinstance(ev, FieldStart):
                    self._mode = mode = 1
                    self._held = []
                else:
                    self._mode = mode = 2
                    out.extend(self._held)
                    self._held = []
            if mode == 2:
                out.append(ev)
                continue
            path = ev.path
            if not path or path[0] != "result":
                continue
            if isinstance(ev, StringFieldDelta):
                out.append(_delta_event(path[1:], ev.delta))
            else:
                out.append(dataclasses.replace(ev, path=path[1:]))
        return out
