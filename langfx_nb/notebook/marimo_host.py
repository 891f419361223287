"""marimo: what differs when the notebook layer runs inside a marimo notebook.

marimo runs cells in its own kernel: there is no IPython shell and no Jupyter comm. It draws
anywidget models (each opens a marimo comm) and no other widget, so every view here is an
anywidget, and a composite view draws its parts inside its own output. Its kernel handles a
widget message (a click) in the same control loop that runs cells, one request at a time, so a
click reaches Python only between cells; its asyncio loop keeps running between cells
(background tasks are not starved), so tool approvals take the ``background`` mode.

Nothing here imports marimo: these run only where it is already imported (its kernel).
"""

from __future__ import annotations

import html
import importlib
import sys
from typing import Any

__all__ = ["cell_running", "label", "running", "show", "stack"]


def running() -> bool:
    """True inside a marimo notebook's kernel (edit or app mode)."""
    mo = sys.modules.get("marimo")
    if mo is None:
        return False
    try:
        return bool(mo.running_in_notebook())
    except Exception:  # an old or partial marimo: not a host we know
        return False


def cell_running() -> bool:
    """True while a marimo cell executes (marimo's runtime context holds the cell's execution
    context then); False outside marimo, or where that context cannot be read."""
    if "marimo" not in sys.modules:
        return False
    try:
        context = importlib.import_module("marimo._runtime.context").safe_get_context()
    except Exception:
        return False
    return getattr(context, "execution_context", None) is not None


def label() -> str:
    """``marimo 0.25.2 (marimo kernel)``: what ``%lf doctor`` and the messages name."""
    version = getattr(sys.modules.get("marimo"), "__version__", "?")
    return f"marimo {version} (marimo kernel)"


def show(widget: Any) -> None:
    """Append ``widget`` to the running cell's output (what ``display`` does in Jupyter);
    outside a running cell (a background task) there is no output to add to: nothing."""
    sys.modules["marimo"].output.append(widget)


def stack(text: str, widgets: list[Any]) -> Any:
    """One line of ``text`` above ``widgets``, as one marimo output (``_display_``)."""
    mo: Any = sys.modules["marimo"]
    head = mo.Html(f'<div class="lfx-run-note">{html.escape(text)}</div>')
    return mo.vstack([head, *widgets])
