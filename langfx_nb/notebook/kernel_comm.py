"""Answer ``comm_info_request`` while a cell awaits, so a reloaded page gets its widgets back.

A page that (re)connects to a kernel asks it which widget comms exist (``comm_info_request``)
before it can draw any widget. ipykernel 7.4 dispatches widget messages (``comm_msg``) while a
cell holds the shell, but queues every other shell message, ``comm_info_request`` included,
behind the running cell. A cell waiting for a tool approval therefore left a reloaded page at
"Loading widget..." with no buttons until the run's deadline. This hook dispatches
``comm_info_request`` the way ipykernel dispatches ``comm_msg``: concurrently, without the
cell's lock (it only reads the comm table and replies). Everything else is left to ipykernel.

Upstream behaviour relied on (ipykernel 7.4.0, ``ipykernel/kernelbase.py``,
https://github.com/ipython/ipykernel/blob/v7.4.0/ipykernel/kernelbase.py): ``Kernel
.shell_main(subshell_id, msg)`` is the shell channel's receive callback
(``shell_channel_thread.manager.set_on_recv_callback``); it holds ``_main_asyncio_lock`` while
a cell runs and, for ``comm_*`` messages, dispatches with ``dispatch_shell(...,
concurrent=True)`` then restores the parent saved with ``get_parent("shell")`` and
``_get_shell_context_var(_shell_parent_ident)``; this hook does the same for one more message
type. Installed only where ``hosts`` found that layout (a kernel that dispatches comms while
a cell awaits).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

__all__ = ["install"]

_CONCURRENT = frozenset({"comm_info_request"})


def install(ip: Any) -> bool:
    """Wrap the kernel's shell receiver (idempotent). False when this is not an ipykernel with
    the shell-channel thread layout of 7.x (nothing is changed then)."""
    kernel = getattr(ip, "kernel", None)
    thread = getattr(kernel, "shell_channel_thread", None)
    manager = getattr(thread, "manager", None)
    original = getattr(kernel, "shell_main", None)
    if kernel is None or manager is None or original is None:
        return False
    if getattr(kernel, "_lfx_comm_info", False):
        return True
    if not hasattr(manager, "set_on_recv_callback") or not hasattr(kernel, "dispatch_shell"):
        return False

    async def shell_main(subshell_id: str | None, msg: Any) -> None:
        lock = getattr(kernel, "_main_asyncio_lock", None)
        if (
            subshell_id is None
            and lock is not None
            and lock.locked()
            and _msg_type(kernel, msg) in _CONCURRENT
        ):
            parent = kernel.get_parent("shell")
            ident = kernel._get_shell_context_var(kernel._shell_parent_ident)
            try:
                await asyncio.create_task(
                    kernel.dispatch_shell(msg, subshell_id=None, concurrent=True),
                    context=contextvars.copy_context(),
                )
            finally:
                kernel.set_parent(ident, parent, channel="shell")
            return
        await original(subshell_id, msg)

    try:
        manager.set_on_recv_callback(shell_main)
    except Exception:  # another thread, or a layout this code does not know: leave it be
        return False
    kernel._lfx_comm_info = True
    return True


def _msg_type(kernel: Any, msg: Any) -> str:
    try:
        _, frames = kernel.session.feed_identities(msg, copy=False)
        header = kernel.session.deserialize(frames, content=False, copy=False)["header"]
    except Exception:
        return ""
    return str(header.get("msg_type", ""))
