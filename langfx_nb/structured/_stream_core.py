"""Shared state and helpers of the stream parser (``stream_parser``): constants, cheap event
construction, the error class, the container stack, and the steps both grammars use (finding
where the document starts, bare tokens, accumulating string pieces)."""

from __future__ import annotations

import json.decoder
import re
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

Grammar = Literal["json", "python"]

# Parser states.
_PRE, _PROSE, _FENCE_INFO, _VALUE, _KEY, _SEP, _AFTER = 0, 1, 2, 3, 4, 5, 6
_STR, _STR_OPEN, _STR_AFTER, _BARE, _NAME, _DONE, _COMMENT = 7, 8, 9, 10, 11, 12, 13

# Container kinds: (closer, dict-like, separator after a key).
_OBJ, _ARR, _CALL, _DICT, _LIST, _TUPLE = 0, 1, 2, 3, 4, 5
_CLOSER = ("}", "]", ")", "}", "]", ")")
_DICTLIKE = (True, False, True, True, False, False)
_SEPARATOR = (":", "", "=", ":", "", "")

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
# Containers nest at most this deep: every value's path is a tuple as long as its depth, so
# hostile input like "[[[[..." would otherwise cost time quadratic in its length.
_MAX_DEPTH = 1000
_TOO_DEEP = f"containers nested deeper than {_MAX_DEPTH} levels"
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


class _ParserCore:
    """Parser state (one document) and the steps shared by the JSON and Python grammars."""

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

    def _failed(self, exc: StreamParseError, out: list[FieldEvent]) -> None:
        """Keep the failure: the chunk's events so far go with it, and the parser stays failed
        (feed and close raise it again)."""
        exc.events = out
        self._error = exc
        self._json_str = False

    def _fail(self, message: str, position: int, buf: str, i: int) -> StreamParseError:
        start = max(0, i - _EXCERPT)
        return StreamParseError(message, position=position, excerpt=buf[start : i + _EXCERPT])

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
                top.key = self._int(token, 10, pos, *self._token_context(token, buf, j, nxt))
            self._state = _SEP
            return j
        if self._py:
            if token in ("True", "False", "None"):
                value: Any = {"True": True, "False": False, "None": None}[token]
            elif _PY_INT.fullmatch(token):
                value = self._int(token, 10, pos, *self._token_context(token, buf, j, nxt))
            elif _PY_INT_BASE.fullmatch(token):
                value = self._int(token, 0, pos, *self._token_context(token, buf, j, nxt))
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
            context = self._token_context(token, buf, j, nxt)
            value = self._int(token, 10, pos, *context) if is_int else float(token)
        else:
            raise self._fail(
                f"invalid literal {token!r}", pos, *self._token_context(token, buf, j, nxt)
            )
        self._finish_value(value, out)
        return j

    def _int(self, token: str, base: int, position: int, text: str, i: int) -> int:
        try:
            return int(token.replace("_", ""), base)
        except ValueError:  # more digits than sys.get_int_max_str_digits() allows
            raise self._fail("number too long", position, text, i) from None

    @staticmethod
    def _token_context(token: str, buf: str, j: int, nxt: str | None) -> tuple[str, int]:
        """Text for an error excerpt: the token and what follows it."""
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
