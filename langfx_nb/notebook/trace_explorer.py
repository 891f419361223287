"""TraceExplorer: a live (or offline) collapsible tree of a Session's trace.

The page never holds the tree: it asks the kernel for the window of rows on screen
(:func:`window_params`), answered by ``WindowedTrace.window`` of a stored trace or of a live
session's :class:`LiveIndex`. A live explorer pushes each view's last window again as events
arrive (at most ``LIVE_VIEWS`` views, ``LIVE_PUSH_S`` apart per view) and copies the state a
reloaded page starts from at most every ``LIVE_STATE_S`` and when the last run going ends
(:meth:`TraceExplorer.flush`). The static copy (``render.trace_html``) has the same rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import math
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
from .bridge import Clock, MessageKind, Timer, to_jsonable
from .render import WidgetDisplayMixin, trace_html, trace_text
from .trace_live import LiveIndex, index_of, row_patch, view_node

__all__ = ["LIVE_PUSH_S", "LIVE_STATE_S", "LIVE_VIEWS", "TraceExplorer"]

#: A trace JSON file at least this large shows a progress line while it is converted.
BIG_FILE_BYTES = 4 << 20
LIVE_PUSH_S = 1 / 16  # at least this long between two pushes to one live view
LIVE_VIEWS = 4  # views kept up to date at once (the ones that asked last)
LIVE_STATE_S = 1.0  # at least this long between two copies of the state trait while live


def _encode(state: Any) -> bytes:
    """``state`` as JSON the page's ``JSON.parse`` reads: a number that is not finite (a
    damaged trace's ``1e999``) is ``null``, a lone surrogate (an emoji a model's text cut in
    two) is written as its escape."""
    try:
        text = json.dumps(state, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # not finite: rare, so the state is walked only then
        return _encode(_finite(state))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(state, separators=(",", ":")).encode("ascii")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _clock_offset(header: Mapping[str, Any], root_start: Any) -> float | None:
    """Wall-clock (epoch) seconds minus trace seconds, from the session's creation time and
    its root node's start, so trace times can be shown as local times."""
    session = header.get("session")
    created = session.get("created_at") if isinstance(session, Mapping) else None
    if not isinstance(created, str) or not isinstance(root_start, float | int):
        return None
    with contextlib.suppress(ValueError):
        return _dt.datetime.fromisoformat(created).timestamp() - float(root_start)
    return None


def _session_over(session: Any) -> bool:
    """The session's root node has ended (disposed, or loaded from a file): nothing runs."""
    root = getattr(session, "root", None)
    return getattr(root, "status", "running") != "running"


