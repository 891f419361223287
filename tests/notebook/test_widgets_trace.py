"""TraceExplorer follows a live Session, loads saved traces, and never breaks the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_live import LiveIndex, row_patch

from ._fakes import FakeClock, record_sends, saved_trace


@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def windows(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The windows of rows pushed to the page (it never gets node patches)."""
    assert not [m for m in sent if m["kind"] == "events"]
    return [m for m in sent if m["kind"] == "window"]


async def test_live_session_is_pushed_as_windows_and_its_rows_match_the_trace() -> None:
    model = Scripted([lf.ToolCall("c1", "add", {"a": 1, "b": 2}), "three"])
    async with lf.Session(model) as session:
        explorer = TraceExplorer(session)
        sent = record_sends(explorer)
        answer = await lf.Agent("add", tools=[add]).invoke(session)
        assert answer == "three"
        explorer.flush()
        final = {n["id"]: n for n in explorer.nodes}
        trace = {n["id"]: n for n in session.trace_json()["nodes"]}
        assert final.keys() == trace.keys()
        for node_id, node in trace.items():
            assert final[node_id]["status"] == node["status"]
            assert final[node_id]["kind"] == node["kind"]
            assert final[node_id].get("parent_id") == node["parent_id"]
        kinds = sorted({n["kind"] for n in final.values()})
        assert kinds == ["action", "query", "session", "tool_call"]
        await asyncio.sleep(0.2)  # the pushes are spaced: the last one goes out
        pushed = windows(sent)
        assert 0 < len(pushed) < 2 * len(trace)  # paced, not one message per event
        assert pushed[-1]["nodes"] == len(trace) and pushed[-1]["counts"]["status"]["ok"] >= 3
        by_id = {n["id"]: n for n in explorer.nodes}
        assert by_id[session.all_tool_calls[0].id]["decision"]["outcome"] == "approve"
        explorer.close()


async def test_explorer_flushes_when_the_run_ends() -> None:
    clock = FakeClock()  # timers never fire on their own: only the end-of-run flush sends
    async with lf.Session(Scripted(["hi"])) as session:
        explorer = TraceExplorer(session, clock=clock)
        sent = record_sends(explorer)
        await lf.Agent("hello").invoke(session)
        clock.advance(1.0)  # the end-of-run flush asked for a push now
        statuses = {r["node"]["id"]: r["node"]["status"] for r in windows(sent)[-1]["rows"]}
        agent_node = session.all_actions[0]
        assert statuses[agent_node.id] == "ok"
        explorer.close()


async def test_an_observer_error_never_reaches_the_run() -> None:
    async with lf.Session(Scripted(["ok"])) as session:
        explorer = TraceExplorer(session)

        def boom(_message: dict[str, Any]) -> None:
            raise RuntimeError("frontend gone")

        explorer._send_message = boom  # type: ignore[method-assign]
        assert await lf.Agent("x").invoke(session) == "ok"


async def test_saved_trace_loads_from_dict_text_and_path(tmp_path: Path) -> None:
    async with lf.Session(Scripted(["fine"])) as session:
        await lf.Agent("go").invoke(session)
        data = session.trace_json()
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    for source in (data, json.dumps(data), path, str(path)):
        explorer = TraceExplorer(source)
        assert explorer.snapshot["windowed"]["nodes"] == len(data["nodes"])
        assert (
            explorer.snapshot["summary"]["requests"] is not None or "summary" in explorer.snapshot
        )
    text = TraceExplorer(data)._fallback_text()
    assert text.startswith(f"TraceExplorer: {len(data['nodes'])} nodes")


def test_session_load_trace_round_trip_is_viewable() -> None:
    nodes = [
        {
            "id": "0",
            "parent_id": None,
            "kind": "session",
            "name": "session",
            "status": "running",
            "start": 0.0,
        },
        {
            "id": "1",
            "parent_id": "0",
            "kind": "action",
            "name": "A",
            "status": "ok",
            "start": 0.0,
            "end": 1.5,
        },
    ]
    explorer = TraceExplorer({"format": "langfx_nb.trace", "version": 1, "nodes": nodes})
    assert [n["parent_id"] for n in explorer.nodes] == [None, "0"]


