"""Core events → batched widget messages, plus the cumulative state behind them.

Jupyter Server drops comm traffic above 1,000 messages/s (3 s window); a widget that sent one
message per trace event would go stale and could leave its cell stuck at ``[*]``. The
:class:`EventBridge` therefore sends **at most one custom message per ``interval``** (~50 ms)
carrying the list of events that arrived meanwhile, and flushes whatever is pending when a run
ends. Every event is also folded into a reducer whose snapshot is published to a synced trait
(throttled) and on demand, so a re-display or a page reload shows the truth rather than only the
events a view happened to see.

The message kinds are defined once here (:class:`MessageKind`) and mirrored in
``js/src/kinds.ts``; a test keeps the two equal.
"""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

from ..jsonable import walk

__all__ = [
    "MESSAGE_KINDS",
    "BridgedView",
    "Clock",
    "EventBridge",
    "MessageKind",
    "Reducer",
    "to_jsonable",
]


class MessageKind(enum.StrEnum):
    """Every custom comm message carries ``{"kind": <one of these>, ...}``."""

    EVENTS = "events"  # kernel → view: {"seq": int, "events": [...]} (one batch)
    SNAPSHOT = "snapshot"  # kernel → view: {"seq": int, "state": {...}} (full state)
    SYNC = "sync"  # view → kernel: a view (re)rendered; please send a snapshot
    RENDERED = "rendered"  # view → kernel: {"prompt_id"} an approval prompt is on screen
    DECISION = "decision"  # view → kernel: {"prompt_id", "call_id", "action", "args"?, "note"?}
    # kernel → view: {"prompt_id", "ok", "error"?, "field_errors"?: [{"loc": [...], "msg"}]}
    DECISION_RESULT = "decision_result"
    DETAIL_REQUEST = "detail_request"  # view → kernel: {"id"} the full record of one node
    DETAIL = "detail"  # kernel → view: {"id", "node"} (snapshots carry summaries only)
    CANCEL = "cancel"  # view → kernel: {"prompt_id"?} the Cancel-run button
    OPEN_GROUP = "open_group"  # view → kernel: {"error": class | None} show a group's traces
    OPEN_TRACE = "open_trace"  # view → kernel: {"id"} open this trial's trace (eval report)
    TRACE_OPENED = "trace_opened"  # kernel → view: {"id", "ok", "message"}
    # view → kernel: {"req", "start", "count", "query", "expanded", "selected"?,
    # "timeline"?: [lo, hi, buckets]} rows to show (and the timeline overview's range)
    WINDOW_REQUEST = "window_request"
    # kernel → view: {"req", "start", "total", "nodes", "rows", "counts", "matches"?,
    # "timeline"?: bucket counts}
    WINDOW = "window"
    # kernel → view: {"seq", "title", "view_state"} + the new state as one buffer: the
    # explorer shows another trace in place (``TraceExplorer.show``)
    SHOW = "show"