class TraceExplorer(WidgetDisplayMixin, anywidget.AnyWidget):
    """Live tree of a Session (subscribes to its events) or a saved trace (offline).

    ``source`` is a ``Session``, a saved trace (dict, JSON text, or a path to a trace file),
    a stored trace (``lf.save_trace``'s file) or a batch's run manifest (the path of
    ``lf.batch(run=...)``'s SQLite file, or its ``BatchResult``), windowed from the file. A
    ``BatchResult`` without a manifest shows its session. A trace whose rows cannot be read
    raises ``ValueError`` naming what is wrong; a node record the core's strict reader
    rejects is named as such when its detail is opened.
    """

    _esm = Path(__file__).parent / "static" / "trace_explorer.js"
    # The state a page starts from (first window, totals, time span) as UTF-8 JSON: one buffer
    state = traitlets.Bytes(b"").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    # What the reader chose (selection, expanded rows, filter, timeline, pane sizes): written
    # by the view, kept by the kernel and in saved widget state, so a reload restores it.
    view_state = traitlets.Dict().tag(sync=True)

    def __init__(
        self, source: Any = None, *, title: str = "", clock: Clock | None = None, **kwargs: Any
    ) -> None:
        # (set before a saved trace is read: a bad one raises, and the half-built widget closes)
        self._trace: StoredTrace | LiveIndex = LiveIndex()
        self._session: Any = None
        self._unsubscribe: Callable[[], Any] | None = None
        self._timer: Timer | None = None  # the pending live push
        self._timer_at = 0.0  # when it fires (``_now()`` time)
        self._summary: dict[str, Any] | None = None  # the session's totals
        self._offset: float | None = None
        self._ended = False
        self._clock = clock
        self._seq = 0  # bumped by each new state sent (a page keeps the newest)
        self._viewers: dict[str, tuple[Any, dict[str, Any]]] = {}  # view: its last (req, params)
        self._dirty = self._state_due = False  # the views' windows, the state trait: to send
        self._last_push = self._last_state = float("-inf")
        self._spacing = LIVE_PUSH_S
        self._loop: tuple[asyncio.AbstractEventLoop, int] | None = None  # that folds events
        #: each node directly under the session root still open: the task that started it
        self._runs: dict[str, asyncio.Task[Any]] = {}
        stored, session = _open(source)
        initial = b""  # (a saved trace's: sent with the widget's opening message)
        if stored is not None:
            self._adopt(stored, None)
            initial = _encode({**self._state_now(), "seq": 0})
        super().__init__(title=title, state=initial, **kwargs)
        self.on_msg(self._on_view_message)
        if session is not None:
            self.watch(session)

    def watch(self, session: Any) -> None:
        """Show ``session``'s trace so far in place of what this explorer showed (which it
        stops following), then follow the session's live events."""
        self._adopt(None, session)
        self._send_snapshot()

    def show(
        self, source: Any, *, title: str | None = None, view_state: Mapping[str, Any] | None = None
    ) -> None:
        """Show ``source`` (what the constructor takes: a ``Session``, followed live, or a
        saved trace) in this explorer in place of what it showed, in the views already on
        screen: no new widget, so the page redraws at once. ``title`` replaces the title when
        given; ``view_state`` (``selected``, ``expanded``, ``query``, ``view``) replaces the
        reader's choices, which otherwise start afresh. A malformed saved trace raises
        ``ValueError`` and the explorer keeps showing what it showed."""
        stored, session = _open(source)  # raises before anything goes
        if stored is None and session is None:
            raise ValueError("not a langfx_nb trace: nothing to show")
        self._seq += 1
        self._adopt(stored, session)
        view = dict(view_state) if view_state is not None else {}
        encoded = _encode({**self._state_now(), "seq": self._seq})
        if self.comm is not None:  # the views on screen swap first; the traits follow
            message = {
                "kind": MessageKind.SHOW.value,
                "seq": self._seq,
                "title": self.title if title is None else title,
                "view_state": view,
            }
            self.send(message, buffers=[encoded])
        with self.hold_sync():
            if title is not None:
                self.title = title
            self.view_state = view
            self.state = encoded
        self._refresh_displays()

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

    def flush(self) -> None:
        """Copy the state now (what a reloaded page and :attr:`snapshot` show), with the
        session's totals; push the views their windows (paced as events are; at once with no
        event loop to pace them); refresh the static copy. Called when the last run going ends."""
        session = self._session
        if session is not None:
            with contextlib.suppress(Exception):  # totals are a nicety; never break the run
                self._summary = to_jsonable(session.usage_summary.to_json())
        if isinstance(self._trace, LiveIndex):
            self._publish()
            self._changed()
            if self._dirty and self._timer is None:  # no event loop to push it later
                self._tick(final=True)
        self._refresh_displays()

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """Every node's row values (a stored trace: its records, read back from the file)."""
        trace = self._trace
        if isinstance(trace, StoredTrace):
            return [view_node(r, plain=True) for r in trace.records()]
        return [trace.summary(i) for i in range(len(trace))]

    @property
    def snapshot(self) -> dict[str, Any]:
        """The state the synced trait holds, decoded (what a reloaded page starts from)."""
        return json.loads(self.state) if self.state else {}

    def cancel(self, reason: str = "the run was cancelled from the trace explorer") -> bool:
        """Cancel the run this explorer watches (as its Cancel-run button does): the runs
        ``lf.nb`` tracks for its session, else each task that started a node directly under
        the session root that is still open (a whole ``lf.batch``, an agent run, a query).
        Plain asyncio cancellation: the awaiting caller gets ``CancelledError``. Returns
        whether anything was cancelled."""
        from . import control

        if control.cancel(reason, session=self._session):
            return True
        tasks = {task for task in self._runs.values() if not task.done()}
        for task in tasks:
            task.get_loop().call_soon_threadsafe(control.cancel_task, task, reason)
        return bool(tasks)

    def close(self) -> None:
        self._let_go()
        super().close()

    def _adopt(self, stored: StoredTrace | None, session: Any) -> None:
        """Show ``stored``, or ``session``'s trace so far (its rows: the records stay in the
        session, which answers the detail pane), followed live. What was shown goes, with its
        pending push and the views that asked for its windows (the pacing stays)."""
        self._let_go()
        self._viewers, self._session, self._runs = {}, session, {}
        if stored is not None:
            self._trace, self._ended, header = stored, True, stored.header
            root_start = stored.root_start()
        else:  # (JSON data: the session's trace holds previews only)
            header = session.trace_json()
            nodes = header["nodes"]
            root_start = next((n.get("start") for n in nodes if n.get("kind") == "session"), None)
            self._trace, self._ended = index_of(nodes, header), _session_over(session)
            handle = session.subscribe(self.push)
            self._unsubscribe = handle if callable(handle) else None
        summary = header.get("summary")
        self._summary = to_jsonable(summary) if isinstance(summary, Mapping) else None
        self._offset = _clock_offset(header, root_start)

    def _let_go(self) -> None:
        """Stop following the session, close a stored trace's file, drop the pending push."""
        if self._unsubscribe is not None:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            unsubscribe()
        if isinstance(self._trace, StoredTrace):
            self._trace.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _extras(self) -> dict[str, Any]:
        """What the state (and a live window) carries besides rows: whether the trace ended,
        its time span, the session's totals, the clock offset."""
        out: dict[str, Any] = {"ended": self._ended or _session_over(self._session)}
        span = self._trace.span()
        if span is not None:
            out["span"] = list(span)
        if self._summary is not None:
            out["summary"] = self._summary
        if self._offset is not None:
            out["offset"] = self._offset
        return out

    def _reply(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The window for ``params`` (see :func:`window_params`), with the timeline overview's
        exact counts per time bucket over the whole trace when asked; a live one with its
        running roots, ``live: true`` and the extras."""
        trace = self._trace
        out = trace.window(**{k: v for k, v in params.items() if k != "timeline"})
        if "timeline" in params:
            lo, hi, buckets = params["timeline"]
            if lo is None or hi is None:
                lo, hi = trace.span() or (0.0, 0.0)
            out["timeline"] = trace.timeline(lo, hi, buckets)
        if isinstance(trace, LiveIndex):
            out.update(roots_running=trace.roots_running(), live=True, **self._extras())
        return out

    def _state_now(self) -> dict[str, Any]:
        """The state a page starts from: the first window and the extras."""
        return {"windowed": self._reply({}), **self._extras()}

    def _record(self, node_id: str) -> dict[str, Any] | None:
        """A node's full record: a stored one read strictly (a malformed one is its row with
        what is wrong: the rest of the trace stays open); a live one from the session (it
        keeps its newest ``max_trace_nodes``), else its row values, labelled as such."""
        trace = self._trace
        if isinstance(trace, StoredTrace):
            try:
                return trace.record(node_id)
            except ValueError as exc:
                return {**(trace.summary(node_id) or {}), "id": node_id, "malformed": str(exc)}
        i = trace.locate(node_id)
        if i is None:
            return None
        node = self._session.find(node_id)  # (a live trace's nodes are its session's)
        if node is not None:
            return view_node(node.to_json())
        row = trace.summary(i)
        row["details"] = (
            "no longer held by the session (it keeps its newest max_trace_nodes nodes): "
            "what the row shows is all there is"
        )
        return row

    def _fallback_html(self, *, ended: bool = False) -> str:
        """The trace as HTML (bounded: counts, first rows with their details, "N more")."""
        ended = ended or self._ended or self._unsubscribe is None
        return trace_html(
            self._trace, title=self.title, record=self._record, offset=self._offset, ended=ended
        )

    def _fallback_text(self) -> str:
        return trace_text(self._trace, title=self.title, ended=self._ended)

    def _static_html(self) -> str:  # once the kernel is gone, nothing shown can still run
        return self._fallback_html(ended=True)

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
        elif kind == MessageKind.SYNC.value and isinstance(self._trace, LiveIndex):
            self._send_snapshot()  # (a stored trace's first window is in the state)

    def _send_window(self, content: Mapping[str, Any]) -> None:
        """Answer a page's window request (see :meth:`_reply`). A live trace remembers each
        view's last request, to push it again as events arrive (see :meth:`_tick`)."""
        params = window_params(content)
        if params is None:
            return
        req = content.get("req")
        if isinstance(self._trace, LiveIndex):
            view = str(content.get("view", ""))
            self._viewers.pop(view, None)
            self._viewers[view] = (req, params)
            while len(self._viewers) > LIVE_VIEWS:
                self._viewers.pop(next(iter(self._viewers)))
        self._send_message({"kind": MessageKind.WINDOW.value, "req": req, **self._reply(params)})

    def _take(self, event: Mapping[str, Any]) -> None:
        try:
            kind, node = event.get("type"), event.get("node")
            node_id = str(node.get("id")) if isinstance(node, Mapping) else ""
            if kind == "node_start" and self._is_run(node):  # a run starts: remember its task
                with contextlib.suppress(RuntimeError):
                    task = asyncio.current_task()
                    if task is not None:
                        self._runs[node_id] = task
            live = self._trace
            if isinstance(live, LiveIndex) and (patch := row_patch(event)) is not None:
                live.apply(patch)
                self._changed()
            root = isinstance(node, Mapping) and node.get("parent_id") is None
            if kind == "node_end" and (root or self._is_run(node)):
                self._runs.pop(node_id, None)
                if root or not self._runs:  # all over: show the truth now
                    self.flush()
                else:  # other runs go on: a copy of the state, paced as pushes are
                    self._state_due = True
        except Exception:  # an observer must never break the run it watches
            pass

    def _is_run(self, node: Any) -> bool:
        """``node`` (an event's) is a run: a node directly under the session root."""
        live = self._trace
        parent = node.get("parent_id") if isinstance(node, Mapping) else None
        if not isinstance(live, LiveIndex) or parent is None:
            return False
        at = live.locate(str(parent))
        return at is not None and live.kind[at] == "session"

    def _send_snapshot(self) -> None:
        """The live state as a snapshot message (a view that (re)rendered) and, at most
        every ``LIVE_STATE_S``, as the state trait (a page reload)."""
        self._seq += 1
        state = self._state_now()
        if self.comm is not None:
            message = {"kind": MessageKind.SNAPSHOT.value, "seq": self._seq}
            self.send(message, buffers=[_encode(state)])
        self._state_due = True
        wait = LIVE_STATE_S - (self._now() - self._last_state)
        if wait <= 0:
            self._publish(state)
        else:
            self._schedule(wait)

    def _publish(self, state: dict[str, Any] | None = None) -> None:
        self._state_due = False
        self._last_state = self._now()
        self.state = _encode({**(state or self._state_now()), "seq": self._seq})

    def _changed(self) -> None:
        """Something changed: push the views' windows when the spacing allows."""
        self._dirty = True
        self._schedule(self._last_push + self._spacing - self._now())

    def _now(self) -> float:
        return time.monotonic() if self._clock is None else self._clock.time()

    def _schedule(self, delay: float) -> None:
        """Have :meth:`_tick` run in ``delay`` seconds, or sooner if it is due sooner already:
        a state copy due later never holds back a push."""
        delay = max(0.0, delay)
        at = self._now() + delay
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
            self._timer = None
        clock: Clock | asyncio.AbstractEventLoop | None = self._clock
        if clock is None:
            try:
                clock = asyncio.get_running_loop()
            except RuntimeError:  # no event loop to fire a timer: a push when due, and
                if delay <= 0:  # what is left when the run ends (flush)
                    self._tick(final=True)
                return
        self._timer = clock.call_later(delay, self._tick)
        self._timer_at = at

    def _tick(self, *, final: bool = False) -> None:
        """Push each live view its window again (one message per view), then the state trait
        when due. The next push waits ``LIVE_PUSH_S`` per view, and at least three times
        what this one cost the kernel, so live updates take at most a quarter of it."""
        self._timer = None
        if not isinstance(self._trace, LiveIndex):
            return
        started = time.perf_counter()
        if self._dirty:
            self._dirty = False
            kind = MessageKind.WINDOW.value
            for view, (req, params) in (self._viewers or {"": (0, {})}).items():
                self._send_message({"kind": kind, "req": req, "view": view, **self._reply(params)})
        now = self._now()
        self._last_push = now
        cost = time.perf_counter() - started
        self._spacing = max(LIVE_PUSH_S * max(1, len(self._viewers)), 3 * cost)
        if self._state_due:
            wait = LIVE_STATE_S - (now - self._last_state)
            if wait <= 0 or final:
                self._publish()
            else:
                self._schedule(min(wait, self._spacing))  # pushes go on meanwhile


