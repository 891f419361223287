"""In a marimo notebook: the host is recognised (no IPython shell there), approvals take the
background mode with words that fit marimo, views go to marimo's output, and composite views
make their explorer where marimo can make widgets (inside a running cell).

marimo itself is stood in for by a module with the three things the notebook layer uses
(``running_in_notebook``, ``output.append``, ``Html``/``vstack``); the real one runs in
tests/ui/test_marimo_browser.py.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

import langfx_nb as lf
from langfx_nb.notebook import hosts
from langfx_nb.notebook.batch_view import BatchView
from langfx_nb.notebook.kernel_state import in_kernel

from ._approval import CALLS, add, ask_policy, click, instant_sleep, script, wait_for_pending
from ._fakes import record_sends


class FakeMarimo(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("marimo")
        self.__version__ = "0.25.2"
        self.appended: list[Any] = []
        self.output = types.SimpleNamespace(append=self.appended.append)

    def running_in_notebook(self) -> bool:
        return True

    def Html(self, text: str) -> tuple[str, str]:
        return ("html", text)

    def vstack(self, items: list[Any]) -> tuple[str, list[Any]]:
        return ("vstack", items)


@pytest.fixture
def marimo(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMarimo]:
    fake = FakeMarimo()
    monkeypatch.setitem(sys.modules, "marimo", fake)
    monkeypatch.setattr(hosts, "_current", None)
    monkeypatch.delenv(hosts.MODE_ENV, raising=False)
    yield fake


def test_a_marimo_kernel_is_a_notebook_whose_approvals_go_in_the_background(
    marimo: FakeMarimo,
) -> None:
    host = hosts.current()
    assert host is not None and host.marimo and host.kernel == "marimo 0.25.2 (marimo kernel)"
    assert (host.comm_while_awaiting, host.loop_between_cells) == (False, True)
    assert hosts.approval_mode() == "background" and in_kernel()
    doctor = hosts.doctor_text()
    assert "kernel: marimo 0.25.2" in doctor and "approvals: background" in doctor
    assert "lf.nb.background(" in doctor and "widgets=[policy.widget]" in doctor
    assert "%%lf" not in doctor and "`run = _`" not in doctor  # neither exists in marimo


async def test_a_background_run_with_its_prompt_in_marimo_takes_the_click(
    marimo: FakeMarimo,
) -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("What is 2 + 3?", tools=[add], allow_tool=policy)
    session = lf.Session(script(lf.ToolCall("c1", "add", {"a": 2, "b": 3})))
    # what a marimo cell does (no %%lf there): the prompt among the handle's widgets
    run = lf.nb.background(agent.invoke(session), label="agent", widgets=[policy.widget])
    text = run.explain()
    assert "marimo 0.25.2 (marimo kernel) hands clicks to Python only between cells" in text
    assert "`run = _`" not in text and "%lf" not in text
    assert run._display_() == ("vstack", [("html", _html(text)), policy.widget])
    # a cell awaiting the run stops when the prompt asks (the click could not arrive)
    with pytest.raises(UsageError, match=r"waiting for your decision on add \(c1\)"):
        await run
    click(policy.widget, await wait_for_pending(policy.widget), "approve")
    assert await run == "The answer is 5."
    assert CALLS == [(2, 3)]
    await session.dispose()


def _html(text: str) -> str:
    import html

    return f'<div class="lfx-run-note">{html.escape(text)}</div>'


async def test_a_prompt_a_marimo_cell_awaits_is_denied_at_once_with_what_to_do(
    marimo: FakeMarimo,
) -> None:
    policy = ask_policy(sleep=instant_sleep)
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        with pytest.raises(lf.ToolDeniedError) as info:
            await agent.invoke(session)
    message = str(info.value)
    assert "marimo 0.25.2" in message and "only while no cell runs" in message
    assert "lf.nb.background(agent.invoke(session), widgets=[policy.widget])" in message
    assert "%%lf" not in message and "not shown" not in message
    assert CALLS == []


def test_a_view_displayed_in_marimo_goes_to_its_output_without_a_static_copy(
    marimo: FakeMarimo,
) -> None:
    view = BatchView()
    view._ipython_display_()  # what lf.batch's default reporter does in the running cell
    assert marimo.appended == [view]


def test_an_ask_policy_in_marimo_makes_its_prompt_in_the_cell_that_makes_the_policy(
    marimo: FakeMarimo,
) -> None:
    policy = lf.nb.ApprovalPolicy()
    assert policy._widget is not None  # not later, in the background task that asks


async def test_a_batch_view_makes_its_explorer_before_any_click_and_reuses_it() -> None:
    """marimo makes widgets only inside a running cell, never in a click's handler: the one
    explorer a group opens in is made when the batch reports its first error."""
    session = lf.Session()
    view = BatchView(session=session)

    async def item(x: int) -> int:
        if x % 2:
            raise ValueError(f"odd {x}")
        return x

    await lf.batch(item, [1, 2, 3], session=session, progress=view)
    made = view._spare
    assert made is not None and view.explorer is None  # made, not shown
    assert view.open_group("ValueError") is made
    assert view.open_group(None) is None
    assert view.open_group("ValueError") is made
    await session.dispose()


async def test_the_page_wait_in_marimo_counts_no_time_a_cell_ran_or_held_the_loop(
    marimo: FakeMarimo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """marimo holds a page's message while any cell runs (Run all runs every cell in one go),
    so the 15 s a page has to draw a background run's prompt count only idle time."""
    from langfx_nb.notebook import approval, control, marimo_host

    running = iter([False, True, False, False, False, False])  # before/after each wait
    monkeypatch.setattr(marimo_host, "cell_running", lambda: next(running))
    clock = iter([0.0, 5.0, 5.0, 30.0, 30.0, 35.0])  # the 2nd wait ended 20 s late
    monkeypatch.setattr(approval, "_now", lambda: next(clock))
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

    with pytest.raises(lf.ToolDeniedError, match="no page acknowledged"):
        await asyncio.create_task(invoke())
    # a cell ran in the first wait, one held the loop through the second: the third ended it
    assert timeouts == [5, 5, 5]
    assert CALLS == []