@pytest.mark.parametrize(
    ("trace", "named"),
    [
        ({"root": {"id": "r", "children": []}}, "not a langfx_nb trace"),
        ({"format": "langfx_nb.trace", "version": 7, "nodes": []}, "unsupported trace version"),
        (
            {"format": "langfx_nb.trace", "version": 1, "nodes": [{"id": "0", "name": "s"}]},
            "nodes[0]: 'kind' is missing",
        ),
        ('{"format": "langfx_nb.trace", "version": 1, "nodes": [', "not valid JSON"),
    ],
)
def test_a_bad_trace_is_one_clear_error_naming_what_is_wrong(trace: Any, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        TraceExplorer(trace)


def test_a_bad_trace_file_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"format": "langfx_nb.trace", "version": 1, "nodes": {}}))
    with pytest.raises(ValueError, match=r"run\.json: malformed trace: 'nodes' must be a list"):
        TraceExplorer(path)
    with pytest.raises(FileNotFoundError):
        TraceExplorer(tmp_path / "missing.json")


def test_row_patches_handle_update_changes_and_logs() -> None:
    live = LiveIndex()
    events: list[dict[str, Any]] = [
        {"type": "node_start", "node": {"id": "1", "parent_id": None, "kind": "query"}},
        {"type": "node_update", "node_id": "1", "changes": {"usage": {"total_tokens": 5}}},
        {
            "type": "log",
            "node": {"id": "2", "parent_id": "1", "kind": "log", "name": "info"}
            | {"inputs": {"message": "m"}},
        },
        {
            "type": "node_end",
            "node": {"id": "1", "parent_id": None, "kind": "query", "name": "q"}
            | {"status": "failed", "error": {"type": "LMError", "message": "x"}},
        },
    ]
    assert row_patch({"type": "node_update", "node_id": "1", "changes": {"delta": "t"}}) is None
    assert row_patch({"type": "something_else"}) is None
    for event in events:
        patch = row_patch(event)
        assert patch is not None
        live.apply(patch)
    rows = live.window()["rows"]
    assert rows[0]["roll"][0] == 5 and rows[0]["node"]["status"] == "failed"
    assert rows[1]["node"]["kind"] == "log" and rows[1]["node"]["parent_id"] == "1"
    assert rows[1]["node"]["hint"] == "m"


def test_sync_request_answers_with_a_snapshot() -> None:
    explorer = TraceExplorer(saved_trace([{"id": "a", "kind": "session", "name": "a"}]))
    sent = record_sends(explorer)
    explorer._on_view_message(explorer, {"kind": "sync", "seq": 0}, [])
    assert sent == []  # a saved trace: its first window is in the state trait
    session = lf.Session()
    live = TraceExplorer(session)
    buffers: list[list[bytes]] = []
    live.send = lambda content, buffers_=None, **kw: (
        sent.append(content),
        buffers.append(kw.get("buffers") or buffers_),
    )
    live._on_view_message(live, {"kind": "sync"}, [])
    assert sent[-1]["kind"] == "snapshot"
    rows = json.loads(buffers[-1][0])["windowed"]["rows"]
    assert [r["node"]["id"] for r in rows] == [session.root.id]


def test_snapshots_carry_summaries_and_details_come_on_request() -> None:
    node = {
        "id": "q",
        "parent_id": None,
        "kind": "query",
        "name": "q",
        "status": "ok",
        "inputs": {"prompt": "long prompt " * 100},
        "outputs": {"text": "answer"},
    }
    explorer = TraceExplorer(saved_trace([{"id": "s", "kind": "session", "name": "s"}, node]))
    _root, row = explorer.snapshot["windowed"]["rows"]
    summary = row["node"]
    assert summary["partial"] is True and "inputs" not in summary and summary["name"] == "q"
    sent = record_sends(explorer)
    explorer._on_view_message(explorer, {"kind": "detail_request", "id": "q"}, [])
    assert sent[-1]["kind"] == "detail" and sent[-1]["node"]["outputs"] == {"text": "answer"}
    explorer._on_view_message(explorer, {"kind": "detail_request", "id": "missing"}, [])
    assert len(sent) == 1


async def test_session_totals_reach_the_view_when_a_run_ends() -> None:
    async with lf.Session(Scripted(["hello there"])) as session:
        explorer = TraceExplorer(session)
        sent = record_sends(explorer)
        await lf.Agent("hi").invoke(session)
        await asyncio.sleep(1.2)  # the pushes, and the state at most once a second
        summaries = [m["summary"] for m in windows(sent) if m.get("summary")]
        assert summaries and summaries[-1]["usage"]["total_tokens"] > 0
        assert explorer.snapshot["summary"] == summaries[-1]
        explorer.close()


