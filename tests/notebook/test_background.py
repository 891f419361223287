"""Approval mode ``background``: a ``%%lf agent`` cell returns its handle at once, the click
arrives between cells, and the answer reaches the handle and the ``-o`` variable.

The run goes on the test's own loop, as it does on the kernel's; the page is simulated by
the widget's message handler (the real page: tests/hosts, and the browser tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

import langfx_nb as lf
from langfx_nb.notebook import control, hosts
from langfx_nb.notebook.background import BackgroundRun
from langfx_nb.notebook.runners import run_agent

from ._approval import CALLS, add, ask_policy, click, instant_sleep, script, wait_for_pending
from ._fakes import record_sends


def _host(mode: hosts.Mode) -> hosts.Host:
    return hosts.Host("ipykernel 6.29.5 (IPythonKernel)", True, False, True, mode)


@pytest.fixture
def background_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(hosts, "_current", _host("background"))
    yield


async def _start(ns: dict[str, Any], *argv: str) -> BackgroundRun:
    ns.update(lm=script(lf.ToolCall("c1", "add", {"a": 2, "b": 3})), add=add)
    handle = await run_agent(["--lm", "lm", "--tools", "add", *argv], "What is 2 + 3?", ns)
    assert isinstance(handle, BackgroundRun)
    record_sends(handle.widgets[0])
    return handle


async def test_the_cell_returns_at_once_and_the_click_finishes_the_run(
    background_kernel: None,
) -> None:
    ns: dict[str, Any] = {}
    handle = await _start(ns, "-o", "ans")
    assert not handle.done()  # the cell has its value before any click
    assert ns["ans"] is handle  # until the answer replaces it
    prompt = handle.widgets[0]
    pending = await wait_for_pending(prompt)
    assert handle.status() == "waiting for your decision on add (c1)"
    assert CALLS == []
    click(prompt, pending, "approve")  # between cells
    assert await handle == "The answer is 5."
    assert ns["ans"] == "The answer is 5."
    assert CALLS == [(2, 3)]
    assert prompt.state["history"][0]["decision"] == "approved"


async def test_awaiting_a_run_that_waits_for_a_click_says_so_and_the_run_keeps_waiting(
    background_kernel: None,
) -> None:
    ns: dict[str, Any] = {}
    handle = await _start(ns)
    prompt = handle.widgets[0]
    with pytest.raises(UsageError, match=r"waiting for your decision on add \(c1\).*click"):
        await handle  # a cell awaiting the run before the prompt opens stops when it does
    pending = await wait_for_pending(prompt)
    with pytest.raises(UsageError, match="The run keeps waiting"):
        await handle
    click(prompt, pending, "approve")
    assert await handle == "The answer is 5."


async def test_cancel_closes_the_prompt_and_the_tool_never_runs(background_kernel: None) -> None:
    handle = await _start({})
    prompt = handle.widgets[0]
    pending = await wait_for_pending(prompt)
    assert handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.task
    assert handle.status() == "cancelled"
    assert prompt.state["history"][0]["decision"] == "cancelled"
    click(prompt, pending, "approve")  # a late click counts for nothing
    assert CALLS == []
    assert not handle.cancel()


async def test_interrupt_leaves_background_runs_alone(background_kernel: None) -> None:
    handle = await _start({})
    await wait_for_pending(handle.widgets[0])
    assert any(r.background for r in control.runs())
    control._on_interrupt()  # Kernel › Interrupt: meant for the running cell
    await asyncio.sleep(0)
    assert not handle.done()
    assert control.cancel("stop") == 1  # %lf cancel stops it
    with pytest.raises(asyncio.CancelledError):
        await handle.task


async def test_a_prompt_awaited_by_a_cell_on_such_a_kernel_is_denied_at_once_with_the_reason(
    background_kernel: None,
) -> None:
    policy = ask_policy(sleep=instant_sleep)
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        with pytest.raises(lf.ToolDeniedError) as info:
            await agent.invoke(session)
    message = str(info.value)
    assert "ipykernel 6.29.5" in message
    assert "hands clicks to Python only between cells" in message
    assert "lf.nb.background" in message and "%%lf agent" in message
    assert "not shown" not in message
    assert CALLS == []


async def test_the_page_wait_of_a_background_run_counts_only_idle_time(
    background_kernel: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = iter([(1, True), (1, True), (1, False), (2, False), (2, False), (2, False)])
    monkeypatch.setattr(hosts, "cell_activity", lambda: next(busy))
    timeouts: list[float] = []

    async def sleep(seconds: float) -> None:
        timeouts.append(seconds)

    policy = ask_policy(sleep=sleep, render_timeout=5)
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)

    async def invoke() -> Any:
        control.mark_background()
        async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
            return await agent.invoke(session)

    with pytest.raises(lf.ToolDeniedError, match="no notebook page acknowledged"):
        await asyncio.create_task(invoke())
    # a cell ran through the first wait and another began in the second: the third, idle
    # from start to end, is the one that ended it
    assert timeouts == [5, 5, 5]


async def test_the_handle_says_which_mode_why_and_what_to_do(
    background_kernel: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = await _start({}, "-o", "ans")
    text = handle.explain()
    assert "ipykernel 6.29.5 (IPythonKernel) hands clicks to Python only between cells" in text
    assert (
        "`ans` is this run until its answer replaces it" in text
        and "`await run`" in text
        and "run.cancel()" in text
    )
    monkeypatch.setattr(
        hosts,
        "_current",
        hosts.Host("ipykernel 7.4.0", True, True, True, "background", forced=True),
    )
    assert f"chosen by ${hosts.MODE_ENV}" in handle.explain()  # never a false reason
    assert "hands clicks" not in handle.explain()
    monkeypatch.setattr(
        hosts,
        "_current",
        hosts.Host("ipykernel 7.4.0", True, True, True, "background", page="Voilà"),
    )
    text = handle.explain()  # a Voilà page: nobody runs a next cell there
    assert "Voilà draws the page only after the whole notebook has run" in text
    assert "the trace below follows the run (its Agent row holds the answer)" in text
    assert "hands clicks" not in text and "next cell" not in text
    handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.task


async def test_a_suspended_run_shows_buttons_whose_clicks_resume_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import IPython.display

    from langfx_nb.notebook.suspended import RUNS_DIR

    monkeypatch.setattr(hosts, "_current", _host("live"))  # any kernel whose loop runs on
    monkeypatch.chdir(tmp_path)
    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.extend(a))
    ns: dict[str, Any] = {"lm": script(lf.ToolCall("c1", "add", {"a": 2, "b": 3})), "add": add}
    state = await run_agent(
        ["--lm", "lm", "--tools", "add", "--suspend", "-o", "ans"], "What is 2 + 3?", ns
    )
    assert isinstance(state, lf.RunState) and ns["ans"] is state
    runs = [s for s in shown if isinstance(s, BackgroundRun)]
    assert len(runs) == 1
    assert "resumes here, as `%lf resume` would; `ans` then holds its answer" in runs[0].explain()
    prompt = runs[0].widgets[0]
    pending = await wait_for_pending(prompt)
    assert pending["tool"] == "add" and pending["call_id"] == "c1"
    click(prompt, pending, "approve")
    assert await runs[0] == "The answer is 5."
    assert ns["ans"] == "The answer is 5."
    assert CALLS == [(2, 3)]
    assert list(RUNS_DIR.glob("*.json")) == []  # resumed once: the saved run is gone


async def test_percent_lf_cancel_reaches_a_background_run_at_every_step(
    background_kernel: None,
) -> None:
    started = asyncio.Event()

    @lf.tool
    async def slow(n: int) -> int:
        """Take a while."""
        started.set()
        await asyncio.Event().wait()
        return n

    ns: dict[str, Any] = {"lm": script(lf.ToolCall("c1", "slow", {"n": 1})), "slow": slow}
    handle = await run_agent(["--lm", "lm", "--tools", "slow"], "Be slow.", ns)
    prompt = handle.widgets[0]
    click(prompt, await wait_for_pending(prompt), "approve")
    await started.wait()  # approved: the tool runs, no prompt is waiting any more
    assert control.cancel("the run was cancelled with %lf cancel") == 1
    with pytest.raises(asyncio.CancelledError):
        await handle.task
