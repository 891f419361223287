"""The windowed trace explorer's kernel side for saved traces: the stored trace's windows
(``agentic/trace_db.py``), a JSON trace converted into one, and the explorer answering from it.

Every count a windowed page shows comes from here, so the tests compare the store's answers
with the same answers computed the plain way over every node record.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from langfx_nb.agentic.session import Session
from langfx_nb.agentic.trace_db import DEFAULT_OPEN_DEPTH, StoredTrace, convert
from langfx_nb.notebook import trace_explorer as te

from .trace_oracle import problems_below, sums, tree_order


def make_trace(n: int, *, seed: int = 1, deep: int = 0) -> dict[str, Any]:
    """A session → batch → items → queries/tool calls trace, plus an optional deep chain."""
    rand = random.Random(seed)
    nodes: list[dict[str, Any]] = [
        {
            "id": "s",
            "parent_id": None,
            "kind": "session",
            "name": "session",
            "status": "ok",
            "start": 0.0,
            "end": float(n),
        },
        {
            "id": "b",
            "parent_id": "s",
            "kind": "batch",
            "name": "batch",
            "status": "ok",
            "start": 0.0,
            "end": float(n),
        },
    ]
    items: list[str] = []
    for i in range(2, n - deep):
        if not items or rand.random() < 0.3:
            node_id = f"item{i}"
            items.append(node_id)
            nodes.append(
                {
                    "id": node_id,
                    "parent_id": "b",
                    "kind": "item",
                    "name": f"item {i}",
                    "status": "ok",
                    "start": float(i),
                    "end": i + 1.0,
                }
            )
            continue
        status = rand.choice(["ok", "ok", "ok", "failed", "denied"])
        node: dict[str, Any] = {
            "id": f"n{i}",
            "parent_id": rand.choice(items),
            "kind": rand.choice(["query", "tool_call"]),
            "name": f"step {i} é",
            "status": status,
            "start": float(i),
            "end": i + 0.5,
            "inputs": {"prompt": f"question {i} ünïcode ✓"},
        }
        if node["kind"] == "query":
            node["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        if status == "failed":
            node["error"] = {"type": "ToolExecutionError", "message": f"boom {i}"}
        nodes.append(node)
    parent = "b"
    for d in range(deep):
        nodes.append(
            {
                "id": f"d{d}",
                "parent_id": parent,
                "kind": "action",
                "name": f"deep {d}",
                "status": "ok",
                "start": 1.0,
                "end": 2.0,
            }
        )
        parent = f"d{d}"
    return {"format": "langfx_nb.trace", "version": 1, "session": {"id": "t"}, "nodes": nodes}


def visible(nodes: list[dict[str, Any]], expanded: dict[str, bool], query: str = "") -> list[str]:
    """The rows the page lists, the plain way (as tree.ts visibleRows)."""
    q = query.strip().lower()
    if q:
        by_id = {n["id"]: n for n in nodes}
        keep: set[str] = set()
        for n in nodes:
            text = " ".join(str(n.get(k, "")) for k in ("name", "kind", "status", "hint")) + " "
            err = n.get("error")
            text += (
                "" if err is None else json.dumps(err, ensure_ascii=False, separators=(",", ":"))
            )
            if q in text.lower():
                cur: dict[str, Any] | None = n
                while cur is not None and cur["id"] not in keep:
                    keep.add(cur["id"])
                    cur = by_id.get(cur.get("parent_id") or "")
        return [str(n["id"]) for n, _d in tree_order(nodes) if n["id"] in keep]
    out: list[str] = []
    closed_at: int | None = None
    for n, depth in tree_order(nodes):
        if closed_at is not None and depth > closed_at:
            continue
        closed_at = None
        out.append(str(n["id"]))
        if not expanded.get(str(n["id"]), depth < DEFAULT_OPEN_DEPTH):
            closed_at = depth
    return out


def read_trace(source: Any) -> dict[str, Any]:
    """A saved trace as the core's strict reader gives it back."""
    return Session.load_trace(source).trace_json()


def records(n: int, **kw: Any) -> list[dict[str, Any]]:
    return read_trace(make_trace(n, **kw))["nodes"]


def stored(nodes: list[dict[str, Any]]) -> StoredTrace:
    """A stored trace of node records (as the views keep them), in a temporary database."""
    data = {"format": "langfx_nb.trace", "version": 1, "session": {}, "nodes": list(nodes)}
    return convert(data)


def all_rows(index: StoredTrace, **kw: Any) -> list[str]:
    total = index.window(count=0, **kw)["total"]
    out: list[str] = []
    while len(out) < total:
        out += [r["node"]["id"] for r in index.window(start=len(out), count=2000, **kw)["rows"]]
    return out


