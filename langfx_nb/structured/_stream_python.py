"""The Python-literal grammar of the stream parser (``Answer(items=[Item(name='a')])``; see
``stream_parser`` for the contract): its state machine, strings with quotes/prefixes/escapes,
and implicit string concatenation."""

from __future__ import annotations

import re
import unicodedata

from ._stream_core import (
    _AFTER,
    _BARE,
    _CALL,
    _COMMENT,
    _DICT,
    _DICTLIKE,
    _DONE,
    _FENCE_INFO,
    _KEY,
    _MAX_DEPTH,
    _NAME,
    _NUMBER_START,
    _PY_ESCAPE,
    _PY_ESCAPE_LENGTH,
    _PY_OPENERS,
    _PY_SIMPLE_ESCAPES,
    _SEP,
    _SEPARATOR,
    _STR,
    _STR_AFTER,
    _STR_OPEN,
    _TOO_DEEP,
    _VALUE,
    _WS_CHARS,
    _bare_match,
    _Frame,
    _number_match,
    _ParserCore,
    _start_event,
    _ws_match,
)
from .events import (
    ArrayEnd,
    ArrayStart,
    FieldEvent,
    ObjectEnd,
    ObjectStart,
)


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


class _PythonParser(_ParserCore):
    """The Python-literal state machine (mixed into ``StreamParser``)."""

    def _run(self, buf: str, base: int, out: list[FieldEvent], final: bool) -> None:
        n = len(buf)
        i = 0
        stack = self._stack
        while i < n:
            st = self._state
            if st == _STR:
                i = self._scan_py_string(buf, i, base, out)
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
            if c == "#" and st != _STR_OPEN:
                self._resume = st
                self._state = _COMMENT
                i += 1
                continue
            if st == _AFTER:
                top = stack[-1]
                if c == ",":
                    if top.dictlike:
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
                if kind == _DICT and c in "'\"":
                    self._begin_string(is_key=True)
                    self._state = _STR_OPEN
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
                if len(stack) >= _MAX_DEPTH:
                    raise self._fail(_TOO_DEEP, base + i, buf, i)
                path = self._path
                out.append(ObjectStart(path, self._name))
                stack.append(_Frame(_CALL, path, {}))
                self._state = _KEY
                i += 1
            else:  # pragma: no cover - every state is handled above
                raise AssertionError(st)

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
                    self._finish_value(self._int(token, 10, base + i, buf, i), out)
                return m.end()
        if c in "'\"":
            out.append(_start_event(path))
            self._begin_string(is_key=False)
            self._state = _STR_OPEN
            return i
        kind = _PY_OPENERS.get(c)
        if kind is not None:
            if len(stack) >= _MAX_DEPTH:
                raise self._fail(_TOO_DEEP, base + i, buf, i)
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

    def _end_string(self, out: list[FieldEvent]) -> None:
        if self._is_key:
            self._stack[-1].key = self._take()
            self._state = _SEP
        else:
            self._state = _STR_AFTER  # a following literal would continue this string

    def _finish_string_value(self, out: list[FieldEvent]) -> None:
        value = self._take()
        self._finish_value(value, out)

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
