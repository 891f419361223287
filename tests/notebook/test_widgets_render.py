"""Static fallbacks: final state without a kernel, untrusted text escaped, stable text/plain."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.messages import AIMessage, ToolCall, Usage
from langfx_nb.notebook import render
from langfx_nb.notebook.approval import ApprovalWidget
from langfx_nb.notebook.stream_view import StreamView
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_live import index_of

from ._fakes import saved_trace

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def assert_inert(html: str) -> None:
    assert "<img" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


class Point(pydantic.BaseModel):
    label: str
    x: int


def test_message_html_escapes_text_tool_args_and_result() -> None:
    msg = AIMessage(
        [HOSTILE, ToolCall("c1", "search", {"q": HOSTILE})],
        usage=Usage(3, 4, 7),
        result=Point(label=HOSTILE, x=1),
    )
    html = render.message_html(msg)
    assert_inert(html)
    assert "search" in html and "total 7" in html


def test_value_html_is_a_readable_tree() -> None:
    html = render.value_html(Point(label="a<b", x=2))
    assert "Point" in html and "a&lt;b" in html and "x:" in html
    assert render.value_text(Point(label="a", x=2)).startswith("Point {")


def test_trace_html_escapes_names_errors_and_rolls_up_tokens() -> None:
    nodes = [
        {"id": "0", "parent_id": None, "kind": "session", "name": "session", "status": "running"},
        {
            "id": "1",
            "parent_id": "0",
            "kind": "query",
            "name": HOSTILE,
            "status": "ok",
            "start": 0,
            "end": 0.25,
            "usage": {"total_tokens": 10},
        },
        {
            "id": "2",
            "parent_id": "0",
            "kind": "tool_call",
            "name": "t",
            "status": "failed",
            "error": {"type": "ToolExecutionError", "message": HOSTILE},
            "usage": {"prompt_tokens": 1, "completion_tokens": 2},
        },
    ]
    html = render.trace_html(index_of(nodes))
    assert_inert(html)
    assert "13 tok" in html  # the session row rolls up both children
    assert '<span class="lfx-dur">250 ms</span>' in html
    text = render.trace_text(index_of(nodes))
    assert text == "TraceExplorer: 3 nodes (failed 1, ok 1, running 1)"


def test_trace_html_is_bounded_for_huge_traces() -> None:
    nodes = [
        {"id": str(i), "parent_id": None, "name": f"n{i}", "status": "ok"} for i in range(5000)
    ]
    html = render.trace_html(index_of(nodes))
    assert f"{5000 - render.MAX_ROWS:,} more nodes" in html
    assert len(html) < 200_000


def test_widget_bundles_carry_html_and_deterministic_text() -> None:
    explorer = TraceExplorer(saved_trace([{"id": "a", "kind": "session", "name": HOSTILE}]))
    data = explorer._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data["text/plain"] == "TraceExplorer: 1 node (ok 1)"
    assert_inert(data["text/html"])
    assert "application/vnd.jupyter.widget-view+json" in data
    again = TraceExplorer(
        saved_trace([{"id": "a", "kind": "session", "name": HOSTILE}])
    )._repr_mimebundle_()
    again = again[0] if isinstance(again, tuple) else again
    assert again["text/plain"] == data["text/plain"] and again["text/html"] == data["text/html"]


def test_stream_view_fallback_shows_the_final_value_escaped() -> None:
    view = StreamView()
    view.push({"type": "object_start", "path": []})
    view.push({"type": "field_start", "path": ["label"]})
    view.push({"type": "string_field_delta", "path": ["label"], "delta": HOSTILE})
    view.push({"type": "field_end", "path": ["label"], "value": HOSTILE})
    view.push({"type": "object_end", "path": []})
    html = view._fallback_html()
    assert_inert(html)
    assert view._fallback_text() == f"Answer[streaming]: {json.dumps({'label': HOSTILE})}"


def test_text_stream_fallback_is_plain_escaped_text() -> None:
    view = StreamView()
    for chunk in ["# Title\n", HOSTILE]:
        view.push(chunk)
    assert_inert(view._fallback_html())
    assert view.text == "# Title\n" + HOSTILE


def test_approval_fallback_escapes_arguments_and_notes() -> None:
    widget = ApprovalWidget()
    widget.state = {
        "pending": {"prompt_id": "p", "call_id": "c2", "tool": "t", "args": {"q": HOSTILE}},
        "history": [
            {
                "tool": "t",
                "call_id": "c1",
                "decision": "denied with note",
                "approved": False,
                "who": "me",
                "note": HOSTILE,
            }
        ],
        "notice": None,
    }
    html = widget._fallback_html()
    assert html.count("&lt;img src=x") == 2 and "<img" not in html


class _Lists(HTMLParser):
    """The inline style of every ``<ul>`` in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.styles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "ul":
            self.styles.append(dict(attrs).get("style") or "")