def test_windows_list_the_rows_and_exact_sums_a_whole_tree_gives() -> None:
    nodes = [dict(n, hint="") for n in records(3000)]
    index = stored(nodes)
    assert all_rows(index) == visible(nodes, {})
    totals, below = sums(nodes), problems_below(nodes)
    window = index.window(start=0, count=500)
    assert window["nodes"] == 3000 and window["total"] == len(visible(nodes, {}))
    for row in window["rows"]:
        node_id = row["node"]["id"]
        tokens, cost, priced, unpriced = totals[node_id]
        assert row["roll"][:3] == [tokens, cost, priced] and row["roll"][5] == unpriced
        assert row.get("below") == below.get(node_id)
    statuses: dict[str, int] = {}
    for n in nodes:
        statuses[n["status"]] = statuses.get(n["status"], 0) + 1
    assert window["counts"]["status"] == statuses
    index.close()


def test_toggling_rows_splices_the_same_list_a_rebuild_gives() -> None:
    nodes = records(2000, seed=3)
    index = stored(nodes)
    rand = random.Random(5)
    expanded: dict[str, bool] = {}
    with_kids = [n["id"] for n in nodes if any(m.get("parent_id") == n["id"] for m in nodes)]
    for _ in range(40):
        node_id = rand.choice(with_kids)
        expanded[node_id] = not expanded.get(node_id, True)
        got = all_rows(index, expanded=expanded)
        assert got == visible(nodes, expanded)


def test_a_filter_runs_over_the_whole_trace_and_counts_exactly() -> None:
    nodes = records(4000, seed=7)
    index = stored(nodes)
    for query in ("boom", "FAILED", "step 39", "no such thing", "denied"):
        window = index.window(query=query, count=50)
        expected = visible(nodes, {}, query)
        assert window["total"] == len(expected)
        assert all_rows(index, query=query) == expected
        hits = [
            n
            for n in nodes
            if query.lower()
            in f"{n['name']} {n['kind']} {n['status']} {n.get('hint', '')} "
            f"{json.dumps(n['error'], separators=(',', ':')) if 'error' in n else ''}".lower()
        ]
        assert window["matches"] == len(hits)
        assert {r["node"]["id"] for r in window["rows"] if r.get("match")} <= {
            h["id"] for h in hits
        }


def test_a_converted_file_reads_records_back_and_matches_the_strict_reader(
    tmp_path: Path,
) -> None:
    data = make_trace(3000, seed=11, deep=40)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    index = convert(path)
    try:
        check_file_index(index, read_trace(path)["nodes"])
    finally:
        index.close()


def check_file_index(index: StoredTrace, strict: list[dict[str, Any]]) -> None:
    assert len(index) == len(strict)
    for n in strict[::97] + strict[-40:]:
        record = index.record(n["id"])
        assert record is not None and {k: v for k, v in record.items() if k != "hint"} == n
    # the deep branch opens one level per toggle, with exact counts under what is closed
    expanded: dict[str, bool] = {}
    for d in range(40):
        expanded[f"d{d}"] = True
    rows = all_rows(index, expanded=expanded)
    assert rows[-1] == "d39"
    deep = index.window(start=rows.index("d0"), count=1, expanded={})["rows"][0]
    assert deep["kids"] and not deep["open"] and deep["roll"][3] == 39


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["nodes"][5].pop("kind"), "nodes[5]: 'kind' is missing"),
        (lambda d: d["nodes"][7].update(status="weird"), "nodes[7]: unknown kind or status"),
        (lambda d: d["nodes"][9].update(id="s"), "nodes[9]: the id 's' is used twice"),
        (lambda d: d.update(version=99), "unsupported trace version: 99"),
    ],
)
def test_a_malformed_file_is_one_clear_error_like_the_strict_reader(
    tmp_path: Path, mutate: Any, message: str
) -> None:
    data = make_trace(200)
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape(message)):
        convert(path)
    with pytest.raises(ValueError, match=re.escape(message)):
        read_trace(path)  # the strict reader says the same


