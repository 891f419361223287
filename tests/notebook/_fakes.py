"""Test doubles shared by the widget tests: a manual clock and a message recorder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class FakeTimer:
    def __init__(self, clock: FakeClock, when: float, callback: Callable[[], None]) -> None:
        self.clock, self.when, self.callback, self.cancelled = clock, when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """``time()`` + ``call_later()``; ``advance(dt)`` fires due timers in order."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[FakeTimer] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self, self.now + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, dt: float) -> None:
        end = self.now + dt
        while True:
            due = [t for t in self.timers if not t.cancelled and t.when <= end]
            if not due:
                break
            timer = min(due, key=lambda t: t.when)
            self.timers.remove(timer)
            self.now = max(self.now, timer.when)
            timer.callback()
        self.now = end


def record_sends(widget: Any) -> list[dict[str, Any]]:
    """Replace ``widget.send`` with a recorder; returns the list it appends to."""
    sent: list[dict[str, Any]] = []
    widget.send = lambda content, buffers=None: sent.append(content)
    return sent


def saved_trace(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """A saved trace in the core's format around ``nodes`` (statuses default to ``ok``,
    parents to the first node, the session root)."""
    root = nodes[0]["id"]
    return {
        "format": "langfx_nb.trace",
        "version": 1,
        "nodes": [
            {"status": "ok", "parent_id": None if n["id"] == root else root, **n} for n in nodes
        ],
    }
