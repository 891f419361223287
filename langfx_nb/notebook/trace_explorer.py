"""TraceExplorer: a live (or offline) collapsible tree of a Session's trace.

Core trace events (``node_start`` / ``node_update`` / ``node_end`` / ``log``) become flat node
patches ``{"op": "node", "id": ..., <fields>}`` with the core's own field names, which the JS
merges into its store. Approval is read from the tool-call node itself (status ``waiting``,
then its decision record), never from log text. The view renders only the rows on screen, so
10,000 nodes stay smooth; the static copy is drawn from the same records (``trace_rows``).
A trace too large for the page to hold is shown through windows of rows (``trace_windows``):
a saved one from its stored trace (``agentic/trace_db.py``: a ``save_trace`` file or a run
manifest opened in place, a large JSON trace converted into a temporary one), a live one
from its :class:`LiveIndex`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..agentic.trace_db import StoredTrace, convert, is_store
from ..agentic.trace_json import regular_file
from ..agentic.trace_reader import LIVE
from .bridge import Clock, EventBridge, MessageKind, to_jsonable
from .render import (
    WidgetDisplayMixin,
    trace_html,
    trace_index_html,
    trace_index_text,
    trace_text,
)
from .trace_data import read_trace, view_node
from .trace_live import LiveIndex, row_patch
from .trace_windows import LIVE_PUSH_S as LIVE_PUSH_S
from .trace_windows import LIVE_STATE_S as LIVE_STATE_S
from .trace_windows import LIVE_VIEWS as LIVE_VIEWS
from .trace_windows import LiveWindows, window_params, with_timeline

__all__ = ["TraceExplorer", "TraceReducer", "read_trace"]

_STATIC = Path(__file__).parent / "static"

SUMMARY_EVENT = "_session_summary"  # synthetic: the explorer's own end-of-run totals
#: Above this many nodes a trace is shown through windows (the page holds what it shows);
#: below it the page gets every node summary and works on its own.
WINDOW_NODES = 20_000
#: A trace JSON file at least this large is converted into a stored trace as a stream
#: (bounded memory, a progress line), not read whole.
BIG_FILE_BYTES = 4 << 20

# What a tree row, the roll-ups and the search need. Snapshots (the state trait, a reload)
# carry only these; the detail pane asks the kernel for the rest of a node when selected.
SUMMARY_KEYS = frozenset(
    {
        "id",
        "parent_id",
        "kind",
        "name",
        "status",
        "start",
        "end",
        "usage",
        "cost",
        "error",
        "evicted_children",
        "hint",
    }
)
# The decision record's fields a row needs (the human wait); the rest comes with the details.
DECISION_SUMMARY = frozenset({"outcome", "by", "asked_at", "decided_at"})


def summarize(node: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in node.items() if k in SUMMARY_KEYS}
    decision = node.get("decision")
    if isinstance(decision, Mapping):
        out["decision"] = {k: v for k, v in decision.items() if k in DECISION_SUMMARY}
        complete = len(out["decision"]) == len(decision)
    else:
        complete = "decision" not in node
    if len(out) < len(node) or not complete:
        out["partial"] = True
    return out


def node_patch(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The node patch (``{"id", <fields>}``, as the views keep records) of a core trace
    event, or ``None`` for an event that changes no node record."""
    kind = event.get("type", "")
    if kind == "node_update":
        changes = event.get("changes")
        if not isinstance(changes, Mapping) or event.get("node_id") is None:
            return None
        node = view_node({k: v for k, v in changes.items() if k != "delta"})
        if not node:
            return None  # streamed text only: shown by StreamView, not stored in the trace
        node["id"] = str(event["node_id"])
        return node
    if kind in ("node_start", "node_end", "log"):
        body = event.get("node")
        if not isinstance(body, Mapping) or body.get("id") is None:
            return None
        return view_node(body)
    return None