MESSAGE_KINDS: dict[str, str] = {k.name: k.value for k in MessageKind}


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """The two things the bridge needs from an event loop (tests inject a fake)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer: ...


class Reducer(Protocol):
    """Folds events into cumulative state; returns the (JSON-able) patch to send to views."""

    def apply(self, event: Mapping[str, Any]) -> list[dict[str, Any]]: ...

    def snapshot(self) -> dict[str, Any]: ...


def to_jsonable(value: Any) -> Any:
    """Plain JSON data from events and values, nothing cut (the rules: ``langfx_nb.jsonable``)."""
    return walk(value)


class _LoopClock:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def time(self) -> float:
        return self.loop.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.loop.call_later(delay, callback)


class EventBridge:
    """Throttles events into batches: ≤ 1 ``send`` per ``interval`` seconds, never more.

    The first event after a quiet period goes out on the next loop turn (so a burst in the same
    turn shares one message); later events wait for the window to pass. ``flush()`` sends what is
    pending immediately (end of a run) and publishes the state.

    ``push`` is safe to call from any thread: off the loop thread it hops over with
    ``call_soon_threadsafe``. Without any event loop (plain scripts), events are sent at once.

    ``coalesce(patch)`` (optional) gives a key for patches that supersede each other: a pending
    patch with the same key is replaced in place, so a batch never carries stale copies (a
    progress view sends one current snapshot per message however many updates arrived).
    """

    def __init__(
        self,
        send: Callable[[dict[str, Any]], None],
        reducer: Reducer,
        *,
        on_state: Callable[[dict[str, Any]], None] | None = None,
        interval: float = 0.05,
        state_interval: float = 5.0,
        clock: Clock | None = None,
        coalesce: Callable[[Mapping[str, Any]], Hashable | None] | None = None,
    ) -> None:
        self._send = send
        self._coalesce = coalesce
        self._pending_at: dict[Hashable, int] = {}
        self.reducer = reducer
        self._on_state = on_state
        self.interval = interval
        self.state_interval = state_interval
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._pending: list[dict[str, Any]] = []
        self._timer: Timer | None = None
        self._last_send = float("-inf")
        self._last_state = float("-inf")
        self._state_dirty = False
        self._state_cost = 0.0
        self.seq = 0  # number of the last batch sent
        self.messages_sent = 0
        self.events_sent = 0

    # -- entry points -------------------------------------------------------------------------

    def push(self, event: Mapping[str, Any]) -> None:
        """Fold one core event into the state and queue its patch for the next batch."""
        if self._clock is not None:
            self._push(event)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            if self._loop is None:
                self._loop, self._loop_thread = running, threading.get_ident()
            if running is self._loop:
                self._push(event)
                return
        loop = self._loop
        if loop is not None and not loop.is_closed() and threading.get_ident() != self._loop_thread:
            loop.call_soon_threadsafe(self._push, event)
            return
        self._push(event)

    def flush(self) -> None:
        """Send pending events now and publish the cumulative state (end of a run)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._send_pending()
        self.publish_state()

    def snapshot_message(self) -> dict[str, Any]:
        """A full-state message for a view that (re)rendered. Sends pending events first so the
        snapshot's ``seq`` covers exactly the batches already sent."""
        self.flush()
        return {"kind": MessageKind.SNAPSHOT.value, "seq": self.seq, "state": self.snapshot()}

    def snapshot(self) -> dict[str, Any]:
        return self.reducer.snapshot()

    def publish_state(self) -> None:
        """Copy the cumulative state into the synced trait (if it changed).

        Publishing a big state costs kernel CPU and bandwidth, so while events flow it happens
        at most every ``state_interval`` seconds *and* the next periodic publish waits 200× as
        long as this one took in the kernel (a big trace costs the browser far more to parse
        than the kernel to send; views get live batches anyway, and a (re)rendered view asks
        for a fresh snapshot)."""
        if self._on_state is not None and self._state_dirty:
            self._state_dirty = False
            started = time.perf_counter()
            state = self.reducer.snapshot()
            state["seq"] = self.seq
            self._on_state(state)
            self._state_cost = time.perf_counter() - started
            self._last_state = self._now()

    def publish_now(self) -> None:
        """Send what is pending and publish the state even if no event changed it (the
        reducer was replaced wholesale, e.g. a finished report shown at once)."""
        self._state_dirty = True
        self.flush()

    def drop_pending(self) -> None:
        """Forget the patches not sent yet (a view about to get a snapshot instead)."""
        self._pending = []
        self._pending_at = {}

    def replace(self, reducer: Reducer) -> int:
        """Drop what is pending and fold later events into ``reducer`` (the view shows
        something else now); returns the ``seq`` of the message that carries the new state,
        above every batch already sent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending, self._pending_at = [], {}
        self.reducer = reducer
        self._state_dirty = True
        self.seq += 1
        return self.seq

    @property
    def is_current(self) -> bool:
        """Nothing is waiting to be sent."""
        return not self._pending

    # -- internals ----------------------------------------------------------------------------

    def _now(self) -> float:
        if self._clock is not None:
            return self._clock.time()
        if self._loop is not None:
            return self._loop.time()
        return 0.0

    def _push(self, event: Mapping[str, Any]) -> None:
        patches = self.reducer.apply(event)
        if not patches:
            return
        if self._coalesce is None:
            self._pending.extend(patches)
        else:
            for patch in patches:
                key = self._coalesce(patch)
                at = self._pending_at.get(key) if key is not None else None
                if at is not None:
                    self._pending[at] = patch
                    continue
                if key is not None:
                    self._pending_at[key] = len(self._pending)
                self._pending.append(patch)
        self._state_dirty = True
        if self._timer is not None:
            return
        clock: Clock | None = self._clock
        if clock is None and self._loop is not None and not self._loop.is_closed():
            clock = _LoopClock(self._loop)
        if clock is None:  # no event loop at all: nothing could fire a timer later
            self._send_pending()
            return
        wait = max(0.0, self._last_send + self.interval - clock.time())
        self._timer = clock.call_later(wait, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._send_pending()
        if self._now() - self._last_state >= max(self.state_interval, 200 * self._state_cost):
            self.publish_state()

    def _send_pending(self) -> None:
        if not self._pending:
            return
        events, self._pending = self._pending, []
        self._pending_at = {}
        self.seq += 1
        self._last_send = self._now()
        self.messages_sent += 1
        self.events_sent += len(events)
        self._send({"kind": MessageKind.EVENTS.value, "seq": self.seq, "events": events})


class BridgedView:
    """The kernel side a bridged widget's views share (mixed into an anywidget): messages go
    out only once a frontend is connected, and a view that (re)rendered and says which batch
    it has last seen gets a full snapshot unless it is already current."""

    comm: Any
    send: Callable[..., None]  # the widget's own (ipywidgets), not defined here
    _bridge: EventBridge

    def _send_message(self, message: dict[str, Any]) -> None:
        if self.comm is not None:
            self.send(message)

    def _answer_sync(self, content: Mapping[str, Any]) -> None:
        """Answer a ``SYNC`` from a view with a snapshot, unless it has exactly this state."""
        if content.get("seq") == self._bridge.seq and self._bridge.is_current:
            return  # e.g. a saved trace, or a view re-rendered with nothing new since
        self._send_message(self._bridge.snapshot_message())
