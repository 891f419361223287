"""Which ipykernel versions langfx_nb's kernel glue is tested on, and the one check for it.

Three modules rely on ipykernel internals that are not public API, read from ipykernel 7.4.0
(``ipykernel/kernelbase.py`` and ``ipykernel/ipkernel.py``,
https://github.com/ipython/ipykernel/tree/v7.4.0/ipykernel):

- ``kernel_comm``: ``Kernel.shell_main`` (dispatches ``comm_*`` concurrently while
  ``_main_asyncio_lock`` is held, queues everything else), ``shell_channel_thread.manager
  .set_on_recv_callback``, ``_get_shell_context_var`` and ``_shell_parent_ident``.
- ``kernel_parent``: ``_parent_ident["shell"]`` and the parent restore in ``shell_main``'s
  ``finally`` (the race it repairs).
- ``control``: ``IPythonKernel._cancel_on_sigint``, whose SIGINT handler schedules the
  cancellation with ``io_loop.add_callback`` from inside the signal handler (the loop is not
  woken), which the SIGINT route replaces while a run is tracked.

Outside ``TESTED`` (``>= 7.4, < 7.5``) ``%load_ext langfx_nb`` refuses with the reason and the
way out, rather than patching a layout it does not know (a silent hang on a click, a cell
stuck at ``[*]``). ``LANGFX_NB_UNTESTED_IPYKERNEL=1`` loads anyway: each hook then installs
only where the attributes it needs exist, and the SIGINT route stays off.
"""

from __future__ import annotations

import os

__all__ = ["OVERRIDE_ENV", "TESTED", "untested_reason", "version_tuple"]

TESTED = ((7, 4), (7, 5))
"""ipykernel versions ``[low, high)`` the kernel glue is tested on."""

OVERRIDE_ENV = "LANGFX_NB_UNTESTED_IPYKERNEL"


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def installed() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ipykernel")
    except PackageNotFoundError:
        return None


def untested_reason(found: str | None = None, *, allow_override: bool = True) -> str | None:
    """Why the installed ipykernel (or ``found``) is outside ``TESTED``; None when tested,
    absent, or (with ``allow_override``) when ``LANGFX_NB_UNTESTED_IPYKERNEL=1``."""
    found = installed() if found is None else found
    if found is None:
        return None
    low, high = TESTED
    if low <= version_tuple(found) < high:
        return None
    if allow_override and os.environ.get(OVERRIDE_ENV) == "1":
        return None
    return (
        f"langfx_nb's kernel glue is tested on ipykernel >=7.4,<7.5 (found {found}); it relies "
        "on ipykernel internals (see langfx_nb/notebook/kernel_version.py) that another version "
        "may lay out differently, which would leave approval clicks or cells hanging. Install "
        f"a tested version (pip install 'ipykernel>=7.4,<7.5'), or set {OVERRIDE_ENV}=1 to "
        "load anyway (the Interrupt fast path then stays off)."
    )
