"""A third probe of the stored trace (format 3: search text in tree order, a byte per node for
searches and listings, a depth byte per node): stores a new user opens, damaged, hostile or
large, must show correctly or give one clear ``ValueError`` naming the file; a saved trace
must show what the live one showed."""

from __future__ import annotations

import json
import re
import sqlite3
from array import array
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.notebook.trace_explorer import TraceExplorer
from tests.stored_tables import edit_sqlite
from tests.trace_gen import write_big_trace

from ._fakes import record_sends


def _node(node_id: str, parent: str | None, kind: str = "action", **more: Any) -> dict[str, Any]:
    out = {"id": node_id, "parent_id": parent, "kind": kind, "name": f"n {node_id}"}
    return {**out, "status": "ok", "start": 0.0, "end": 1.0, **more}


def _store(tmp_path: Path, *nodes: dict[str, Any]) -> Path:
    data = {"format": "langfx_nb.trace", "version": 1, "session": {"id": "s"}}
    data["nodes"] = [_node("s", None, "session"), *nodes]
    return lf.save_trace(data, tmp_path / "t.db")


def _damaged(tmp_path: Path, sql: str) -> Path:
    """A store of s → a → b → c (c named "Needle", failed) and s → d, then ``sql`` run on it."""
    path = _store(
        tmp_path,
        _node("a", "s"),
        _node("b", "a"),
        _node("c", "b", name="Needle", status="failed", error="boom"),
        _node("d", "s"),
    )
    edit_sqlite(path, sql)
    return path


def _everything_a_page_asks(path: Path) -> list[dict[str, Any]]:
    """Open ``path`` in the explorer and ask what the page asks: windows (first, searched,
    a row opened, a row closed), a node's detail, the timeline; the static copy too."""
    explorer = TraceExplorer(path)
    sent = record_sends(explorer)
    requests: list[dict[str, Any]] = [
        {"start": 0, "count": 50},
        {"start": 0, "count": 50, "query": "needle"},
        {"start": 0, "count": 50, "expanded": [["b", True]]},
        {"start": 0, "count": 50, "expanded": [["a", False]], "selected": "c"},
        {"start": 0, "count": 50, "timeline": [None, None, 10]},
    ]
    for req in requests:
        explorer._on_view_message(explorer, {"kind": "window_request", "req": 1, **req}, [])
    explorer._on_view_message(explorer, {"kind": "detail_request", "id": "c"}, [])
    explorer._static_html()
    explorer.close()
    return sent


_OVERFLOW = {
    # OverflowError: cannot convert float infinity to integer (StoredTrace.__init__'s int())
    "node count Infinity": "UPDATE trace_info SET value = 'Infinity' WHERE key = 'nodes'",
    "a status count 1e999": "UPDATE trace_info SET value ="
    """ '{"status": {"ok": 1e999}, "kind": {"action": 4}}' WHERE key = 'counts'""",
    "untimed -Infinity": "UPDATE trace_info SET value = '-Infinity' WHERE key = 'untimed'",
    # OverflowError from _row's int() of a window row, not caught by _rows
    "a row's tokens 9e999": "UPDATE trace_rows SET tokens = 9e999",
    "a problem count 1e999 below a row": """UPDATE trace_tree SET below = '{"failed": 1e999}'""",
}


@pytest.mark.parametrize("damage", list(_OVERFLOW))
def test_an_infinite_count_in_a_store_is_one_value_error(tmp_path: Path, damage: str) -> None:
    path = _damaged(tmp_path, _OVERFLOW[damage])
    with pytest.raises(ValueError, match=r"t\.db") as caught:
        _everything_a_page_asks(path)
    assert type(caught.value) is ValueError


_DEPTHS = {
    # every node 255 deep or more: the window lists none of the 5 nodes (total 0), as if right
    "all 255": "UPDATE trace_order SET ranks = x'ffffffffff' WHERE name = 'depth'",
    # every node a root: all 5 rows listed though b is closed, and a search for "needle"
    # lists c alone, without the ancestors it is listed under
    "all 0": "UPDATE trace_order SET ranks = zeroblob(5) WHERE name = 'depth'",
}


