"""TraceExplorer: a live (or offline) collapsible tree of a Session's trace.

The page never holds the tree: it asks the kernel for the window of rows on screen, and every
trace answers through the one ``WindowedTrace.window`` (``agentic/trace_reader.py``): a saved
trace from its stored trace (``agentic/trace_db.py``: a ``save_trace`` file or a run manifest
opened in place, a JSON trace converted into a temporary one), a live session from its
:class:`LiveIndex`, kept exact event by event and pushed to the views as it changes
(``trace_windows``). Approval is read from the tool-call node itself (status ``waiting``, then
its decision record), never from log text. The detail pane asks the kernel for a node's full
record; the static copy is drawn from the first rows of the same windows (``render.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..agentic.trace_db import StoredTrace, convert, is_store
from ..agentic.trace_json import regular_file
from ..agentic.trace_reader import LIVE
from .bridge import Clock, MessageKind, to_jsonable
from .render import WidgetDisplayMixin, trace_html, trace_text
from .trace_data import read_trace, view_node
from .trace_live import LiveIndex, index_of, row_patch
from .trace_windows import LiveWindows, window_params, with_timeline

__all__ = ["TraceExplorer", "read_trace"]

_STATIC = Path(__file__).parent / "static"

#: A trace JSON file at least this large is converted into a stored trace as a stream
#: (bounded memory, a progress line), not read whole first.
BIG_FILE_BYTES = 4 << 20


def _encode(state: Mapping[str, Any]) -> bytes:
    return json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _clock_offset(header: Mapping[str, Any], root_start: Any) -> float | None:
    """Wall-clock (epoch) seconds minus trace seconds, from the session's creation time and
    its root node's start, so trace times can be shown as local times."""
    session = header.get("session")
    created = session.get("created_at") if isinstance(session, Mapping) else None
    if not isinstance(created, str) or not isinstance(root_start, float | int):
        return None
    try:
        epoch = _dt.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return epoch - float(root_start)


def _session_over(session: Any) -> bool:
    """The session's root node has ended (disposed, or loaded from a file): nothing runs."""
    root = getattr(session, "root", None)
    return getattr(root, "status", "running") != "running"


def _summary(data: Mapping[str, Any]) -> dict[str, Any] | None:
    summary = data.get("summary")
    return to_jsonable(summary) if isinstance(summary, Mapping) else None


