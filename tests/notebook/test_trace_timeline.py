"""The timeline overview's bucket counts: exact, over the whole trace, for saved and live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langfx_nb.agentic.trace_db import StoredTrace
from langfx_nb.agentic.trace_reader import GROUPS, group_of, time_buckets
from langfx_nb.notebook import trace_explorer as te
from langfx_nb.notebook.trace_live import LiveIndex

from .test_trace_index import make_trace, stored


def plain_counts(
    nodes: list[dict[str, Any]], lo: float, hi: float, buckets: int
) -> dict[str, list[int]]:
    """The same counts computed the plain way, node by node."""
    out = {g: [0] * buckets for g in GROUPS}
    width = (hi - lo) / buckets
    for n in nodes:
        start = n.get("start")
        if not isinstance(start, float | int) or not lo <= start <= hi:
            continue
        b = buckets - 1 if start == hi else min(buckets - 1, int((start - lo) // width))
        # the bisected edges are lo + b * width: a start on an edge opens the next bucket
        while b + 1 < buckets and start >= lo + (b + 1) * width:
            b += 1
        while b > 0 and start < lo + b * width:
            b -= 1
        out[group_of(str(n.get("status", "ok")))][b] += 1
    return out


def with_odd_nodes(n: int) -> list[dict[str, Any]]:
    nodes = make_trace(n, deep=5)["nodes"]
    nodes.append({"id": "u1", "parent_id": "s", "kind": "log", "status": "ok", "start": None})
    nodes.append({"id": "r1", "parent_id": "s", "kind": "item", "status": "running", "start": 7.5})
    nodes.append({"id": "w1", "parent_id": "s", "kind": "item", "status": "waiting", "start": 9})
    return nodes


@pytest.mark.parametrize("live", [False, True])
@pytest.mark.parametrize(("lo", "hi", "buckets"), [(0, 3000, 50), (100, 250, 7), (7.5, 7.5, 3)])
def test_bucket_counts_are_exact_and_every_node_is_counted_once(
    live: bool, lo: float, hi: float, buckets: int
) -> None:
    nodes = with_odd_nodes(3000)
    if live:
        index: StoredTrace | LiveIndex = LiveIndex()
        for node in nodes:
            index.apply(node)  # type: ignore[union-attr]
    else:
        index = stored(nodes)
    got = index.timeline(lo, hi, buckets)
    assert got["counts"] == plain_counts(nodes, lo, hi, buckets)
    in_range = sum(1 for n in nodes if n.get("start") is not None and lo <= n["start"] <= hi)
    assert got["in_range"] == in_range == sum(sum(row) for row in got["counts"].values())
    assert got["untimed"] == 1
    assert got["before"] + got["in_range"] + got["after"] + got["untimed"] == len(nodes)


def test_running_nodes_with_no_end_count_where_they_start() -> None:
    index = LiveIndex()
    for k, (start, status) in enumerate(
        [(1.0, "running"), (2.0, "waiting"), (2.5, "failed"), (None, "ok")]
    ):
        index.apply({"id": f"n{k}", "kind": "item", "status": status, "start": start})
    got = index.timeline(0.0, 4.0, 2)
    assert got["counts"] == {"running": [1, 1], "ok": [0, 0], "failed": [0, 1]}
    assert got["untimed"] == 1 and got["in_range"] == 3


def test_a_trace_with_no_times_has_only_untimed_nodes() -> None:
    index = stored(
        [{"id": "s", "parent_id": None, "kind": "session", "status": "ok", "start": None}]
        + [{"id": f"n{i}", "parent_id": "s", "kind": "log", "start": None} for i in range(4)]
    )
    got = index.timeline(0.0, 1.0, 4)
    assert got["in_range"] == 0 and got["untimed"] == 5
    assert got["counts"] == {g: [0, 0, 0, 0] for g in GROUPS}


def test_a_bad_range_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="lo <= hi"):
        LiveIndex().timeline(2.0, 1.0, 3)
    with pytest.raises(ValueError, match="finite"):
        time_buckets({}, 0, 0.0, float("inf"), 3)


def test_a_window_request_with_a_timeline_range_answers_its_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(te, "BIG_FILE_BYTES", 1)
    trace = make_trace(5000)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(trace))
    explorer = te.TraceExplorer(path)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(explorer, "_send_message", sent.append)
    request = {"kind": "window_request", "req": 1, "start": 0, "count": 5, "expanded": []}
    try:
        explorer._on_view_message(explorer, {**request, "timeline": [1000, 2000, 10]}, [])
        reply = sent.pop()
        assert reply["timeline"]["counts"] == plain_counts(trace["nodes"], 1000, 2000, 10)
        assert len(reply["rows"]) == 5
        explorer._on_view_message(explorer, {**request, "timeline": [None, None, 4]}, [])
        whole = sent.pop()["timeline"]  # the whole trace's span
        assert (whole["lo"], whole["hi"], whole["in_range"]) == (0.0, 5000.0, 5000)
        explorer._on_view_message(explorer, {**request, "timeline": [5, "x", 10]}, [])
        assert "timeline" not in sent.pop()  # a malformed range: the rows, no overview
    finally:
        explorer.close()
