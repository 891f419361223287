"""The stored trace (``lf.save_trace``, ``agentic/trace_db.py``): written once, read by windows.

Every count and row a window gives is compared with the same answer computed the plain way
over every node record; files from elsewhere (JSON, stores) that are damaged or hostile give
one ``ValueError``.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.trace_db import StoredTrace, node_hint, open_store, save_trace
from langfx_nb.llms import Echo


def make_trace(n: int, *, seed: int = 1, deep: int = 0) -> dict[str, Any]:
    """A session → batch → items → queries/tool calls trace, plus an optional deep chain."""
    rand = random.Random(seed)
    nodes: list[dict[str, Any]] = [
        {"id": "s", "parent_id": None, "kind": "session", "name": "session", "status": "ok",
         "start": 0.0, "end": float(n)},
        {"id": "b", "parent_id": "s", "kind": "batch", "name": "batch", "status": "ok",
         "start": 0.0, "end": float(n)},
    ]  # fmt: skip
    items: list[str] = []
    for i in range(2, n - deep):
        if not items or rand.random() < 0.3:
            items.append(f"item{i}")
            nodes.append(
                {"id": f"item{i}", "parent_id": "b", "kind": "item", "name": f"item {i}",
                 "status": "ok", "start": float(i), "end": i + 1.0}
            )  # fmt: skip
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
            if i % 3:
                node["cost"] = 0.001
        if status == "failed":
            node["error"] = {"type": "ToolExecutionError", "message": f"boom {i}"}
        nodes.append(node)
    parent = "b"
    for d in range(deep):
        nodes.append(
            {"id": f"d{d}", "parent_id": parent, "kind": "action", "name": f"deep {d}",
             "status": "ok", "start": 1.0, "end": 2.0}
        )  # fmt: skip
        parent = f"d{d}"
    return {"format": "langfx_nb.trace", "version": 1, "session": {"id": "t"}, "nodes": nodes}


def tree_order(nodes: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    kids: dict[Any, list[dict[str, Any]]] = {}
    for n in nodes:
        kids.setdefault(n.get("parent_id"), []).append(n)
    out: list[tuple[dict[str, Any], int]] = []
    stack = [(n, 0) for n in reversed(kids.get(None, []))]
    while stack:
        node, depth = stack.pop()
        out.append((node, depth))
        stack.extend((k, depth + 1) for k in reversed(kids.get(node["id"], [])))
    return out


def search_text(n: dict[str, Any]) -> str:
    err = n.get("error")
    text = f"{n['name']} {n['kind']} {n['status']} {node_hint(n)} "
    return (text + ("" if err is None else json.dumps(err, separators=(",", ":")))).lower()


def visible(nodes: list[dict[str, Any]], expanded: dict[str, bool], query: str = "") -> list[str]:
    """The rows the page lists, the plain way (as tree.ts visibleRows)."""
    q = query.strip().lower()
    if q:
        by_id = {n["id"]: n for n in nodes}
        keep: set[str] = set()
        for n in nodes:
            if q in search_text(n):
                cur: dict[str, Any] | None = n
                while cur is not None and cur["id"] not in keep:
                    keep.add(cur["id"])
                    cur = by_id.get(cur.get("parent_id") or "")
        return [n["id"] for n, _d in tree_order(nodes) if n["id"] in keep]
    out: list[str] = []
    closed_at: int | None = None
    for n, depth in tree_order(nodes):
        if closed_at is not None and depth > closed_at:
            continue
        closed_at = None
        out.append(n["id"])
        if not expanded.get(n["id"], depth < 2):
            closed_at = depth
    return out


def all_rows(store: StoredTrace, **kw: Any) -> list[str]:
    total = store.window(count=0, **kw)["total"]
    out: list[str] = []
    while len(out) < total:
        out += [r["node"]["id"] for r in store.window(start=len(out), count=2000, **kw)["rows"]]
    return out


@pytest.fixture
def stored(tmp_path: Path) -> tuple[dict[str, Any], StoredTrace]:
    data = make_trace(3000, seed=3, deep=40)
    store = open_store(save_trace(data, tmp_path / "t.lfxtrace"))
    yield data, store
    store.close()


def test_windows_list_the_rows_and_exact_sums_of_the_whole_tree(
    stored: tuple[dict[str, Any], StoredTrace],
) -> None:
    data, store = stored
    nodes = data["nodes"]
    assert all_rows(store) == visible(nodes, {})
    by_id = {n["id"]: n for n in nodes}
    window = store.window(start=0, count=2000)
    for row in window["rows"]:
        below = [m for m, _ in tree_order(nodes) if _under(by_id, m, row["node"]["id"])]
        tokens = sum((m.get("usage") or {}).get("total_tokens", 0) for m in below)
        failed = sum(m["status"] == "failed" for m in below if m["id"] != row["node"]["id"])
        assert row["roll"][0] == tokens and row["roll"][3] == len(below) - 1
        assert (row.get("below") or {}).get("failed", 0) == failed
    statuses: dict[str, int] = {}
    for n in nodes:
        statuses[n["status"]] = statuses.get(n["status"], 0) + 1
    assert window["counts"]["status"] == statuses and window["nodes"] == len(nodes)


def _under(by_id: dict[str, Any], node: dict[str, Any], top: str) -> bool:
    cur: dict[str, Any] | None = node
    while cur is not None:
        if cur["id"] == top:
            return True
        cur = by_id.get(cur.get("parent_id") or "")
    return False


def test_expanding_and_collapsing_rows_lists_what_the_page_would(
    stored: tuple[dict[str, Any], StoredTrace],
) -> None:
    data, store = stored
    nodes = data["nodes"]
    parents = {n.get("parent_id") for n in nodes}
    with_kids = [n["id"] for n in nodes if n["id"] in parents]
    rand = random.Random(5)
    expanded: dict[str, bool] = {}
    for _ in range(40):
        node_id = rand.choice(with_kids)
        expanded[node_id] = not expanded.get(node_id, True)
        rows = visible(nodes, expanded)
        assert all_rows(store, expanded=expanded) == rows
        pick = rand.choice(rows)
        assert store.window(expanded=expanded, selected=pick)["selected_index"] == rows.index(pick)
    chain = {f"d{d}": True for d in range(40)}  # the whole deep chain opened
    assert all_rows(store, expanded=chain) == visible(nodes, chain)


def test_a_search_lists_every_match_and_its_ancestors_and_counts_exactly(
    stored: tuple[dict[str, Any], StoredTrace],
) -> None:
    data, store = stored
    nodes = data["nodes"]
    rand = random.Random(7)
    queries = ("boom", "FAILED", "step 39", "ünï", "no such thing", "deep 3", "s", "e", "p 1", "oo")
    for query in queries:
        expected = visible(nodes, {}, query)
        window = store.window(query=query, count=50)
        assert window["total"] == len(expected)
        assert all_rows(store, query=query) == expected
        hits = {n["id"] for n in nodes if query.lower() in search_text(n)}
        assert window["matches"] == len(hits)
        assert {r["node"]["id"] for r in window["rows"] if r.get("match")} <= hits
        for pick in rand.sample(expected, min(5, len(expected))):
            at = store.window(query=query, selected=pick)["selected_index"]
            assert at == expected.index(pick)


def test_records_as_the_core_writes_them_and_any_others_give_the_same_store(
    tmp_path: Path,
) -> None:
    data = make_trace(3000, seed=5, deep=20)
    data["nodes"][40]["start"] = 40  # an int: this batch is checked node by node
    fast = open_store(save_trace(data, tmp_path / "fast.lfxtrace"))
    for node in data["nodes"]:  # as another writer may write them: every batch node by node
        node["start"] = int(node["start"])
        if (status := node.pop("status")) != "ok":  # "ok" when left out
            node["status"] = status
    slow = open_store(save_trace(data, tmp_path / "slow.lfxtrace"))
    try:
        tables = ("trace_rows", "trace_tree", "trace_info", "trace_search", "trace_starts")
        for table in tables:
            query = f"SELECT * FROM {table} ORDER BY 1"
            assert fast.conn.execute(query).fetchall() == slow.conn.execute(query).fetchall()
    finally:
        fast.close()
        slow.close()


def test_the_tree_table_holds_what_a_plain_walk_of_the_tree_gives(tmp_path: Path) -> None:
    """Every trace_tree column against the tree walked the plain way, for a trace with
    children written before their parents (across blocks), a root besides the session, a
    parent not in the trace, problems below problems, priced and unpriced queries."""
    data = make_trace(6000, seed=7, deep=30)
    nodes = data["nodes"]
    nodes[:0] = list(reversed(nodes[-30:]))  # the deep chain first, each child before its parent
    del nodes[-30:]
    nodes.append(nodes.pop(31))  # the batch: after its items, blocks later
    assert nodes[-1]["id"] == "b"
    nodes.append({"id": "lost", "parent_id": "gone", "kind": "action", "name": "x"})
    nodes.append({"id": "root2", "kind": "action", "name": "y", "status": "failed"})
    for k, node in enumerate(n for n in nodes if n["kind"] == "tool_call"):
        if k % 5 == 0:  # a failed step below it: counted there, not here
            node["status"] = "failed"
            kid = {"id": f"{node['id']}.k", "parent_id": node["id"], "kind": "log",
                   "name": "z", "status": "failed", "usage": {"total_tokens": 2}}  # fmt: skip
            nodes.append(kid)
    bad = ("failed", "denied", "cancelled", "timed_out")
    by_id = {n["id"]: n for n in nodes}
    kids: dict[str, list[str]] = {}
    for n in nodes:  # a parent not in the trace: a root
        kids.setdefault(n["parent_id"] if n.get("parent_id") in by_id else "", []).append(n["id"])
    order: list[tuple[dict[str, Any], int]] = []
    walk = [(k, 0) for k in reversed(kids[""])]
    while walk:
        node_id, depth = walk.pop()
        order.append((by_id[node_id], depth))
        walk.extend((k, depth + 1) for k in reversed(kids.get(node_id, [])))
    rank = {n["id"]: r for r, (n, _) in enumerate(order)}
    seq = {n["id"]: k for k, n in enumerate(nodes)}

    def subtree(top: str) -> list[dict[str, Any]]:
        out, stack = [], [top]
        while stack:
            out.append(by_id[stack.pop()])
            stack.extend(kids.get(out[-1]["id"], []))
        return out

    started = {  # problems that did not come from a problem below them
        n["id"]
        for n in nodes
        if n.get("status") in bad and not any(m.get("status") in bad for m in subtree(n["id"])[1:])
    }
    store = open_store(save_trace(data, tmp_path / "t.lfxtrace"))
    try:
        stored = store.conn.execute("SELECT * FROM trace_tree ORDER BY rank").fetchall()
    finally:
        store.close()
    assert len(stored) == len(nodes)
    for (node, depth), row in zip(order, stored, strict=True):
        below = subtree(node["id"])
        tokens = [(m.get("usage") or {}).get("total_tokens", 0) for m in below]
        costs = [m["cost"] for m in below if "cost" in m]
        problems: dict[str, int] = {}
        for m in below[1:]:
            if m["id"] in started:
                problems[m["status"]] = problems.get(m["status"], 0) + 1
        parent = node.get("parent_id")
        expected = (
            rank[node["id"]], seq[node["id"]], rank.get(parent or ""), depth,
            len(below) - 1, sum(tokens), pytest.approx(sum(costs)), len(costs),
            sum(1 for m, t in zip(below, tokens, strict=True) if t and "cost" not in m),
            problems or None,
        )  # fmt: skip
        assert (*row[:9], row[9] and json.loads(row[9])) == expected, node["id"]


def test_records_and_timeline_are_exact(stored: tuple[dict[str, Any], StoredTrace]) -> None:
    data, store = stored
    for node in data["nodes"][:100]:
        record = store.record(node["id"])
        assert record is not None
        assert {k: v for k, v in record.items() if k != "hint"} == node
    assert store.record("no such node") is None
    timeline = store.timeline(0.0, 3000.0, 10)
    starts = [n["start"] for n in data["nodes"]]
    assert timeline["in_range"] + timeline["before"] + timeline["after"] == len(starts)
    assert sum(sum(c) for c in timeline["counts"].values()) == timeline["in_range"]
    assert store.span() == (0.0, 3000.0)


async def test_a_session_saved_is_loaded_back_the_same(tmp_path: Path) -> None:
    async with lf.Session(Echo()) as session:
        await session.query("hello")
        session.log("info", "done")
    path = lf.save_trace(session, tmp_path / "run.lfxtrace")
    loaded = lf.Session.load_trace(path)
    assert loaded.trace_json()["nodes"] == session.trace_json()["nodes"]
    assert (
        lf.Session.load_trace(str(path)).trace_json()["summary"]
        == (session.trace_json()["summary"])
    )
    assert sorted(os.listdir(tmp_path)) == ["run.lfxtrace"]


def test_a_script_saves_and_reads_a_trace_without_the_notebook_layer(tmp_path: Path) -> None:
    code = (
        "import sys, langfx_nb as lf\n"
        "from langfx_nb.agentic.trace_db import open_store\n"
        f"data = {make_trace(50)!r}\n"
        f"p = lf.save_trace(data, {str(tmp_path / 'x.lfxtrace')!r})\n"
        "assert open_store(p).window()['nodes'] == 50\n"
        "assert len(lf.Session.load_trace(p).trace_json()['nodes']) == 50\n"
        "assert not any(m.startswith('langfx_nb.notebook') for m in sys.modules), 'notebook'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_json_trace_is_converted_as_a_stream_with_progress(tmp_path: Path) -> None:
    data = make_trace(5000, seed=9)
    source = tmp_path / "elsewhere.json"
    source.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    seen: list[tuple[int, int]] = []
    path = save_trace(source, tmp_path / "mine.lfxtrace", progress=lambda a, b: seen.append((a, b)))
    size = source.stat().st_size
    assert len(seen) > 1 and all(b == size for _a, b in seen)
    assert [a for a, _b in seen] == sorted(a for a, _b in seen) and seen[-1][0] > size - 10
    assert sorted(os.listdir(tmp_path)) == ["elsewhere.json", "mine.lfxtrace"]
    store = open_store(path)
    try:
        assert all_rows(store) == visible(data["nodes"], {})
        assert store.header == {k: v for k, v in data.items() if k != "nodes"}
        assert list(store.records()) == data["nodes"]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda nodes: nodes.append(dict(nodes[-1])), "used twice"),
        (
            lambda nodes: (
                nodes[1].update(parent_id="b2")
                or nodes.append({**nodes[1], "id": "b2", "parent_id": "b"})
            ),
            "cycle",
        ),
        (lambda nodes: nodes.pop(0), "no session root"),
        (lambda nodes: nodes[5].update(start="noon"), "nodes[5]"),
        (lambda nodes: nodes[5].pop("kind"), "nodes[5]: 'kind' is missing"),
        (lambda nodes: nodes[5].update(usage={"total_tokens": -1}), "nodes[5]: a token count"),
        (  # each fits, their sum does not: SQLite's integers end at 2**63
            lambda nodes: nodes.extend(
                {**nodes[1], "id": f"t{i}", "usage": {"total_tokens": 2**53 - 1}}
                for i in range(1100)
            ),
            "add up to 2**63",
        ),
    ],
)
def test_a_malformed_trace_is_one_error_and_writes_nothing(
    tmp_path: Path, change: Any, message: str
) -> None:
    data = make_trace(50)
    change(data["nodes"])
    with pytest.raises(ValueError, match=re.escape(message)):
        save_trace(data, tmp_path / "t.lfxtrace")
    source = tmp_path / "t.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message)):
        save_trace(source, tmp_path / "t.lfxtrace")
    assert os.listdir(tmp_path) == ["t.json"]


def test_save_trace_refuses_what_is_not_a_trace(tmp_path: Path) -> None:
    for source in ({"nodes": []}, {**make_trace(5), "version": 7}):
        with pytest.raises(ValueError, match="trace"):
            save_trace(source, tmp_path / "t.lfxtrace")
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        '{"format": "langfx_nb.trace", "version": 1, "nodes": [{"id": "s"',
        "[1, 2]",
        "{",
        "",
        '{"format": "other", "nodes": []}',
    ],
)
def test_a_damaged_json_file_is_one_error(tmp_path: Path, text: str) -> None:
    source = tmp_path / "t.json"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"t\.json"):
        save_trace(source, tmp_path / "t.lfxtrace")


def test_json_nested_too_deeply_is_one_error(tmp_path: Path) -> None:
    source = tmp_path / "deep.json"
    head = '{"format": "langfx_nb.trace", "version": 1, "nodes": [{"id": "s", "kind": "session"'
    source.write_text(head + ', "inputs": ' + "[" * 100_000 + "]" * 100_000 + "}]}")
    with pytest.raises(ValueError, match="nested too deeply"):
        save_trace(source, tmp_path / "t.lfxtrace")


def test_json_text_with_an_integer_too_long_to_read_says_it_is_not_valid_json(
    tmp_path: Path,
) -> None:
    head = '{"format": "langfx_nb.trace", "version": 1, "nodes": [{"id": "s", "kind": "session"'
    text = head + ', "start": ' + "1" * 5_000 + "}]}"
    with pytest.raises(ValueError, match="not a langfx_nb trace: not valid JSON"):
        save_trace(text, tmp_path / "t.lfxtrace")
    with pytest.raises(ValueError, match="not a langfx_nb trace: not valid JSON"):
        lf.Session.load_trace(text)


def test_devices_pipes_and_links_to_them_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        with pytest.raises(ValueError, match="not a regular file"):
            open_store(path)
        with pytest.raises(ValueError, match="not a regular file"):
            save_trace(path, tmp_path / "out.lfxtrace")


def _tamper(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql)
    conn.close()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("UPDATE trace_info SET value = '99' WHERE key = 'version'", "unsupported"),
        ("UPDATE trace_info SET value = 'x' WHERE key = 'counts'", "damaged"),
        ("DROP TABLE trace_info", "not a readable stored trace"),
    ],
)
def test_a_damaged_store_is_one_error_at_open(tmp_path: Path, sql: str, message: str) -> None:
    path = save_trace(make_trace(100), tmp_path / "t.lfxtrace")
    _tamper(path, sql)
    with pytest.raises(ValueError, match=re.escape(message)):
        open_store(path)


def test_a_file_that_is_not_a_store_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "t.lfxtrace"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 5000)
    with pytest.raises(ValueError, match="not a readable stored trace"):
        open_store(path)
    path.write_text(json.dumps(make_trace(10)))
    with pytest.raises(ValueError):
        open_store(path)


def test_damaged_rows_and_records_never_loop_and_are_named(tmp_path: Path) -> None:
    data = make_trace(500, deep=20)
    path = save_trace(data, tmp_path / "t.lfxtrace")
    # a parent cycle and descendant counts that point past the end: windows still end
    _tamper(path, "UPDATE trace_tree SET parent = rank + 1, desc = 1000000")
    store = open_store(path)
    try:
        expanded = {n["id"]: True for n in data["nodes"]}
        window = store.window(expanded=expanded, count=2000)
        assert window["total"] <= len(data["nodes"]) * 2
        assert store.window(query="deep")["total"] <= len(data["nodes"])
    finally:
        store.close()
    _tamper(path, "UPDATE trace_records SET body = X'7b7b7b'")
    store = open_store(path)
    try:
        with pytest.raises(ValueError, match="damaged records"):
            store.record("b")
    finally:
        store.close()
    _tamper(path, 'UPDATE trace_records SET body = \'[{"id": "s", "kind": 3}]\'')
    store = open_store(path)
    try:
        with pytest.raises(ValueError, match="malformed trace: nodes"):
            store.record("s")
    finally:
        store.close()


_DAMAGED = [
    *(("trace_order SET ranks", r, "damaged trace_order") for r in (
        b"\x00", array("i", [10**6] * 200).tobytes(), array("i", [-2] * 200).tobytes()
    )),
    *(("trace_search SET text", t, "damaged trace_search") for t in (
        b"step \xff\n" * 200, b"no newline at the end", b"one line\n", b"step\n" * 500
    )),
]  # fmt: skip


@pytest.mark.parametrize(("column", "value", "message"), _DAMAGED)
def test_a_damaged_tree_order_or_search_text_is_one_error(
    tmp_path: Path, column: str, value: bytes, message: str
) -> None:
    path = save_trace(make_trace(200), tmp_path / "t.lfxtrace")
    _tamper(path, f"UPDATE {column} = X'{value.hex()}'")
    store = open_store(path)
    try:
        with pytest.raises(ValueError, match=message):
            store.window(query="step")
        if "trace_order" in column:
            with pytest.raises(ValueError, match=message):
                store.window(selected="b")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("parent", array("i", [(r + 1) % 200 for r in range(200)]).tobytes()),  # would loop
        ("parent", array("i", [-5] * 200).tobytes()),
        ("depth", bytes(199)),
    ],
)
def test_a_damaged_parent_or_depth_array_is_one_error_at_the_first_search(
    tmp_path: Path, name: str, value: bytes
) -> None:
    path = save_trace(make_trace(200), tmp_path / "t.lfxtrace")
    _tamper(path, f"UPDATE trace_order SET ranks = X'{value.hex()}' WHERE name = '{name}'")
    store = open_store(path)
    try:
        for query in ("step", "step 17"):  # many matches and one
            with pytest.raises(ValueError, match="damaged trace_order"):
                store.window(query=query)
    finally:
        store.close()


def test_a_trace_deeper_than_a_byte_counts_is_listed_and_searched_exactly(tmp_path: Path) -> None:
    data = make_trace(700, seed=4, deep=300)  # a chain down to depth 301
    nodes = data["nodes"]
    store = open_store(save_trace(data, tmp_path / "t.lfxtrace"))
    try:
        for query in ("deep", "deep 29", "deep 299", "step", "step 2", "e"):
            expected = visible(nodes, {}, query)
            assert all_rows(store, query=query) == expected
            pick = expected[-1] if expected else "s"
            assert store.window(query=query, selected=pick)["selected_index"] == (
                expected.index(pick) if expected else -1
            )
        chain = {f"d{d}": True for d in range(300)}
        for expanded in (chain, {**chain, "d250": False}, {**chain, "d100": False, "b": False}):
            assert all_rows(store, expanded=expanded) == visible(nodes, expanded)
    finally:
        store.close()


def test_a_record_larger_than_a_batch_with_a_lone_surrogate_is_converted(tmp_path: Path) -> None:
    data = make_trace(20)
    data["nodes"][5]["name"] = "odd \ud800"  # JSON may hold it as an escape
    data["nodes"][5]["inputs"] = {"prompt": "x" * (2 << 20)}  # read on its own
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    store = open_store(save_trace(path, tmp_path / "t.lfxtrace"))
    try:
        record = store.record(data["nodes"][5]["id"])
        assert record is not None and record["name"] == "odd \ud800"
        assert store.window(query="\ud800")["matches"] == 1
    finally:
        store.close()


def test_records_holding_objects_that_begin_with_an_id_are_converted_whole(tmp_path: Path) -> None:
    """A batch cut is looked for before a record's ``"id"``: one inside a record (a list of
    objects with ids) never parses, and such records are read one at a time."""
    data = make_trace(20_000, seed=3)
    for k, node in enumerate(data["nodes"]):
        if node["kind"] == "tool_call":
            node["inputs"] = {"args": {"rows": [{"id": k}, {"id": k + 1, "x": "}, {"}]}}
    source = tmp_path / "t.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    store = open_store(save_trace(source, tmp_path / "t.lfxtrace"))
    try:
        assert list(store.records()) == data["nodes"]
        assert all_rows(store) == visible(data["nodes"], {})
    finally:
        store.close()


@pytest.mark.parametrize("seed", range(6))
def test_a_tree_of_any_shape_is_listed_and_searched_as_the_plain_walk_does(
    tmp_path: Path, seed: int
) -> None:
    """Random trees (wide, deep, in between; children written before or after their
    parents): a search with many matches (a depth level at a time), few (a walk up) or
    between, and rows opened and closed, list what the plain walk does."""
    rand = random.Random(seed)
    nodes: list[dict[str, Any]] = [
        {"id": "s", "parent_id": None, "kind": "session", "name": "session", "status": "ok"}
    ]
    for i in range(1, 600):
        back = rand.randrange(len(nodes)) if seed % 2 else int(rand.expovariate(0.1 * seed + 0.1))
        pick = len(nodes) - 1 - min(len(nodes) - 1, back)  # any node, or one of the last
        name = f"n{rand.randrange(10 ** rand.randrange(1, 4))}"
        nodes.append({"id": f"x{i}", "parent_id": nodes[pick]["id"], "kind": "action",
                      "name": name, "status": "ok"})  # fmt: skip
    rand.shuffle(nodes)  # written in any order
    data = {"format": "langfx_nb.trace", "version": 1, "session": {"id": "t"}, "nodes": nodes}
    store = open_store(save_trace(data, tmp_path / "t.lfxtrace"))
    try:
        for query in ("n", "n1", "n12", "n5", "n99", "action", "zzz"):
            assert all_rows(store, query=query) == visible(nodes, {}, query)
        expanded: dict[str, bool] = {}
        for _ in range(20):  # rows opened and closed, at any depth
            expanded[rand.choice(nodes)["id"]] = rand.random() < 0.7
            assert all_rows(store, expanded=expanded) == visible(nodes, expanded)
    finally:
        store.close()