def window_params(content: Mapping[str, Any]) -> dict[str, Any] | None:
    """The window a page's request asks for (``{req, start, count, query, expanded,
    selected, view?, timeline?: [lo, hi, buckets]}``), as ``WindowedTrace.window``'s
    arguments plus ``timeline`` (``lo`` and ``hi`` both ``None``: the whole trace, as it is
    when answered; an invalid one is left out); ``None`` for a request whose ``start`` or
    ``count`` is not a number."""
    raw = content.get("expanded")
    expanded = {
        e[0]: bool(e[1])
        for e in (raw if isinstance(raw, list) else ())
        if isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)
    }
    query, selected = content.get("query"), content.get("selected")
    try:
        start, count = int(content.get("start", 0)), int(content.get("count", 200))
    except (TypeError, ValueError):
        return None
    params: dict[str, Any] = {
        "start": start,
        "count": count,
        "expanded": expanded,
        "query": query if isinstance(query, str) else "",
        "selected": selected if isinstance(selected, str) else None,
    }
    timeline = content.get("timeline")
    if isinstance(timeline, list) and len(timeline) == 3 and type(timeline[2]) is int:
        lo, hi, buckets = timeline
        if lo is None and hi is None:
            params["timeline"] = (None, None, buckets)
        elif all(type(v) in (int, float) and math.isfinite(v) for v in (lo, hi)) and lo <= hi:
            params["timeline"] = (float(lo), float(hi), buckets)
    return params


