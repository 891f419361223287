"""The lexical rules of the stream parser's two grammars (``stream_parser``): which characters
a run of string content or a bare token holds, how escapes decode, and what a bare token means.

These are plain functions of the text; the parser owns the state and the positions.
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Any

WHITESPACE = " \t\r\n"
_WHITESPACE_RUN = re.compile(r"[ \t\r\n]*")
# A bare token: a number, true/false/null, True/False/None, a class or argument name.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_.+\-]*")
TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_.+-")
IDENTIFIER_START = frozenset(string.ascii_letters + "_")
identifier_end = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*").match
# The next quote or backslash in a string, per quote character.
find_special = {'"': re.compile(r'["\\]').search, "'": re.compile(r"['\\]").search}

PYTHON_STRING_PREFIXES = frozenset({"r", "u", "R", "U"})
PYTHON_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}
PYTHON_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
PYTHON_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PYTHON_INT = re.compile(r"[+-]?(?:[1-9](?:_?[0-9])*|0(?:_?0)*)")
_PYTHON_INT_BASE = re.compile(r"[+-]?0(?:[xX](?:_?[0-9a-fA-F])+|[oO](?:_?[0-7])+|[bB](?:_?[01])+)")
_PYTHON_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9](?:_?[0-9])*)?\.[0-9](?:_?[0-9])*|[0-9](?:_?[0-9])*\.?)"
    r"(?:[eE][+-]?[0-9](?:_?[0-9])*)?"
)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_JSON_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None}

_JSON_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_PYTHON_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\n": "",  # a line continuation
}
_PYTHON_HEX_LENGTH = {"x": 2, "u": 4, "U": 8}
_OCTAL = "01234567"
_HEX_DIGITS = frozenset(string.hexdigits)
# What may still become the \uDC00-\uDFFF escape that completes a surrogate pair.
_LOW_SURROGATE_START = re.compile(r"(?:\\(?:u(?:[dD](?:[c-fC-F][0-9a-fA-F]{0,2})?)?)?)?")
_MAX_UNICODE_NAME = 100  # \N{...}: the longest character name is 88 characters
MAX_INT_DIGITS = 4300
"""An integer value has at most this many decimal digits: Python refuses to turn a larger
``int`` into text, which every repr, widget message and trace needs."""
_INT_BOUND = 10**MAX_INT_DIGITS


def whitespace_end(buf: str, i: int) -> int:
    """The end of the run of whitespace at ``buf[i]``."""
    return _WHITESPACE_RUN.match(buf, i).end()  # type: ignore[union-attr]  # matches ""


def token_end(buf: str, i: int) -> int:
    """The end of the run of token characters at ``buf[i]``."""
    return _TOKEN_RUN.match(buf, i).end()  # type: ignore[union-attr]  # matches ""


class LexError(Exception):
    """Malformed input at ``index`` of the text being scanned."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


def json_escape(buf: str, j: int) -> tuple[str, int] | None:
    """The JSON escape at ``buf[j]`` (a backslash): its text and the index after it, or
    ``None`` when the text ends before the escape is complete. A high surrogate followed by
    a low one decodes to one character, as in ``json.loads``, so a delta never holds half a
    surrogate pair; a lone surrogate stays a lone code point."""
    n = len(buf)
    if j + 1 >= n:
        return None
    c = buf[j + 1]
    if c != "u":
        text = _JSON_ESCAPES.get(c)
        if text is None:
            raise LexError("invalid \\escape", j)
        return text, j + 2
    code = _hex_escape(buf, j + 1, 4)
    if code is None:
        return None
    return _code_point(buf, code, j + 6)


