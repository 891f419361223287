"""What runs inside the Ray cluster for ``engine=lf.engines.Ray()`` (``ray_engine.py``).

- ``BatchWorker``: an async actor holding ``fn`` and a session of its own. ``exchange``
  queues the items it is given, waits until some have finished, and returns their outcomes:
  ``(index, ok, pickled result, (type, message), pickled exception, trace nodes, requests)``.
  It never opens the run manifest; the trace nodes go to the driver, which adopts them.
- ``ShareLimiter`` replaces a worker's account limiters (``ratelimit.set_limiter_factory``):
  a configured ``lf.RateLimit`` is divided by the number of workers, so the workers together
  keep the account's limit with no remote call per request (docs/decisions.md). A 429 or
  provider headers pace the worker that saw them.
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
from ..agentic.trace import error_info
from ..agentic.usage import UsageMeter
from ..llms.ratelimit import Limiter, RateLimit, set_limiter_factory
from ..messages import Usage

__all__ = ["BatchWorker", "ShareLimiter"]

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
        share = int(config["workers"])
        set_limiter_factory(lambda account: ShareLimiter(share))
        self.queue: asyncio.Queue[tuple[int, bytes]] | None = None
        self.ready: list[tuple[Any, ...]] = []
        self.arrived: asyncio.Event | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def exchange(self, items: list[tuple[int, bytes]]) -> list[tuple[Any, ...]]:
        """Queue ``items``; the outcomes of items finished since the last call."""
        if self.queue is None:
            self.queue = asyncio.Queue()
            self.arrived = asyncio.Event()
            self.tasks = [asyncio.ensure_future(self._consume()) for _ in range(self.concurrency)]
        assert self.arrived is not None
        for item in items:
            self.queue.put_nowait(item)
        if not self.ready:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), WAIT_S)
        deadline = time.monotonic() + GATHER_S
        while len(self.ready) < GATHER_MAX and not self.queue.empty():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)
        out, self.ready = self.ready, []
        self.arrived.clear()
        return out

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


class ShareLimiter(Limiter):
    """An account limiter of one of ``share`` workers: each configured limit divided by
    ``share``, so the workers together keep the account's limit."""

    def __init__(self, share: int) -> None:
        super().__init__()
        self.share = max(1, share)

    def configure(self, limit: RateLimit) -> None:
        rpm, tpm = limit.requests_per_minute, limit.tokens_per_minute
        super().configure(
            RateLimit(
                None if rpm is None else rpm / self.share,
                None if tpm is None else tpm / self.share,
            )
        )