def _open(source: Any) -> tuple[StoredTrace | None, Any]:
    """What ``source`` shows: ``(stored trace, None)`` or ``(None, session or None)``. A
    ``BatchResult`` shows its run manifest, else (no ``run=``) its session. A stored trace or a
    run manifest is opened in place; other saved traces (data, JSON text, the path of a trace
    JSON file) are converted by the core's one reader (``trace_db.convert``: a file as a
    stream, in bounded memory) into a temporary store that lives as long as it is shown."""
    if getattr(source, "run_path", None) is not None:
        source = source.run_path
    elif hasattr(source, "batch_node_id") and hasattr(source, "session"):
        source = source.session
    if source is None or hasattr(source, "subscribe"):
        return None, source
    if isinstance(source, str | os.PathLike) and is_store(source):
        from ..batch.run_trace import open_trace

        return open_trace(Path(source)), None
    return convert(source, _progress_line(source)), None


def _progress_line(source: Any) -> Callable[[int, int], None]:
    """How far the conversion of a file of ``BIG_FILE_BYTES`` or more is, as one line on
    standard error (at most twice a second, and 100% once: the file may be read ahead of the
    records parsed)."""
    last = 0.0

    def show(done: int, size: int) -> None:
        nonlocal last
        now = time.monotonic()
        if last >= 0 and size >= BIG_FILE_BYTES and (now - last >= 0.5 or done >= size):
            last, end = (now, "") if done < size else (-1.0, "\n")  # 100% shown once
            share = 100 * done // max(1, size)
            name = Path(source).name
            sys.stderr.write(f"\rreading {name}: {share}% of {size / 1e6:,.0f} MB{end}")
            sys.stderr.flush()

    return show
