"""A fourth probe of the trace explorer: a live session's rows (sums settled lazily as rows
are read) against the plain oracle of its records and against its saved copy, at moments
during the run, not only at the end."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_rows import row_values


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
        for cost in (0.1, 0.2, 0.0):  # a price revised after the call, then refunded
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


@pytest.mark.xfail(
    strict=True,
    reason="an error's search text is its JSON: a backslash is doubled, so searching for a "
    r"Windows path the error shows (C:\data\in.txt) finds nothing, live or saved",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="an evicting session (max_trace_nodes=20, 30 items, 10 failed) saved, or opened "
    "after its run, shows the counts of the held nodes (failed 6, item 18) where the "
    "explorer that followed the run and session.usage_summary.counts say failed 10, item 30 "
    "(docs/batch.md: counts stay exact)",
)
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
