"""Work around an ipykernel 7.4 race that leaves a finished async cell at ``[*]``.

ipykernel 7.4 handles a widget message (``comm_msg``) that arrives while a cell holds the
shell concurrently: it saves the kernel's current parent request, awaits the handler, then
restores the saved parent into the context shared by all shell messages. If, during those two
event-loop turns, the running cell finished and the next queued cell started, the restore puts
the *previous* cell's request back as the parent. The new cell's outputs are unaffected (its
task copied the right parent when it started), but its final ``status: idle`` is sent with
the previous cell's ``msg_id``. JupyterLab marks a cell done only when it has the
``execute_reply`` *and* an idle status for that request, so the cell stays at ``[*]`` while the
kernel shows idle. Run All over ``%%lf`` cells (async) whose widgets message the kernel when
their views render hits this every few runs.

The fix: remember each cell's request when it starts (``pre_execute`` runs inside the cell's
own task, which holds the right parent) and, in ``post_execute``, put it back if a stale
request replaced it. ipykernel runs ``post_execute`` in the shell's context after the cell's
last ``await`` and sends the reply and the idle status right after it with no ``await`` in
between, so no stale restore can slip in afterwards. Comm handlers also fire these events
(their parent is the ``comm_msg``); those calls are left alone.

Upstream behaviour relied on (ipykernel 7.4.0, ``ipykernel/kernelbase.py``,
https://github.com/ipython/ipykernel/blob/v7.4.0/ipykernel/kernelbase.py): the restore is
``set_parent(shell_ident, shell_parent, channel="shell")`` in the ``finally`` of
``Kernel.shell_main``'s concurrent comm dispatch; the current request's routing identity is
read from ``_parent_ident["shell"]`` (a backward-compatible view of the
``_shell_parent_ident`` context variable). Installed only where ``hosts`` found that layout.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["ParentPin", "install"]


def _header(parent: Any) -> dict[str, Any]:
    header = parent.get("header") if isinstance(parent, dict) else None
    return header if isinstance(header, dict) else {}


class ParentPin:
    """``pre_execute``/``post_execute`` hooks keeping a cell's request as the kernel's parent."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.repaired = 0  # how many times a stale parent was replaced (for tests/diagnosis)
        # Per thread: the main shell and each subshell run their cells on their own thread.
        self._started: dict[int, tuple[Any, dict[str, Any]]] = {}

    def _current(self) -> tuple[Any, dict[str, Any]] | None:
        try:
            parent = self.kernel.get_parent("shell")
            ident = self.kernel._parent_ident["shell"]
        except Exception:
            return None
        if _header(parent).get("msg_type") != "execute_request":
            return None  # a comm handler (or no request): not a cell
        return ident, parent

    def pre_execute(self) -> None:
        current = self._current()
        if current is not None:
            self._started[threading.get_ident()] = current

    def post_execute(self) -> None:
        started = self._started.get(threading.get_ident())
        current = self._current()
        if started is None or current is None:
            return
        ident, parent = started
        if _header(current[1]).get("msg_id") == _header(parent).get("msg_id"):
            return
        try:
            self.kernel.set_parent(ident, parent, channel="shell")
        except Exception:
            return
        self.repaired += 1


def install(ip: Any) -> ParentPin | None:
    """Register the hooks on ``ip`` (idempotent); nothing outside an ipykernel kernel."""
    kernel = getattr(ip, "kernel", None)
    if kernel is None or not hasattr(kernel, "get_parent") or not hasattr(kernel, "set_parent"):
        return None
    existing = getattr(ip, "_lfx_parent_pin", None)
    if isinstance(existing, ParentPin):
        return existing
    pin = ParentPin(kernel)
    ip.events.register("pre_execute", pin.pre_execute)
    ip.events.register("post_execute", pin.post_execute)
    # First in line, so other post_execute hooks (e.g. matplotlib's figure flush) publish with
    # the right parent too.
    callbacks = ip.events.callbacks["post_execute"]
    callbacks.remove(pin.post_execute)
    callbacks.insert(0, pin.post_execute)
    ip._lfx_parent_pin = pin
    return pin
