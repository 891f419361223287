"""JSON-schema patterns as ECMA-262 regular expressions, run by the ``regex`` package.

JSON Schema says a ``pattern`` (and a ``patternProperties`` key) is an ECMA-262 regular
expression, with Unicode semantics. Python's engines read the same text differently, and the
differences let through what a schema means to keep out: ``$`` matches before a trailing
newline (``^[a-z]+$`` accepts ``"main\\n"``), ``\\d``/``\\w``/``\\b`` are Unicode-wide, ``.``
crosses ``\\r`` and the Unicode line separators. ``compile_pattern`` rewrites those constructs
into what ``regex`` reads the ECMA way:

- ``$`` ends the input (``\\Z``); ``.`` matches anything but ``\\n``, ``\\r``, U+2028, U+2029;
- ``\\d`` is ``[0-9]``, ``\\w`` ``[A-Za-z0-9_]``, ``\\b`` a boundary of those; ``\\s`` is
  ECMA's white space and line terminators (U+FEFF among them); their capitals are the
  complements, inside a character class too;
- ``[]`` matches nothing and ``[^]`` any character; ``\\cX`` is a control character;
  ``\\u{...}`` a code point; ``\\k<name>`` a named back reference.

Everything else is passed through (``\\p{L}``, look-behind and named groups mean the same
in ``regex``). Patterns are compiled once (a bounded cache); ``regex.error`` for text neither
engine reads.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["compile_pattern", "ecma_to_regex"]

_DIGIT = "0-9"
_WORD = "A-Za-z0-9_"
_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_SETS = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_ANY = "(?s:.)"
_DOT = "[^\\n\\r\\u2028\\u2029]"
_BOUNDARY = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NOT_BOUNDARY = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"
_CLASS_SPECIAL = frozenset("[&~|")  # literal in ECMA classes; set operators or warnings in Python


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` (ECMA-262) compiled by ``regex``; ``regex.error`` if it cannot be read."""
    import regex

    return regex.compile(ecma_to_regex(pattern))


def ecma_to_regex(pattern: str) -> str:
    """The ``regex`` text that matches what ECMA-262 ``pattern`` matches (see module)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            text, i = _escape(pattern, i)
            out.append(text)
        elif c == "[":
            text, i = _class(pattern, i)
            out.append(text)
        else:
            out.append("\\Z" if c == "$" else _DOT if c == "." else c)
            i += 1
    return "".join(out)


def _escape(pattern: str, i: int) -> tuple[str, int]:
    """The escape at ``pattern[i]`` (a backslash) outside a class, and where it ends."""
    e = pattern[i + 1] if i + 1 < len(pattern) else ""
    if e in _SETS:
        return f"[{_SETS[e]}]", i + 2
    if e.lower() in _SETS:
        return f"[^{_SETS[e.lower()]}]", i + 2
    if e == "b":
        return _BOUNDARY, i + 2
    if e == "B":
        return _NOT_BOUNDARY, i + 2
    if e == "k" and pattern.startswith("<", i + 2):
        return "\\g", i + 2
    return _common_escape(pattern, i)


def _common_escape(pattern: str, i: int) -> tuple[str, int]:
    """Escapes read alike in and out of a class: ``\\cX``, ``\\u{...}``, the rest as written."""
    e = pattern[i + 1 : i + 2]
    if e == "c" and pattern[i + 2 : i + 3].isascii() and pattern[i + 2 : i + 3].isalpha():
        return f"\\x{ord(pattern[i + 2]) % 32:02x}", i + 3
    if e == "u" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        digits = pattern[i + 3 : end] if end > 0 else ""
        if digits and all(d in "0123456789abcdefABCDEF" for d in digits) and len(digits) <= 6:
            return f"\\U{int(digits, 16):08x}", end + 1
    return pattern[i : i + 2], i + 2


def _class(pattern: str, i: int) -> tuple[str, int]:
    """The character class opening at ``pattern[i]``, and where it ends."""
    j = i + 1
    negated = pattern.startswith("^", j)
    if negated:
        j += 1
    items: list[str] = []
    complements: list[str] = []  # \D, \W, \S inside the class
    n = len(pattern)
    while j < n and pattern[j] != "]":  # in ECMA a "]" right after "[" or "[^" closes it
        c = pattern[j]
        if c == "\\":
            e = pattern[j + 1 : j + 2]
            if e in _SETS:
                items.append(_SETS[e])
                j += 2
            elif e and e.lower() in _SETS:
                complements.append(f"[^{_SETS[e.lower()]}]")
                j += 2
            elif e == "b":
                items.append("\\x08")
                j += 2
            else:
                text, j = _common_escape(pattern, j)
                items.append(text)
        else:
            items.append("\\" + c if c in _CLASS_SPECIAL else c)
            j += 1
    if j >= n:  # unclosed: left for regex to refuse
        return pattern[i:], n
    body = "".join(items)
    if not complements:
        if not body:
            return (_ANY if negated else "(?!)"), j + 1
        return f"[{'^' if negated else ''}{body}]", j + 1
    alternatives = "|".join(([f"[{body}]"] if body else []) + complements)
    if negated:
        return f"(?:(?!{alternatives}){_ANY})", j + 1
    return f"(?:{alternatives})", j + 1
