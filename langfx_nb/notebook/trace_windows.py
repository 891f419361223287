"""The windows of rows a trace explorer's page asks for, and the live windows it is pushed.

The page never holds the tree: it asks for the rows on screen (:func:`window_params` reads
its request, :func:`with_timeline` answers it from a :class:`StoredTrace` or a
:class:`LiveIndex` through the one ``WindowedTrace.window``, with the timeline overview's
counts when asked). For a live trace, :class:`LiveWindows` remembers each view's last
request (at most ``LIVE_VIEWS`` views) and pushes the same window again, with what changed,
as events arrive: at least ``LIVE_PUSH_S`` apart per view, and at least ``LIVE_STATE_S``
apart for a copy of the state (what a reloaded page starts from). It sends only through the
callbacks it is given, so it needs no widget.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..agentic.trace_reader import WindowedTrace
from .bridge import Clock, MessageKind, Timer
from .trace_live import LiveIndex

__all__ = [
    "LIVE_PUSH_S",
    "LIVE_STATE_S",
    "LIVE_VIEWS",
    "LiveWindows",
    "window_params",
    "with_timeline",
]

#: A live trace shown through windows: at least this long between two pushes to one view
#: (all views together stay under 20 messages a second; see ``LiveWindows.tick``).
LIVE_PUSH_S = 1 / 16
LIVE_VIEWS = 4  # views kept up to date at once (the ones that asked last)
LIVE_STATE_S = 1.0  # at least this long between two copies of the state trait while live


def window_params(content: Mapping[str, Any]) -> dict[str, Any] | None:
    """The window a page's request asks for (``{req, start, count, query, expanded,
    selected, view?, timeline?: [lo, hi, buckets]}``), as :meth:`StoredTrace.window`'s
    arguments plus ``timeline``; ``None`` for a request whose ``start`` or ``count`` is not a
    number."""
    expanded: dict[str, bool] = {}
    raw = content.get("expanded")
    if isinstance(raw, list):
        for entry in raw:
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
                expanded[entry[0]] = bool(entry[1])
    query = content.get("query")
    selected = content.get("selected")
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
    timeline = _timeline_params(content.get("timeline"))
    if timeline is not None:
        params["timeline"] = timeline
    return params


def _timeline_params(raw: Any) -> tuple[float | None, float | None, int] | None:
    """A window request's ``timeline: [lo, hi, buckets]`` (the overview's range; ``lo`` and
    ``hi`` both ``None``: the whole trace, as it is when answered), if valid."""
    if not isinstance(raw, list) or len(raw) != 3:
        return None
    lo, hi, buckets = raw
    if not isinstance(buckets, int) or isinstance(buckets, bool):
        return None
    if lo is None and hi is None:
        return None, None, buckets
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)):
        return None
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        return None
    return lo, hi, buckets


def with_timeline(index: WindowedTrace, params: Mapping[str, Any]) -> dict[str, Any]:
    """The window for ``params``, with the timeline overview's bucket counts when asked."""
    rest = {k: v for k, v in params.items() if k != "timeline"}
    out = index.window(**rest)
    timeline = params.get("timeline")
    if timeline is not None:
        lo, hi, buckets = timeline
        if lo is None or hi is None:
            lo, hi = index.span() or (0.0, 0.0)
        out["timeline"] = index.timeline(lo, hi, buckets)
    return out


