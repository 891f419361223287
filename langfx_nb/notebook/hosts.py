"""What this kernel can do, found by looking at it once at ``%load_ext``, and what follows.

No version list decides: each capability is read from the running kernel itself.

- **comm while awaiting**: does the kernel's shell receiver hand a widget message
  (``comm_msg``) to its handler while a cell holds the shell at an ``await``? ipykernel 7.4
  does: its ``Kernel.shell_main`` (the shell channel's receive callback) dispatches
  ``comm_open``/``comm_msg``/``comm_close`` with ``dispatch_shell(..., concurrent=True)``
  instead of queueing them behind the cell's lock. ipykernel 6.x (one message queue,
  ``dispatch_queue``) and 7.0-7.3 (``shell_main`` takes the lock for every message) queue
  them. The probe reads the compiled receiver the kernel actually uses: the set of comm
  message types it tests and its call of ``dispatch_shell``, in the code object's constants
  and names (microseconds, no source file read). A kernel that moves this code elsewhere reads
  as "no": clicks then take the background route, which works on every kernel.
- **loop between cells**: does the asyncio loop a cell awaits on keep running after the cell
  returns? In an ipykernel kernel whose IPython runs async cells with the asyncio runner it
  does (the cell's coroutine runs on the kernel's own loop); in terminal IPython the loop only
  runs while a cell does.
- **page drawn after the run** (Voilà): Voilà's default mode runs the whole notebook before it
  sends the page, so no prompt is on screen while a cell runs, whatever the kernel can do. Its
  kernels are told apart by the environment Voilà starts them with (``SERVER_SOFTWARE``
  ``voila/…`` for a page's kernel, ``VOILA_PREHEAT`` also for a pre-heated one). The page's
  widgets connect once the notebook has run, so a click reaches a background run there.

A marimo notebook has no IPython shell to probe: its kernel is recognised by marimo itself
(``marimo_host``) and reads "no" for the first (one control loop runs cells and handles
clicks, one request at a time) and "yes" for the second.

The approval mode follows (``LANGFX_NB_APPROVAL=live|background|suspend`` chooses one):

- ``live``: the cell awaits the click (comm while awaiting, and a page drawn while cells run);
- ``background``: the run becomes a task on the kernel loop and the cell returns at once with
  its handle; the click arrives between cells (loop between cells);
- ``suspend``: the run ends with a saved ``RunState`` that ``%lf resume`` continues.

The kernel patches (``kernel_comm``, ``kernel_parent``, the SIGINT route in ``control``)
install only where the probe found the layout they were written against; ``%lf doctor``
shows what was found, what was installed, and what it means for a person.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

__all__ = [
    "MODE_ENV",
    "Host",
    "approval_mode",
    "cell_activity",
    "current",
    "doctor_text",
    "explain_no_click",
    "meaning",
    "probe",
    "probe_marimo",
    "why_not_live",
]

Mode = Literal["live", "background", "suspend"]
MODES: tuple[Mode, ...] = ("live", "background", "suspend")
MODE_ENV = "LANGFX_NB_APPROVAL"

_COMM_TYPES = frozenset({"comm_open", "comm_msg", "comm_close"})
_PACKAGES = ("ipykernel", "ipython", "ipywidgets", "anywidget", "jupyter_client", "marimo")


@dataclass
class Host:
    """What the probe found in one shell, and which patches were installed on it."""

    kernel: str  # "ipykernel 7.4.0 (IPythonKernel)", or "no kernel (TerminalInteractiveShell)"
    in_kernel: bool
    comm_while_awaiting: bool
    loop_between_cells: bool
    mode: Mode
    forced: bool = False  # the mode came from $LANGFX_NB_APPROVAL
    page: str | None = None  # a host that draws the page only after the notebook ran: "Voilà"
    patches: dict[str, bool] = field(default_factory=dict)  # patch name -> installed
    marimo: bool = False  # a marimo notebook's kernel (no IPython shell, no `%%lf`)


_current: Host | None = None
_cells = {"started": 0, "running": 0}  # cells run in the probed shell (pre/post_run_cell)


def _cell_started(*_: Any) -> None:
    _cells["started"] += 1
    _cells["running"] += 1


def _cell_ended(*_: Any) -> None:
    _cells["running"] = max(0, _cells["running"] - 1)


def cell_activity() -> tuple[int, bool]:
    """(cells started so far, whether one runs now): a page's message can reach a background
    run only while no cell runs, so waits for the page count idle time only. (In marimo, whose
    cells are not counted, whether one runs now.)"""
    from .marimo_host import cell_running

    return _cells["started"], _cells["running"] > 0 or cell_running()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def comm_while_awaiting(kernel: Any) -> bool:
    """True when ``kernel``'s shell receiver dispatches comm messages without waiting for a
    running cell (see the module docstring for what is read)."""
    receiver = getattr(type(kernel), "shell_main", None)
    code = getattr(receiver, "__code__", None)
    if code is None:
        return False
    sets = [c for c in code.co_consts if isinstance(c, frozenset)]
    names = set(code.co_names)
    return any(s >= _COMM_TYPES for s in sets) and {"dispatch_shell", "_main_asyncio_lock"} <= names


def page_after_run(environ: Any = os.environ) -> str | None:
    """The name of the host when this kernel serves a page drawn only after the whole notebook
    has run (Voilà's default mode), else None."""
    software = str(environ.get("SERVER_SOFTWARE", ""))
    if software.startswith("voila/") or "VOILA_PREHEAT" in environ:
        return "Voilà"
    return None


def loop_between_cells(ip: Any) -> bool:
    """True when async cells run on a loop that keeps running after the cell returns."""
    kernel = getattr(ip, "kernel", None)
    if kernel is None:
        return False
    try:
        from IPython.core.async_helpers import _asyncio_runner
    except ImportError:
        return False
    return getattr(ip, "loop_runner", None) is _asyncio_runner


def probe(ip: Any) -> Host:
    """Look at ``ip`` (an IPython shell) once; remembered as :func:`current`."""
    global _current
    kernel = getattr(ip, "kernel", None)
    if kernel is None:
        label = f"no kernel ({type(ip).__name__})"
    else:  # the module's own attribute: package metadata costs milliseconds per lookup
        found = getattr(sys.modules.get("ipykernel"), "__version__", None) or _version("ipykernel")
        label = f"ipykernel {found or '?'} ({type(kernel).__name__})"
    comm = kernel is not None and comm_while_awaiting(kernel)
    loop = loop_between_cells(ip)
    page = page_after_run() if kernel is not None else None
    mode: Mode = "live" if comm and page is None else "background" if loop else "suspend"
    forced = False
    wanted = os.environ.get(MODE_ENV, "").strip().lower()
    if wanted in MODES:
        mode, forced = wanted, True
    _current = Host(label, kernel is not None, comm, loop, mode, forced, page=page)
    events = getattr(ip, "events", None)
    if events is not None and _cell_started not in events.callbacks.get("pre_run_cell", []):
        events.register("pre_run_cell", _cell_started)
        events.register("post_run_cell", _cell_ended)
    return _current


def current() -> Host | None:
    """The host found by the last :func:`probe` (``%load_ext``). Without ``%load_ext``, the
    running IPython shell is probed now (``lf.nb`` used directly), or a marimo notebook's
    kernel recognised; None elsewhere."""
    if _current is None:
        from . import marimo_host

        if marimo_host.running():  # first: an IPython shell may exist in marimo's process too
            return probe_marimo()
    if _current is None and "IPython" in sys.modules:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is not None:
            return probe(ip)
    return _current


def probe_marimo() -> Host:
    """The host of a marimo notebook (see the module docstring); remembered as :func:`current`."""
    global _current
    from . import marimo_host

    mode: Mode = "background"
    wanted = os.environ.get(MODE_ENV, "").strip().lower()
    forced = wanted in MODES
    if forced:
        mode = wanted  # type: ignore[assignment]
    _current = Host(marimo_host.label(), True, False, True, mode, forced, marimo=True)
    return _current


def approval_mode() -> Mode:
    """How ``%%lf agent --approve ask`` waits for a person here (``live`` outside IPython:
    there a policy is awaited by the caller's own code)."""
    host = current()
    return host.mode if host is not None else "live"


_MEANING: dict[Mode, str] = {
    "live": (
        "approvals: live. A `%%lf agent` cell waits at the prompt; click Approve or Deny "
        "and the run continues in the same cell. Kernel > Interrupt or Cancel run stops it."
    ),
    "background": (
        "approvals: background. A `%%lf agent` cell that may ask returns at once with the run's "
        "handle and the run goes on between cells, where a click reaches Python on every "
        "kernel. Click Approve or Deny in its prompt while no cell runs; `run = _` in the next "
        "cell names the handle, `await run` (or the -o variable) gives the answer. Cancel run, "
        "`%lf cancel` or `run.cancel()` stop it (Kernel > Interrupt stops the running cell only)."
    ),
    "suspend": (
        "approvals: suspend. Nothing runs between cells here, so a run that needs a decision "
        "stops, is saved under .langfx_nb/runs/, and `%lf resume --approve ID` continues it."
    ),
}


# marimo has no `%%lf` cells and no `_`: a run is started and named in Python
_MARIMO_BACKGROUND = (
    "approvals: background. marimo hands a click to Python only between cells, so a run that "
    "may ask goes on between cells: `run = lf.nb.background(agent.invoke(session), "
    "widgets=[policy.widget])` as a cell's last expression shows its prompt; click Approve or "
    "Deny while no cell runs, then `await run` (in a cell run after the click) gives the "
    "answer. Cancel run or `run.cancel()` stop it."
)


_PAGE_AFTER_RUN = (
    "drawn only after the whole notebook has run, so no cell can wait for a click here; "
    "a prompt appears with the page and its click reaches the run going on in the background"
)


# marimo has no `%lf resume`: the suspended run is a RunState the notebook continues in Python
_MARIMO_SUSPEND = (
    "approvals: suspend. A run that needs a decision stops instead of asking: `state = await "
    'agent.invoke(session, on_approval="suspend")` (with no ask policy) returns its RunState, '
    "and `await lf.Agent.resume(state, {call_id: lf.Approve()}, tools=[...], lm=lm)` (or "
    "`lf.Deny(note)`) continues it."
)


# a page drawn after the notebook ran (the `page:` line says why): nobody runs another cell
_PAGE_BACKGROUND = (
    "approvals: background. A `%%lf agent` cell that may ask returns at once and its run goes "
    "on in the background. Nobody runs another cell on this page: click Approve or Deny in the "
    "prompt on the page, and the trace below it follows the run (its Agent row holds the "
    "answer). Cancel run stops it."
)


def meaning(mode: Mode) -> str:
    """What ``mode`` means for a person: how a tool approval waits, and what to do."""
    host = current()
    if host is not None and host.marimo and mode == "background":
        return _MARIMO_BACKGROUND
    if host is not None and host.marimo and mode == "suspend":
        return _MARIMO_SUSPEND
    if host is not None and host.page is not None and mode == "background":
        return _PAGE_BACKGROUND
    return _MEANING[mode]


def doctor_text(host: Host | None = None) -> str:
    """What ``%lf doctor`` prints: what was found, what was patched, what it means."""
    host = host or current()
    if host is None:
        return "langfx_nb: not loaded in IPython (run %load_ext langfx_nb)\n"
    lines = [f"kernel: {host.kernel}; python {sys.version.split()[0]}"]
    versions = ((name, _version(name)) for name in _PACKAGES)
    lines.append("packages: " + ", ".join(f"{k} {v}" for k, v in versions if v is not None))
    yes = {True: "yes", False: "no"}
    lines.append(f"widget messages handled while a cell awaits: {yes[host.comm_while_awaiting]}")
    lines.append(f"asyncio loop runs between cells: {yes[host.loop_between_cells]}")
    if host.page is not None:
        lines.append(f"page: {host.page}, {_PAGE_AFTER_RUN}")
    if host.patches:
        done = ", ".join(f"{k} {'installed' if v else 'skipped'}" for k, v in host.patches.items())
        lines.append(f"kernel patches: {done}")
    forced = f" (chosen by ${MODE_ENV})" if host.forced else ""
    lines.append(meaning(host.mode) + forced)
    if host.mode != "live" and host.in_kernel:
        query = "lf.query" if host.marimo else "%%lf query"
        lines.append(
            f"Everything else works here: {query}, streaming, the trace explorer, batch "
            "and evaluation views."
        )
    return "\n".join(lines) + "\n"


def why_not_live(host: Host | None = None) -> str:
    """Why a cell cannot wait for a click here, in words for the person who would click."""
    host = host or current()
    if host is not None and host.page is not None:
        return f"{host.page} draws the page only after the whole notebook has run"
    kernel = host.kernel if host is not None else "this kernel"
    return f"{kernel} hands clicks to Python only between cells"


def explain_no_click(tool: str, call_id: str, timeout: float, *, in_cell: bool = False) -> str:
    """The truthful reason a live prompt got no answer from any page in ``timeout`` s
    (``in_cell``: a running cell awaited the prompt, not a background run)."""
    host = current()
    where = f" on {host.kernel}" if host is not None else ""
    if host is not None and host.marimo and in_cell:  # only with approval mode live forced
        return (
            f"no answer reached the approval prompt for tool {tool!r} (call {call_id}) within "
            f"{timeout:g} s{where}, so the call was denied (fail closed): marimo hands a click "
            "(and the page's note that it drew the prompt) to Python only after the running "
            f"cell ends, and this cell awaited the prompt (approval mode {host.mode}). Unset "
            f"${MODE_ENV} (marimo's mode is background) or start the run with `run = "
            "lf.nb.background(agent.invoke(session), widgets=[policy.widget])`."
        )
    if host is not None and host.marimo:
        return (
            f"no page acknowledged the approval prompt for tool {tool!r} (call {call_id}) within "
            f"{timeout:g} s of idle time{where}, so the call was denied (fail closed). marimo "
            "draws a widget only where a cell outputs it: start the run with `run = "
            "lf.nb.background(agent.invoke(session), widgets=[policy.widget])` as the cell's "
            "last expression, and click while no cell runs."
        )
    kernel = (
        ""
        if host is not None and host.comm_while_awaiting
        else " or this kernel may not pass a click to a waiting cell (%lf doctor tells which)"
    )
    return (
        f"no notebook page acknowledged the approval prompt for tool {tool!r} (call {call_id}) "
        f"within {timeout:g} s{where}, so the call was denied (fail closed). The page may not "
        f"draw widgets (nbconvert, nbval, a closed tab){kernel}. For unattended runs use "
        "--approve deny | allow:TOOLS (ApprovalPolicy(mode='deny') or mode='allow'); to decide "
        "later, %%lf agent --suspend."
    )
