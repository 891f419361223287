"""``%load_ext langfx_nb`` loads on every kernel layout, and the probe decides the approval mode.

The kernels are real ipykernel classes where this venv has them (7.4's ``IPythonKernel``)
and, for the layouts of other releases, classes whose shell receiver is the upstream code
(ipykernel 7.0-7.3's ``Kernel.shell_main``; 6.x has none). The real 6.29 kernel runs in
tests/hosts (its own venv).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Iterator
from typing import Any

import ipykernel
import pytest
from ipykernel.ipkernel import IPythonKernel
from IPython.core.interactiveshell import InteractiveShell

from langfx_nb.notebook import control, hosts, load_ipython_extension


class Kernel73:
    """The shell receiver of ipykernel 7.0-7.3 (kernelbase.py, v7.3.0): every message,
    widget messages included, waits for the running cell's lock."""

    _main_asyncio_lock: Any = None

    async def dispatch_shell(self, msg: Any, subshell_id: str | None = None) -> None: ...

    async def shell_main(self, subshell_id: str | None, msg: Any) -> None:
        asyncio_lock = self._main_asyncio_lock
        async with asyncio_lock:
            await self.dispatch_shell(msg, subshell_id=subshell_id)


class Kernel6:
    """ipykernel 6.x: one queue (``dispatch_queue``), no shell receiver to read."""

    async def dispatch_queue(self) -> None: ...


def kernel74() -> Any:
    return IPythonKernel.__new__(IPythonKernel)  # the class is what the probe reads


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(hosts, "_current", None)
    monkeypatch.setitem(control._route, "on", False)
    monkeypatch.delenv(hosts.MODE_ENV, raising=False)
    yield


def shell_with(kernel: Any) -> InteractiveShell:
    ip = InteractiveShell()  # its own shell: the kernel attribute stays out of other tests
    ip.kernel = kernel
    return ip


def test_the_probe_reads_the_shell_receiver_the_kernel_uses() -> None:
    assert hosts.comm_while_awaiting(kernel74())
    assert not hosts.comm_while_awaiting(Kernel73())
    assert not hosts.comm_while_awaiting(Kernel6())
    assert not hosts.comm_while_awaiting(object())


@pytest.mark.parametrize(
    ("found", "kernel", "mode"),
    [
        ("6.17.1", Kernel6, "background"),  # Google Colab's pinned kernel
        ("6.29.5", Kernel6, "background"),
        ("7.1.0", Kernel73, "background"),
        ("7.4.0", kernel74, "live"),
        ("7.5.0", kernel74, "live"),  # not released yet: the layout decides, not the number
    ],
)
def test_load_ext_loads_on_every_kernel_and_picks_the_mode_it_allows(
    fresh: None, monkeypatch: pytest.MonkeyPatch, found: str, kernel: Any, mode: str
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: found)
    monkeypatch.setattr(ipykernel, "__version__", found)
    ip = shell_with(kernel())
    load_ipython_extension(ip)  # refused every kernel but 7.4 before
    host = hosts.current()
    assert host is not None
    assert host.mode == mode
    assert f"ipykernel {found}" in host.kernel
    # the patches of 7.4's layout install only where it was found
    assert ("parent pin" in host.patches) == (mode == "live")
    ip.run_line_magic("lf", "doctor")


def test_doctor_and_help_say_what_was_found_and_what_to_do(
    fresh: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "6.29.5")
    monkeypatch.setattr(ipykernel, "__version__", "6.29.5")
    ip = shell_with(Kernel6())
    load_ipython_extension(ip)
    ip.run_line_magic("lf", "doctor")
    text = capsys.readouterr().out
    assert "kernel: ipykernel 6.29.5" in text
    assert "widget messages handled while a cell awaits: no" in text
    assert "approvals: background" in text
    assert "`await run`" in text and "run.cancel()" in text
    assert "%%lf query" in text  # what works regardless
    ip.run_line_magic("lf", "help")
    assert "approvals here: background (%lf doctor" in capsys.readouterr().out