class LiveWindows:
    """The windows of a live trace, pushed to the views that asked.

    ``live`` is the trace's :class:`LiveIndex` (``None``: a stored trace is shown). ``send``
    sends a message to the views; ``snapshot`` sends the windowed state as a snapshot
    message (a view that (re)rendered); ``publish`` makes it the state trait; ``extras``
    gives what the state carries besides rows (``ended``, totals, clock offset). The pacing
    (when the views and the state were last sent) lasts across traces shown.
    """

    def __init__(
        self,
        *,
        send: Callable[[dict[str, Any]], None],
        snapshot: Callable[[dict[str, Any]], None],
        publish: Callable[[dict[str, Any]], None],
        extras: Callable[[], dict[str, Any]],
        clock: Clock | None = None,
    ) -> None:
        self.live: LiveIndex | None = None
        self._send = send
        self._snapshot = snapshot
        self._publish = publish
        self._extras = extras
        self._clock = clock
        self._viewers: dict[str, dict[str, Any]] = {}  # a live view's last window request
        self._timer: Timer | None = None
        self._dirty = False
        self._state_due = False
        self._last_push = float("-inf")
        self._last_state = float("-inf")
        self._push_spacing = LIVE_PUSH_S

    def reset(self) -> None:
        """Another trace is shown: forget this one's rows and views (the pacing stays)."""
        self.cancel()
        self.live, self._viewers = None, {}

    def cancel(self) -> None:
        """Drop the pending push, if any."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def answer(self, req: Any, view: str, params: Mapping[str, Any]) -> None:
        """Answer ``view``'s window request and remember it, to push it again as the trace
        changes (the ``LIVE_VIEWS`` views that asked last)."""
        self._viewers.pop(view, None)
        self._viewers[view] = {"req": req, "view": view, "params": params}
        while len(self._viewers) > LIVE_VIEWS:
            self._viewers.pop(next(iter(self._viewers)))
        self._send({"kind": MessageKind.WINDOW.value, "req": req, **self.reply(params)})

    def reply(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The window for ``params`` with the live trace's span, running roots and extras."""
        live = self.live
        assert live is not None
        out = with_timeline(live, params)
        span = live.span()
        if span is not None:
            out["span"] = list(span)
        out["roots_running"] = live.roots_running()
        out["live"] = True
        out.update(self._extras())
        return out

    def state(self) -> dict[str, Any]:
        """The windowed state: the first window, ``live``, the extras and the span."""
        reply = self.reply({})
        out = {"windowed": reply, "live": True, **self._extras()}
        if "span" in reply:
            out["span"] = reply["span"]
        return out

    def send_snapshot(self) -> None:
        """The windowed state as a snapshot message (a view that (re)rendered) and, at most
        every ``LIVE_STATE_S``, as the state trait (a page reload)."""
        state = self.state()
        self._snapshot(state)
        wait = LIVE_STATE_S - (self._now() - self._last_state)
        if wait <= 0:
            self._publish_state(state)
        else:
            self._state_due = True
            self._schedule(wait)

    def flush(self) -> None:
        """The run ended or was flushed: push the views and the state trait soon."""
        if self.live is not None:
            self._state_due = True
            self.changed()

    def changed(self) -> None:
        """Something changed: push the views' windows when the spacing allows."""
        self._dirty = True
        self._schedule(self._last_push + self._push_spacing - self._now())

    def _publish_state(self, state: dict[str, Any] | None = None) -> None:
        self._state_due = False
        self._last_state = self._now()
        self._publish(state or self.state())

    def _now(self) -> float:
        if self._clock is not None:
            return self._clock.time()
        return time.monotonic()

    def _schedule(self, delay: float) -> None:
        if self._timer is not None:
            return
        clock: Clock | asyncio.AbstractEventLoop | None = self._clock
        if clock is None:
            try:
                clock = asyncio.get_running_loop()
            except RuntimeError:  # no event loop: nothing could fire a timer later
                self.tick(final=True)
                return
        self._timer = clock.call_later(max(0.0, delay), self.tick)

    def tick(self, *, final: bool = False) -> None:
        """Push each live view its window again (one message per view), then the state trait
        when due. The next push waits ``LIVE_PUSH_S`` per view, and at least three times
        what this one cost the kernel, so live updates take at most a quarter of it."""
        self._timer = None
        if self.live is None:
            return
        started = time.perf_counter()
        if self._dirty:
            self._dirty = False
            viewers = list(self._viewers.values()) or [{"req": 0, "view": "", "params": {}}]
            for viewer in viewers:
                reply = self.reply(viewer["params"])
                self._send(
                    {
                        "kind": MessageKind.WINDOW.value,
                        "req": viewer["req"],
                        "view": viewer["view"],
                        **reply,
                    }
                )
        now = self._now()
        self._last_push = now
        cost = time.perf_counter() - started
        self._push_spacing = max(LIVE_PUSH_S * max(1, len(self._viewers)), 3 * cost)
        if self._state_due:
            wait = LIVE_STATE_S - (now - self._last_state)
            if wait <= 0 or final:
                self._publish_state()
            else:
                self._schedule(min(wait, self._push_spacing))  # pushes go on meanwhile
