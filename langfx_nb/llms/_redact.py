"""Secrets out of error texts: a server may echo a key back in an error body or event.

``redact_exception`` replaces every occurrence of the given secret values in the text of an
exception and of everything chained to it (``__cause__``/``__context__``), in place, so the
error keeps its class and attributes but its message, ``repr``, traceback text, and whatever
a trace or log makes of it no longer hold the secret. ``shown_url`` is a URL without its
``user:password@``; ``url_secrets`` are the credentials it held (secrets too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

from ..redact import REDACTED, URL_SCHEME

__all__ = [
    "MIN_SECRET_CHARS",
    "REDACTED",
    "SECRET_HEADER",
    "Secrets",
    "redact",
    "redact_exception",
    "shown_url",
    "url_secrets",
]

MIN_SECRET_CHARS = 8  # shorter values (test keys like "k") would redact ordinary words
# scheme:// and the userinfo (up to the last @ before the path) of a URL
_USERINFO = re.compile(rf"^({URL_SCHEME})[^/?#]*@")
# Names of configured headers whose values are treated as secrets.
SECRET_HEADER = re.compile(
    r"auth|key|token|secret|cookie|session|password|passwd|credential|signature", re.IGNORECASE
)


class Secrets:
    """The secret values a model has used; its ``repr`` never shows them."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, value: str | None) -> None:
        if not value:
            return
        for v in (value, *value.split()):  # "Bearer <token>": the token alone too
            if len(v) >= MIN_SECRET_CHARS:
                self._values.add(v)

    def values(self) -> tuple[str, ...]:
        return tuple(sorted(self._values, key=len, reverse=True))  # longest first

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return "<secrets>"


def redact(text: str, secrets: Iterable[str]) -> str:
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return text


def redact_exception(exc: BaseException, secrets: Secrets) -> None:
    values = secrets.values()
    if not values:
        return
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo and len(seen) < 50:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.args = tuple(redact(a, values) if isinstance(a, str) else a for a in e.args)
        notes = getattr(e, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [redact(n, values) if isinstance(n, str) else n for n in notes]
        todo += [e.__cause__, e.__context__]


def shown_url(url: str) -> str:
    """``url`` fit to show or store: credentials in it (``user:password@``) replaced by
    ``<redacted>@``, whatever else the URL holds (a URL that does not parse too)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(r"\1<redacted>@", url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"<redacted>@{host}"))


def url_secrets(url: str) -> list[str]:
    """The credentials in ``url``'s userinfo, as sent and percent-decoded."""
    userinfo = _USERINFO.match(url)
    if userinfo is None:
        return []
    raw = userinfo[0][len(userinfo[1]) : -1]
    password = raw.partition(":")[2]
    return [raw, unquote(raw), password, unquote(password)]
