"""What runs inside the Ray cluster for ``engine=lf.engines.Ray()`` (``ray_engine.py``).

- ``BatchWorker``: an async actor holding ``fn`` and a session of its own. ``exchange``
  queues the items it is given, waits until some have finished, and returns their outcomes:
  ``(index, ok, pickled result, (type, message), pickled exception, trace nodes, requests)``.
  It never opens the run manifest; the trace nodes go to the driver, which adopts them.
- ``CentralLimiter``: one named actor per batch holding each account's request and token
  buckets. ``LeasedLimiter`` replaces a worker's account limiters
  (``ratelimit.set_limiter_factory``): a request with a configured ``lf.RateLimit`` spends
  an allowance leased from the central buckets in blocks of ``LEASE_S`` seconds of the
  limit, so the limit holds across workers without a remote call per request; token
  estimates are corrected in the next lease; a 429 pauses the central buckets too. Provider
  headers without a configured limit are followed per worker (as in one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import pickle
import time
from typing import Any

import ray
from ray import cloudpickle

from ..agentic.session import Session
from ..agentic.trace import error_info
from ..agentic.usage import UsageMeter
from ..llms.ratelimit import BURST_S, SAFETY, Limiter, Ticket, set_limiter_factory
from ..messages import Usage

__all__ = ["BatchWorker", "CentralLimiter", "LeasedLimiter", "limiter_name", "stop_limiter"]

#: A lease covers this many seconds of a limit (at least one request).
LEASE_S = 0.02
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
        self.session = Session(
            prices=config["prices"],
            max_trace_nodes=int(config["max_trace_nodes"]),
            max_text_chars=int(config["max_text_chars"]),
        )
        name = config["limiter"]
        set_limiter_factory(lambda account: LeasedLimiter(account, name))
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
            self.ready.append(await self._one(index, blob))
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
                    payload = cloudpickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
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
                exc_blob = cloudpickle.dumps(exc)
            nodes = [n.to_json() for n in node.walk()] if node is not None else []
            return index, False, None, (info["type"], info["message"]), exc_blob, nodes, log.log
        nodes = [n.to_json() for n in node.walk()]
        return index, True, payload, None, None, nodes, log.log


def limiter_name(run_id: str) -> str:
    return f"langfx-limiter-{run_id}"


def stop_limiter(run_id: str) -> None:
    """End a batch's central limiter, if a worker made one."""
    try:
        actor = ray.get_actor(limiter_name(run_id))
    except ValueError:
        return
    ray.kill(actor)


class _Bucket:
    """``rate`` units a second, at most ``capacity`` held; grants go into debt."""

    __slots__ = ("at", "capacity", "level", "rate")

    def __init__(self, per_minute: float, now: float) -> None:
        self.rate = per_minute / 60.0 * SAFETY
        self.capacity = max(1.0, self.rate * BURST_S)
        self.level = self.capacity
        self.at = now

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
            self.at = now

    def wait(self) -> float:
        return -self.level / self.rate if self.level < 0 else 0.0


