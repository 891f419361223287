"""Model text shown as Markdown in a notebook, without letting it carry live HTML."""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["MarkdownText", "escape_markdown_html", "present"]


class MarkdownText(str):
    """A ``str`` that a notebook displays as Markdown: what ``%%lf query`` returns for text.

    Model text is untrusted, so HTML in it is shown as text (``<`` and ``&`` are escaped
    outside code spans and fences); Markdown emphasis, lists and code still render.
    """

    __slots__ = ()

    def _repr_markdown_(self) -> str:
        return escape_markdown_html(str(self))


_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def escape_markdown_html(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` everywhere except inside code fences and code spans.

    Markdown renderers pass raw HTML through (and entity references are decoded), so this
    is what keeps ``<img onerror=...>`` in a model answer visible as text. Inside code the
    renderer shows characters literally already, so escaping there would show ``&lt;``.
    """
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        m = _FENCE_RE.match(line)
        if fence is not None:
            out.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            out.append(line)
            continue
        out.append(_escape_outside_spans(line))
    return "".join(out)


def _escape_outside_spans(line: str) -> str:
    parts: list[str] = []
    pos = 0
    while pos < len(line):
        tick = line.find("`", pos)
        if tick < 0:
            break
        rest = line[tick:]
        run = len(rest) - len(rest.lstrip("`"))
        close = line.find("`" * run, tick + run)
        # A closing run must be exactly as long (CommonMark); otherwise it is literal text.
        while close >= 0 and line[close + run : close + run + 1] == "`":
            close = line.find("`" * run, close + run + 1)
        if close < 0:
            parts.append(_escape(line[pos : tick + run]))
            pos = tick + run
            continue
        parts.append(_escape(line[pos:tick]))
        parts.append(line[tick : close + run])
        pos = close + run
    parts.append(_escape(line[pos:]))
    return "".join(parts)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def present(value: Any) -> Any:
    """Text as :class:`MarkdownText` (so the notebook renders it); other values unchanged."""
    return MarkdownText(value) if type(value) is str else value