def test_terminal_ipython_suspends_and_the_env_chooses_a_mode(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip = InteractiveShell()
    load_ipython_extension(ip)
    host = hosts.current()
    assert host is not None and host.mode == "suspend" and not host.in_kernel
    assert "%lf resume" in hosts.doctor_text()
    monkeypatch.setenv(hosts.MODE_ENV, "background")
    host = hosts.probe(shell_with(kernel74()))
    assert host.mode == "background" and host.forced
    assert f"chosen by ${hosts.MODE_ENV}" in hosts.doctor_text()


def test_the_interrupt_route_installs_only_over_the_handler_it_replaces(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip = shell_with(Kernel73())  # no _cancel_on_sigint
    load_ipython_extension(ip)
    assert hosts.current().patches["interrupt route"] is False  # type: ignore[union-attr]
    load_ipython_extension(shell_with(kernel74()))
    assert hosts.current().patches["interrupt route"] is True  # type: ignore[union-attr]


async def test_cells_running_are_counted_for_idle_time(fresh: None) -> None:
    ip = InteractiveShell()
    load_ipython_extension(ip)
    started, running = hosts.cell_activity()
    ip.run_cell("1 + 1")
    assert hosts.cell_activity() == (started + 1, running)
    await asyncio.sleep(0)


def test_without_load_ext_the_running_shell_is_probed_when_first_asked(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import IPython

    ip = shell_with(Kernel6())
    monkeypatch.setattr(IPython, "get_ipython", lambda: ip)
    assert hosts.approval_mode() == "background"  # lf.nb.ApprovalPolicy used directly


def test_in_suspend_mode_an_ask_ends_the_run_saved_and_resume_continues_it(
    fresh: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import langfx_nb as lf
    from langfx_nb.notebook.options import APPROVE_ENV

    from ._approval import CALLS, add, script
    from ._ipython import lf_shell, run

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(APPROVE_ENV, raising=False)
    ip = lf_shell()
    assert hosts.probe(ip).mode == "suspend"  # terminal IPython: nothing runs between cells
    ip.user_ns.update(lm=script(lf.ToolCall("c1", "add", {"a": 2, "b": 3})), add=add)
    run(ip, "%%lf agent --lm lm --tools add\nWhat is 2 + 3?\n")
    shown = capsys.readouterr().out
    assert "approvals: suspend" in shown and "%lf resume --approve c1" in shown
    assert CALLS == []
    assert run(ip, "%lf resume --approve c1 --lm lm") == "The answer is 5."
    assert CALLS == [(2, 3)]


@pytest.mark.parametrize(
    "environ",
    [{"SERVER_SOFTWARE": "voila/0.5.13"}, {"VOILA_PREHEAT": "True"}],
)
def test_voila_gets_background_approvals_even_on_a_kernel_with_live_clicks(
    fresh: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    environ: dict[str, str],
) -> None:
    """Voilà's default mode draws the page after the whole notebook ran: a cell waiting for a
    click would wait for a prompt nobody sees (it used to be denied after 15 s as "not shown")."""
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    ip = shell_with(kernel74())
    load_ipython_extension(ip)
    host = hosts.current()
    assert host is not None
    assert host.comm_while_awaiting and host.page == "Voilà" and host.mode == "background"
    ip.run_line_magic("lf", "doctor")
    text = capsys.readouterr().out
    assert "page: Voilà, drawn only after the whole notebook has run" in text
    assert "approvals: background" in text
    assert hosts.why_not_live() == "Voilà draws the page only after the whole notebook has run"
    # nobody runs a next cell on a Voilà page: the advice is what to do on the page
    assert "run = _" not in text and "next cell" not in text
    assert "click Approve or Deny in the prompt on the page" in text and "Agent row" in text


def test_a_kernel_outside_voila_is_not_taken_for_it(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVER_SOFTWARE", "nginx/1.27")
    monkeypatch.delenv("VOILA_PREHEAT", raising=False)
    host = hosts.probe(shell_with(kernel74()))
    assert host.page is None and host.mode == "live"