@pytest.mark.parametrize("damage", list(_DEPTHS))
def test_depth_bytes_that_disagree_with_the_parents_are_one_value_error(
    tmp_path: Path, damage: str
) -> None:
    path = _damaged(tmp_path, _DEPTHS[damage])
    with pytest.raises(ValueError, match=r"t\.db"):
        _everything_a_page_asks(path)


def test_a_store_as_written_answers_every_request(tmp_path: Path) -> None:
    sent = _everything_a_page_asks(_damaged(tmp_path, "SELECT 1"))
    windows = [m for m in sent if m["kind"] == "window"]
    assert [w["total"] for w in windows] == [4, 4, 5, 3, 4]
    assert windows[1]["matches"] == 1
    assert windows[3]["selected_index"] == -1  # c under the closed a
    assert sent[-1]["kind"] == "detail" and sent[-1]["node"]["error"] == "boom"


def test_a_name_with_a_newline_shows_the_same_live_and_saved(tmp_path: Path) -> None:
    session = Session()
    with session.track("action", "first line\nsecond line"):
        pass
    live = TraceExplorer(session)
    saved = TraceExplorer(lf.save_trace(session, tmp_path / "saved.db"))
    for view in ({}, {"query": "line second"}, {"query": "line\nsecond"}):
        want = live._reply({"start": 0, "count": 50, **view})
        got = saved._reply({"start": 0, "count": 50, **view})
        assert [r["node"]["name"] for r in got["rows"]] == [
            r["node"]["name"] for r in want["rows"]
        ], view
        assert got.get("matches") == want.get("matches"), view
    live.close()
    saved.close()


def _wide_store(tmp_path: Path) -> Path:
    """s → a → b → c, then 2,500 leaves under s: three blocks of search text."""
    leaves = [_node(f"x{i}", "s", name=f"leaf {i}") for i in range(2500)]
    return _store(tmp_path, _node("a", "s"), _node("b", "a"), _node("c", "b"), *leaves)


_VIEWS: list[dict[str, Any]] = [
    {},
    {"expanded": [["b", True]]},
    {"expanded": [["x7", False], ["a", False]]},
    {"query": "leaf 7"},
    {"query": "leaf 2499"},
    {"selected": "x1500", "start": 1500},
]

_WRONG = {
    # every node's rank is 0 (the root's): opening b is ignored, closing a closes the root
    "every rank the root's": "UPDATE trace_order SET ranks = zeroblob(4 * 2504)"
    " WHERE name = 'rank'",
    # every row of the tree points at the root's row: each row shows s
    "every tree row the root's": "UPDATE trace_tree SET seq = 0",
}  # (two search blocks of as many lines swapped are consistent: shown as stored)


@pytest.mark.parametrize("damage", list(_WRONG))
def test_a_damaged_tree_order_shows_right_or_is_refused(tmp_path: Path, damage: str) -> None:
    path = _wide_store(tmp_path)
    want = _windows(path)
    edit_sqlite(path, _WRONG[damage])
    try:
        got = _windows(path)
    except ValueError as exc:
        assert str(path) in str(exc)
        return
    for view, right, shown in zip(_VIEWS, want, got, strict=True):
        for key in ("total", "matches", "selected_index", "rows"):
            assert shown.get(key) == right.get(key), (view, key)


def _windows(path: Path) -> list[dict[str, Any]]:
    """The windows the explorer sends for each of ``_VIEWS``."""
    explorer = TraceExplorer(path)
    sent = record_sends(explorer)
    for req in _VIEWS:
        message = {"kind": "window_request", "req": 1, "count": 100, **req}
        explorer._on_view_message(explorer, message, [])
    explorer.close()
    return sent


def test_converting_a_big_json_trace_says_100_percent_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.json"
    write_big_trace(path, 30_000)  # about 5 MB: converted with a progress line
    TraceExplorer(path).close()
    assert capfd.readouterr().err.count("100%") == 1


