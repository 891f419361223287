"""Traces a new user opens in the explorer (issue #39's check): damaged or unusual ones must
give one clear ``ValueError`` or show correctly, never crash the widget, freeze a live view or
send the page a state its ``JSON.parse`` refuses."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.notebook.trace_explorer import TraceExplorer


def _node(node_id: str, parent: str | None, kind: str = "action", **more: Any) -> dict[str, Any]:
    out = {"id": node_id, "parent_id": parent, "kind": kind, "name": f"n {node_id}"}
    return {**out, "status": "ok", "start": 0.0, "end": 1.0, **more}


def _trace_file(tmp_path: Path, *nodes: dict[str, Any]) -> Path:
    data = {"format": "langfx_nb.trace", "version": 1, "session": {"id": "s"}}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({**data, "nodes": [_node("s", None, "session"), *nodes]}))
    return path


def _strict_json(raw: bytes) -> Any:
    """What the page's ``JSON.parse`` accepts: no NaN or Infinity."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(raw, parse_constant=refuse)


def test_a_log_message_with_a_cut_emoji_opens_in_the_explorer() -> None:
    # model text decoded from JSON may hold a lone surrogate ("\ud83d": an emoji cut in two);
    # the session records it and trace_json_str() saves it, but _encode raises
    # UnicodeEncodeError, so TraceExplorer(session) fails to open
    session = Session()
    session.log("info", "the model said: \ud83d")
    explorer = TraceExplorer(session)
    assert explorer.snapshot["windowed"]["nodes"] == 2


def test_a_live_explorer_keeps_following_after_a_lone_surrogate() -> None:
    session = Session()
    explorer = TraceExplorer(session)
    session.log("info", "cut \ud83d")  # the observer swallows the encoding error
    with session.track("action", "after"):
        pass
    explorer.flush()  # raises UnicodeEncodeError; pushed events are dropped silently
    assert explorer.snapshot["windowed"]["nodes"] == 3


def test_a_saved_trace_with_an_escaped_lone_surrogate_opens(tmp_path: Path) -> None:
    # valid JSON ("\ud800" escaped), as json.dumps writes it; save_trace takes it
    path = _trace_file(tmp_path, _node("x", "s", name="bad \ud800 name"))
    assert "\\ud800" in path.read_text()
    explorer = TraceExplorer(path)
    assert explorer.snapshot["windowed"]["nodes"] == 2


@pytest.mark.parametrize("field", ["start", "end", "cost"])
def test_the_page_state_is_json_the_browser_parses(tmp_path: Path, field: str) -> None:
    # Python's json reads Infinity; the state goes to the page as bytes that dom.ts decodes
    # with JSON.parse, which refuses Infinity: the explorer draws nothing
    path = _trace_file(tmp_path, {**_node("x", "s"), field: float("inf")})
    explorer = TraceExplorer(path)
    state = _strict_json(explorer.state)
    assert state["windowed"]["nodes"] == 2


@pytest.mark.parametrize("cost", [1e30, float("inf")])
def test_the_static_copy_of_a_trace_with_a_huge_cost(tmp_path: Path, cost: float) -> None:
    # trace_rows._fixed quantizes with Decimal: 1e30 exceeds its precision and inf is not
    # finite, so decimal.InvalidOperation escapes from the notebook's HTML fallback
    path = _trace_file(tmp_path, _node("x", "s", cost=cost))
    html = TraceExplorer(path)._static_html()
    assert "n x" in html


def test_deeply_nested_trace_json_is_one_value_error(tmp_path: Path) -> None:
    # save_trace says "not valid JSON (nested too deeply)"; a small file through the explorer
    # (and Session.load_trace) lets json's RecursionError escape instead
    deep = "[" * 100_000 + "]" * 100_000
    path = _trace_file(tmp_path)
    text = path.read_text().replace(
        '"session": {"id": "s"}', f'"session": {{"id": "s", "x": {deep}}}'
    )
    path.write_text(text)
    with pytest.raises(ValueError, match=r"nested too deeply|not valid JSON"):
        TraceExplorer(path)


_DAMAGE = {
    # AttributeError: 'list' object has no attribute 'items' (trace_rows.py, drawing a row)
    "below is a list": "UPDATE trace_tree SET below = '[1]'",
    # ValueError: __len__() should return >= 0 (names nothing)
    "negative node count": "UPDATE trace_info SET value = '-5' WHERE key = 'nodes'",
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_store_in_the_explorer_is_one_value_error(tmp_path: Path, damage: str) -> None:
    path = lf.save_trace(_trace_file(tmp_path, _node("a", "s"), _node("b", "a")), tmp_path / "t.db")
    conn = sqlite3.connect(path)
    conn.execute(_DAMAGE[damage])
    conn.commit()
    conn.close()
    try:
        explorer = TraceExplorer(path)
        html = explorer._static_html()
    except ValueError as exc:
        assert type(exc) is ValueError and str(path) in str(exc)
        return
    assert "n b" in html