class TraceReducer:
    """Cumulative trace state: node records by id in arrival order, as the core wrote them."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.summary: dict[str, Any] | None = None  # session totals from a saved trace
        self.offset: float | None = None  # wall-clock seconds minus trace seconds
        #: The trace is over (a saved trace, a disposed session): nothing in it runs any more.
        self.ended = False

    def load(self, nodes: Iterable[dict[str, Any]], *, ended: bool = False) -> None:
        """Adopt node records (they become the reducer's own). ``ended``: a saved trace or a
        disposed session, where a node recorded as running never finished."""
        self.ended = self.ended or ended
        for node in nodes:
            current = self.nodes.get(node["id"])
            if current is None:
                self.nodes[node["id"]] = node
            else:
                current.update(node)

    def _merge(self, patch: dict[str, Any]) -> dict[str, Any]:
        node_id = patch["id"]
        current = self.nodes.get(node_id)
        if current is None:
            self.nodes[node_id] = current = {"id": node_id}
        current.update(patch)
        return current

    def apply(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type", "")
        if kind == SUMMARY_EVENT:  # session totals (tokens, cost), sent when a run ends
            self.summary = to_jsonable(event.get("summary"))
            return [{"op": "summary", "summary": self.summary}]
        node = node_patch(event)
        if node is None:
            return []
        self._merge(dict(node))
        return [{"op": "node", **node}]

    def is_run_end(self, event: Mapping[str, Any]) -> bool:
        """A node directly under the session root (or the root itself) finished."""
        if event.get("type") != "node_end" or not isinstance(event.get("node"), Mapping):
            return False
        parent = event["node"].get("parent_id")
        return parent is None or self.nodes.get(str(parent), {}).get("kind") == "session"

    def snapshot(self) -> dict[str, Any]:
        """The state the live view starts from: node summaries, ``ended``, totals and the
        clock offset."""
        out: dict[str, Any] = {"nodes": [summarize(n) for n in self.nodes.values()]}
        if self.ended:
            out["ended"] = True
        if self.summary is not None:
            out["summary"] = self.summary
        if self.offset is not None:
            out["offset"] = self.offset
        return out


def _encode(state: Mapping[str, Any]) -> bytes:
    return json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _clock_offset(data: Mapping[str, Any], nodes: list[dict[str, Any]]) -> float | None:
    """Wall-clock (epoch) seconds minus trace seconds, from the session's creation time and
    its root node's start, so trace times can be shown as local times."""
    header = data.get("session")
    created = header.get("created_at") if isinstance(header, Mapping) else None
    root = next((n for n in nodes if n.get("kind") == "session"), None)
    if (
        not isinstance(created, str)
        or root is None
        or not isinstance(root.get("start"), float | int)
    ):
        return None
    try:
        epoch = _dt.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return epoch - float(root["start"])


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
    # The cumulative state as UTF-8 JSON bytes: ipywidgets ships bytes as one binary buffer
    # instead of walking (and re-encoding) a 10,000-node structure on every publish.
    state = traitlets.Bytes(b"").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    # What the reader chose (selection, expanded rows, filter, timeline, pane sizes): written
    # by the view, kept by the kernel and in saved widget state, so a reload restores it.
    view_state = traitlets.Dict().tag(sync=True)
    # set before a saved trace is read: a bad one raises, and the half-built widget is closed
    _unsubscribe: Callable[[], Any] | None = None
    _index: StoredTrace | None = None
    _session: Any = None

    def __init__(
        self,
        source: Any = None,
        *,
        title: str = "",
        interval: float = 0.05,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        self._reducer = TraceReducer()
        #: A live trace grown past ``WINDOW_NODES``: its rows, kept exact event by event, and
        #: the windows pushed to the views that asked (first: a half-built widget is closed).
        self._windows = LiveWindows(
            send=self._send_message,
            snapshot=self._send_live_snapshot,
            publish=self._publish_live_state,
            extras=self._live_extras,
            clock=clock,
        )
        #: A saved trace too large for the page to hold: the page asks for windows of rows.
        self._index = None
        initial = b""
        source = _source(source)
        if source is not None and not hasattr(source, "subscribe"):
            saved = _saved(source)
            if isinstance(saved, StoredTrace):
                self._index = saved
                _adopt_index(self._reducer, saved)
            else:
                self._adopt(saved, ended=True)
            initial = _encode({**self._initial_state(), "seq": 0})
        # the saved trace travels with the widget's opening message (one message, not two)
        super().__init__(title=title, state=initial or b"", **kwargs)
        self._bridge = EventBridge(
            self._send_message,
            _Fold(self._fold, self._state_now),
            on_state=self._set_state,
            interval=interval,
            clock=clock,
        )
        self._run_task: asyncio.Task[Any] | None = None
        self.on_msg(self._on_view_message)
        if source is not None and hasattr(source, "subscribe"):
            self.watch(source)

    @property
    def _live(self) -> LiveIndex | None:
        return self._windows.live

    def _initial_state(self) -> dict[str, Any]:
        index = self._index
        if index is None:
            return self._reducer.snapshot()
        out = {"windowed": index.window(start=0, count=200), **self._live_extras()}
        span = index.span()
        if span is not None:
            out["span"] = list(span)
        return out

    # -- public ---------------------------------------------------------------------------------

    def watch(self, session: Any) -> None:
        """Show ``session``'s trace so far, then follow its live events."""
        self._adopt_session(session)
        if len(self._reducer.nodes) > WINDOW_NODES:
            self._go_windowed()
        self._bridge.publish_now()
        self._subscribe(session)

    def _adopt_session(self, session: Any) -> None:
        """Show ``session``'s trace so far (a copy: a live session's records keep changing;
        a disposed or loaded session runs nothing any more)."""
        self._session = session
        trace_json = getattr(session, "trace_json", None)
        if callable(trace_json):
            raw = trace_json()
            data = json.loads(raw) if isinstance(raw, str) else to_jsonable(raw)
            self._adopt(data, ended=_session_over(session))

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
        reducer = TraceReducer()
        index: StoredTrace | None = None
        source = _source(source)
        session = source if hasattr(source, "subscribe") else None
        if session is None:
            saved = _saved(source)  # raises before anything is replaced
            if isinstance(saved, StoredTrace):
                index = saved
                _adopt_index(reducer, index)
        self._stop_following()
        if self._index is not None:
            self._index.close()
        self._windows.reset()  # a live window of the old source: gone with it
        self._reducer, self._index, self._session, self._run_task = reducer, index, None, None
        # the explorer's own fold: a shown session that grows past WINDOW_NODES goes windowed
        seq = self._bridge.replace(_Fold(self._fold, self._state_now))
        if session is not None:
            self._adopt_session(session)
        elif not isinstance(saved, StoredTrace):
            self._adopt(saved, ended=True)
        self._send_show(seq, title, dict(view_state) if view_state is not None else {})
        if session is not None:
            self._subscribe(session)
        self._refresh_displays()

    def _send_show(self, seq: int, title: str | None, view: dict[str, Any]) -> None:
        """The state now to the views on screen (first) and the traits; ``view``: the
        reader's choices afresh."""
        encoded = _encode({**self._initial_state(), "seq": seq})
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

    def _adopt(self, data: Mapping[str, Any], *, ended: bool) -> None:
        """Take the nodes, totals and clock offset of trace JSON as the core writes it."""
        nodes = [view_node(n, plain=True) for n in data.get("nodes") or ()]
        self._reducer.offset = _clock_offset(data, nodes)
        self._reducer.load(nodes, ended=ended)
        self._reducer.summary = _summary(data)

    def push(self, event: Mapping[str, Any]) -> None:
        """Feed one core event (the Session observer). Never raises into the caller."""
        try:
            if event.get("type") == "node_start":  # the task running the watched session
                with contextlib.suppress(RuntimeError):
                    task = asyncio.current_task()
                    if task is not None:
                        self._run_task = task
            self._bridge.push(event)
            if self._is_run_end(event):  # the run is over: show the truth now
                self.flush()
        except Exception:  # an observer must never break the run it watches
            pass

    def flush(self) -> None:
        """Send pending events now, publish the state and refresh the static fallback."""
        session = self._session
        if session is not None:
            with contextlib.suppress(Exception):  # totals are a nicety; never break the run
                summary = session.usage_summary.to_json()
                self._bridge.push({"type": SUMMARY_EVENT, "summary": summary})
        self._bridge.flush()
        self._windows.flush()
        self._refresh_displays()

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """Every node record (for a trace shown through windows, read back from the file;
        for a live one, the row values of each node)."""
        live = self._live
        if live is not None:
            return [live.summary(i) for i in range(len(live))]
        index = self._index
        if index is not None:
            return [view_node(r, plain=True) for r in index.records()]
        return list(self._reducer.nodes.values())

    @property
    def windowed(self) -> bool:
        """The page holds only the rows it shows (a trace of more than ``WINDOW_NODES``)."""
        return self._index is not None or self._live is not None

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
        self._windows.cancel()
        self._stop_following()
        super().close()

    # -- fallbacks ------------------------------------------------------------------------------

    def _fallback_html(self) -> str:
        windowed = self._live or self._index
        if windowed is not None:
            return trace_index_html(windowed, title=self.title)
        return trace_html(self.nodes, title=self.title, ended=self._reducer.ended)

    def _fallback_text(self) -> str:
        windowed = self._live or self._index
        if windowed is not None:
            return trace_index_text(windowed, title=self.title)
        return trace_text(self.nodes, title=self.title, ended=self._reducer.ended)

    def _static_html(self) -> str:
        # The copy is what a reader sees once the kernel is gone: drawn from the records the
        # live view gets, with the labels the live view shows when its kernel is gone. A trace
        # too large to list gets a bounded copy (summary, counts, first rows, "N more").
        windowed = self._live or self._index
        if windowed is not None:
            return trace_index_html(windowed, title=self.title)
        reducer = self._reducer
        nodes = list(reducer.nodes.values())
        return trace_html(
            nodes, title=self.title, ended=reducer.ended, gone=True, offset=reducer.offset
        )

    def _session_finished(self) -> bool:
        return _session_over(self._session)

    def cancel(self, reason: str = "the run was cancelled from the trace explorer") -> bool:
        """Cancel the run this explorer watches (as its Cancel-run button does)."""
        from . import control

        if control.cancel(reason, session=self._session):
            return True
        task = self._run_task
        live = self._live
        if live is not None:
            held = sum(live.by_status.get(s, 0) for s in LIVE)
            running = held > live.roots_running()
        else:
            running = any(
                n.get("status") in LIVE and n.get("kind") != "session"
                for n in self._reducer.nodes.values()
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

    def _set_state(self, state: dict[str, Any]) -> None:
        self.state = _encode(state)

    def _send_message(self, message: dict[str, Any]) -> None:
        if self.comm is not None:
            self.send(message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.CANCEL.value:
            self.cancel()
            return
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.WINDOW_REQUEST.value:
            self._send_window(content)
            return
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.DETAIL_REQUEST.value:
            node = self._reducer.nodes.get(str(content.get("id")))
            if node is None and self._live is not None:
                node = self._live_record(str(content.get("id")))
            if node is None and self._index is not None:
                node = self._index_record(str(content.get("id")))
            if node is not None:
                self._send_message(
                    {"kind": MessageKind.DETAIL.value, "id": node["id"], "node": node}
                )
            return
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.SYNC.value:
            if self._live is not None:
                self._windows.send_snapshot()
                return
            if self._index is not None:
                return  # the state trait holds the first window; the page asks for the rest
            if content.get("seq") == self._bridge.seq and self._bridge.is_current:
                return  # the view already has exactly this state (e.g. a saved trace)
            message = self._bridge.snapshot_message()
            state = message.pop("state")
            if self.comm is not None:
                self.send(message, buffers=[_encode(state)])

    def _index_record(self, node_id: str) -> dict[str, Any] | None:
        """A windowed trace's record, read strictly: a malformed one is shown as its row
        with what is wrong (the rest of the trace stays open)."""
        index = self._index
        assert index is not None
        try:
            return index.record(node_id)
        except ValueError as exc:
            row = {k: v for k, v in (index.summary(node_id) or {}).items() if k != "partial"}
            return {**row, "id": node_id, "malformed": str(exc)}

    def _send_window(self, content: Mapping[str, Any]) -> None:
        """Answer a page's window request (see ``trace_windows.window_params``) with ``{kind:
        window, req, start, total, nodes, rows, counts, matches?, timeline?}`` (``timeline``:
        the overview's exact counts per time bucket over the whole trace, see
        ``trace_timeline``). A live trace remembers each view's last request and pushes the
        same window again, with what changed, as events arrive (``live: true``; see
        :class:`LiveWindows`)."""
        index: StoredTrace | LiveIndex | None = self._live or self._index
        if index is None:
            return
        params = window_params(content)
        if params is None:
            return
        if self._live is not None:
            self._windows.answer(content.get("req"), str(content.get("view", "")), params)
            return
        window = with_timeline(index, params)
        self._send_message({"kind": MessageKind.WINDOW.value, "req": content.get("req"), **window})

    # -- a live trace shown through windows ------------------------------------------------------

    def _fold(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The bridge's reducer: a live trace's records until it grows past ``WINDOW_NODES``,
        then its :class:`LiveIndex` (no per-event patches: windows are pushed instead)."""
        live = self._live
        if live is None:
            patches = self._reducer.apply(event)
            if len(self._reducer.nodes) > WINDOW_NODES:
                self._go_windowed()
                return []
            return patches
        if event.get("type") == SUMMARY_EVENT:
            self._reducer.summary = to_jsonable(event.get("summary"))
        else:
            patch = row_patch(event)
            if patch is None:
                return []
            live.apply(patch)
        self._windows.changed()
        return []

    def _state_now(self) -> dict[str, Any]:
        if self._live is None:
            return self._reducer.snapshot()
        return self._windows.state()

    def _is_run_end(self, event: Mapping[str, Any]) -> bool:
        live = self._live
        if live is None:
            return self._reducer.is_run_end(event)
        node = event.get("node")
        if event.get("type") != "node_end" or not isinstance(node, Mapping):
            return False
        parent = live.pos.get(str(node.get("parent_id")))
        return node.get("parent_id") is None or (
            parent is not None and live.kind[parent] == "session"
        )

    def _go_windowed(self) -> None:
        """The live trace outgrew what the page holds whole: keep its rows in a
        :class:`LiveIndex` (the records stay in the session), show the page its first window."""
        live = LiveIndex()
        for node in self._reducer.nodes.values():
            live.apply(node)
        self._reducer.nodes = {}
        self._windows.live = live
        self._bridge.drop_pending()
        self._windows.send_snapshot()

    def _live_extras(self) -> dict[str, Any]:
        reducer = self._reducer
        out: dict[str, Any] = {"ended": reducer.ended or _session_over(self._session)}
        if reducer.summary is not None:
            out["summary"] = reducer.summary
        if reducer.offset is not None:
            out["offset"] = reducer.offset
        return out

    def _send_live_snapshot(self, state: dict[str, Any]) -> None:
        """The windowed state as a snapshot message, to the views on screen."""
        self._bridge.seq += 1
        if self.comm is not None:
            message = {"kind": MessageKind.SNAPSHOT.value, "seq": self._bridge.seq}
            self.send(message, buffers=[_encode(state)])

    def _publish_live_state(self, state: dict[str, Any]) -> None:
        self.state = _encode({**state, "seq": self._bridge.seq})

    def _live_record(self, node_id: str) -> dict[str, Any] | None:
        """A live windowed node's full record from the session (it keeps the newest
        ``max_trace_nodes``), else its row values, labelled as such."""
        live = self._live
        assert live is not None
        i = live.pos.get(node_id)
        if i is None:
            return None
        session = self._session
        node = session.find(node_id) if session is not None and hasattr(session, "find") else None
        if node is not None:
            return view_node(node.to_json())
        row = {k: v for k, v in live.summary(i).items() if k != "partial"}
        row["details"] = (
            "no longer held by the session (it keeps its newest max_trace_nodes nodes): "
            "what the row shows is all there is"
        )
        return row


class _Fold:
    """The explorer's bridge reducer: its ``apply`` and ``snapshot`` are the explorer's own
    fold of an event and state now (bound methods, so the bridge needs no explorer)."""

    def __init__(
        self,
        apply: Callable[[Mapping[str, Any]], list[dict[str, Any]]],
        snapshot: Callable[[], dict[str, Any]],
    ) -> None:
        self.apply = apply
        self.snapshot = snapshot


def _adopt_index(reducer: TraceReducer, index: StoredTrace) -> None:
    """A stored trace's totals and clock offset, from its header and session root."""
    reducer.ended = True
    reducer.summary = _summary(index.header)
    start = index.root_start()
    reducer.offset = (
        None
        if start is None
        else _clock_offset(index.header, [{"kind": "session", "start": start}])
    )


def _source(source: Any) -> Any:
    """What a ``BatchResult`` shows: its run manifest, else (no ``run=``) its session."""
    run_path = getattr(source, "run_path", None)
    if run_path is not None:
        return run_path
    if hasattr(source, "batch_node_id") and hasattr(source, "session"):
        return source.session
    return source


def _saved(source: Any) -> StoredTrace | dict[str, Any]:
    """A saved trace as the explorer shows it: a stored trace when the page should not get
    it whole (see :func:`_stored`; a trace of more than ``WINDOW_NODES`` read whole is
    converted too), else its data, read strictly."""
    stored = _stored(source)
    if stored is not None:
        return stored
    data = read_trace(source)
    return convert(data) if len(data.get("nodes") or ()) > WINDOW_NODES else data


def _stored(source: Any) -> StoredTrace | None:
    """``source`` as a stored trace when it names a file the page should not get whole: a
    stored trace or a run manifest (opened in place), or a trace JSON file of
    ``BIG_FILE_BYTES`` or more (converted, with a progress line, into a temporary store
    that lives as long as the explorer shows it). ``None``: read it whole."""
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
