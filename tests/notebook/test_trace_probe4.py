"""A fourth probe of the trace explorer: a live session's rows (sums settled lazily as rows
are read) against the plain oracle of its records and against its saved copy, at moments
during the run, not only at the end."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.errors import ToolDeniedError
from langfx_nb.llms import Scripted
from langfx_nb.notebook import render
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_rows import row_values

from .trace_oracle import problems_below, sums


def _update(explorer: TraceExplorer, node_id: str, **changes: Any) -> None:
    """A core ``node_update`` event reaching the live explorer (as a recorder emits it)."""
    explorer._take({"type": "node_update", "node_id": node_id, "changes": changes})


@pytest.mark.xfail(
    strict=True,
    reason="a live row's cost sum is kept by adding and subtracting floats: a query whose "
    "cost goes 0.10 -> 0.20 -> 0 leaves 2.8e-17 in its parent, shown as '$0.0000' "
    "('$0.000000000000000028' on the page) where the saved trace shows '$0'",
)
def test_a_cost_that_changes_back_to_zero_shows_zero_live() -> None:
    session = Session()
    explorer = TraceExplorer(session)
    with session.track("action", "step") as step:
        step_id = step.node.id
        for cost in (0.1, 0.2, 0.0):  # a cost changed after the call (core events may set it)
            _update(explorer, step_id, cost=cost)
            explorer._reply({"start": 0, "count": 50})  # a read between the changes
    live = explorer._reply({"start": 0, "count": 50})
    explorer.close()
    root = live["rows"][0]
    assert root["node"]["kind"] == "session"
    assert row_values(root)["cost"] == "$0"
    assert root["roll"][1] == 0.0


def _live_and_saved(session: Session, tmp_path: Path) -> tuple[TraceExplorer, TraceExplorer]:
    live = TraceExplorer(session)
    return live, TraceExplorer(lf.save_trace(session, tmp_path / "saved.db"))


def test_a_windows_path_in_an_error_is_found_by_a_search(tmp_path: Path) -> None:
    session = Session()
    with pytest.raises(OSError), session.track("action", "load"):
        raise OSError('cannot open "C:\\data\\in.txt"')
    for explorer in _live_and_saved(session, tmp_path):
        found = explorer._reply({"start": 0, "count": 50, "query": "C:\\data\\in.txt"})
        explorer.close()
        assert found["matches"] == 1
        assert found["rows"][-1]["node"]["name"] == "load"


def _status_counts(session: Session) -> dict[str, int]:
    out: dict[str, int] = {}
    for by_status in session.usage_summary.counts.values():
        for status, n in by_status.items():
            out[status] = out.get(status, 0) + n
    return out


def test_an_evicting_session_shows_its_exact_counts_saved_and_opened_late(
    tmp_path: Path,
) -> None:
    session = Session(max_trace_nodes=20)
    follow = TraceExplorer(session)
    with session.track("batch", "b") as batch:
        for i in range(30):
            with contextlib.suppress(RuntimeError), batch.session.track("item", f"item {i}"):
                if i % 3 == 0:
                    raise RuntimeError("boom")
    want = follow._reply({"start": 0, "count": 50})["counts"]
    follow.close()
    assert want["status"] == _status_counts(session)
    assert want["status"]["failed"] == 10 and want["kind"]["item"] == 30
    late, saved = _live_and_saved(session, tmp_path)
    for explorer in (late, saved):
        got = explorer._reply({"start": 0, "count": 50})["counts"]
        explorer.close()
        assert got == want


def _evicting_session() -> Session:
    """30 items under a batch, every third failed, in a session holding at most 20 nodes."""
    session = Session(max_trace_nodes=20)
    with session.track("batch", "b") as batch:
        for i in range(30):
            with contextlib.suppress(RuntimeError), batch.session.track("item", f"item {i}"):
                if i % 3 == 0:
                    raise RuntimeError("boom")
    return session


@pytest.mark.parametrize(
    "damaged",
    ["many", [], {"item": [10]}, {"item": {"failed": -4}}, {"item": {"failed": True}},
     {"item": {"failed": 1.5}}, {"item": {"failed": 10**30}}],
)  # fmt: skip
def test_a_stored_trace_whose_exact_counts_are_damaged_opens_with_its_held_counts(
    tmp_path: Path, damaged: Any
) -> None:
    data = _evicting_session().trace_json()
    data["summary"]["counts"] = damaged
    explorer = TraceExplorer(lf.save_trace(data, tmp_path / "saved.db"))
    window = explorer._reply({"start": 0, "count": 50})
    explorer.close()
    held = [row["node"] for row in window["rows"]]
    assert window["nodes"] == len(held) == 20
    assert window["counts"]["kind"]["item"] == sum(n["kind"] == "item" for n in held)
    assert window["counts"]["status"]["failed"] == sum(n["status"] == "failed" for n in held)


def test_an_evicting_sessions_static_copy_shows_its_exact_counts() -> None:
    html = render.session_html(_evicting_session())
    assert "by status: failed 10, ok 21, running 1" in html
    assert "by kind: batch 1, item 30, session 1" in html


# -- what agreed: a random run read at random moments, live against saved and the oracle ----

_BAD = ["failed", "denied", "cancelled", "timed_out"]
_CHANGES = st.one_of(
    st.fixed_dictionaries({"status": st.sampled_from(["ok", "running", "waiting", *_BAD])}),
    st.fixed_dictionaries({"usage": st.fixed_dictionaries({"total_tokens": st.integers(0, 9)})}),
    st.fixed_dictionaries({"cost": st.sampled_from([None, 0.0, 0.25, 0.5, 1.0])}),
    st.fixed_dictionaries({"status": st.sampled_from(_BAD), "error": st.just("boom")}),
    st.fixed_dictionaries({"name": st.sampled_from(["alpha", "boom x", "Beta"])}),
)


@st.composite
def _runs(draw: st.DrawFn) -> tuple[int, list[int], list[tuple[int, Any]]]:
    """A tree of ``n`` nodes under the session root (each parent before it), the order its
    nodes start in (a child may start before its parent), and changes to started nodes."""
    n = draw(st.integers(1, 9))
    parents = [draw(st.integers(-1, k - 1)) for k in range(n)]  # -1: the session root
    order = draw(st.permutations(range(n)))
    steps: list[tuple[int, Any]] = []
    for at, k in enumerate(order):
        steps.append((k, None))  # node k starts
        for _ in range(draw(st.integers(0, 3))):
            steps.append((draw(st.sampled_from(order[: at + 1])), draw(_CHANGES)))
            if draw(st.booleans()):
                steps.append((-1, draw(st.sampled_from([{}, {"query": "boom"}]))))  # a read
    return n, parents, steps


def _window_keys(window: dict[str, Any]) -> dict[str, Any]:
    keys = ("rows", "total", "matches", "counts", "nodes", "selected_index", "timeline")
    return {k: window.get(k) for k in keys}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=_runs(), data=st.data())
def test_a_live_run_read_at_any_moment_shows_what_its_saved_copy_and_the_oracle_show(
    run: tuple[int, list[int], list[tuple[int, Any]]], data: st.DataObject
) -> None:
    n, parents, steps = run
    session = Session()
    live = TraceExplorer(session)
    root = session.trace_json()["nodes"][0]
    records: dict[str, dict[str, Any]] = {str(root["id"]): dict(root)}
    ids = [f"n{k}" for k in range(n)]
    for at, (k, change) in enumerate(steps):
        if k == -1:
            live._reply({"start": 0, "count": 50, **change})  # a read between changes
            continue
        if change is None:
            parent = str(root["id"]) if parents[k] < 0 else ids[parents[k]]
            node: dict[str, Any] = {"id": ids[k], "parent_id": parent, "kind": "action"}
            node |= {"name": ids[k], "status": "running", "start": float(at)}
            live._take({"type": "node_start", "node": dict(node)})
            records[ids[k]] = node
        else:
            _update(live, ids[k], **change)
            records[ids[k]].update(change)
    shown = [i for i in ids if i in records]
    views: list[dict[str, Any]] = [
        {},
        {"query": "boom"},
        {"query": "beta", "selected": data.draw(st.sampled_from(shown))},
        {"expanded": {i: data.draw(st.booleans()) for i in shown}},
        {"timeline": [None, None, 4]},
    ]
    nodes = list(records.values())
    saved = TraceExplorer(
        {"format": "langfx_nb.trace", "version": 1, "session": {"id": "s"}, "nodes": nodes}
    )
    tot, below = sums(nodes), problems_below(nodes)
    for view in views:
        request = {"start": 0, "count": 50, **view}
        want, got = live._reply(request), saved._reply(request)
        assert _window_keys(got) == _window_keys(want), view
        for row in got["rows"]:
            tokens, cost, priced, unpriced = tot[row["node"]["id"]]
            assert row["roll"][:3] == [tokens, cost, priced] and row["roll"][5] == unpriced
            assert row.get("below") == below.get(row["node"]["id"])
    live.close()
    saved.close()


def _agrees(session: Session, live: TraceExplorer, path: Path) -> None:
    """The live explorer's windows are the saved copy's now, with the oracle's sums."""
    saved = TraceExplorer(lf.save_trace(session, path))
    nodes = session.trace_json()["nodes"]
    tot, below = sums(nodes), problems_below(nodes)
    everything = {"expanded": {str(n["id"]): True for n in nodes}}
    for view in ({}, {"query": "add"}, {"query": "denied"}, everything):
        request = {"start": 0, "count": 100, **view}
        want, got = live._reply(request), saved._reply(request)
        assert _window_keys(got) == _window_keys(want), view
        for row in want["rows"]:
            node_id = row["node"]["id"]
            assert row["roll"][0] == tot[node_id][0] and row.get("below") == below.get(node_id)
    saved.close()