class TraceExplorer(WidgetDisplayMixin, anywidget.AnyWidget):
    """Live tree of a Session (subscribes to its events) or a saved trace (offline).

    ``source`` is a ``Session``, a saved trace (dict, JSON text, or a path to a trace file),
    read strictly: a malformed one raises ``ValueError`` naming what is wrong; a stored trace
    (``lf.save_trace``'s file) or a batch's run manifest (the path of ``lf.batch(run=...)``'s
    SQLite file, or its ``BatchResult``), windowed from the file. A ``BatchResult`` without a
    manifest shows its session.
    """

    _esm = _STATIC / "trace_explorer.js"
    # The state a page starts from (its first window, totals, the time span) as UTF-8 JSON
    # bytes: ipywidgets ships bytes as one binary buffer.
    state = traitlets.Bytes(b"").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    # What the reader chose (selection, expanded rows, filter, timeline, pane sizes): written
    # by the view, kept by the kernel and in saved widget state, so a reload restores it.
    view_state = traitlets.Dict().tag(sync=True)
    # set before a saved trace is read: a bad one raises, and the half-built widget is closed
    _unsubscribe: Callable[[], Any] | None = None
    _index: StoredTrace | None = None
    _session: Any = None
    #: a stored trace's copy (it never changes): (title, ended, html)
    _copied: tuple[str, bool, str] | None = None

    def __init__(
        self,
        source: Any = None,
        *,
        title: str = "",
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        #: What the trace shows besides rows: session totals, the clock offset, whether over.
        self._summary: dict[str, Any] | None = None
        self._offset: float | None = None
        self._ended = False
        #: A live trace's rows, kept exact event by event, and the windows pushed to the
        #: views that asked (first: a half-built widget is closed).
        self._windows = LiveWindows(
            send=self._send_message,
            snapshot=self._send_live_snapshot,
            publish=self._publish_live_state,
            extras=self._extras,
            clock=clock,
        )
        self._windows.live = LiveIndex()  # nothing shown yet: an empty live trace
        source = _source(source)
        session = source if hasattr(source, "subscribe") else None
        if source is not None and session is None:
            self._adopt_stored(_saved(source))
        # a saved trace travels with the widget's opening message (one message, not two)
        initial = _encode({**self._state_now(), "seq": 0}) if self._index is not None else b""
        super().__init__(title=title, state=initial, **kwargs)
        self._clock = clock
        self._seq = 0  # bumped by each new state sent (a page keeps the newest)
        #: the event loop (and its thread) that folds events: another thread's are handed over
        self._loop: tuple[asyncio.AbstractEventLoop, int] | None = None
        self._run_task: asyncio.Task[Any] | None = None
        self.on_msg(self._on_view_message)
        if session is not None:
            self.watch(session)

    @property
    def _live(self) -> LiveIndex | None:
        return self._windows.live

    def _adopt_stored(self, index: StoredTrace) -> None:
        """Show a stored trace: its totals and clock offset from its header and root."""
        self._index, self._windows.live, self._ended = index, None, True
        self._summary = _summary(index.header)
        self._offset = _clock_offset(index.header, index.root_start())

    def _state_now(self) -> dict[str, Any]:
        """The state a page starts from: the first window, the extras and the time span."""
        index = self._index
        if index is None:
            return self._windows.state()
        out = {"windowed": index.window(start=0, count=200), **self._extras()}
        span = index.span()
        if span is not None:
            out["span"] = list(span)
        return out

    # -- public ---------------------------------------------------------------------------------

    def watch(self, session: Any) -> None:
        """Show ``session``'s trace so far, then follow its live events."""
        self._adopt_session(session)
        self._windows.send_snapshot()
        self._subscribe(session)

    def _adopt_session(self, session: Any) -> None:
        """Show ``session``'s trace so far (its rows: the records stay in the session, which
        answers the detail pane; a disposed or loaded session runs nothing any more)."""
        if self._index is not None:  # watched after showing a stored trace
            self._index.close()
        self._index, self._session, self._windows.live = None, session, LiveIndex()
        trace_json = getattr(session, "trace_json", None)
        if not callable(trace_json):
            return
        raw = trace_json()
        data = json.loads(raw) if isinstance(raw, str) else to_jsonable(raw)
        nodes = data.get("nodes") or ()
        root: Mapping[str, Any] = next((n for n in nodes if n.get("kind") == "session"), {})
        self._windows.live = index_of(nodes)
        self._ended = _session_over(session)
        self._offset = _clock_offset(data, root.get("start"))
        self._summary = _summary(data)

    def _subscribe(self, session: Any) -> None:
        handle = session.subscribe(self.push)
        if callable(handle):
            self._unsubscribe = handle
        elif hasattr(session, "unsubscribe"):
            self._unsubscribe = lambda: session.unsubscribe(self.push)

    def _stop_following(self) -> None:
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            finally:
                self._unsubscribe = None

    def show(
        self,
        source: Any,
        *,
        title: str | None = None,
        view_state: Mapping[str, Any] | None = None,
    ) -> None:
        """Show ``source`` (what the constructor takes: a ``Session``, followed live, or a
        saved trace) in this explorer in place of what it showed, in the views already on
        screen: no new widget, so the page redraws at once. ``title`` replaces the title when
        given; ``view_state`` (``selected``, ``expanded``, ``query``, ``view``) replaces the
        reader's choices, which otherwise start afresh. A malformed saved trace raises
        ``ValueError`` and the explorer keeps showing what it showed."""
        source = _source(source)
        session = source if hasattr(source, "subscribe") else None
        saved = _saved(source) if session is None else None  # raises before anything goes
        self._stop_following()
        if self._index is not None:
            self._index.close()
        self._windows.reset()  # a live window of the old source: gone with it
        self._index, self._session, self._run_task, self._copied = None, None, None, None
        self._summary, self._offset, self._ended = None, None, False
        self._seq += 1
        seq = self._seq
        if saved is not None:
            self._adopt_stored(saved)
        else:
            self._adopt_session(session)
        self._send_show(seq, title, dict(view_state) if view_state is not None else {})
        if session is not None:
            self._subscribe(session)
        self._refresh_displays()

    def _send_show(self, seq: int, title: str | None, view: dict[str, Any]) -> None:
        """The state now to the views on screen (first) and the traits; ``view``: the
        reader's choices afresh."""
        encoded = _encode({**self._state_now(), "seq": seq})
        if self.comm is not None:  # the views on screen swap first; the traits follow
            message = {
                "kind": MessageKind.SHOW.value,
                "seq": seq,
                "title": self.title if title is None else title,
                "view_state": view,
            }
            self.send(message, buffers=[encoded])
        with self.hold_sync():
            if title is not None:
                self.title = title
            self.view_state = view
            self.state = encoded

    def push(self, event: Mapping[str, Any]) -> None:
        """Feed one core event (the Session observer), folded on the thread of the event loop
        that folded the first one (another thread's events are handed over to that loop).
        Never raises into the caller."""
        if self._clock is None:
            with contextlib.suppress(RuntimeError):  # no running loop here
                if self._loop is None:
                    self._loop = asyncio.get_running_loop(), threading.get_ident()
            if self._loop is not None and self._loop[1] != threading.get_ident():
                loop = self._loop[0]
                if not loop.is_closed():
                    loop.call_soon_threadsafe(self._take, event)
                    return
        self._take(event)

    def _take(self, event: Mapping[str, Any]) -> None:
        try:
            if event.get("type") == "node_start":  # the task running the watched session
                with contextlib.suppress(RuntimeError):
                    task = asyncio.current_task()
                    if task is not None:
                        self._run_task = task
            live = self._live
            if live is not None and (patch := row_patch(event)) is not None:
                live.apply(patch)
                self._windows.changed()
            if self._is_run_end(event):  # the run is over: show the truth now
                self.flush()
        except Exception:  # an observer must never break the run it watches
            pass

    def flush(self) -> None:
        """Push the views and the state now, with the session's totals; refresh the copy."""
        session = self._session
        if session is not None:
            with contextlib.suppress(Exception):  # totals are a nicety; never break the run
                self._summary = to_jsonable(session.usage_summary.to_json())
        self._windows.flush()
        self._refresh_displays()

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """Every node's row values (a stored trace: its records, read back from the file)."""
        index = self._index
        if index is not None:
            return [view_node(r, plain=True) for r in index.records()]
        live = self._live
        return [] if live is None else [live.summary(i) for i in range(len(live))]

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
        self._windows.cancel()
        self._stop_following()
        super().close()

    # -- fallbacks ------------------------------------------------------------------------------

    def _shown(self) -> StoredTrace | LiveIndex:
        shown = self._index or self._live
        assert shown is not None
        return shown

    def _copy(self, *, ended: bool) -> str:
        """The trace as HTML (bounded: counts, first rows with their details, "N more")."""
        index = self._index
        if index is None:
            shown = self._shown()
            return trace_html(
                shown, title=self.title, record=self._record, offset=self._offset, ended=ended
            )
        copied = self._copied
        if copied is None or copied[:2] != (self.title, ended):
            html = trace_html(
                index, title=self.title, record=self._record, offset=self._offset, ended=ended
            )
            self._copied = copied = (self.title, ended, html)
        return copied[2]

    def _fallback_html(self) -> str:
        return self._copy(ended=self._ended or self._unsubscribe is None)

    def _fallback_text(self) -> str:
        return trace_text(self._shown(), title=self.title, ended=self._ended)

    def _static_html(self) -> str:
        # what a reader sees once the kernel is gone: nothing shown can still run
        return self._copy(ended=True)

    def cancel(self, reason: str = "the run was cancelled from the trace explorer") -> bool:
        """Cancel the run this explorer watches (as its Cancel-run button does)."""
        from . import control

        if control.cancel(reason, session=self._session):
            return True
        task = self._run_task
        live = self._live
        running = live is not None and (
            sum(live.by_status.get(s, 0) for s in LIVE) > live.roots_running()
        )
        if task is None or task.done() or not running:
            return False
        loop = task.get_loop()
        loop.call_soon_threadsafe(control.cancel_task, task, reason)
        return True

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def snapshot(self) -> dict[str, Any]:
        """The state the synced trait holds, decoded (what a reloaded page starts from)."""
        return json.loads(self.state) if self.state else {}

    def _send_message(self, message: dict[str, Any]) -> None:
        if self.comm is not None:
            self.send(message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, Mapping):
            return
        kind = content.get("kind")
        if kind == MessageKind.CANCEL.value:
            self.cancel()
        elif kind == MessageKind.WINDOW_REQUEST.value:
            self._send_window(content)
        elif kind == MessageKind.DETAIL_REQUEST.value:
            node = self._record(str(content.get("id")))
            if node is not None:
                self._send_message(
                    {"kind": MessageKind.DETAIL.value, "id": node["id"], "node": node}
                )
        elif kind == MessageKind.SYNC.value and self._index is None:
            self._windows.send_snapshot()  # (a stored trace's first window is in the state)

    def _record(self, node_id: str) -> dict[str, Any] | None:
        """A node's full record: a stored one read strictly (a malformed one is its row with
        what is wrong: the rest of the trace stays open); a live one from the session (it
        keeps its newest ``max_trace_nodes``), else its row values, labelled as such."""
        index = self._index
        if index is not None:
            try:
                return index.record(node_id)
            except ValueError as exc:
                return {**(index.summary(node_id) or {}), "id": node_id, "malformed": str(exc)}
        live = self._live
        i = None if live is None else live.pos.get(node_id)
        if live is None or i is None:
            return None
        session = self._session
        node = session.find(node_id) if session is not None and hasattr(session, "find") else None
        if node is not None:
            return view_node(node.to_json())
        row = live.summary(i)
        row["details"] = (
            "no longer held by the session (it keeps its newest max_trace_nodes nodes): "
            "what the row shows is all there is"
        )
        return row

    def _send_window(self, content: Mapping[str, Any]) -> None:
        """Answer a page's window request (see ``trace_windows.window_params``) with ``{kind:
        window, req, start, total, nodes, rows, counts, matches?, timeline?}`` (``timeline``:
        the overview's exact counts per time bucket over the whole trace). A live trace
        remembers each view's last request and pushes the same window again, with what
        changed, as events arrive (``live: true``; see :class:`LiveWindows`)."""
        params = window_params(content)
        if params is None:
            return
        if self._index is None:
            self._windows.answer(content.get("req"), str(content.get("view", "")), params)
            return
        window = with_timeline(self._index, params)
        self._send_message({"kind": MessageKind.WINDOW.value, "req": content.get("req"), **window})

    # -- a live trace ---------------------------------------------------------------------------

    def _is_run_end(self, event: Mapping[str, Any]) -> bool:
        """A node directly under the session root (or the root itself) finished."""
        live = self._live
        node = event.get("node")
        if live is None or event.get("type") != "node_end" or not isinstance(node, Mapping):
            return False
        parent = live.pos.get(str(node.get("parent_id")))
        return node.get("parent_id") is None or (
            parent is not None and live.kind[parent] == "session"
        )

    def _extras(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ended": self._ended or _session_over(self._session)}
        if self._summary is not None:
            out["summary"] = self._summary
        if self._offset is not None:
            out["offset"] = self._offset
        return out

    def _send_live_snapshot(self, state: dict[str, Any]) -> None:
        """The live state as a snapshot message, to the views on screen."""
        self._seq += 1
        if self.comm is not None:
            message = {"kind": MessageKind.SNAPSHOT.value, "seq": self._seq}
            self.send(message, buffers=[_encode(state)])

    def _publish_live_state(self, state: dict[str, Any]) -> None:
        self.state = _encode({**state, "seq": self._seq})


def _source(source: Any) -> Any:
    """What a ``BatchResult`` shows: its run manifest, else (no ``run=``) its session."""
    run_path = getattr(source, "run_path", None)
    if run_path is not None:
        return run_path
    if hasattr(source, "batch_node_id") and hasattr(source, "session"):
        return source.session
    return source


def _saved(source: Any) -> StoredTrace:
    """A saved trace as a stored trace: opened in place (see :func:`_stored`), else read
    strictly and converted into a temporary one."""
    stored = _stored(source)
    return convert(read_trace(source)) if stored is None else stored


def _stored(source: Any) -> StoredTrace | None:
    """``source`` as a stored trace when it names a file: a stored trace or a run manifest
    (opened in place), or a trace JSON file of ``BIG_FILE_BYTES`` or more (converted, with a
    progress line, into a temporary store that lives as long as the explorer shows it).
    ``None``: read it whole first."""
    if not isinstance(source, str | os.PathLike):
        return None
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return None  # JSON text
    path = Path(source)
    if is_store(path):
        from ..batch.manifest import open_trace

        return open_trace(path)
    regular_file(path)
    if path.stat().st_size < BIG_FILE_BYTES:
        return None
    return convert(path, _ProgressLine(path))


class _ProgressLine:
    """How far a conversion is, as one line on standard error (at most twice a second)."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self.last = 0.0

    def __call__(self, done: int, size: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.5 and done < size:
            return
        self.last = now
        end = "\n" if done >= size else ""
        share = 100 * done // max(1, size)
        sys.stderr.write(f"\rreading {self.name}: {share}% of {size / 1e6:,.0f} MB{end}")
        sys.stderr.flush()