def test_lf_nb_background_stays_the_function_once_its_module_is_imported() -> None:
    import importlib

    module = importlib.import_module("langfx_nb.notebook.background")  # as %%lf agent's runner
    assert lf.nb.background is module.background and callable(lf.nb.background)


async def test_with_live_forced_in_marimo_a_denial_says_the_click_was_held_not_unseen(
    marimo: FakeMarimo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured in marimo 0.25.2 with LANGFX_NB_APPROVAL=live: Approve clicked 2 s after the
    prompt showed never reached the awaiting cell, which was denied at its render deadline."""
    monkeypatch.setenv(hosts.MODE_ENV, "live")
    policy = ask_policy(sleep=instant_sleep)
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        with pytest.raises(lf.ToolDeniedError) as info:
            await agent.invoke(session)
    message = str(info.value)
    assert "only after the running cell ends" in message and "approval mode live" in message
    assert "no page acknowledged" not in message


def test_with_suspend_forced_in_marimo_doctor_names_the_python_resume_call(
    marimo: FakeMarimo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """marimo has no magics: `%lf resume` would be advice nobody can follow there."""
    monkeypatch.setenv(hosts.MODE_ENV, "suspend")
    doctor = hosts.doctor_text()
    assert "approvals: suspend" in doctor and "%lf" not in doctor
    assert 'on_approval="suspend"' in doctor and "lf.Agent.resume(state" in doctor


def test_lf_nb_doctor_prints_what_the_magic_prints_for_marimo_users(
    marimo: FakeMarimo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lf.nb.doctor() is None
    text = capsys.readouterr().out
    assert text == hosts.doctor_text() and "kernel: marimo 0.25.2" in text
