"""Single-pass push parser: model text in chunks, field events out (JSON or Python literals).

``StreamParser(grammar).feed(chunk)`` returns the events that chunk completes; ``close()``
ends the input. A caller may rely on:

* **Linear time.** Each chunk is read once, in time proportional to its length: the parser
  keeps an explicit stack of open containers, and the only text it carries into the next
  chunk is a short fragment it cannot decide yet (an escape cut in half, a possible closing
  ``'''``, a possible code fence). Long strings and numbers are kept as pieces, joined once.
* **Deltas.** A string literal yields at most one ``StringFieldDelta`` per chunk, with escapes
  decoded and never split (a JSON surrogate pair is one character); the deltas of a string
  add up to its ``FieldEnd`` value.
* **Errors.** Malformed input raises ``StreamParseError`` (a ``MappingError``) with the
  absolute ``position`` and an ``excerpt``; ``events`` holds what the failing chunk produced
  before the error. A failed parser stays failed: ``feed`` and ``close`` raise it again.
* **Bounds**, so hostile output costs bounded time and memory: containers nest at most
  ``MAX_DEPTH`` deep (each value's path is as long as its depth), a number or name is at most
  ``MAX_TOKEN_CHARS`` characters (Python's own limit on ``int`` digits), an integer has at most
  4,300 decimal digits (``_stream_lex.MAX_INT_DIGITS``; a shorter hex literal can have more),
  and a response is at most ``MAX_RESPONSE_CHARS`` characters (what the protocols parse at all).

Two grammars share one event vocabulary (``events``):

* ``"json"``: the first top-level ``{``/``[`` in the text (only ``{`` with
  ``object_root=True``), or the first value after a code fence line (```` ```json ````).
  Prose before the value and anything after it are ignored.
* ``"python"``: restricted Python literals, ``Answer(items=[Item(name='a')], n=-3)``. A call
  with keyword arguments is an object (``ObjectStart.name`` is the class name); lists and
  tuples are arrays; dicts with str/int keys are objects; strings may be single, double or
  triple quoted, with ``r``/``u`` prefixes and implicit concatenation; numbers; ``True``,
  ``False``, ``None``; ``# comments``. The value starts after a code fence line, or at the
  start of the text when it begins with something expression-like (``Name(``, a bracket,
  quote or digit).

The parser is lenient where that is free (trailing commas, raw control characters in JSON
strings): it reports progress for display, and the value a query returns always comes from
the non-streaming parser ``lf.query`` uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import MappingError
from . import _stream_lex as lex
from .events import (
    ArrayEnd,
    ArrayStart,
    FieldEnd,
    FieldEvent,
    FieldStart,
    ObjectEnd,
    ObjectStart,
    Path,
    StringFieldDelta,
)
from .protocols import MAX_RESPONSE_CHARS

__all__ = ["MAX_DEPTH", "MAX_RESPONSE_CHARS", "MAX_TOKEN_CHARS", "StreamParseError", "StreamParser"]

Grammar = Literal["json", "python"]

MAX_DEPTH = 1000
"""Containers nest at most this deep; the next opener is a ``StreamParseError``."""
MAX_TOKEN_CHARS = lex.MAX_INT_DIGITS
"""A number or name is at most this long (``int()`` refuses more than 4,300 digits)."""

_EXCERPT = 24
_json_start = re.compile(r"```|[{\[]").search
_json_object_start = re.compile(r"```|\{").search

# Parser states. In the structural ones, whitespace (and Python comments) are skipped first.
_PRE = "before the document"
_PROSE = "prose before a code fence"
_FENCE = "the code fence's info line"
_VALUE = "a value"
_KEY = "a key"
_SEP = "a key's separator"
_AFTER = "after a value in a container"
_NAME = "after a class name"
_STRING = "a string"
_STRING_OPEN = "a string's opening quotes"
_STRING_AFTER = "after a string (Python: another may continue it)"
_TOKEN = "a number or name"
_COMMENT = "a comment"
_DONE = "after the document"
_STRUCTURAL = frozenset({_VALUE, _KEY, _SEP, _AFTER, _NAME, _STRING_AFTER})


class StreamParseError(MappingError):
    """The streamed text is not a valid document. ``position`` is a character offset into
    everything fed so far; ``excerpt`` is the text around it. ``events`` are the events the
    failing chunk produced before the error."""

    def __init__(self, message: str, *, position: int, excerpt: str) -> None:
        super().__init__(f"{message} at position {position}: {excerpt!r}", raw=excerpt)
        self.position = position
        self.excerpt = excerpt
        self.events: list[FieldEvent] = []


@dataclass(slots=True)
class _Container:
    """An open object or array: its path, its value so far, and how it is written."""

    path: Path
    value: Any  # dict for objects, list for arrays
    closer: str
    separator: str  # between a key and its value: ":" or "=" (a Python call); "" for arrays
    key: str | int = ""


class StreamParser:
    """Incremental parser for one document. Not thread-safe; one instance per stream."""

    def __init__(
        self,
        grammar: Grammar = "json",
        *,
        object_root: bool = False,
        unwrap_result: bool = False,
        max_chars: int = MAX_RESPONSE_CHARS,
    ) -> None:
        """``object_root=True`` (JSON): the document is an object, so an unfenced document
        starts at the first ``{`` and a ``[`` in prose before it is not mistaken for it.

        ``unwrap_result=True`` (JSON): the document may be the JSON protocol's
        ``{"result": ...}``. If the root object's first key is ``result``, events are
        reported relative to it and everything outside it is dropped (``value`` stays the
        whole document); any other first key means there is no wrapper.

        ``max_chars``: feeding more characters than this in all is a ``StreamParseError``."""
        if grammar not in ("json", "python"):
            raise ValueError(f"unknown grammar {grammar!r}; expected 'json' or 'python'")
        self.grammar: Grammar = grammar
        self._py = grammar == "python"
        self._start_search = _json_object_start if object_root else _json_start
        self._unwrap = unwrap_result and not self._py
        self._max_chars = max_chars
        self._state = _PRE
        self._stack: list[_Container] = []
        self._path: Path = ()  # of the value being read
        self._tail = ""  # text held back for the next chunk
        self._fed = 0  # characters fed so far
        self._buf = ""  # the text being scanned: the tail and the current chunk
        self._base = 0  # the position of _buf[0] in the whole input
        self._final = False  # _buf is the end of the input
        self._out: list[FieldEvent] = []
        self._pieces: list[str] = []  # the current string or token
        self._token_chars = 0
        self._token_position = 0
        self._is_key = False
        self._quote = '"'
        self._triple = False
        self._raw = False
        self._name = ""  # Python: a class name waiting for its "("
        self._name_position = 0
        self._resume = _VALUE  # the state a comment returns to
        self._held: list[FieldEvent] | None = None  # root events until the first key
        self._wrapper: _Container | None = None  # the {"result": ...} object, once known
        self._quiet = False  # after the wrapped result: events are dropped
        self._value: Any = None
        self._error: StreamParseError | None = None
        self._steps: dict[str, Callable[[str, int], int]] = {
            _PRE: self._pre,
            _PROSE: self._prose,
            _FENCE: self._fence,
            _VALUE: self._value_start,
            _KEY: self._key,
            _SEP: self._separator,
            _AFTER: self._after,
            _NAME: self._call,
            _STRING: self._string,
            _STRING_OPEN: self._string_open,
            _STRING_AFTER: self._string_after,
            _TOKEN: self._token,
            _COMMENT: self._comment,
        }

    # -- public API ----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The top-level value is complete (later text is ignored)."""
        return self._state == _DONE

    @property
    def value(self) -> Any:
        """The complete top-level value (plain data); ``None`` until ``done``."""
        return self._value

    @property
    def error(self) -> StreamParseError | None:
        """The error this parser failed with, if it did."""
        return self._error

    def feed(self, chunk: str) -> list[FieldEvent]:
        """Consume one chunk; return the events it completes. Raises ``StreamParseError``."""
        if self._error is not None:
            raise self._error
        self._fed += len(chunk)
        if self._fed > self._max_chars:
            error = StreamParseError(
                f"response longer than {self._max_chars} characters",
                position=self._max_chars,
                excerpt="",
            )
            self._error = error
            raise error
        if self._state == _DONE:
            return []
        return self._scan(self._tail + chunk, final=False)

    def close(self) -> list[FieldEvent]:
        """End of input: finish a trailing token or raise ``StreamParseError`` if incomplete."""
        if self._error is not None:
            raise self._error
        return self._scan(self._tail, final=True)

    # -- the scan ------------------------------------------------------------------------------
    def _scan(self, buf: str, final: bool) -> list[FieldEvent]:
        """Run the state machine over ``buf``: each step consumes text from ``i`` on and
        returns where the next one starts."""
        out = self._out = []
        self._buf, self._final, self._tail = buf, final, ""
        self._base = self._fed - len(buf)
        i, n = 0, len(buf)
        try:
            try:
                while i < n and self._state != _DONE:
                    state = self._state
                    if state in _STRUCTURAL:
                        c = buf[i]
                        if c in lex.WHITESPACE:
                            i = lex.whitespace_end(buf, i)
                            continue
                        if c == "#" and self._py:
                            self._resume, self._state = state, _COMMENT
                            i += 1
                            continue
                    i = self._steps[state](buf, i)
            except lex.LexError as problem:
                raise self._fail(problem.message, problem.index) from None
            if final:
                self._finish()
        except StreamParseError as error:
            error.events = out
            self._error = error
            raise
        return out

    def _finish(self) -> None:
        """At the end of the input: complete what the end completes, or fail."""
        if self._state == _COMMENT:
            self._state = self._resume
        if self._state == _TOKEN:
            self._end_token(self._buf, len(self._buf))
        if self._state == _STRING_AFTER:
            self._end_value("".join(self._pieces))
        state = self._state
        if state == _DONE:
            return
        end = len(self._buf)
        if state in (_PRE, _PROSE, _FENCE):
            raise self._fail(f"no {'Python expression' if self._py else 'JSON value'} found", end)
        if state in (_STRING, _STRING_OPEN):
            raise self._fail("unterminated string", end)
        raise self._fail("unexpected end of input", end)

    def _fail(self, message: str, i: int, position: int | None = None) -> StreamParseError:
        """An error at ``self._buf[i]`` (or at ``position``, when the problem started in an
        earlier chunk)."""
        buf = self._buf
        excerpt = buf[max(0, i - _EXCERPT) : i + _EXCERPT]
        where = self._base + i if position is None else position
        return StreamParseError(message, position=where, excerpt=excerpt)

    def _hold(self, buf: str, i: int) -> int:
        """Keep ``buf[i:]`` for the next chunk: it cannot be decided yet."""
        self._tail = buf[i:]
        return len(buf)

    # -- before the document -------------------------------------------------------------------
    def _pre(self, buf: str, i: int) -> int:
        if not self._py:
            m = self._start_search(buf, i)
            if m is None:
                return self._hold_backticks(buf, i)
            if m.group() == "```":
                self._state = _FENCE
                return m.end()
            self._state = _VALUE
            return m.start()
        c = buf[i]
        if c in lex.WHITESPACE:
            return lex.whitespace_end(buf, i)
        if c == "`":
            if buf.startswith("```", i):
                self._state = _FENCE
                return i + 3
            if not self._final and "```".startswith(buf[i:]):
                return self._hold(buf, i)
            self._state = _PROSE
            return i
        if c in "[{(\"'-+.0123456789":
            self._state = _VALUE
            return i
        m = lex.identifier_end(buf, i)
        if m is None:
            self._state = _PROSE
            return i
        word, j = m.group(), m.end()
        if j == len(buf) and not self._final and j - i < MAX_TOKEN_CHARS:
            return self._hold(buf, i)  # what follows the word decides
        nxt = buf[j : j + 1]
        call = nxt == "("
        prefixed_string = nxt != "" and nxt in "'\"" and word in lex.PYTHON_STRING_PREFIXES
        constant = word in lex.PYTHON_CONSTANTS and (not nxt or nxt in lex.WHITESPACE)
        self._state = _VALUE if call or prefixed_string or constant else _PROSE
        return i

    def _prose(self, buf: str, i: int) -> int:
        j = buf.find("```", i)
        if j == -1:
            return self._hold_backticks(buf, i)
        self._state = _FENCE
        return j + 3

    def _fence(self, buf: str, i: int) -> int:
        j = buf.find("\n", i)
        if j == -1:
            return len(buf)
        self._state = _VALUE
        return j + 1

    def _hold_backticks(self, buf: str, i: int) -> int:
        """Nothing starts in ``buf[i:]``, but a fence may begin with its last backticks."""
        n = len(buf)
        k = n
        while k > max(i, n - 2) and buf[k - 1] == "`":
            k -= 1
        return self._hold(buf, k) if not self._final else n

    # -- events --------------------------------------------------------------------------------
    def _emit(self, event: FieldEvent) -> None:
        if not self._quiet:
            self._out.append(event)

    def _end_value(self, value: Any) -> None:
        """The value at ``self._path`` is complete: report it and add it to its container."""
        self._emit(FieldEnd(self._path, value))
        if not self._stack:
            self._value = value
            self._state = _DONE
            return
        top = self._stack[-1]
        if top.separator:
            top.value[top.key] = value
        else:
            top.value.append(value)
        self._state = _AFTER
        if top is self._wrapper:
            self._quiet = True  # the result is complete; the rest of the wrapper is not shown

    # -- structure: containers, keys, separators -----------------------------------------------
    def _value_start(self, buf: str, i: int) -> int:
        c = buf[i]
        stack = self._stack
        if stack and c == stack[-1].closer and not stack[-1].separator:
            return self._close(i)  # an empty array, or a trailing comma
        if c == '"' or (self._py and c == "'"):
            self._emit(FieldStart(self._path))
            return self._begin_string(i, is_key=False, raw=False)
        if c == "{" or c == "[" or (self._py and c == "("):
            return self._open(c, i)
        if c in lex.TOKEN_CHARS:
            self._emit(FieldStart(self._path))
            self._begin_token(i, is_key=False)
            return i
        raise self._fail(f"unexpected character {c!r}", i)

    def _open(self, opener: str, i: int, name: str | None = None) -> int:
        """Open a container at ``buf[i]``: ``{``, ``[``, ``(`` (a tuple, or a call to
        ``name``)."""
        if len(self._stack) >= MAX_DEPTH:
            raise self._fail(f"containers nested deeper than {MAX_DEPTH} levels", i)
        path = self._path
        # A call's FieldStart came with its class name.
        events: list[FieldEvent] = [FieldStart(path)] if name is None else []
        if opener == "[" or (opener == "(" and name is None):
            self._stack.append(_Container(path, [], "]" if opener == "[" else ")", ""))
            events.append(ArrayStart(path))
            self._path = (*path, 0)
            self._state = _VALUE
        else:
            closer, separator = (")", "=") if opener == "(" else ("}", ":")
            self._stack.append(_Container(path, {}, closer, separator))
            events.append(ObjectStart(path, name))
            self._state = _KEY
        if self._unwrap and len(self._stack) == 1 and opener == "{":
            # The root object may be the {"result": ...} wrapper: its events wait for the
            # first key, and are shown only if it is not.
            self._held = events
        else:
            for event in events:
                self._emit(event)
        return i + 1

    def _close(self, i: int) -> int:
        container = self._stack.pop()
        self._release_held()
        if container.separator:
            self._emit(ObjectEnd(container.path))
        else:
            self._emit(ArrayEnd(container.path))
        self._path = container.path
        self._end_value(container.value)
        return i + 1

    def _release_held(self) -> None:
        if self._held is not None:
            self._out.extend(self._held)
            self._held = None

    def _key(self, buf: str, i: int) -> int:
        c = buf[i]
        top = self._stack[-1]
        if c == top.closer:
            return self._close(i)
        if c in "'\"" if self._py else c == '"':
            if top.separator == "=":  # a call's keys are names
                raise self._fail(f"expected an argument name, got {c!r}", i)
            return self._begin_string(i, is_key=True, raw=False)
        if self._py and (
            (top.separator == "=" and c in lex.IDENTIFIER_START)
            or (top.separator == ":" and (c.isdigit() or c == "-"))
        ):
            self._begin_token(i, is_key=True)
            return i
        raise self._fail(f"expected a key, got {c!r}", i)

    def _key_done(self, key: str | int) -> None:
        top = self._stack[-1]
        top.key = key
        self._state = _SEP
        if self._held is not None:  # the root object's first key: is it the wrapper?
            if key == "result":
                self._wrapper = top
                self._held = None
            else:
                self._release_held()

    def _separator(self, buf: str, i: int) -> int:
        c = buf[i]
        top = self._stack[-1]
        if c != top.separator:
            raise self._fail(f"expected {top.separator!r} after key, got {c!r}", i)
        self._path = () if top is self._wrapper else (*top.path, top.key)
        self._state = _VALUE
        return i + 1

    def _after(self, buf: str, i: int) -> int:
        c = buf[i]
        top = self._stack[-1]
        if c == ",":
            if top.separator:
                self._state = _KEY
            else:
                self._path = (*top.path, len(top.value))
                self._state = _VALUE
            return i + 1
        if c == top.closer:
            return self._close(i)
        raise self._fail(f"expected ',' or {top.closer!r}, got {c!r}", i)

    def _call(self, buf: str, i: int) -> int:
        """Python: a class name has been read; only ``(`` may follow it."""
        if buf[i] != "(":
            message = f"name {self._name!r} is not a value (only calls of class names are)"
            raise self._fail(message, i, self._name_position)
        return self._open("(", i, self._name)

    def _comment(self, buf: str, i: int) -> int:
        j = buf.find("\n", i)
        if j == -1:
            return len(buf)
        self._state = self._resume
        return j + 1

    # -- strings -------------------------------------------------------------------------------
    def _begin_string(self, i: int, *, is_key: bool, raw: bool) -> int:
        """A string opens at ``buf[i]``; returns where its scan goes on. A JSON string's quote
        is consumed here; a Python one decides single or triple quotes first."""
        self._pieces = []
        self._is_key = is_key
        self._raw = raw
        self._quote = '"'
        self._triple = False
        if self._py:
            self._state = _STRING_OPEN
            return i
        self._state = _STRING
        return i + 1

    def _string_open(self, buf: str, i: int) -> int:
        """Python: at an opening quote, decide between ``'...'`` and ``'''...'''``."""
        q = buf[i]
        self._quote = q
        if buf.startswith(q * 3, i):
            self._triple = True
            self._state = _STRING
            return i + 3
        if buf[i + 1 : i + 2] not in ("", q) or i + 2 < len(buf) or self._final:
            self._triple = False
            self._state = _STRING
            return i + 1
        return self._hold(buf, i)  # ' or '' at the end: could still become '''

    def _string(self, buf: str, i: int) -> int:
        """String contents from ``buf[i]``: one delta for what this chunk holds of the
        string, then the string's end if it is here."""
        n = len(buf)
        quote, find_special = self._quote, lex.find_special[self._quote]
        decoded: list[str] = []
        end = -1
        while True:
            m = find_special(buf, i)
            j = m.start() if m is not None else n
            if j > i:
                decoded.append(buf[i:j])
            if j == n:
                i = n
                break
            if buf[j] == "\\":
                if self._py:
                    escape = lex.python_escape(buf, j, self._raw)
                else:
                    escape = lex.json_escape(buf, j)
                if escape is None:  # cut by the chunk's end
                    i = self._hold(buf, j)
                    break
                decoded.append(escape[0])
                i = escape[1]
            elif not self._triple:
                i = end = j + 1
                break
            elif buf.startswith(quote * 3, j):
                i = end = j + 3
                break
            elif j + 3 > n and buf[j:] == quote * (n - j):
                i = self._hold(buf, j)  # a closing ''' may be arriving
                break
            else:
                decoded.append(quote)
                i = j + 1
        text = "".join(decoded)
        if text:
            self._pieces.append(text)
            if not self._is_key:
                self._emit(StringFieldDelta(self._path, text))
        if end != -1:
            self._end_string()
        return i

    def _end_string(self) -> None:
        if self._is_key:
            self._key_done("".join(self._pieces))
        elif self._py:
            self._state = _STRING_AFTER  # 'ab' 'cd' is one string
        else:
            self._end_value("".join(self._pieces))

    def _string_after(self, buf: str, i: int) -> int:
        if buf[i] in "'\"":
            self._raw = False
            self._state = _STRING_OPEN
            return i
        self._end_value("".join(self._pieces))
        return i

    # -- numbers, constants and names ----------------------------------------------------------
    def _begin_token(self, i: int, *, is_key: bool) -> None:
        self._pieces = []
        self._token_chars = 0
        self._token_position = self._base + i
        self._is_key = is_key
        self._state = _TOKEN

    def _token(self, buf: str, i: int) -> int:
        j = lex.token_end(buf, i)
        if j > i:
            self._pieces.append(buf[i:j])
            self._token_chars += j - i
            if self._token_chars > MAX_TOKEN_CHARS:
                message = f"number or name longer than {MAX_TOKEN_CHARS} characters"
                raise self._fail(message, i, self._token_position)
        if j == len(buf) and not self._final:
            return j  # the token may go on in the next chunk
        return self._end_token(buf, j)

    def _end_token(self, buf: str, j: int) -> int:
        """The token ends at ``buf[j]``: a key, a value, a string prefix or a class name."""
        token = "".join(self._pieces)
        nxt = buf[j : j + 1]
        try:
            if self._is_key:
                self._key_done(self._key_token(token))
            elif not self._py:
                self._end_value(lex.json_literal(token))
            elif token in lex.PYTHON_STRING_PREFIXES and nxt and nxt in "'\"":
                return self._begin_string(j, is_key=False, raw=token in ("r", "R"))
            elif lex.PYTHON_NAME.fullmatch(token) and token not in lex.PYTHON_CONSTANTS:
                self._name, self._name_position = token, self._token_position
                self._state = _NAME
            else:
                self._end_value(lex.python_literal(token))
        except ValueError as exc:
            raise self._fail(str(exc), j, self._token_position) from None
        return j

    def _key_token(self, token: str) -> str | int:
        """Python: an argument name in a call, an int key in a dict."""
        if self._stack[-1].separator == "=":
            if not lex.PYTHON_IDENTIFIER.fullmatch(token):
                raise ValueError(f"invalid argument name {token!r}")
            return token
        if not lex.PYTHON_INT.fullmatch(token):
            raise ValueError(f"unsupported dict key {token!r}")
        return int(token.replace("_", ""))