async def test_an_agent_with_denied_calls_shows_the_same_live_and_saved_during_its_run(
    tmp_path: Path,
) -> None:
    @lf.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def calls(*args: tuple[str, int]) -> list[lf.ToolCall]:
        return [lf.ToolCall(call_id, "add", {"a": a, "b": 1}) for call_id, a in args]

    replies: list[Any] = [calls(("c1", 9), ("c2", 1)), "ok", calls(("c3", 1), ("c4", 7)), "x"]
    moments = iter(range(100))
    async with lf.Session(Scripted(replies), prices={"fake:scripted": lf.Price(1, 2)}) as session:
        live = TraceExplorer(session)

        def check() -> None:
            _agrees(session, live, tmp_path / f"{next(moments)}.db")

        async def deny_big(call: lf.ToolCall, _s: lf.Session) -> lf.Deny | bool:
            check()  # a read while the agent waits on its policy
            return lf.Deny("No.", by="user") if call.args["a"] > 5 else True

        def stop_big(call: lf.ToolCall, _s: lf.Session) -> bool:
            check()
            return call.args["a"] <= 5

        await lf.Agent("go", tools=[add], allow_tool=deny_big).invoke(session)
        check()
        with pytest.raises(ToolDeniedError):
            await lf.Agent("go", tools=[add], allow_tool=stop_big).invoke(session)
        check()
        root = live._reply({"start": 0, "count": 100})["rows"][0]
        live.close()
    assert next(moments) == 6  # four policy calls and two ends read
    assert root["below"] == {"denied": 2, "cancelled": 1}  # c3 approved, cancelled by c4