def test_a_large_saved_trace_is_shown_through_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # converted into a stored trace, as at 1,000,000
    monkeypatch.setattr(te, "BIG_FILE_BYTES", 1)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(make_trace(5000, deep=30)))
    explorer = te.TraceExplorer(path, title="big")
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(explorer, "_send_message", sent.append)
    try:
        state = explorer.snapshot
        assert "nodes" not in state and state["windowed"]["nodes"] == 5000
        assert len(state["windowed"]["rows"]) == 200  # the first window, not the trace
        explorer._on_view_message(
            explorer,
            {
                "kind": "window_request",
                "req": 3,
                "start": 0,
                "count": 10,
                "query": "boom",
                "expanded": [],
                "selected": "s",
            },
            [],
        )
        reply = sent.pop()
        assert reply["kind"] == "window" and reply["req"] == 3
        assert reply["matches"] == sum(
            1 for n in make_trace(5000, deep=30)["nodes"] if "error" in n
        )
        assert reply["selected_index"] == 0 and len(reply["rows"]) == 10
        explorer._on_view_message(explorer, {"kind": "detail_request", "id": "d29"}, [])
        assert sent.pop()["node"]["name"] == "deep 29"
        static = explorer._static_html()
        assert "5,000 nodes (first 300 shown)" in static and "more nodes" in static
        assert explorer._fallback_text().startswith("TraceExplorer 'big': 5000 nodes")
    finally:
        explorer.close()


def test_the_static_copy_of_a_huge_trace_stays_small() -> None:
    data = make_trace(30_000, seed=2)
    explorer = te.TraceExplorer(data)
    try:
        html = explorer._static_html()
        assert len(html.encode()) < 1_000_000
        failed = sum(1 for n in data["nodes"] if n["status"] == "failed")
        assert f"failed {failed:,}" in html and "30,000 nodes" in html
        assert len(explorer.state) < 1_000_000
    finally:
        explorer.close()


def test_a_record_is_read_strictly_when_its_detail_is_opened(tmp_path: Path) -> None:
    # a file of any size: a small one is converted as a large one is, not read whole first
    data = make_trace(300)
    data["nodes"][12]["metadata"] = "not an object"  # not what a row needs: found at detail
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    index = convert(path)
    try:
        assert len(index) == 300
        with pytest.raises(ValueError, match=re.escape("nodes[12]: 'metadata' must be")):
            index.record(data["nodes"][12]["id"])
        assert index.record(data["nodes"][13]["id"]) is not None
    finally:
        index.close()
    explorer = te.TraceExplorer(path)
    sent: list[dict[str, Any]] = []
    try:
        explorer._send_message = sent.append  # type: ignore[method-assign]
        explorer._on_view_message(explorer, {"kind": "detail_request", "id": "n12"}, [])
        assert "nodes[12]: 'metadata' must be" in sent.pop()["node"]["malformed"]
    finally:
        explorer.close()


def test_records_whose_values_look_like_record_boundaries_are_read_whole(
    tmp_path: Path,
) -> None:
    """Nested lists of objects with an ``id`` (``}, {"id"`` and ``}]`` inside a record), and
    the same text inside strings: every record is read whole, the last one too."""
    data = make_trace(6000, seed=4)
    for k, n in enumerate(data["nodes"][2:], start=2):
        if k % 3 == 0:
            n["inputs"] = {"args": {"rows": [{"id": k}, {"id": k + 1}]}, "note": '}, {"id": 1}]'}
        elif k % 3 == 1:
            n["outputs"] = {"turns": [{"role": "user", "text": f"t{k}"}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    index = convert(path)
    try:
        assert len(index) == len(data["nodes"])
        for n in data["nodes"][::101] + data["nodes"][-3:]:
            record = index.record(n["id"])
            assert record is not None and {k: v for k, v in record.items() if k != "hint"} == n
    finally:
        index.close()


@pytest.mark.parametrize(
    "dump",
    [
        lambda d: json.dumps(d, sort_keys=True),  # "nodes" before "version", "end" before "id"
        lambda d: json.dumps(d, indent=2),
        lambda d: json.dumps({**d, "nodes": [{"kind": n["kind"], **n} for n in d["nodes"]]}),
    ],
)
def test_a_trace_written_in_another_key_order_or_layout_opens_the_same(
    tmp_path: Path, dump: Any
) -> None:
    data = make_trace(5000, seed=8, deep=40)
    path = tmp_path / "t.json"
    path.write_text(dump(data), encoding="utf-8")
    index = convert(path)
    try:
        check_file_index(index, read_trace(path)["nodes"])
    finally:
        index.close()


def test_a_record_that_is_not_json_is_named_when_records_are_read_one_by_one(
    tmp_path: Path,
) -> None:
    text = json.dumps(make_trace(3000), sort_keys=True)
    at = text.index('"name": ', len(text) // 2)
    path = tmp_path / "t.json"
    path.write_text(text[:at] + '"name" ' + text[at + 8 :], encoding="utf-8")
    with pytest.raises(ValueError, match="not a langfx_nb trace: not valid JSON"):
        convert(path)
    path.write_text(json.dumps({**make_trace(300), "version": 7}, sort_keys=True))
    with pytest.raises(ValueError, match=re.escape("unsupported trace version: 7")):
        convert(path)
