"""BatchView: the live progress of one ``lf.batch`` run in a notebook.

``lf.batch`` hands a reporter frozen ``BatchProgress`` snapshots (``update`` at most about four
times a second, ``close`` once at the end; ``langfx_nb/batch/progress.py``). The view turns each
snapshot into one ``progress`` patch; the bridge coalesces them (a pending patch is replaced by
the newer one) and sends at most one comm message per ``interval`` (0.25 s), so however many
items finish, the page gets a few messages a second, never one per item.

An error group's button asks the kernel to open the group's items: the view's ``explorer`` trait
then holds a :class:`TraceExplorer` of those item nodes (and what ran under them), which the page
draws inside the view, below the counts (one anywidget output, which every host draws). The
explorer is made once, when the first error is reported (while the batch's cell runs: marimo
can make a widget only inside a running cell, never in a click's handler), and reused by every
group. Error messages are model or tool text: shown as text, never HTML.

The notebook layer registers :func:`notebook_reporter` with ``set_default_reporter`` (the core
never imports this package); it makes a view only inside a Jupyter kernel, so a terminal keeps
the core's text bar.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets
from ipywidgets import widget_serialization

from ..batch.progress import BatchProgress, stopped_note
from . import control
from .bridge import BridgedView, Clock, EventBridge, MessageKind, to_jsonable
from .render import WidgetDisplayMixin, batch_html, batch_text
from .trace_explorer import TraceExplorer
from .trace_live import subtrace

if TYPE_CHECKING:
    from ..agentic.session import Session

__all__ = ["BatchReducer", "BatchView", "batch_status", "notebook_reporter"]

_STATIC = Path(__file__).parent / "static"

PROGRESS = "progress"  # event: {"type": "progress", "progress": BatchProgress | its JSON}
OPEN = "open"  # event: {"type": "open", "error": class | None, "open_error": str}


def batch_status(progress: Mapping[str, Any]) -> str:
    """``running`` until the batch ends; then, when every item settled, ``done`` (none
    failed), ``some failed`` or ``failed`` (every item failed); else ``stopped`` (cancelled
    or raised with items not run)."""
    if not progress.get("finished"):
        return "running"
    done, failed = int(progress.get("done") or 0), int(progress.get("failed") or 0)
    if done + failed < int(progress.get("total") or 0):
        return "stopped"
    if not failed:
        return "done"
    return "failed" if not done else "some failed"


def _progress_json(progress: Any) -> dict[str, Any]:
    data = progress.to_json() if isinstance(progress, BatchProgress) else to_jsonable(progress)
    if not isinstance(data, dict):
        raise TypeError(f"a BatchProgress or its JSON, not {type(progress).__name__}")
    return {**data, "status": batch_status(data), "note": stopped_note(data)}


class BatchReducer:
    """The view's state: the last snapshot, plus which error group's traces are open."""

    def __init__(self, title: str = "") -> None:
        self.title = title
        self.progress: dict[str, Any] = {}
        self.opened: str | None = None
        self.open_error = ""

    def apply(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == PROGRESS:
            self.progress = _progress_json(event.get("progress"))
            return [{"op": "progress", "progress": dict(self.progress)}]
        if kind == OPEN:
            error = event.get("error")
            self.opened = None if error is None else str(error)
            self.open_error = str(event.get("open_error") or "")
            return [{"op": "open", "type": self.opened, "open_error": self.open_error}]
        return []

    def snapshot(self) -> dict[str, Any]:
        return {
            **self.progress,
            "title": self.title,
            "opened": self.opened,
            "open_error": self.open_error,
        }

    def group(self, error: str) -> Mapping[str, Any] | None:
        for group in self.progress.get("errors") or ():
            if isinstance(group, Mapping) and group.get("type") == error:
                return group
        return None


def _coalesce(patch: Mapping[str, Any]) -> Hashable | None:
    """A newer snapshot supersedes a pending one; so does a newer open/close of a group."""
    return str(patch.get("op"))


class BatchView(BridgedView, WidgetDisplayMixin, anywidget.AnyWidget):
    """Live progress of a batch: a reporter (``update`` / ``close``) and a widget.

    ``lf.batch`` makes one automatically in a notebook; pass ``progress=BatchView(session=s)``
    to keep a handle (display it later: the display shows the last snapshot). ``session``
    is where the items' trace nodes live (what an error group's button opens).
    """

    _esm = _STATIC / "batch_view.js"
    state = traitlets.Dict().tag(sync=True)
    # The TraceExplorer of the error group the reader opened (None: none open).
    explorer = traitlets.Instance(TraceExplorer, allow_none=True).tag(
        sync=True, **widget_serialization
    )

    def __init__(
        self,
        *,
        session: Session | None = None,
        progress: BatchProgress | Mapping[str, Any] | None = None,
        title: str = "",
        interval: float = 0.25,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.session = session
        self._reducer = BatchReducer(title)
        self._bridge = EventBridge(
            self._send_message,
            self._reducer,
            on_state=self._set_state,
            interval=interval,
            clock=clock,
            coalesce=_coalesce,
        )
        self._spare: TraceExplorer | None = None  # what a group opens in (``_prepare``)
        if progress is not None:
            self._reducer.apply({"type": PROGRESS, "progress": progress})
            self._prepare()
        self.state = {**self._reducer.snapshot(), "seq": 0}
        self.on_msg(self._on_view_message)

    # -- the reporter protocol ------------------------------------------------------------------

    def update(self, progress: BatchProgress | Mapping[str, Any]) -> None:
        """A new snapshot (the batch calls this a few times a second)."""
        self._bridge.push({"type": PROGRESS, "progress": progress})
        self._prepare()

    def close(self, progress: BatchProgress | Mapping[str, Any] | None = None) -> None:
        """The final snapshot: sent at once, and the static copy shows the final counts.

        (Also ``Widget.close``'s name: called without a snapshot it closes the widget.)"""
        if progress is None:
            if self._spare is not None:
                self._spare.close()
            super().close()
            return
        self._bridge.push({"type": PROGRESS, "progress": progress})
        self._prepare()
        self.flush()
        note = self._reducer.progress.get("note")
        if note:  # interrupted: the cell shows one line saying what was lost, no traceback
            control.explain_cancellation(f"lf.batch {note}")

    def flush(self) -> None:
        self._bridge.flush()
        self._refresh_displays()

    @property
    def progress(self) -> dict[str, Any]:
        """The last snapshot as JSON data (``BatchProgress.to_json()`` plus ``status``)."""
        return dict(self._reducer.progress)

    @property
    def status(self) -> str:
        return batch_status(self._reducer.progress)

    # -- error groups -----------------------------------------------------------------------------

    def open_group(self, error: str | None) -> TraceExplorer | None:
        """Show the traces of the items that failed with ``error`` (an exception class name)
        below the counts, as the group's button does; ``None`` hides them. Returns the
        explorer (the view's one, reused), or None when the session no longer holds any of the
        group's item nodes."""
        if error is None:
            self.explorer = None
            self._bridge.push({"type": OPEN, "error": None})
        else:
            explorer, why = self._group_explorer(error)
            self.explorer = explorer
            self._bridge.push({"type": OPEN, "error": error, "open_error": why})
        self._bridge.flush()
        return self.explorer

    def _prepare(self) -> None:
        """Make the explorer groups open in once the batch reports an error (see the module)."""
        if self._spare is None and self._reducer.progress.get("errors"):
            with contextlib.suppress(Exception):  # a view must never break the run it watches
                self._spare = TraceExplorer(title="traces")

    def _group_explorer(self, error: str) -> tuple[TraceExplorer | None, str]:
        """The explorer showing ``error``'s items, or None and why not."""
        group = self._reducer.group(error)
        session = self.session
        gone = f"the traces of the {error} items are no longer held"
        if group is None or session is None:
            return None, gone
        node_ids = [str(i) for i in group.get("node_ids") or () if i is not None]
        data = subtrace(session, node_ids)
        if data is None:
            return None, gone
        shown = sum(1 for i in node_ids if session.find(i) is not None)
        count = int(group.get("count") or 0)
        name = self._reducer.progress.get("name") or "batch"
        more = f" (first {shown} of {count})" if count > shown else ""
        ids = [n["id"] for n in data["nodes"]]  # the ancestors and the items, opened
        try:
            if self._spare is None:
                self._spare = TraceExplorer(title="traces")
            self._spare.show(
                data,
                title=f"{name} · {error} items{more}",
                view_state={"expanded": [[i, True] for i in ids]},
            )
        except Exception as exc:  # the page gets a reason, the kernel keeps running
            return None, f"could not show the traces here: {type(exc).__name__}: {exc}"[:300]
        return self._spare, ""

    # -- fallbacks --------------------------------------------------------------------------------

    def _fallback_html(self) -> str:
        return batch_html(self._reducer.snapshot())

    def _fallback_text(self) -> str:
        return batch_text(self._reducer.snapshot())

    # -- plumbing ---------------------------------------------------------------------------------

    def _set_state(self, state: dict[str, Any]) -> None:
        self.state = state

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, Mapping):
            return
        kind = content.get("kind")
        if kind == MessageKind.OPEN_GROUP.value:
            error = content.get("type")
            self.open_group(None if error is None else str(error))
        elif kind == MessageKind.SYNC.value:
            self._answer_sync(content)


def notebook_reporter(session: Session, first: BatchProgress) -> BatchView | None:
    """The default reporter in a Jupyter kernel: a :class:`BatchView`, displayed in the
    running cell. Anywhere else (terminal IPython, a script) None: the core's text bar."""
    from .kernel_state import in_kernel

    if not in_kernel():
        return None
    view = BatchView(session=session, progress=first)
    view._ipython_display_()
    return view
