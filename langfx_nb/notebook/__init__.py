"""``lf.nb``: the notebook layer — magics, live widgets and rich display.

This is the only package that imports IPython, ipywidgets or anywidget; ``import langfx_nb``
never loads it (``lf.nb`` imports it on first access). ``%load_ext langfx_nb`` calls
``load_ipython_extension`` below.

Widget classes are re-exported from their own modules (``TraceExplorer``, ``ApprovalPolicy``,
``StreamView``, ``EvalReportView`` ...) and imported when first used, so the magics stay
usable and quick to load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..batch.progress import set_default_reporter
from ..eval.report import set_live_view, set_report_view

# imported here, not lazily: a function named as its module would be replaced on the package by
# the module once anything imported `langfx_nb.notebook.background` (`lf.nb.background(...)`
# then called a module)
from .background import BackgroundRun, background
from .control import cancel
from .kernel_state import NotebookState, export, in_kernel, state, use
from .markdown import MarkdownText

if TYPE_CHECKING:
    from ..agentic.session import Session
    from ..agentic.trace_db import save_trace
    from ..batch.progress import BatchProgress, Reporter
    from .approval import ApprovalPolicy, ApprovalWidget
    from .batch_view import BatchView
    from .bridge import EventBridge
    from .eval_report import EvalReportView
    from .stream_view import StreamView
    from .trace_explorer import TraceExplorer

__all__ = [
    "ApprovalPolicy",
    "ApprovalWidget",
    "BackgroundRun",
    "BatchView",
    "EvalReportView",
    "EventBridge",
    "MarkdownText",
    "NotebookState",
    "StreamView",
    "TraceExplorer",
    "background",
    "cancel",
    "doctor",
    "export",
    "load_ipython_extension",
    "save_trace",
    "state",
    "use",
]

# name → module (relative to this package) for the widget classes, imported on first access.
_LAZY = {
    "ApprovalPolicy": ".approval",
    "ApprovalWidget": ".approval",
    "BatchView": ".batch_view",
    "EvalReportView": ".eval_report",
    "EventBridge": ".bridge",
    "StreamView": ".stream_view",
    "TraceExplorer": ".trace_explorer",
    "save_trace": "..agentic.trace_db",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name], __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def batch_reporter(session: Session, first: BatchProgress) -> Reporter | None:
    """``lf.batch``'s default reporter once the notebook layer is loaded: a live
    ``BatchView`` in the running cell inside a kernel; None elsewhere, which leaves the core's
    text bar (the view's module is not even imported then)."""
    if not in_kernel():
        return None
    from .batch_view import notebook_reporter

    return notebook_reporter(session, first)


# The core never imports this package; the hook goes the other way: loading the notebook layer
# (``lf.nb``, ``%load_ext langfx_nb``) makes notebook batches show the live view.
set_default_reporter(batch_reporter)


def eval_report_view(value: Any) -> Any:
    """An ``lf.eval`` report or comparison as its widget (``Report.widget``)."""
    from .eval_report import EvalReportView

    return EvalReportView(value)


set_report_view(eval_report_view)


def eval_live_view(name: str, trials: int) -> Any:
    """The view ``lf.eval.run`` fills in live: an ``EvalReportView`` displayed in the
    running cell inside a kernel; None elsewhere (the view's module is not imported then)."""
    if not in_kernel():
        return None
    from .eval_report import live_report

    return live_report(name, trials)


set_live_view(eval_live_view)


def doctor() -> None:
    """Print what ``%lf doctor`` prints (the kernel found, what it can do, how approvals wait
    here and what to do): for marimo, which has no magics. ``hosts.doctor_text()`` returns
    the same text."""
    from .hosts import doctor_text

    print(doctor_text(), end="")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext langfx_nb``: the ``%%lf`` transformer and magic, and rich display, on any
    IPython shell. What the kernel can do is probed here (``hosts``); the kernel patches
    install only where the probe found the layout they were written against, and approvals
    take the mode it allows (``%lf doctor`` says which)."""
    from . import control, hosts, kernel_comm, kernel_parent
    from .magics import register

    register(ipython)
    host = hosts.probe(ipython)
    if host.comm_while_awaiting:
        # the race of a concurrent comm dispatch that can leave an async cell at [*]
        host.patches["parent pin"] = kernel_parent.install(ipython) is not None
        # a reloaded page gets its widgets while a cell awaits
        host.patches["comm_info while awaiting"] = kernel_comm.install(ipython)
    host.patches["interrupt route"] = control.install(ipython)  # cancellations: one line
    try:
        render = importlib.import_module(".render", __name__)
    except ImportError:
        return
    register_formatters = getattr(render, "register_formatters", None)
    if register_formatters is not None:
        register_formatters(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext langfx_nb``: remove the transformer (the magic stays registered)."""
    from .cells import transform_lf_cell

    cleanup = ipython.input_transformers_cleanup
    while transform_lf_cell in cleanup:
        cleanup.remove(transform_lf_cell)