class CentralLimiter:
    """The request and token buckets of every account, for the whole cluster."""

    def __init__(self) -> None:
        self.buckets: dict[str, tuple[_Bucket | None, _Bucket | None]] = {}
        self.limits: dict[str, tuple[float | None, float | None]] = {}
        self.pause_until: dict[str, float] = {}

    def lease(
        self,
        account: str,
        rpm: float | None,
        tpm: float | None,
        requests: float,
        tokens: float,
        correction: float,
    ) -> tuple[float, float, float]:
        """Grant ``requests`` and ``tokens`` (after taking ``correction`` tokens used beyond
        earlier estimates): ``(requests, tokens, 0)``, or ``(0, 0, seconds to wait)``."""
        now = time.monotonic()
        if self.limits.get(account) != (rpm, tpm):
            self.limits[account] = (rpm, tpm)
            self.buckets[account] = (
                None if rpm is None else _Bucket(rpm, now),
                None if tpm is None else _Bucket(tpm, now),
            )
        req, tok = self.buckets[account]
        if tok is not None and correction:
            tok.refill(now)
            tok.level = min(tok.capacity, tok.level - correction)
        wait = self.pause_until.get(account, 0.0) - now
        for bucket in (req, tok):
            if bucket is not None:
                bucket.refill(now)
                wait = max(wait, bucket.wait())
        if wait > 0:
            return 0.0, 0.0, wait
        if req is not None:
            req.level -= requests
        if tok is not None:
            tok.level -= tokens
        return requests, tokens, 0.0

    def throttle(self, account: str, pause: float) -> None:
        """A worker saw a 429: no grants for ``pause`` seconds, buckets emptied."""
        now = time.monotonic()
        until = max(self.pause_until.get(account, 0.0), now + pause)
        self.pause_until[account] = until
        for bucket in self.buckets.get(account, (None, None)):
            if bucket is not None:
                bucket.refill(now)
                bucket.level = min(bucket.level, 0.0)
                bucket.at = max(bucket.at, until)


class LeasedLimiter(Limiter):
    """An account limiter of a worker that leases from the batch's ``CentralLimiter``
    when a limit is configured (without one it is the plain limiter: headers, 429s)."""

    def __init__(self, account: str, central_name: str) -> None:
        super().__init__()
        self.account = account
        self.central_name = central_name
        self.central: Any = None
        self.requests_left = 0.0
        self.tokens_left = 0.0
        self.correction = 0.0
        self.leasing: asyncio.Lock | None = None

    def _central(self) -> Any:
        if self.central is None:
            remote = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(CentralLimiter)
            self.central = remote.options(
                name=self.central_name, get_if_exists=True, lifetime="detached"
            ).remote()
        return self.central

    def _has(self, estimate: int) -> bool:
        limit = self.limit
        assert limit is not None
        if limit.requests_per_minute is not None and self.requests_left < 1:
            return False
        return limit.tokens_per_minute is None or self.tokens_left >= estimate

    async def acquire(self, estimate: int) -> Ticket:
        if self.limit is None:
            return await super().acquire(estimate)
        estimate = max(0, int(estimate))
        if self.leasing is None:
            self.leasing = asyncio.Lock()
        while True:
            wait = self.pause_until - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if self._has(estimate):
                self.requests_left -= 1
                self.tokens_left -= estimate
                self.in_flight += 1
                return Ticket(self, estimate)
            async with self.leasing:
                if self._has(estimate):
                    continue
                await self._lease(estimate)

    async def _lease(self, estimate: int) -> None:
        limit = self.limit
        assert limit is not None
        rpm, tpm = limit.requests_per_minute, limit.tokens_per_minute
        want_r = 0.0 if rpm is None else max(1.0, math.floor(rpm / 60 * SAFETY * LEASE_S))
        want_t = 0.0 if tpm is None else max(float(estimate), tpm / 60 * SAFETY * LEASE_S)
        if rpm is not None and self.requests_left >= 1:
            want_r = 0.0
        if tpm is not None and self.tokens_left >= estimate:
            want_t = 0.0
        correction, self.correction = self.correction, 0.0
        got_r, got_t, wait = await self._central().lease.remote(
            self.account, rpm, tpm, want_r, want_t, correction
        )
        if wait > 0:
            await asyncio.sleep(wait)
            return
        self.requests_left += got_r
        self.tokens_left += got_t

    def _settle(self, estimate: int, tokens: int | None) -> None:
        if self.limit is None:
            super()._settle(estimate, tokens)
            return
        self.in_flight = max(0, self.in_flight - 1)
        if tokens is not None:
            self.correction += tokens - estimate

    def throttle(self, retry_after: float | None) -> None:
        super().throttle(retry_after)
        if self.limit is not None:
            pause = max(0.0, self.pause_until - time.monotonic())
            self._central().throttle.remote(self.account, pause)