def test_rows_carry_a_hint_that_tells_same_named_nodes_apart() -> None:
    from langfx_nb.notebook.trace_live import view_node

    log = view_node({"id": 1, "kind": "log", "name": "info", "inputs": {"message": "cache warm"}})
    assert log["hint"] == "cache warm"
    query = view_node(
        {
            "id": 2,
            "kind": "query",
            "name": "query:Fact",
            "inputs": {
                "prompt": {"role": "user", "text": "A fact about\n Mars"},
                "vars": {"p": "Mars"},
            },
        }
    )
    assert query["hint"] == "p=Mars · A fact about Mars"
    call = view_node({"id": 3, "kind": "tool_call", "name": "add", "inputs": {"args": {"a": 1}}})
    assert call["hint"] == "a=1"
    assert "hint" not in view_node({"id": 4, "kind": "action", "name": "Agent"})


async def test_show_swaps_the_trace_in_place_and_follows_a_new_session() -> None:
    first = saved_trace([{"id": "a", "kind": "session", "name": "a"}])
    explorer = TraceExplorer(first, title="first")
    sent: list[dict[str, Any]] = []
    buffers: list[list[bytes]] = []
    explorer.send = lambda content, buffers_=None, **kw: (
        sent.append(content),
        buffers.append(kw.get("buffers") or buffers_),
    )
    second = saved_trace(
        [{"id": "r", "kind": "session", "name": "r"}, {"id": "x", "kind": "action", "name": "x"}]
    )
    explorer.show(second, title="second", view_state={"selected": "x"})
    assert [n["id"] for n in explorer.nodes] == ["r", "x"]  # nothing of the first is left
    assert (explorer.title, explorer.view_state) == ("second", {"selected": "x"})
    shown = sent[-1]
    assert shown["kind"] == "show" and shown["seq"] > 0 and shown["view_state"]["selected"] == "x"
    rows = json.loads(buffers[-1][0])["windowed"]["rows"]
    assert [r["node"]["id"] for r in rows] == ["r", "x"]
    assert explorer.snapshot["seq"] == shown["seq"]  # a reloaded page starts from it

    # a malformed trace raises and the explorer keeps what it showed
    with pytest.raises(ValueError):
        explorer.show({"format": "nope"})
    assert [n["id"] for n in explorer.nodes] == ["r", "x"]

    # a live session: its trace so far, then its events, in batches above the show's seq
    async with lf.Session(Scripted(["hi", "again"])) as session:
        explorer.show(session)
        assert explorer.title == "second" and explorer.view_state == {}
        seq = sent[-1]["seq"]
        await lf.Agent("hello").invoke(session)
        explorer.flush()
        await asyncio.sleep(0.2)
        live = windows(sent[sent.index(next(m for m in sent if m.get("seq") == seq)) :])
        assert live and live[-1]["nodes"] == len(session.trace_json()["nodes"])
        assert {n["id"] for n in explorer.nodes} == {n["id"] for n in session.trace_json()["nodes"]}
        # shown something else: the session's later events no longer reach the explorer
        explorer.show(first)
        before = len(sent)
        await lf.Agent("again").invoke(session)
        explorer.flush()
        await asyncio.sleep(0.2)
        assert windows(sent[before:]) == []
        assert [n["id"] for n in explorer.nodes] == ["a"]
    explorer.close()


def test_watch_after_a_saved_trace_shows_the_session_as_recorded() -> None:
    explorer = TraceExplorer(saved_trace([{"id": "a", "kind": "session", "name": "a"}]))
    session = lf.Session()
    explorer.watch(session)
    assert [n["id"] for n in explorer.nodes] == [session.root.id]  # nothing of the file
    assert explorer._fallback_text() == "TraceExplorer: 1 node (running 1)"  # still live
    explorer.close()


def test_watch_of_another_session_stops_following_the_first() -> None:
    first, second = lf.Session(), lf.Session()
    explorer = TraceExplorer(first)
    explorer.watch(second)
    with first.track("action", "elsewhere"):
        pass
    assert [n["id"] for n in explorer.nodes] == [second.root.id]  # nothing of the first
    explorer.close()
