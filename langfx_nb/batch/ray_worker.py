"""What runs inside the Ray cluster for ``engine=lf.engines.Ray()`` (``ray_engine.py``).

- ``BatchWorker``: an async actor holding ``fn`` and a session of its own. ``exchange``
  queues the items it is given, waits until some have finished, and returns their outcomes:
  ``(index, ok, pickled result, (type, message), pickled exception, trace nodes, requests)``.
  It never opens the run manifest; the trace nodes go to the driver, which adopts them.
- Its account limiters are ``ray_limiter.LeasedLimiter``s (``ratelimit.set_limiter_factory``),
  spending grants of the batch's one ``LimitActor``. The driver starts that actor when a
  worker first needs it: ``exchange`` then returns at once, saying so, and the driver hands
  every worker the actor (``use_limiter``). ``pause`` is the actor telling of a 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import pickle
import time
from typing import Any

from ray import cloudpickle

from ..agentic.session import Session
from ..agentic.tracebacks import error_info
from ..agentic.usage import UsageMeter
from ..llms.ratelimit import limiter_for, set_limiter_factory
from ..messages import Usage
from .ray_limiter import LeasedLimiter

__all__ = ["BatchWorker"]

#: ``exchange`` returns after this long without any finished item (the driver asks again).
WAIT_S = 1.0
#: Once an item has finished, ``exchange`` waits up to this long for more before returning.
GATHER_S = 0.05
#: ... unless this many outcomes are ready.
GATHER_MAX = 512


class RequestLog(UsageMeter):
    """A meter that also keeps each request (model id, usage, cost) for the driver."""

    __slots__ = ("log",)

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, Usage | None, float | None]] = []

    def add(self, model_id: str, usage: Usage | None, cost: float | None = None) -> None:
        self.log.append((model_id, usage, cost))


class BatchWorker:
    """One Ray worker of a batch (see the module docstring)."""

    def __init__(self, fn_blob: bytes, config: dict[str, Any]) -> None:
        self.fn = pickle.loads(fn_blob)
        self.with_session = bool(config["with_session"])
        self.concurrency = int(config["concurrency"])
        lm, defaults = pickle.loads(config["context"])
        self.session = Session(
            lm,
            prices=config["prices"],
            max_trace_nodes=int(config["max_trace_nodes"]),
            max_text_chars=int(config["max_text_chars"]),
            **defaults,
        )
        self.limit_handle: Any = config.get("limiter")  # the batch's LimitActor, once made
        self.limit_ready: asyncio.Event | None = None
        set_limiter_factory(lambda account: LeasedLimiter(account, self))
        self.queue: asyncio.Queue[tuple[int, bytes]] | None = None
        self.ready: list[tuple[Any, ...]] = []
        self.arrived: asyncio.Event | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def exchange(self, items: list[tuple[int, bytes]]) -> tuple[list[tuple[Any, ...]], bool]:
        """Queue ``items``; the outcomes of items finished since the last call, and whether
        this worker waits for the batch's ``LimitActor`` (see ``use_limiter``)."""
        if self.queue is None:
            self.queue = asyncio.Queue()
            self.arrived = asyncio.Event()
            self.tasks = [asyncio.ensure_future(self._consume()) for _ in range(self.concurrency)]
        assert self.arrived is not None
        for item in items:
            self.queue.put_nowait(item)
        if not self.ready and not self._wants_limiter():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), WAIT_S)
        deadline = time.monotonic() + GATHER_S
        while len(self.ready) < GATHER_MAX and not self.queue.empty():
            left = deadline - time.monotonic()
            if left <= 0 or self._wants_limiter():
                break
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)
        out, self.ready = self.ready, []
        self.arrived.clear()
        return out, self._wants_limiter()

    def _wants_limiter(self) -> bool:
        return self.limit_handle is None and self.limit_ready is not None

    async def limit_actor(self) -> Any:
        """The batch's ``LimitActor`` (asking the driver for it on first use)."""
        if self.limit_handle is None:
            if self.limit_ready is None:
                self.limit_ready = asyncio.Event()
                if self.arrived is not None:
                    self.arrived.set()  # exchange returns now and tells the driver
            await self.limit_ready.wait()
        return self.limit_handle

    async def use_limiter(self, handle: Any) -> None:
        """The driver's answer: the batch's ``LimitActor``."""
        self.limit_handle = handle
        if self.limit_ready is None:
            self.limit_ready = asyncio.Event()
        self.limit_ready.set()

    async def pause(self, account: str, seconds: float) -> None:
        """A 429 elsewhere in the cluster: this worker's requests of ``account`` wait too."""
        limiter = limiter_for(account)
        if isinstance(limiter, LeasedLimiter):
            limiter.pause(seconds)

    async def _consume(self) -> None:
        assert self.queue is not None and self.arrived is not None
        last = time.monotonic()
        while True:
            index, blob = await self.queue.get()
            outcome = await self._one(index, blob)
            self.ready.append(outcome)  # after the await: exchange may have swapped the list
            self.arrived.set()
            now = time.monotonic()
            if now - last >= 0.02:  # items that never wait must let exchange return
                last = now
                await asyncio.sleep(0)

    async def _one(self, index: int, blob: bytes) -> tuple[Any, ...]:
        log = RequestLog()
        node = None
        try:
            item = pickle.loads(blob)
            with self.session.track(
                "item", f"item {index}", inputs=item, metadata={"index": index}, meter=log
            ) as tracked:
                node = tracked.node
                out = self.fn(item, tracked.session) if self.with_session else self.fn(item)
                if inspect.isawaitable(out):
                    out = await out
                try:
                    payload = cloudpickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[no-untyped-call]
                except Exception as exc:
                    raise TypeError(
                        f"the result ({type(out).__name__}) cannot be sent back to the "
                        f"driver: it does not pickle ({type(exc).__name__})"
                    ) from None
                tracked.outputs = out
        except Exception as exc:
            info = error_info(exc)
            exc_blob = None
            with contextlib.suppress(Exception):
                exc_blob = cloudpickle.dumps(exc)  # type: ignore[no-untyped-call]
            nodes = [n.to_json() for n in node.walk()] if node is not None else []
            return index, False, None, (info["type"], info["message"]), exc_blob, nodes, log.log
        nodes = [n.to_json() for n in node.walk()]
        return index, True, payload, None, None, nodes, log.log
