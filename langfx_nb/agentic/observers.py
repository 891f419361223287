"""Observer fan-out: trace events reach subscribers without ever hurting the run.

A sync observer is called inline with each event (a plain dict); it must be cheap (append
to a buffer, set a flag). Whatever it raises is caught and counted, never propagated. An
async observer (a coroutine function) gets events through its own bounded queue drained by
a background task, so a slow one cannot stall the run; when its queue is full the oldest
queued events are dropped and counted in ``dropped``.

Closing the hub (``Session.dispose``) first lets each async observer take the events still
queued for it, for at most ``drain_timeout`` seconds in all; whatever is left then (a stuck
or very slow observer) is counted in ``dropped``, as is what is queued for an observer that
unsubscribes. So every event is either delivered or counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Observer", "ObserverHub"]

Event = dict[str, Any]
Observer = Callable[[Event], Any]

_log = logging.getLogger("langfx_nb.agentic")


class _AsyncObserver:
    """One async subscriber: a bounded queue and the task that drains it."""

    def __init__(self, fn: Callable[[Event], Awaitable[Any]], hub: ObserverHub, size: int):
        self.fn = fn
        self.hub = hub
        self.queue: deque[Event] = deque()
        self.size = size
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.closed = False

    def push(self, event: Event) -> None:
        if len(self.queue) >= self.size:
            self.queue.popleft()
            self.hub.dropped += 1
        self.queue.append(event)
        if self.task is None:
            try:
                self.task = asyncio.get_running_loop().create_task(self._drain())
            except RuntimeError:  # no loop yet: the next event from inside a run starts it
                return
        self.wakeup.set()

    async def _drain(self) -> None:
        while True:
            while self.queue:
                event = self.queue.popleft()
                try:
                    await self.fn(event)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    self.hub.failed(self.fn)
            if self.closed:
                return
            self.wakeup.clear()
            await self.wakeup.wait()

    async def close(self, deadline: float) -> None:
        """Deliver what is queued until the loop time ``deadline``, then stop; events never
        delivered are counted in ``hub.dropped``."""
        self.closed = True
        task = self.task
        if task is None and self.queue:  # queued before any loop ran: deliver now
            task = self.task = asyncio.get_running_loop().create_task(self._drain())
        if task is not None and not task.done():
            self.wakeup.set()
            timeout = max(0.0, deadline - asyncio.get_running_loop().time())
            await asyncio.wait([task], timeout=timeout)
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.discard()

    def discard(self) -> None:
        """Count what is still queued as dropped and forget it."""
        self.hub.dropped += len(self.queue)
        self.queue.clear()


class ObserverHub:
    """The subscriber list of one session. ``errors`` and ``dropped`` count what was lost."""

    def __init__(self, queue_size: int = 10_000, drain_timeout: float = 2.0) -> None:
        self._sync: list[Observer] = []
        self._async: list[_AsyncObserver] = []
        self.queue_size = queue_size
        self.drain_timeout = drain_timeout
        self.errors = 0
        self.dropped = 0
        self._warned: set[int] = set()
        self.active = False

    def _refresh(self) -> None:
        #: True when someone listens; event dicts are only built then (a plain attribute:
        #: it is read on every trace operation).
        self.active = bool(self._sync or self._async)

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        if inspect.iscoroutinefunction(observer) or inspect.iscoroutinefunction(
            getattr(observer, "__call__", None)  # noqa: B004  (async callable objects)
        ):
            sub = _AsyncObserver(observer, self, self.queue_size)
            self._async.append(sub)
            self._refresh()

            def unsubscribe_async() -> None:
                if sub in self._async:
                    self._async.remove(sub)
                    self._refresh()
                    sub.closed = True
                    if sub.task is not None:
                        sub.task.cancel()
                    sub.discard()

            return unsubscribe_async
        if not callable(observer):
            raise TypeError("an observer must be callable")
        self._sync.append(observer)
        self._refresh()

        def unsubscribe() -> None:
            if observer in self._sync:
                self._sync.remove(observer)
                self._refresh()

        return unsubscribe

    def emit(self, event: Event) -> None:
        for fn in tuple(self._sync):
            try:
                fn(event)
            except Exception:
                self.failed(fn)
        for sub in self._async:
            sub.push(event)

    def failed(self, fn: Any) -> None:
        self.errors += 1
        if id(fn) not in self._warned:
            self._warned.add(id(fn))
            _log.warning("trace observer %r raised; the run continues", fn, exc_info=True)

    async def close(self) -> None:
        """Let async observers take their queued events (at most ``drain_timeout`` seconds
        in all), count what is left in ``dropped``, and forget every observer."""
        subs, self._async = self._async, []
        self._sync = []
        self._refresh()
        if not subs:
            return
        deadline = asyncio.get_running_loop().time() + self.drain_timeout
        await asyncio.gather(*(sub.close(deadline) for sub in subs))
