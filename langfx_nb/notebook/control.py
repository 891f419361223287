"""Stopping notebook runs: the Cancel-run buttons, ``%lf cancel`` / ``lf.nb.cancel()`` and
Kernel › Interrupt.

A run is the asyncio task a cell awaits in (``%%lf`` cells, and any cell whose agent is waiting
for an approval). Cancelling it is plain asyncio cancellation: ``task.cancel()``; the agent
records the pending tool call (and its parents) as ``cancelled`` and the prompt is closed, so a
later click can never run the tool. What the user sees is one line, ``CancelledError: <why>``,
instead of a traceback through the library (an IPython custom exception handler that acts only
on cancellations this module asked for; any other exception keeps its normal traceback).

Interrupt on ipykernel (6.x and 7.x): the kernel's SIGINT handler schedules the cancellation
of the running cell with ``call_soon`` from inside the signal handler, which does not wake the
event loop, so a cell awaiting a click (or any quiet ``await``) is interrupted only at its next
wake-up — possibly minutes later. While a run is tracked here, SIGINT is also routed through
the loop's own signal wake-up (``loop.add_signal_handler``), which cancels the tracked runs at
once; the kernel's own handler is put back when the last run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Run", "cancel", "explain_cancellation", "install", "runs", "track"]


@dataclass(eq=False)
class Run:
    """One tracked run: its task, the sessions it belongs to, and why it was cancelled."""

    task: asyncio.Task[Any]
    loop: asyncio.AbstractEventLoop
    sessions: set[str] = field(default_factory=set)
    label: str = ""
    reason: str | None = None
    background: bool = False  # runs between cells (``mark_background``)


_lock = threading.Lock()
_runs: list[Run] = []
_sigint: dict[int, Any] = {}  # id(loop) -> the SIGINT handler to restore
_depth: dict[int, int] = {}  # id(loop) -> tracked runs using the wake-up
_shown: dict[int, str] = {}  # id(task) -> reason, until the cell shows it


def runs() -> list[Run]:
    """The runs currently tracked (a copy)."""
    with _lock:
        return list(_runs)


@contextlib.contextmanager
def track(session: Any = None, label: str = "") -> Iterator[Run | None]:
    """Register the current task as a run for as long as the block lasts (re-entrant: an
    approval inside a ``%%lf`` run adds its session to the same run)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    if task is None:
        yield None
        return
    _install_in_ipython()
    loop = task.get_loop()
    sid = _session_id(session)
    with _lock:
        existing = next((r for r in _runs if r.task is task), None)
    if existing is not None:
        added = sid is not None and sid not in existing.sessions
        if added and sid is not None:
            existing.sessions.add(sid)
        try:
            yield existing
        finally:
            if added and sid is not None:
                existing.sessions.discard(sid)
        return
    wake = not _background.get()
    run = Run(task, loop, {sid} if sid else set(), label, background=not wake)
    with _lock:
        _runs.append(run)
    if wake:
        _wake_on_sigint(loop)
    try:
        yield run
    finally:
        with _lock:
            if run in _runs:
                _runs.remove(run)
        if wake:
            _unwake(loop)


def cancel(reason: str | None = None, *, session: Any = None) -> int:
    """Cancel the tracked runs (of ``session`` only, if given); returns how many.

    Safe from any thread. A waiting approval prompt closes as cancelled; the cell ends with one
    line naming ``reason``."""
    why = reason or "the run was cancelled (lf.nb.cancel)"
    sid = _session_id(session)
    count = 0
    for run in runs():
        if sid is not None and sid not in run.sessions:
            continue
        if run.task.done():
            continue
        run.reason = run.reason or why
        with _lock:
            _shown[id(run.task)] = run.reason
        count += 1
        if _on_loop_thread(run.loop):
            run.task.cancel(run.reason)
        else:
            run.loop.call_soon_threadsafe(run.task.cancel, run.reason)
    return count


def cancel_task(task: asyncio.Task[Any], reason: str) -> None:
    """Cancel one task (not necessarily tracked), with a reason shown in one line. Call it on
    the task's loop thread (``loop.call_soon_threadsafe(cancel_task, ...)`` from elsewhere)."""
    with _lock:
        _shown[id(task)] = reason
    task.cancel(reason)


def add_detail(task: asyncio.Task[Any] | None, detail: str) -> None:
    """Add what the cancellation stopped (``tool add (c1) did not run``) to the one line the
    cell will show, if this module cancelled ``task``."""
    if task is None:
        return
    with _lock:
        reason = _shown.get(id(task))
        if reason is not None and detail not in reason:
            _shown[id(task)] = f"{reason}; {detail}"


def _session_id(session: Any) -> str | None:
    if session is None:
        return None
    return str(getattr(session, "id", id(session)))


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


# -- Interrupt ----------------------------------------------------------------------------------


