"""Durable human control: cancelling a waiting approval, Interrupt, a reloaded page getting its
widgets while a cell awaits, honest statuses and the static copy a saved notebook keeps."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import time
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.notebook import control
from langfx_nb.notebook.render import STATIC_CSS, arg_changes
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_rows import human_wait, status_label
from tests.notebook.trace_oracle import trace_rows

from ._approval import CALLS, add, ask_policy, click, script, wait_for_pending
from ._fakes import record_sends, saved_trace


async def test_cancel_run_from_the_prompt_cancels_and_the_tool_never_runs() -> None:
    policy = ask_policy()
    sent = record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        pending = await wait_for_pending(policy.widget)
        policy.widget._on_view_message(
            policy.widget, {"kind": "cancel", "prompt_id": pending["prompt_id"]}, []
        )
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        assert "add (c1) did not run" in str(info.value)
        tool = session.all_tool_calls[0]
        assert tool.status == "cancelled"
        # a click arriving afterwards is refused and runs nothing
        click(policy.widget, pending, "approve")
        assert sent[-1]["ok"] is False
    assert CALLS == []
    history = policy.widget.state["history"]
    assert history[-1]["decision"] == "cancelled" and policy.widget.state["pending"] is None
    assert "Cancelled" in policy.widget.state["notice"]


async def test_lf_nb_cancel_and_the_explorer_button_cancel_a_waiting_run() -> None:
    for how in ("lf.nb.cancel", "explorer"):
        policy = ask_policy()
        record_sends(policy.widget)
        agent = lf.Agent("add", tools=[add], allow_tool=policy)
        async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
            explorer = TraceExplorer(session)
            record_sends(explorer)
            task = asyncio.ensure_future(agent.invoke(session))
            await wait_for_pending(policy.widget)
            if how == "explorer":
                explorer._on_view_message(explorer, {"kind": "cancel"}, [])
            else:
                assert lf.nb.cancel() == 1
            with pytest.raises(asyncio.CancelledError):
                await task
            assert session.all_tool_calls[0].status == "cancelled"
            explorer.close()
    assert CALLS == []
    assert control.runs() == []  # nothing left tracked


async def test_percent_lf_cancel_cancels_a_tracked_run(capsys: pytest.CaptureFixture[str]) -> None:
    from langfx_nb.notebook.magics import _line_command

    started = asyncio.Event()

    async def run() -> None:
        with control.track(label="%%lf agent"):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(run())
    await started.wait()
    _line_command("cancel", {})
    with pytest.raises(asyncio.CancelledError, match="%lf cancel"):
        await task
    assert "cancelled 1 run" in capsys.readouterr().out


async def test_interrupt_cancels_a_waiting_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # ipykernel's own SIGINT handler acts only when the loop next wakes up; while a run is
    # tracked the loop's signal wake-up is used, so the wait ends now. The route is on where
    # %load_ext found that handler (control.sigint_layout), as in every ipykernel kernel.
    monkeypatch.setitem(control._route, "on", True)
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    previous = signal.getsignal(signal.SIGINT)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        await wait_for_pending(policy.widget)
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(asyncio.CancelledError) as info:
            await asyncio.wait_for(task, timeout=10)
        assert "interrupted" in str(info.value)
        assert session.all_tool_calls[0].status == "cancelled"
    assert signal.getsignal(signal.SIGINT) == previous  # the kernel's handler is back
    assert CALLS == []


async def test_waiting_for_approval_is_a_status_and_the_wait_is_kept_apart() -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 2, "b": 3}))) as session:
        explorer = TraceExplorer(session)
        record_sends(explorer)
        task = asyncio.ensure_future(agent.invoke(session))
        pending = await wait_for_pending(policy.widget)
        await asyncio.sleep(0.05)
        tool = next(n for n in explorer.nodes if n.get("kind") == "tool_call")
        assert tool["status"] == "waiting" and status_label(tool) == "waiting for approval"
        click(policy.widget, pending, "approve_edited", args={"a": 20, "b": 3})
        await task
        tool = next(n for n in explorer.nodes if n.get("kind") == "tool_call")
        assert tool["status"] == "ok"
        wait = human_wait(tool)
        assert wait is not None and wait >= 0.05
        assert tool["end"] - tool["start"] >= wait
        assert policy.widget.state["history"][0]["waited_s"] >= 0.05
        static = explorer._static_html()
        raw_at = tool["decision"]["decided_at"]
        explorer.close()
    # edited arguments: what ran, what the model proposed, and the difference
    assert "Arguments that ran (edited)" in static and "Model&#x27;s proposal" in static
    assert "a: 2 → 20" in static
    assert "waiting for a person" in static
    assert ">decided_at:</span>" in static and repr(raw_at) not in static  # a local time
    assert arg_changes({"a": 2, "b": 3}, {"a": 20, "b": 3, "c": 1}) == ["a: 2 → 20", "c: ∅ → 1"]


async def test_a_saved_or_finished_trace_never_shows_running() -> None:
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 2, "b": 3}))) as session:
        data = json.loads(json.dumps(session.trace_json()))
    # a trace saved mid-run: its unfinished nodes must not look live when reopened
    for node in data["nodes"]:
        node["status"] = "running"
    explorer = TraceExplorer(data)
    statuses = {
        row["status"] for row in trace_rows(explorer.nodes, ended=explorer.snapshot["ended"])
    }
    assert statuses == {"closed"}  # its one node, the session, is closed: never "running"
    assert "running" not in explorer._static_html()


async def test_parents_roll_up_denied_and_cancelled_children() -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        explorer = TraceExplorer(session)
        record_sends(explorer)
        task = asyncio.ensure_future(agent.invoke(session))
        click(policy.widget, await wait_for_pending(policy.widget), "deny")
        with pytest.raises(lf.ToolDeniedError):
            await task
    static = explorer._static_html()
    explorer.close()
    session_row = static[static.index('data-kind="session"') :]
    assert "1 denied below" in session_row.split("<details")[0], session_row[:400]


def test_every_widget_display_carries_a_static_copy_that_outlives_the_kernel() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shown: list[tuple[dict[str, Any], Any]] = []
    publisher = shell.display_pub

    original = publisher.publish

    def publish(data: dict[str, Any], metadata: Any = None, **kw: Any) -> None:
        shown.append((data, kw.get("transient")))

    publisher.publish = publish  # type: ignore[method-assign]
    try:
        explorer = TraceExplorer(saved_trace([{"id": "1", "kind": "session", "name": "s"}]))
        explorer._ipython_display_()
        explorer.close()
    finally:
        publisher.publish = original  # type: ignore[method-assign]
    assert len(shown) == 2
    live, static = shown[0][0], shown[1][0]
    assert "application/vnd.jupyter.widget-view+json" in live
    assert list(static) == ["text/html"] and static["text/html"].startswith(STATIC_CSS)
    assert 'class="lfx-static"' in static["text/html"] and "session" in static["text/html"]


# -- a real kernel ----------------------------------------------------------------------------

SETUP = """
import asyncio
%load_ext langfx_nb
"""


def test_in_a_real_kernel_comm_info_is_answered_while_a_cell_awaits() -> None:
    # A reloaded page asks which widget comms exist before drawing any; ipykernel 7.4 queued
    # that request behind the awaiting cell (an approval waits up to 900 s).
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        assert kc.execute_interactive(SETUP, timeout=60)["content"]["status"] == "ok"
        kc.execute("await asyncio.sleep(30)")
        time.sleep(0.5)
        msg = kc.session.msg("comm_info_request", {"target_name": "jupyter.widget"})
        kc.shell_channel.send(msg)
        deadline = time.monotonic() + 10
        reply = None
        while time.monotonic() < deadline and reply is None:
            try:
                got = kc.get_shell_msg(timeout=0.5)
            except queue.Empty:
                continue
            if got["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                reply = got
        assert reply is not None, "comm_info_request waited behind the running cell"
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