def _code_point(buf: str, code: int, end: int) -> tuple[str, int] | None:
    """The character of a ``\\u`` escape ending at ``end``: a high surrogate followed by a
    ``\\uDC00``-``\\uDFFF`` escape joins it into one character; a lone surrogate becomes
    U+FFFD (UTF-8 cannot encode it: it would break every message that carries the delta),
    as the protocols' parsers repair it in the final value."""
    if not 0xD800 <= code <= 0xDFFF:
        return chr(code), end
    if code >= 0xDC00:
        return "\ufffd", end
    rest = buf[end : end + 6]
    if len(rest) < 6 and _LOW_SURROGATE_START.fullmatch(rest):
        return None  # the low half may be in the next chunk
    if len(rest) == 6 and rest[:2] == "\\u" and set(rest[2:]) <= _HEX_DIGITS:
        low = int(rest[2:], 16)
        if 0xDC00 <= low <= 0xDFFF:
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), end + 6
    return "\ufffd", end


def python_escape(buf: str, j: int, raw: bool) -> tuple[str, int] | None:
    """The escape at ``buf[j]`` in a Python string literal, decoded as Python does: its text
    and the index after it, or ``None`` when the text ends before it is complete. In a raw
    string the backslash and the next character stay as written (but the quote does not end
    the string)."""
    n = len(buf)
    if j + 1 >= n:
        return None
    c = buf[j + 1]
    if raw:
        return buf[j : j + 2], j + 2
    if c in _PYTHON_HEX_LENGTH:
        size = _PYTHON_HEX_LENGTH[c]
        code = _hex_escape(buf, j + 1, size)
        if code is None:
            return None
        if code > 0x10FFFF:
            raise LexError(f"invalid \\{c} escape", j)
        return _code_point(buf, code, j + 2 + size)
    if c == "N":
        end = buf.find("}", j, j + _MAX_UNICODE_NAME)
        if end == -1:
            if n - j < _MAX_UNICODE_NAME and buf[j + 2 : j + 3] in ("", "{"):
                return None
            raise LexError("invalid \\N{...} escape", j)
        try:
            return unicodedata.lookup(buf[j + 3 : end]), end + 1
        except KeyError:
            raise LexError("unknown character name in \\N{...}", j) from None
    if c in _OCTAL:
        k = j + 1
        while k < n and k < j + 4 and buf[k] in _OCTAL:
            k += 1
        if k == n and k < j + 4:
            return None  # more octal digits may follow
        return chr(int(buf[j + 1 : k], 8)), k
    if c == "\r":  # a line continuation: backslash, then CR or CRLF
        if j + 2 >= n:
            return None
        return "", j + 3 if buf[j + 2] == "\n" else j + 2
    text = _PYTHON_ESCAPES.get(c)
    if text is None:
        return buf[j : j + 2], j + 2  # Python keeps an unknown escape as written
    return text, j + 2


def _hex_escape(buf: str, i: int, size: int) -> int | None:
    """The ``size`` hex digits after ``buf[i]`` (the escape letter), or ``None`` if cut."""
    digits = buf[i + 1 : i + 1 + size]
    if not set(digits) <= _HEX_DIGITS:
        raise LexError(f"invalid \\{buf[i]} escape", i)
    if len(digits) < size:
        return None
    return int(digits, 16)


def json_literal(token: str) -> Any:
    """``true``/``false``/``null`` or a JSON number; ``ValueError`` for anything else."""
    if token in _JSON_CONSTANTS:
        return _JSON_CONSTANTS[token]
    m = _JSON_NUMBER.fullmatch(token)
    if m is None:
        raise ValueError(f"invalid literal {token!r}")
    return float(token) if m.group(1) or m.group(2) else int(token)


def python_literal(token: str) -> Any:
    """``True``/``False``/``None`` or a Python number (underscores, hex, octal, binary, floats);
    ``ValueError`` for anything else."""
    if token in PYTHON_CONSTANTS:
        return PYTHON_CONSTANTS[token]
    digits = token.replace("_", "")
    if PYTHON_INT.fullmatch(token):
        return int(digits)
    if _PYTHON_INT_BASE.fullmatch(token):
        value = int(digits, 0)
        if abs(value) >= _INT_BOUND:  # a decimal literal that long is already a too-long token
            raise ValueError(f"an integer with more than {MAX_INT_DIGITS} decimal digits")
        return value
    if _PYTHON_FLOAT.fullmatch(token):
        return float(digits)
    raise ValueError(f"invalid literal {token!r}")