def test_static_copies_have_no_bullets_without_their_stylesheet() -> None:
    # GitHub and nbviewer drop <style>: the lists must still have no bullets and the tree's
    # indentation, from inline styles alone.
    explorer = TraceExplorer(
        saved_trace(
            [
                {"id": "a", "kind": "session", "name": "Agent", "status": "ok"},
                {
                    "id": "b",
                    "parent_id": "a",
                    "kind": "query",
                    "name": "q",
                    "status": "ok",
                    "outputs": {"value": {"items": [1, 2]}},
                },
                {"id": "c", "parent_id": "b", "kind": "log", "name": "note", "status": "ok"},
            ]
        )
    )
    approval = ApprovalWidget()
    approval.state = {
        "pending": {"prompt_id": "p", "call_id": "c2", "tool": "t", "args": {"q": [1, {"r": 2}]}},
        "history": [{"tool": "t", "call_id": "c1", "decision": "approved", "who": "me"}],
        "notice": None,
    }
    stream = StreamView()
    stream.push({"type": "object_start", "path": []})
    stream.push({"type": "field_end", "path": ["tags"], "value": ["a", "b"]})
    stream.push({"type": "object_end", "path": []})
    for widget in (explorer, approval, stream):
        for html in (widget._static_bundle()["text/html"], widget._fallback_html()):
            lists = _Lists()
            lists.feed(re.sub(r"<style>.*?</style>", "", html, flags=re.S))
            assert lists.styles, (type(widget).__name__, html)
            for style in lists.styles:
                rules = style.replace(" ", "").split(";")
                assert "list-style:none" in rules and "padding-left:1.1em" in rules, html


def test_session_html_and_formatters(tmp_path: Path) -> None:
    ip = pytest.importorskip("IPython.core.interactiveshell").InteractiveShell.instance()
    render.register_formatters(ip)
    fmt = ip.display_formatter.formatters["text/html"]
    assert "Point" in fmt(Point(label="a", x=1))
    assert_inert(fmt(AIMessage(HOSTILE)))
    html = fmt(lf.Session())
    assert "1 node</div>" in html and "by status: running 1" in html
    assert '<span class="lfx-st-open">open</span>' in html  # a live session: open, not closed


def test_jsonable_reprs_unknown_objects_without_evaluating_them() -> None:
    class Weird:
        def __repr__(self) -> str:
            return HOSTILE

    html = render.value_html({"w": Weird()})
    assert_inert(html)


def test_rollups_do_not_depend_on_the_order_nodes_are_listed_in() -> None:
    nodes = [
        {"id": "r", "parent_id": None, "usage": {"total_tokens": 1}},
        {"id": "a", "parent_id": "r", "usage": {"total_tokens": 2}, "cost": 0.5},
        {"id": "b", "parent_id": "a", "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"id": "c", "parent_id": "r"},
    ]
    expected = {"r": (10, 0.5, 1, 2), "a": (9, 0.5, 1, 1), "b": (7, 0.0, 0, 1), "c": (0, 0.0, 0, 0)}

    def sums(nodes: list[dict[str, Any]]) -> dict[str, tuple[int, float, int, int]]:
        rows = index_of(nodes).first_rows(100)
        return {
            r["node"]["id"]: (r["roll"][0], r["roll"][1], r["roll"][2], r["roll"][5]) for r in rows
        }

    assert sums(nodes) == expected
    assert sums(list(reversed(nodes))) == expected  # children listed first


def test_a_saved_deep_trace_gets_exact_sums_in_its_static_copy() -> None:
    # a chain 5,000 deep (a damaged or hostile file): every row still sums all below it
    nodes = [
        {"id": "0", "kind": "session", "name": "s", "status": "ok", "usage": {"total_tokens": 1}}
    ] + [
        {"id": str(i), "parent_id": str(i - 1), "kind": "query", "name": "q", "status": "ok"}
        | {"usage": {"total_tokens": 1}}
        for i in range(1, 5000)
    ]
    html = TraceExplorer(saved_trace(nodes))._static_html()
    session_row = html[html.index('data-kind="session"') :].split("<ul")[0]
    assert "5,000 tok" in session_row
    assert f"{5000 - render.MAX_ROWS:,} more nodes" in html


def test_a_saved_traces_copy_holds_its_first_rows_details() -> None:
    # read in one pass from the stored trace (each row's record, not the first one's)
    nodes: list[dict[str, Any]] = [{"id": "0", "kind": "session", "name": "s"}] + [
        {
            "id": str(i),
            "kind": "tool_call",
            "name": f"add {i}",
            "inputs": {"args": {"a": 2}},
            "decision": {"outcome": "approve", "by": "me", "args": {"a": 20 + i}},
        }
        for i in range(1, 400)
    ]
    html = TraceExplorer(saved_trace(nodes))._static_html()
    assert html.count("Arguments that ran (edited)") == render.MAX_ROWS - 1
    row = html.split('data-node="299"')[1]
    assert "add 299" in row and "a: 2 → 319" in row.split('data-node="')[0]
