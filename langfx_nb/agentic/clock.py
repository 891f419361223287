"""Clocks for traces and deadlines: the real monotonic one, and a fake one for tests.

Deadlines are absolute times on a session's clock. A clock can also schedule a callback at a
time (that is how a deadline interrupts running work), so a ``FakeClock`` lets tests move time
forward with ``advance`` and see deadlines fire without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FakeClock", "MonotonicClock", "TimerHandle"]


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Seconds on a monotonic scale, plus a way to run a callback at a given time."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


class MonotonicClock:
    """``time.monotonic``; timers run on the running event loop."""

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, when - time.monotonic()), callback)


class _FakeTimer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to. ``advance`` runs timers that became due, in order.

    Use it in tests: ``clock = FakeClock(); Session(lm, clock=clock)``; start the work as a task,
    let it reach the point of interest, then ``clock.advance(61)``.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds
        while self._timers and self._timers[0][0] <= self._now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback()

    @property
    def pending_timers(self) -> int:
        return sum(1 for *_, t in self._timers if not t.cancelled)