def test_a_200k_node_json_trace_300_deep_is_shown_and_searched_exactly(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    nodes, deep = 200_000, 300  # deeper than a depth byte tells apart (255)
    info = write_big_trace(path, nodes, deep=deep)
    explorer = TraceExplorer(path)
    first = explorer._reply({"start": 0, "count": 200})
    assert first["nodes"] == nodes and first["counts"]["status"]["failed"] == info.failed
    boom = explorer._reply({"start": 0, "count": 200, "query": "BOOM"})
    assert boom["matches"] == info.failed
    assert boom["total"] == 2 + 2 * info.failed  # s, b, each failed call and its item
    chain = [f"d{d}" for d in range(deep)]
    end = explorer._reply({"start": 0, "count": 400, "query": f"deep {deep - 1}"})
    assert [r["node"]["id"] for r in end["rows"]] == ["s", "b", *chain]
    assert [r["depth"] for r in end["rows"]] == list(range(deep + 2))
    deep_open = {d: True for d in chain}
    opened = {"expanded": deep_open, "selected": chain[-1]}
    window = explorer._reply({"start": 10**9, "count": 200, **opened})
    assert window["total"] == 2 + deep + info.items and window["selected_index"] == 1 + deep
    assert window["start"] == window["total"] - 1 and len(window["rows"]) == 1
    shut = {"expanded": {**deep_open, "b": False}, "selected": chain[-1]}
    closed = explorer._reply({"start": 0, "count": 200, **shut})
    assert closed["total"] == 2 and closed["selected_index"] == -1
    prompts = explorer._reply({"start": 0, "count": 200, "query": "question number 1"})
    assert prompts["matches"] == sum(
        "question number 1" in f"question number {i}" for i in range(1, nodes - deep - 2, 4)
    )
    explorer.close()


@pytest.mark.parametrize("opener", ["load_trace", "restore"])
def test_a_malformed_trace_file_read_by_a_session_is_an_error_naming_it(
    tmp_path: Path, opener: str
) -> None:
    data = {"format": "langfx_nb.trace", "version": 1, "session": {"id": "s"}}
    data["nodes"] = [_node("s", None, "session"), _node("a", "b"), _node("b", "a")]  # a cycle
    path = tmp_path / "cycle.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="cycle") as caught:
        TraceExplorer(path)
    assert str(path) in str(caught.value)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        getattr(Session, opener)(path)


def test_a_store_with_a_damaged_record_loaded_is_an_error_naming_it(tmp_path: Path) -> None:
    path = _store(tmp_path, _node("a", "s"))
    conn = sqlite3.connect(path)
    (body,) = conn.execute("SELECT body FROM trace_records WHERE seq = 0").fetchone()
    records = json.loads(body)
    records[-1]["parent_id"] = records[-1]["id"]  # its own parent
    conn.execute("UPDATE trace_records SET body = ? WHERE seq = 0", (json.dumps(records),))
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match=re.escape(str(path))):
        Session.load_trace(path)


def _reversed_ok_starts(conn: sqlite3.Connection) -> None:
    # the ok group's start times in reverse: all 201 nodes counted in one bucket of ten
    (blob,) = conn.execute("SELECT starts FROM trace_starts WHERE grp = 'ok'").fetchone()
    starts = array("d", reversed(array("d", blob))).tobytes()
    conn.execute("UPDATE trace_starts SET starts = ? WHERE grp = 'ok'", (starts,))


def _ok_starts_everywhere(conn: sqlite3.Connection) -> None:
    # every group holds the ok group's times: 603 nodes counted in a trace of 201
    conn.execute(
        "UPDATE trace_starts SET starts = (SELECT starts FROM trace_starts WHERE grp = 'ok')"
    )


_STARTS = {"reversed": _reversed_ok_starts, "every group the ok group's": _ok_starts_everywhere}


@pytest.mark.parametrize("damage", list(_STARTS))
def test_a_damaged_timeline_shows_right_or_is_refused(tmp_path: Path, damage: str) -> None:
    nodes = [_node(f"n{i}", "s", start=float(i), end=i + 0.5) for i in range(200)]
    path = _store(tmp_path, *nodes)
    request = {"start": 0, "count": 10, "timeline": (None, None, 10)}
    explorer = TraceExplorer(path)
    want = explorer._reply(request)["timeline"]
    explorer.close()
    conn = sqlite3.connect(path)
    _STARTS[damage](conn)
    conn.commit()
    conn.close()
    try:
        explorer = TraceExplorer(path)
        got = explorer._reply(request)["timeline"]
    except ValueError as exc:
        assert str(path) in str(exc)
        return
    assert got == want
