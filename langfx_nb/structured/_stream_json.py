"""The JSON grammar of the stream parser: a state machine with its common steps inlined
(see ``stream_parser`` for the contract), and the string-chunk path ``feed`` takes while inside
a string value."""

from __future__ import annotations

from json import JSONDecodeError
from typing import Any, cast

from ._stream_core import (
    _AFTER,
    _ARR,
    _BARE,
    _DONE,
    _KEY,
    _MAX_DEPTH,
    _NUMBER_START,
    _OBJ,
    _SEP,
    _STR,
    _TOO_DEEP,
    _VALUE,
    _WS_CHARS,
    StreamParseError,
    _ArrayEndShell,
    _ArrayStartShell,
    _bare_match,
    _delta_event,
    _DeltaShell,
    _EndShell,
    _Frame,
    _json_content,
    _json_key,
    _json_next_key,
    _json_scanstring,
    _number_match,
    _ObjectEndShell,
    _ObjectStartShell,
    _ParserCore,
    _StartShell,
    _ws_match,
)
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


class _JsonParser(_ParserCore):
    """The JSON state machine (mixed into ``StreamParser``)."""

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
                self._failed(exc, out)
                raise
        return out

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
                        value = self._int(token, 10, base + i, buf, i)
                    i = m.end()
                elif c == "{":
                    if len(stack) >= _MAX_DEPTH:
                        raise self._fail(_TOO_DEEP, base + i, buf, i)
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
                    if len(stack) >= _MAX_DEPTH:
                        raise self._fail(_TOO_DEEP, base + i, buf, i)
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
            self._stack[-1].key = self._take()
            self._state = _SEP
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