_route = {"on": False}  # the SIGINT route: set by install() where the kernel's layout fits
_background: contextvars.ContextVar[bool] = contextvars.ContextVar("lfx_background", default=False)


def sigint_layout(ip: Any) -> bool:
    """True when ``ip``'s kernel cancels an async cell the way the SIGINT route replaces:
    ``IPythonKernel._cancel_on_sigint`` (ipykernel 6.x and 7.x, ``ipykernel/ipkernel.py``),
    whose handler cancels the cell through ``io_loop.add_callback`` from inside the signal
    handler, which does not wake the loop. Elsewhere the kernel's own handler is left alone."""
    kernel = getattr(ip, "kernel", None)
    return callable(getattr(kernel, "_cancel_on_sigint", None))


def mark_background() -> None:
    """The current task (and the tasks it starts) runs between cells: Interrupt, meant for
    the running cell, never cancels it, and its tracking leaves SIGINT alone."""
    _background.set(True)


def in_background() -> bool:
    """True inside a task marked with :func:`mark_background`."""
    return _background.get()


def _wake_on_sigint(loop: asyncio.AbstractEventLoop) -> None:
    key = id(loop)
    if _depth.get(key):
        _depth[key] += 1
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if not _route["on"]:
        return
    try:
        previous = signal.getsignal(signal.SIGINT)
        loop.add_signal_handler(signal.SIGINT, _on_interrupt)
    except (NotImplementedError, RuntimeError, ValueError, AttributeError):
        return  # not the main thread's loop, or a platform without it: the kernel's own way
    _sigint[key] = previous
    _depth[key] = 1


def _unwake(loop: asyncio.AbstractEventLoop) -> None:
    key = id(loop)
    if not _depth.get(key):
        return
    _depth[key] -= 1
    if _depth[key]:
        return
    del _depth[key]
    previous = _sigint.pop(key, None)
    with contextlib.suppress(Exception):
        loop.remove_signal_handler(signal.SIGINT)
    if previous is not None:
        with contextlib.suppress(Exception):
            signal.signal(signal.SIGINT, previous)


def _on_interrupt() -> None:
    # Kernel › Interrupt, and also a restart or shutdown (the server interrupts a busy kernel
    # before it asks it to shut down); background runs are not the cell being interrupted
    why = "interrupted (Kernel › Interrupt, restart or shutdown)"
    for run in runs():
        if not run.background and not run.task.done():
            run.reason = run.reason or why
            with _lock:
                _shown[id(run.task)] = run.reason
            run.task.cancel(run.reason)


# -- one line instead of a traceback ------------------------------------------------------------


def take_reason() -> str | None:
    """The reason this module cancelled the current task, once."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    if task is None:
        return None
    with _lock:
        return _shown.pop(id(task), None)


def explain_cancellation(reason: str) -> None:
    """When the current task is being cancelled (Kernel › Interrupt, a cancelled cell),
    show that cancellation, once it reaches the cell, as the one line ``CancelledError:
    <reason>`` instead of a traceback through the library. The ``CancelledError`` itself
    propagates untouched; nothing happens when the task is not being cancelled."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return
    if task is None or not task.cancelling():
        return
    with _lock:
        prior = _shown.get(id(task))  # why a Cancel button or lf.nb.cancel stopped it
        if prior is None or reason not in prior:
            _shown[id(task)] = reason if prior is None else f"{prior}; {reason}"
    _install_in_ipython()


def _show_cancelled(
    shell: Any, etype: type, evalue: BaseException, tb: Any, tb_offset: Any = None
) -> Any:
    reason = take_reason()
    if reason is None:
        return shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
    task = asyncio.current_task() if _running() else None
    if task is not None and task.cancelling():
        task.uncancel()  # handled here, at the cell's top: later awaits of the cell run normally
    red, reset = "\x1b[0;31m", "\x1b[0m"
    stb = [f"{red}CancelledError{reset}: {reason}"]
    # IPython's hook for showing a prepared traceback (ipykernel's ZMQInteractiveShell
    # overrides it to publish the error to the cell): the one way to show one line
    shell._showtraceback(etype, asyncio.CancelledError(reason), stb)
    return stb


def _running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def install(ip: Any) -> bool:
    """Show cancellations asked for here as one line (IPython's custom exception hook), and
    turn the SIGINT route on where :func:`sigint_layout` holds. Returns whether it is on."""
    if sigint_layout(ip):
        _route["on"] = True
    if not getattr(ip, "_lfx_cancel_display", False):
        ip.set_custom_exc((asyncio.CancelledError,), _show_cancelled)
        ip._lfx_cancel_display = True
    return _route["on"]


def _install_in_ipython() -> None:
    """A run tracked in a notebook without ``%load_ext langfx_nb`` still ends in one line."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        install(ip)
