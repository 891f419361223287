"""The trace's static copy and the live view show the same rows.

The kernel answers the page with window rows (a live session's from its ``LiveIndex``, a
saved trace's from its stored trace), and ``row_values`` computes what each row shows
(status label, token and cost sums, duration, what went wrong below, a person's decision
time); both are committed as ``js/test/fixtures/trace_parity.json``, which the JS test
(``js/test/trace_parity.test.ts``) replays through the view's ``rowValuesOf``. This test
fails when the kernel side changes without regenerating the fixture (``LANGFX_REGEN=1``
rewrites it), and checks that the static copy a saved notebook keeps shows those values.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from langfx_nb.agentic.trace_db import convert
from langfx_nb.agentic.trace_reader import WindowedTrace
from langfx_nb.notebook.render import trace_html
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_live import LiveIndex, row_patch
from langfx_nb.notebook.trace_rows import row_values

FIXTURE = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures" / "trace_parity.json"


def _node(id: str, parent: str | None, kind: str, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": id,
        "parent_id": parent,
        "kind": kind,
        "name": name,
        "status": "running",
        "start": 0.0,
        "end": None,
        **fields,
    }


def live_events() -> list[dict[str, Any]]:
    """A run as the core reports it (docs/agentic.md, "Events"): an agent with a query, a
    call approved with edited arguments after a person's wait, one denied, one still waiting,
    a failed query and a log."""
    seq = iter(range(1, 1000))

    def event(type: str, **fields: Any) -> dict[str, Any]:
        return {"type": type, "seq": next(seq), "session_id": "s", **fields}

    def start(node: dict[str, Any]) -> dict[str, Any]:
        return event("node_start", node=dict(node))

    def end(node: dict[str, Any], **fields: Any) -> dict[str, Any]:
        node.update(fields)
        return event("node_end", node=dict(node))

    root = _node("0", None, "session", "session")
    agent = _node("1", "0", "action", "Agent", start=0.5, inputs={"prompt": "add <b>2</b> and 3"})
    q1 = _node("2", "1", "query", "step 1", start=0.5, inputs={"prompt": "add 2 and 3"})
    edited = _node(
        "3", "1", "tool_call", "add", start=0.75, inputs={"call_id": "c1", "args": {"a": 2, "b": 3}}
    )
    denied = _node(
        "4", "1", "tool_call", "search", start=0.8, inputs={"call_id": "c2", "args": {"q": "x"}}
    )
    q2 = _node("5", "1", "query", "step 2", start=4.6, inputs={"prompt": "and now?"})
    waiting = _node(
        "6", "1", "tool_call", "add", start=16.9, inputs={"call_id": "c3", "args": {"a": 1, "b": 1}}
    )
    log = {
        **_node("7", "3", "log", "info", start=4.5, end=4.5, status="ok"),
        "inputs": {"message": "tool call add (c1) approved with edited arguments"},
    }
    long_q = _node(
        "8",
        "0",
        "query",
        "query:Fact",
        start=100.0,
        inputs={"prompt": "facts", "vars": {"p": "Mars"}},
    )
    asked = {"outcome": "waiting", "by": None, "asked_at": 0.75, "decided_at": None}
    return [
        start(root),
        start(agent),
        start(q1),
        event("node_update", node_id="2", changes={"delta": "thinking"}),
        end(
            q1,
            status="ok",
            end=0.75,
            usage={"prompt_tokens": 1000, "completion_tokens": 234, "total_tokens": 1234},
            outputs={"text": ""},
        ),
        start(edited),
        event("node_update", node_id="3", changes={"status": "waiting", "decision": asked}),
        start(denied),
        event(
            "node_update",
            node_id="4",
            changes={"status": "waiting", "decision": {**asked, "asked_at": 0.8}},
        ),
        event(
            "node_update",
            node_id="4",
            changes={
                "decision": {
                    "outcome": "deny",
                    "by": "me (notebook)",
                    "asked_at": 0.8,
                    "decided_at": 0.9,
                    "note": "not now",
                }
            },
        ),
        end(denied, status="denied", end=0.9, outputs={"message": "not now"}),
        event(
            "node_update",
            node_id="3",
            changes={
                "status": "running",
                "decision": {
                    "outcome": "approve",
                    "by": "me (notebook)",
                    "asked_at": 0.75,
                    "decided_at": 3.25,
                    "args": {"a": 20, "b": 3},
                },
            },
        ),
        event("log", node=log),
        end(edited, status="ok", end=4.5, outputs={"json": "23"}),
        start(q2),
        end(
            q2,
            status="failed",
            end=16.9,
            error={"type": "LMError", "message": "rate <limited>"},
            usage={"prompt_tokens": 7},
        ),
        start(waiting),
        event(
            "node_update",
            node_id="6",
            changes={"status": "waiting", "decision": {**asked, "asked_at": 17.0}},
        ),
        start(long_q),
        end(long_q, status="ok", end=175.0, usage={"total_tokens": 5}, cost=0.25),
    ]


def saved_mid_run() -> dict[str, Any]:
    """A trace saved while work was running, as ``Session.trace_json()`` writes it."""
    nodes = [
        _node("0", None, "session", "session"),
        _node("1", "0", "action", "Agent", start=0.25),
        _node(
            "2",
            "1",
            "query",
            "step 1",
            start=0.25,
            end=1.5,
            status="ok",
            usage={"total_tokens": 40},
        ),
        _node(
            "3",
            "1",
            "tool_call",
            "add",
            start=1.5,
            inputs={"call_id": "c1", "args": {"a": 1}},
            decision={"outcome": "approve", "by": "allow_tool", "asked_at": 1.5, "decided_at": 1.5},
        ),
        _node(
            "4",
            "1",
            "tool_call",
            "rm",
            start=1.5,
            end=1.5,
            status="cancelled",
            decision={"outcome": "stop", "by": "allow_tool", "asked_at": 1.5, "decided_at": 1.5},
        ),
    ]
    return {"format": "langfx_nb.trace", "version": 1, "nodes": nodes}


def live_index() -> LiveIndex:
    """The live events folded as the explorer folds them."""
    live = LiveIndex()
    for event in live_events():
        patch = row_patch(event)
        if patch is not None:
            live.apply(patch)
    return live


def all_rows(index: WindowedTrace) -> list[dict[str, Any]]:
    """Every window row, all expanded."""
    expanded = {str(n): True for n in range(20)}
    return list(index.window(expanded=expanded, count=1000)["rows"])


def build() -> dict[str, Any]:
    live = all_rows(live_index())
    saved = convert(saved_mid_run())  # as TraceExplorer shows a saved trace
    cases: dict[str, Any] = {
        "live": {"rows": live, "ended": False, "gone": False},
        "live_kernel_gone": {"rows": live, "ended": False, "gone": True},
        "saved_mid_run": {"rows": all_rows(saved), "ended": True, "gone": False},
    }
    saved.close()
    for case in cases.values():
        flags = {"ended": case["ended"], "gone": case["gone"]}
        case["values"] = [row_values(row, **flags) for row in case["rows"]]
    return {"cases": cases}


def test_fixture_matches_the_kernel_rows() -> None:
    data = json.loads(json.dumps(build()))
    if os.environ.get("LANGFX_REGEN"):
        FIXTURE.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    assert json.loads(FIXTURE.read_text(encoding="utf-8")) == data, (
        "js/test/fixtures/trace_parity.json is stale: rerun this test with LANGFX_REGEN=1"
    )


def test_the_fixture_covers_what_a_reader_relies_on() -> None:
    rows = {r["id"]: r for r in build()["cases"]["live"]["values"]}
    assert rows["0"]["status"] == "open" and rows["0"]["tokens"] == "1,246 tok"
    assert rows["1"]["below"] == "1 denied, 1 failed below"
    assert rows["7"]["status"] == "info"  # a log entry shows its level, never a green "ok"
    assert rows["3"]["wait"] == "2.50 s" and rows["3"]["duration"] == "3.75 s"
    assert rows["6"]["status"] == "waiting for approval" and rows["6"]["wait"] == ""
    assert rows["5"]["duration"] == "12.3 s" and rows["8"]["duration"] == "1m15s"
    assert rows["2"]["cost"] == "—"  # no price known: unknown, not $0
    assert rows["8"]["cost"] == "$0.25"
    # the session's sum leaves out the two unpriced queries below it: labelled partial
    assert rows["0"]["cost"] == "≥ $0.25 (2 calls unpriced)"
    gone = {r["id"]: r["status"] for r in build()["cases"]["live_kernel_gone"]["values"]}
    assert gone["6"] == "unfinished" and gone["1"] == "unfinished" and gone["0"] == "closed"
    saved = {r["id"]: r["status"] for r in build()["cases"]["saved_mid_run"]["values"]}
    assert saved == {
        "0": "closed",  # a session is a container: its unfinished work shows below it
        "1": "unfinished",
        "2": "ok",
        "3": "unfinished",
        "4": "cancelled",
    }


def _row_html(html: str, node_id: str) -> str:
    """The ``<li>`` of one node up to its details or first child."""
    at = html.index(f'<li data-node="{node_id}"')
    return re.split(r"<details|<ul", html[at:], maxsplit=1)[0]


def test_the_static_copy_shows_the_rows_values() -> None:
    # the static copy is what a reader sees once the kernel is gone (or the trace ended)
    saved = TraceExplorer(saved_mid_run())
    copies = {"live_kernel_gone": trace_html(live_index()), "saved_mid_run": saved._static_html()}
    saved.close()
    for name, html in copies.items():
        for row in build()["cases"][name]["values"]:
            cell = _row_html(html, row["id"])
            assert f">{row['status']}</span>" in cell, (name, row, cell)
            if row["duration"]:
                assert f'<span class="lfx-dur">{row["duration"]}</span>' in cell, (name, row)
            if row["below"]:
                assert f"({row['below']})" in cell, (name, row)
        assert "running" not in html.replace("TraceExplorer", "")
