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
"""

from __future__ import annotations

import json.decoder
import re
import unicodedata
from json import JSONDecodeError
from typing import Any, Literal, cast

from ..errors import MappingError
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

__all__ = ["StreamParseError", "StreamParser"]

Grammar = Literal["json", "python"]

# Parser states.
_PRE, _PROSE, _FENCE_INFO, _VALUE, _KEY, _SEP, _AFTER = 0, 1, 2, 3, 4, 5, 6
_STR, _STR_OPEN, _STR_AFTER, _BARE, _NAME, _DONE, _COMMENT = 7, 8, 9, 10, 11, 12, 13

# Container kinds: (closer, dict-like, separator after a key).
_OBJ, _ARR, _CALL, _DICT, _LIST, _TUPLE = 0, 1, 2, 3, 4, 5
_CLOSER = ("}", "]", ")", "}", "]", ")")
_DICTLIKE = (True, False, True, True, False, False)
_SEPARATOR = (":", "", "=", ":", "", "")

_JSON_OPENERS = {"[": _ARR, "{": _OBJ}
_PY_OPENERS = {"[": _LIST, "(": _TUPLE, "{": _DICT}
_WS_CHARS = " \t\r\n"
_ws_match = re.compile(r"[ \t\r\n]+").match
_bare_match = re.compile(r"[A-Za-z0-9_.+\-]+").match
_json_start_search = re.compile(r"```|[{\[]").search
_json_object_start_search = re.compile(r"```|\{").search
_json_next_key = re.compile(r',[ \t\r\n]*"([^"\\]*)"[ \t\r\n]*:[ \t\r\n]*').match
_json_key = re.compile(r'"([^"\\]*)"[ \t\r\n]*:[ \t\r\n]*').match
# A run of JSON string content that decodes on its own: no unescaped quote, only complete
# escapes, and no high surrogate (whose low half may follow; the careful path decides).
_json_content = re.compile(
    r'[^"\\]*(?:\\(?:["\\/bfnrt]|u(?![dD][89abAB])[0-9a-fA-F]{4})[^"\\]*)*'
).match
_number_match = re.compile(
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?=[ \t\r\n,\]})])"
).match
_NUMBER_START = "-0123456789"
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_PY_INT = re.compile(r"[+-]?(?:[1-9](?:_?[0-9])*|0(?:_?0)*)")
_PY_INT_BASE = re.compile(r"[+-]?0(?:[xX](?:_?[0-9a-fA-F])+|[oO](?:_?[0-7])+|[bB](?:_?[01])+)")
_PY_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9](?:_?[0-9])*)?\.[0-9](?:_?[0-9])*|[0-9](?:_?[0-9])*\.?)"
    r"(?:[eE][+-]?[0-9](?:_?[0-9])*)?"
)
_PY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_PY_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ident_match = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*").match
_PY_VALUE_START = "[{(\"'-+.0123456789"
_PY_STRING_PREFIXES = frozenset({"r", "u", "R", "U"})
_PY_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|[0-7]{1,3}|\r\n|[\s\S])"
)
_PY_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\n": "",
    "\r\n": "",
}
_PY_ESCAPE_LENGTH = {"x": 4, "u": 6, "U": 10}
_EXCERPT = 24
# the C string decoder behind json.loads (typeshed does not declare it)
_json_scanstring = cast("Any", getattr(json.decoder, "scanstring"))  # noqa: B009


def _shell(cls: type) -> Any:
    """A twin of a frozen event class: the same slots, but plain attribute assignment. An
    event is built as its shell and then given its real class, which is much cheaper than
    the frozen dataclass ``__init__`` (or ``object.__new__`` and slot descriptors) and gives
    the same object: same type, fields, equality and immutability afterwards."""
    slots = cls.__dict__["__slots__"]
    return type(f"_{cls.__name__}Shell", cls.__bases__, {"__slots__": slots})


_DeltaShell = _shell(StringFieldDelta)
_StartShell = _shell(FieldStart)
_EndShell = _shell(FieldEnd)
_ObjectStartShell = _shell(ObjectStart)
_ObjectEndShell = _shell(ObjectEnd)
_ArrayStartShell = _shell(ArrayStart)
_ArrayEndShell = _shell(ArrayEnd)


def _delta_event(path: Path, delta: str) -> StringFieldDelta:
    ev = _DeltaShell()
    ev.path = path
    ev.delta = delta
    ev.__class__ = StringFieldDelta
    return ev


def _start_event(path: Path) -> FieldStart:
    ev = _StartShell()
    ev.path = path
    ev.__class__ = FieldStart
    return ev


def _end_event(path: Path, value: Any) -> FieldEnd:
    ev = _EndShell()
    ev.path = path
    ev.value = value
    ev.__class__ = FieldEnd
    return ev


class StreamParseError(MappingError):
    """The streamed text is not a valid document. ``position`` is a character offset into
    everything fed so far; ``excerpt`` is the text around it. ``events`` are the events the
    failing chunk produced before the error."""

    def __init__(self, message: str, *, position: int, excerpt: str) -> None:
        super().__init__(f"{message} at position {position}: {excerpt!r}", raw=excerpt)
        self.position = position
        self.excerpt = excerpt
        self.events: list[FieldEvent] = []


class _Frame:
    __slots__ = ("closer", "dictlike", "key", "kind", "path", "value")

    def __init__(self, kind: int, path: Path, value: Any) -> None:
        self.kind = kind
        self.path = path
        self.value = value
        self.closer = _CLOSER[kind]
        self.dictlike = _DICTLIKE[kind]
        self.key: str | int = ""


def _unescape_py(m: re.Match[str]) -> str:
    s = m.group(1)
    simple = _PY_SIMPLE_ESCAPES.get(s)
    if simple is not None:
        return simple
    c = s[0]
    if c in "xuU":
        return chr(int(s[1:], 16))
    if c == "N":
        return unicodedata.lookup(s[2:-1])
    if c in "01234567":
        return chr(int(s, 8))
    return "\\" + s  # Python keeps unknown escapes as written


class StreamParser:
    """Incremental parser for one document. Not thread-safe; one instance per stream."""

    def __init__(self, grammar: Grammar = "json", *, object_root: bool = False) -> None:
        """``object_root=True`` (JSON): the document is an object, so an unfenced document
        starts at the first ``{`` and a ``[`` in prose before it is not mistaken for it."""
        if grammar not in ("json", "python"):
            raise ValueError(f"unknown grammar {grammar!r}; expected 'json' or 'python'")
        self.grammar: Grammar = grammar
        self._py = grammar == "python"
        self._start_search = _json_object_start_search if object_root else _json_start_search
        self._state = _PRE
        self._stack: list[_Frame] = []
        self._path: Path = ()
        self._tail = ""
        self._fed = 0  # characters fed before the current chunk
        # current string / bare token
        self._pieces: list[str] = []
        self._blocks: list[str] = []  # joined runs of 256 pieces (a long string's past)
        # chunks the fast path appended to a string value, not yet in _pieces or _fed
        self._hot: list[str] = []
        self._quote = '"'
        self._triple = False
        self._raw = False
        self._is_key = False
        self._name = ""
        self._name_pos = 0
        self._resume = _VALUE  # the state a Python comment returns to
        self._value: Any = None
        self._error: StreamParseError | None = None
        self._json_str = False  # inside a JSON string: feed() may take its fast path

    # -- public API ---------------------------------------------------------------------------
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
        return self._error

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
            exc.events = out
            self._error = exc
            self._json_str = False
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

    def _string_chunk(self, chunk: str) -> list[FieldEvent] | None:
        """A chunk inside a JSON string value with escapes or quotes: one C decode (the
        ``json`` string scanner) finds the end of the string, if it is in this chunk, and
        decodes up to it. ``None``: an escape is cut at the chunk's end (or invalid), so the
        state machine must handle it."""
        n = len(chunk)
        try:
            seg, end = _json_scanstring(chunk + '"', 0, False)
        except ValueError:
            return None
        if end > n:  # the string goes on: safe unless an escape may be cut at the end
            r = chunk.rfind("\\")
            if r >= n - 6 and (r == n - 1 or chunk[r + 1] == "u"):
                return None
            self._fed += n
            if not seg:
                return []
            self._pieces.append(seg)
            ev = _DeltaShell()
            ev.path = self._path
            ev.delta = seg
            ev.__class__ = StringFieldDelta
            return [ev]
        # the string ends at chunk[end - 1]
        base = self._fed
        self._fed = base + n
        path = self._path
        out: list[FieldEvent] = []
        pieces = self._pieces
        if seg:
            pieces.append(seg)
            ev = _DeltaShell()
            ev.path = path
            ev.delta = seg
            ev.__class__ = StringFieldDelta
            out.append(ev)
        if self._blocks:
            blocks, self._blocks = self._blocks, []
            blocks.extend(pieces)
            value = "".join(blocks)
        else:
            value = pieces[0] if len(pieces) == 1 else "".join(pieces)
        self._pieces = []
        ev = _EndShell()
        ev.path = path
        ev.value = value
        ev.__class__ = FieldEnd
        out.append(ev)
        self._json_str = False
        stack = self._stack
        if not stack:
            self._value = value
            self._state = _DONE
            return out
        top = stack[-1]
        if top.dictlike:
            top.value[top.key] = value
        else:
            top.value.append(value)
        self._state = _AFTER
        if end < n:
            try:
                self._run_json(chunk, end, base, out, False)
            except StreamParseError as exc:
                exc.events = out
                self._error = exc
                raise
        return out

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
            exc.events = out
            self._error = exc
            self._json_str = False
            raise
        return out

    # -- the state machine ----------------------------------------------------------------------
    def _fail(self, message: str, position: int, buf: str, i: int) -> StreamParseError:
        start = max(0, i - _EXCERPT)
        return StreamParseError(message, position=position, excerpt=buf[start : i + _EXCERPT])

    def _run(self, buf: str, base: int, out: list[FieldEvent], final: bool) -> None:
        n = len(buf)
        i = 0
        py = self._py
        stack = self._stack
        while i < n:
            st = self._state
            if st == _STR:
                i = (
                    self._scan_py_string(buf, i, base, out)
                    if py
                    else self._scan_json_string(buf, i, base, out)
                )
                continue
            if st == _BARE:
                m = _bare_match(buf, i)
                j = m.end() if m else i
                if j > i:
                    self._pieces.append(buf[i:j])
                if j == n and not final:
                    return
                i = self._finish_bare(buf[j] if j < n else None, base, buf, j, out)
                continue
            if st <= _FENCE_INFO:
                i = self._scan_prelude(buf, i, base, out, final)
                continue
            if st == _DONE:
                return
            if st == _COMMENT:  # Python: a comment runs to the end of the line
                j = buf.find("\n", i)
                if j == -1:
                    return
                self._state = self._resume
                i = j + 1
                continue
            c = buf[i]
            if c in _WS_CHARS:
                i += 1
                if i < n and buf[i] in _WS_CHARS:
                    i = _ws_match(buf, i).end()  # type: ignore[union-attr]
                continue
            if c == "#" and py and st != _STR_OPEN:
                self._resume = st
                self._state = _COMMENT
                i += 1
                continue
            if st == _AFTER:
                top = stack[-1]
                if c == ",":
                    if top.dictlike:
                        m = None if py else _json_next_key(buf, i)
                        if m is not None:  # `, "key": ` in one step: the common case
                            key = top.key = m.group(1)
                            self._path = (*top.path, key)
                            self._state = _VALUE
                            i = m.end()
                            continue
                        self._state = _KEY
                    else:
                        self._path = (*top.path, len(top.value))
                        self._state = _VALUE
                    i += 1
                elif c == top.closer:
                    self._close_container(out)
                    i += 1
                else:
                    raise self._fail(f"expected ',' or {top.closer!r}, got {c!r}", base + i, buf, i)
            elif st == _VALUE:
                i = self._start_value(c, buf, i, base, out)
            elif st == _KEY:
                top = stack[-1]
                if c == top.closer:
                    self._close_container(out)
                    i += 1
                    continue
                kind = top.kind
                if kind == _OBJ and c == '"':
                    q = buf.find('"', i + 1)
                    if q != -1 and "\\" not in buf[i + 1 : q]:  # a whole plain key: common
                        top.key = buf[i + 1 : q]
                        self._state = _SEP
                        i = q + 1
                        continue
                if (kind == _OBJ and c == '"') or (kind == _DICT and c in "'\""):
                    self._begin_string(is_key=True)
                    if kind == _DICT:
                        self._state = _STR_OPEN
                    else:
                        i += 1
                elif (kind == _CALL and (c.isalpha() or c == "_")) or (
                    kind == _DICT and (c.isdigit() or c == "-")
                ):
                    self._begin_bare(is_key=True)
                else:
                    raise self._fail(f"expected a key, got {c!r}", base + i, buf, i)
            elif st == _SEP:
                top = stack[-1]
                if c != _SEPARATOR[top.kind]:
                    raise self._fail(
                        f"expected {_SEPARATOR[top.kind]!r} after key, got {c!r}", base + i, buf, i
                    )
                self._path = (*top.path, top.key)
                self._state = _VALUE
                i += 1
            elif st == _STR_OPEN:
                i = self._open_py_string(buf, i, base, final)
            elif st == _STR_AFTER:
                if c in "'\"":  # implicit concatenation: 'abc' 'def'
                    self._state = _STR_OPEN
                    self._raw = False
                else:
                    self._finish_string_value(out)
            elif st == _NAME:
                if c != "(":
                    raise self._fail(
                        f"name {self._name!r} is not a value (only calls of class names are)",
                        self._name_pos,
                        buf,
                        i,
                    )
                path = self._path
                out.append(ObjectStart(path, self._name))
                stack.append(_Frame(_CALL, path, {}))
                self._state = _KEY
                i += 1
            else:  # pragma: no cover - every state is handled above
                raise AssertionError(st)

    def _run_json(self, buf: str, i: int, base: int, out: list[FieldEvent], final: bool) -> None:
        """The JSON state machine, from ``buf[i]`` to the end of ``buf``.

        The common steps are inlined with the state in locals (a call or an attribute
        store per token is a large share of the cost); rare ones use the helpers above.
        """
        n = len(buf)
        stack = self._stack
        st = self._state
        path = self._path
        append = out.append
        while i < n:
            if st == _STR:
                # string contents from i: a key or a value
                j = _json_content(buf, i).end()  # type: ignore[union-attr]  # always matches
                if j < n and buf[j] != '"':  # an escape to hold back (or an invalid one)
                    self._state = st
                    self._path = path
                    i = self._scan_json_string(buf, i, base, out)
                    st = self._state
                    continue
                if j == n:  # the string goes on in the next chunk
                    seg = buf[i:] if i else buf
                    if "\\" in seg:
                        seg = _json_scanstring(seg + '"', 0, False)[0]
                    if seg:
                        self._pieces.append(seg)
                        if not self._is_key:
                            ev = _DeltaShell()
                            ev.path = path
                            ev.delta = seg
                            ev.__class__ = StringFieldDelta
                            append(ev)
                    break
                no_escape = buf.find("\\", i, j) == -1
                seg = buf[i:j] if no_escape else _json_scanstring(buf, i, False)[0]
                pieces = self._pieces
                if seg:
                    pieces.append(seg)
                    if not self._is_key:
                        ev = _DeltaShell()
                        ev.path = path
                        ev.delta = seg
                        ev.__class__ = StringFieldDelta
                        append(ev)
                if self._blocks:
                    blocks, self._blocks = self._blocks, []
                    blocks.extend(pieces)
                    value: Any = "".join(blocks)
                else:
                    value = pieces[0] if len(pieces) == 1 else "".join(pieces)
                self._pieces = []
                i = j + 1
                if self._is_key:
                    stack[-1].key = value
                    st = _SEP
                    continue
                # fall through: finish the string value
            elif st == _AFTER:
                c = buf[i]
                if c == ",":
                    top = stack[-1]
                    if top.dictlike:
                        m = _json_next_key(buf, i)
                        if m is not None:  # `, "key": ` in one step: the common case
                            key = top.key = m.group(1)
                            path = (*top.path, key)
                            st = _VALUE
                            i = m.end()
                            continue
                        st = _KEY
                    else:
                        path = (*top.path, len(top.value))
                        st = _VALUE
                    i += 1
                    continue
                if c in _WS_CHARS:
                    i += 1
                    if i < n and buf[i] in _WS_CHARS:
                        i = _ws_match(buf, i).end()  # type: ignore[union-attr]
                    continue
                top = stack[-1]
                if c != top.closer:
                    raise self._fail(f"expected ',' or {top.closer!r}, got {c!r}", base + i, buf, i)
                i += 1
                frame = stack.pop()
                path = frame.path
                if frame.dictlike:
                    ev = _ObjectEndShell()
                    ev.path = path
                    ev.__class__ = ObjectEnd
                else:
                    ev = _ArrayEndShell()
                    ev.path = path
                    ev.__class__ = ArrayEnd
                append(ev)
                value = frame.value
            elif st == _VALUE:
                c = buf[i]
                if c == '"':
                    ev = _StartShell()
                    ev.path = path
                    ev.__class__ = FieldStart
                    append(ev)
                    q = buf.find('"', i + 1)
                    if q == -1 or buf.find("\\", i + 1, q) != -1:
                        st = _STR
                        self._is_key = False
                        i += 1
                        continue
                    value = buf[i + 1 : q]  # a whole plain string: common
                    if value:
                        ev = _DeltaShell()
                        ev.path = path
                        ev.delta = value
                        ev.__class__ = StringFieldDelta
                        append(ev)
                    i = q + 1
                elif c in _NUMBER_START and (m := _number_match(buf, i)) is not None:
                    # a number whose end is in sight: no token state needed
                    ev = _StartShell()
                    ev.path = path
                    ev.__class__ = FieldStart
                    append(ev)
                    token = m.group()
                    if "." in token or "e" in token or "E" in token:
                        value = float(token)
                    else:
                        value = int(token)
                    i = m.end()
                elif c == "{":
                    ev = _StartShell()
                    ev.path = path
                    ev.__class__ = FieldStart
                    append(ev)
                    ev = _ObjectStartShell()
                    ev.path = path
                    ev.name = None
                    ev.__class__ = ObjectStart
                    append(ev)
                    stack.append(_Frame(_OBJ, path, {}))
                    st = _KEY
                    i += 1
                    continue
                elif c == "[":
                    ev = _StartShell()
                    ev.path = path
                    ev.__class__ = FieldStart
                    append(ev)
                    ev = _ArrayStartShell()
                    ev.path = path
                    ev.__class__ = ArrayStart
                    append(ev)
                    stack.append(_Frame(_ARR, path, []))
                    path = (*path, 0)
                    i += 1
                    continue
                elif c in _WS_CHARS:
                    i += 1
                    if i < n and buf[i] in _WS_CHARS:
                        i = _ws_match(buf, i).end()  # type: ignore[union-attr]
                    continue
                elif c == "]" and stack and not stack[-1].dictlike:
                    # an empty list or a trailing comma
                    i += 1
                    frame = stack.pop()
                    path = frame.path
                    ev = _ArrayEndShell()
                    ev.path = path
                    ev.__class__ = ArrayEnd
                    append(ev)
                    value = frame.value
                elif c.isalnum() or c in "-+._":
                    ev = _StartShell()
                    ev.path = path
                    ev.__class__ = FieldStart
                    append(ev)
                    self._pieces = []
                    self._is_key = False
                    st = _BARE
                    continue
                else:
                    raise self._fail(f"unexpected character {c!r}", base + i, buf, i)
            elif st == _KEY:
                m = _json_key(buf, i)
                if m is not None:  # `"key": ` in one step: the common case
                    top = stack[-1]
                    key = top.key = m.group(1)
                    path = (*top.path, key)
                    st = _VALUE
                    i = m.end()
                    continue
                c = buf[i]
                if c in _WS_CHARS:
                    i += 1
                    if i < n and buf[i] in _WS_CHARS:
                        i = _ws_match(buf, i).end()  # type: ignore[union-attr]
                    continue
                if c == "}":
                    i += 1
                    frame = stack.pop()
                    path = frame.path
                    ev = _ObjectEndShell()
                    ev.path = path
                    ev.__class__ = ObjectEnd
                    append(ev)
                    value = frame.value
                elif c == '"':
                    q = buf.find('"', i + 1)
                    if q != -1 and buf.find("\\", i + 1, q) == -1:  # a whole plain key
                        stack[-1].key = buf[i + 1 : q]
                        st = _SEP
                        i = q + 1
                    else:
                        self._pieces = []
                        self._is_key = True
                        st = _STR
                        i += 1
                    continue
                else:
                    raise self._fail(f"expected a key, got {c!r}", base + i, buf, i)
            elif st == _SEP:
                c = buf[i]
                if c == ":":
                    top = stack[-1]
                    path = (*top.path, top.key)
                    st = _VALUE
                    i += 1
                elif c in _WS_CHARS:
                    i = _ws_match(buf, i).end()  # type: ignore[union-attr]
                else:
                    raise self._fail(f"expected ':' after key, got {c!r}", base + i, buf, i)
                continue
            elif st == _BARE:
                m = _bare_match(buf, i)
                j = m.end() if m else i
                if j > i:
                    self._pieces.append(buf[i:j])
                if j == n and not final:
                    break
                self._state = st
                self._path = path
                i = self._finish_bare(buf[j] if j < n else None, base, buf, j, out)
                st = self._state
                continue
            elif st == _DONE:
                break
            else:  # before the document: prose, a code fence
                self._state = st
                i = self._scan_prelude(buf, i, base, out, final)
                st = self._state
                continue
            # a value is complete: path and value are set
            ev = _EndShell()
            ev.path = path
            ev.value = value
            ev.__class__ = FieldEnd
            append(ev)
            if stack:
                top = stack[-1]
                if top.dictlike:
                    top.value[top.key] = value
                else:
                    top.value.append(value)
                st = _AFTER
            else:
                self._value = value
                st = _DONE
        self._state = st
        self._path = path
        self._json_str = st == _STR and not self._is_key and not self._tail

    def _scan_prelude(self, buf: str, i: int, base: int, out: list[FieldEvent], final: bool) -> int:
        """Find where the document starts: after a code fence line, or at the value itself."""
        n = len(buf)
        st = self._state
        if st == _FENCE_INFO:
            j = buf.find("\n", i)
            if j == -1:
                return n
            self._state = _VALUE
            return j + 1
        if st == _PRE and not self._py:
            m = self._start_search(buf, i)
            if m is None:
                return self._hold_backticks(buf, i, final)
            if m.group() == "```":
                self._state = _FENCE_INFO
                return m.end()
            self._state = _VALUE
            return m.start()
        if st == _PROSE:
            j = buf.find("```", i)
            if j == -1:
                return self._hold_backticks(buf, i, final)
            self._state = _FENCE_INFO
            return j + 3
        # Python, nothing but whitespace seen so far.
        c = buf[i]
        if c in _WS_CHARS:
            return _ws_match(buf, i).end()  # type: ignore[union-attr]
        if c == "`":
            if buf.startswith("```", i):
                self._state = _FENCE_INFO
                return i + 3
            if not final and "```".startswith(buf[i:]):
                self._tail = buf[i:]
                return n
            self._state = _PROSE
            return i
        if c in _PY_VALUE_START:
            self._state = _VALUE
            return i
        m = _ident_match(buf, i)
        if m is None:
            self._state = _PROSE
            return i
        j = m.end()
        if j == n and not final:
            self._tail = buf[i:]
            return n
        nxt = buf[j] if j < n else ""
        if nxt == "(" or (nxt in "'\"" and m.group() in _PY_STRING_PREFIXES):
            self._state = _VALUE
            return i
        if m.group() in ("True", "False", "None") and (j == n or buf[j] in _WS_CHARS):
            self._state = _VALUE
            return i
        self._state = _PROSE
        return i

    def _hold_backticks(self, buf: str, i: int, final: bool) -> int:
        n = len(buf)
        k = n
        while k > i and k > n - 2 and buf[k - 1] == "`":
            k -= 1
        if k < n and not final:
            self._tail = buf[k:]
        return n

    def _start_value(self, c: str, buf: str, i: int, base: int, out: list[FieldEvent]) -> int:
        stack = self._stack
        path = self._path
        if stack and c == stack[-1].closer and not stack[-1].dictlike:
            self._close_container(out)  # empty list or trailing comma
            return i + 1
        if c in _NUMBER_START:
            m = _number_match(buf, i)
            if m is not None:  # a number whose end is in sight: no token state needed
                token = m.group()
                out.append(_start_event(path))
                if "." in token or "e" in token or "E" in token:
                    self._finish_value(float(token), out)
                else:
                    self._finish_value(int(token), out)
                return m.end()
        if self._py:
            if c in "'\"":
                out.append(_start_event(path))
                self._begin_string(is_key=False)
                self._state = _STR_OPEN
                return i
            kind = _PY_OPENERS.get(c)
        else:
            if c == '"':
                out.append(_start_event(path))
                q = buf.find('"', i + 1)
                if q != -1 and "\\" not in buf[i + 1 : q]:  # a whole plain string: common
                    if q > i + 1:
                        out.append(_delta_event(path, buf[i + 1 : q]))
                    self._finish_value(buf[i + 1 : q], out)
                    return q + 1
                self._begin_string(is_key=False)
                return i + 1
            kind = _JSON_OPENERS.get(c)
        if kind is not None:
            out.append(_start_event(path))
            if _DICTLIKE[kind]:
                out.append(ObjectStart(path))
                stack.append(_Frame(kind, path, {}))
                self._state = _KEY
            else:
                out.append(ArrayStart(path))
                stack.append(_Frame(kind, path, []))
                self._path = (*path, 0)
                self._state = _VALUE
            return i + 1
        if c.isalnum() or c in "-+._":
            out.append(_start_event(path))
            self._begin_bare(is_key=False)
            return i
        raise self._fail(f"unexpected character {c!r}", base + i, buf, i)

    def _close_container(self, out: list[FieldEvent]) -> None:
        frame = self._stack.pop()
        if frame.dictlike:
            out.append(ObjectEnd(frame.path))
        else:
            out.append(ArrayEnd(frame.path))
        self._path = frame.path
        self._finish_value(frame.value, out)

    def _finish_value(self, value: Any, out: list[FieldEvent]) -> None:
        out.append(_end_event(self._path, value))
        stack = self._stack
        if not stack:
            self._value = value
            self._state = _DONE
            return
        top = stack[-1]
        if top.dictlike:
            top.value[top.key] = value
        else:
            top.value.append(value)
        self._state = _AFTER

    # -- bare tokens: numbers, literals, names --------------------------------------------------
    def _begin_bare(self, *, is_key: bool) -> None:
        self._pieces = []
        self._is_key = is_key
        self._state = _BARE

    def _finish_bare(
        self, nxt: str | None, base: int, buf: str, j: int, out: list[FieldEvent]
    ) -> int:
        token = self._take()
        pos = base + j - len(token)
        if self._is_key:
            top = self._stack[-1]
            if top.kind == _CALL:
                if not _PY_IDENT.fullmatch(token):
                    raise self._fail(
                        f"invalid argument name {token!r}",
                        pos,
                        *self._token_context(token, buf, j, nxt),
                    )
                top.key = token
            else:
                if not _PY_INT.fullmatch(token):
                    raise self._fail(
                        f"unsupported dict key {token!r}",
                        pos,
                        *self._token_context(token, buf, j, nxt),
                    )
                top.key = int(token.replace("_", ""))
            self._state = _SEP
            return j
        if self._py:
            if token in ("True", "False", "None"):
                value: Any = {"True": True, "False": False, "None": None}[token]
            elif _PY_INT.fullmatch(token):
                value = int(token.replace("_", ""))
            elif _PY_INT_BASE.fullmatch(token):
                value = int(token.replace("_", ""), 0)
            elif _PY_FLOAT.fullmatch(token):
                value = float(token.replace("_", ""))
            elif nxt is not None and nxt in "'\"" and token in _PY_STRING_PREFIXES:
                self._begin_string(is_key=False)
                self._raw = token in ("r", "R")
                self._state = _STR_OPEN
                return j
            elif _PY_NAME.fullmatch(token):
                self._name = token
                self._name_pos = pos
                self._state = _NAME
                return j
            else:
                raise self._fail(
                    f"invalid literal {token!r}", pos, *self._token_context(token, buf, j, nxt)
                )
        elif token == "true":
            value = True
        elif token == "false":
            value = False
        elif token == "null":
            value = None
        elif _JSON_NUMBER.fullmatch(token):
            is_int = "." not in token and "e" not in token and "E" not in token
            value = int(token) if is_int else float(token)
        else:
            raise self._fail(
                f"invalid literal {token!r}", pos, *self._token_context(token, buf, j, nxt)
            )
        self._finish_value(value, out)
        return j

    @staticmethod
    def _token_context(token: str, buf: str, j: int, nxt: str | None) -> tuple[str, int]:
        """Text for an error excerpt: the token and what follows it (built only on error)."""
        if nxt is None:
            return token, len(token)
        return token + buf[j : j + _EXCERPT], len(token)

    # -- strings ------------------------------------------------------------------------------
    def _begin_string(self, *, is_key: bool) -> None:
        self._pieces = []
        self._is_key = is_key
        self._quote = '"'
        self._triple = False
        self._raw = False
        self._state = _STR

    def _end_string(self, out: list[FieldEvent]) -> None:
        if self._is_key:
            self._stack[-1].key = self._take()
            self._state = _SEP
        elif self._py:
            self._state = _STR_AFTER  # a following literal would continue this string
        else:
            self._finish_string_value(out)

    def _finish_string_value(self, out: list[FieldEvent]) -> None:
        value = self._take()
        self._finish_value(value, out)

    def _take(self) -> str:
        """The current string or token, joined once; resets the accumulators."""
        pieces = self._pieces
        self._pieces = []
        if self._blocks:
            blocks, self._blocks = self._blocks, []
            blocks.extend(pieces)
            return "".join(blocks)
        return pieces[0] if len(pieces) == 1 else "".join(pieces)

    def _piece(self, piece: str, out: list[FieldEvent]) -> None:
        if piece:
            self._pieces.append(piece)
            if not self._is_key:
                out.append(_delta_event(self._path, piece))

    def _scan_json_string(self, buf: str, i: int, base: int, out: list[FieldEvent]) -> int:
        q = buf.find('"', i)
        while q > i and buf[q - 1] == "\\":  # maybe escaped: count the backslashes
            k = q - 1
            while k > i and buf[k - 1] == "\\":
                k -= 1
            if not (q - k) & 1:
                break
            q = buf.find('"', q + 1)
        if q == -1:
            n = len(buf)
            cut = _json_safe_cut(buf, i, n)
            if cut > i:
                seg = buf[i:cut]
                if "\\" in seg:
                    seg = self._json_decode(seg + '"', 0, base + i, buf, i)
                self._piece(seg, out)
            self._tail = buf[cut:]
            return n
        seg = buf[i:q]
        if "\\" in seg:
            seg = self._json_decode(buf, i, base, buf, i)
        if self._is_key:
            self._pieces.append(seg)
            self._end_string(out)
            return q + 1
        pieces = self._pieces
        path = self._path
        if seg:
            pieces.append(seg)
            out.append(_delta_event(path, seg))
        value = self._take()
        self._finish_value(value, out)
        return q + 1

    def _json_decode(self, s: str, start: int, base: int, buf: str, i: int) -> str:
        try:
            return cast(str, _json_scanstring(s, start, False)[0])
        except JSONDecodeError as exc:
            pos = exc.pos - start
            raise self._fail(
                exc.msg.split(":")[0].lower(), base + start + pos, buf, i + pos
            ) from None

    def _open_py_string(self, buf: str, i: int, base: int, final: bool) -> int:
        """At a quote: decide between '...' and '''...''' (may need two more characters)."""
        n = len(buf)
        q = buf[i]
        if buf.startswith(q * 3, i):
            self._quote, self._triple = q, True
            self._state = _STR
            return i + 3
        if (i + 1 < n and buf[i + 1] != q) or (i + 2 < n) or final:
            self._quote, self._triple = q, False
            self._state = _STR
            return i + 1
        self._tail = buf[i:]  # '' or ' at the end: could still become '''
        return n

    def _scan_py_string(self, buf: str, i: int, base: int, out: list[FieldEvent]) -> int:
        n = len(buf)
        quote = self._quote
        triple = self._triple
        q = buf.find(quote, i)
        end = -1
        hold = -1
        while q != -1:
            k = q
            while k > i and buf[k - 1] == "\\":
                k -= 1
            if not (q - k) & 1:
                if not triple:
                    end = q + 1
                    break
                if buf.startswith(quote * 3, q):
                    end = q + 3
                    break
                if q + 3 > n and buf[q:] == quote * (n - q):
                    hold = q  # a closing ''' may be arriving
                    break
            q = buf.find(quote, q + 1)
        if end == -1:
            cut = self._py_safe_cut(buf, i, n if hold == -1 else hold)
            if cut > i:
                self._piece(self._py_decode(buf[i:cut], base + i, buf, i), out)
            self._tail = buf[cut:]
            return n
        self._piece(self._py_decode(buf[i:q], base + i, buf, i), out)
        self._end_string(out)
        return end

    def _py_decode(self, seg: str, pos: int, buf: str, i: int) -> str:
        if self._raw or "\\" not in seg:
            return seg
        try:
            return _PY_ESCAPE.sub(_unescape_py, seg)
        except (KeyError, ValueError) as exc:
            raise self._fail(f"invalid escape ({exc})", pos, buf, i) from None

    def _py_safe_cut(self, buf: str, i: int, n: int) -> int:
        """End of the decodable prefix of ``buf[i:n]``: an escape is never split."""
        r = buf.rfind("\\", i, n)
        if r == -1:
            return n
        k = r
        while k > i and buf[k - 1] == "\\":
            k -= 1
        if (r - k) & 1:
            return n  # the last backslash is escaped itself
        if r + 1 == n:
            return r
        if self._raw:
            return n
        t = buf[r + 1]
        need = _PY_ESCAPE_LENGTH.get(t)
        if need is not None:
            return n if r + need <= n else r
        if t == "N":
            return n if buf.find("}", r) != -1 else r
        if t in "01234567":
            j = r + 1
            while j < n and j < r + 4 and buf[j] in "01234567":
                j += 1
            return r if j == n and j < r + 4 else n
        if t == "\r":
            return r if r + 2 == n else n
        return n


def _json_safe_cut(buf: str, i: int, n: int) -> int:
    """End of the decodable prefix of a JSON string's ``buf[i:n]``.

    Holds back an incomplete escape, and a complete high-surrogate ``\\uD8xx`` at the very end
    (its low half may follow), so surrogate pairs are always decoded together.
    """
    r = buf.rfind("\\", max(i, n - 6), n)
    if r == -1:
        return n
    k = r
    while k > i and buf[k - 1] == "\\":
        k -= 1
    if (r - k) & 1:
        return n
    if r + 1 < n and buf[r + 1] != "u":
        return n  # a complete two-character escape
    if r + 6 > n or _is_high_surrogate(buf, r):
        return r - 6 if _high_surrogate_before(buf, i, r) else r
    return n


def _is_high_surrogate(buf: str, r: int) -> bool:
    return buf[r + 2] in "dD" and buf[r + 3] in "89abAB"


def _high_surrogate_before(buf: str, i: int, r: int) -> bool:
    """``buf[r-6:r]`` is an unescaped ``\\uD8xx``..``\\uDBxx`` escape."""
    s = r - 6
    if s < i or buf[s] != "\\" or buf[s + 1] != "u" or not _is_high_surrogate(buf, s):
        return False
    k = s
    while k > i and buf[k - 1] == "\\":
        k -= 1
    return not (s - k) & 1
