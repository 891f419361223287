"""Model text shown as formatted Markdown in a notebook, without letting it carry live HTML.

Model text is untrusted. Instead of escaping Markdown by hand (a regex escaper cannot know
where a CommonMark renderer will see a code span or a fence, and two payloads got through
one), the text is rendered here to HTML by markdown-it-py's CommonMark parser with **raw HTML
disabled**:

- every ``<tag>`` and HTML block in the text is output as escaped text;
- link targets pass markdown-it's ``validateLink`` (no ``javascript:``, ``vbscript:``,
  ``file:`` or non-image ``data:`` URLs, after entity decoding); such links stay plain text;
- images are not rendered (``![alt](url)`` shows as ``!`` and a link), so displaying an
  answer never makes the browser request a URL the model chose;
- attribute values and text are HTML-escaped by the renderer.

The notebook then receives ``text/html`` (and ``text/plain``), never ``text/markdown``: the
frontend has nothing left to interpret, in JupyterLab, in nbconvert's HTML or elsewhere.
"""

from __future__ import annotations

import functools
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["MarkdownText", "markdown_html", "present"]


@functools.cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).disable("image")


def markdown_html(text: str) -> str:
    """``text`` as CommonMark rendered to HTML with raw HTML off (see the module docstring)."""
    return f'<div class="lfx-md">{_parser().render(text)}</div>'


class MarkdownText(str):
    """A ``str`` that a notebook displays as formatted Markdown: what ``%%lf query`` returns.

    It is still a plain ``str`` for code. Its display is :func:`markdown_html`: emphasis,
    lists, code and safe links render; HTML in the text shows as text.
    """

    __slots__ = ()

    def _repr_html_(self) -> str:
        return markdown_html(str(self))


def present(value: Any) -> Any:
    """Text as :class:`MarkdownText` (so the notebook renders it); other values unchanged."""
    return MarkdownText(value) if type(value) is str else value
