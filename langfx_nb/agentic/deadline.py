"""Deadline scopes on a session clock: the trio/anyio cancel-scope idea, kept small.

An invocation's effective deadline is ``min(own, parent)``; it never grows. Only a scope
that *tightens* the deadline arms a timer: when it fires, the scope cancels the task it was
entered in and turns the resulting ``CancelledError`` into ``ExecutionTimeoutError`` on exit.
Nested work that shares an earlier deadline sees the cancellation, notices the deadline has
passed, records itself as ``timed_out`` and lets the owner do the conversion.
"""

from __future__ import annotations

import asyncio

from .clock import Clock, TimerHandle

__all__ = ["DeadlineScope"]


class DeadlineScope:
    __slots__ = ("_cancelling", "_closed", "_handle", "_task", "fired")

    def __init__(self, clock: Clock, when: float) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline needs a running task")
        self._task = task
        self._cancelling = task.cancelling()
        self.fired = False
        self._closed = False
        self._handle: TimerHandle | None = clock.call_at(when, self._fire)

    def _fire(self) -> None:
        if not self._task.done() and not self.fired:
            self.fired = True
            self._task.cancel()

    def close(self) -> bool:
        """Disarm; True when this scope's deadline fired (its cancellation is then withdrawn)."""
        if self._closed:
            return False
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.fired:
            return self._task.uncancel() <= self._cancelling
        return False
