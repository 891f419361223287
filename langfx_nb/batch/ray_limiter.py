"""One rate limiter for every worker of a Ray batch (``engine=lf.engines.Ray()``).

- ``LimitActor`` (one Ray actor per batch, made by its first worker that needs it) owns
  the account limiters: plain ``ratelimit.Limiter``s with the configured requests and
  tokens per minute, the provider headers' windows and the 429 pause, exactly as in one
  process.
- ``LeasedLimiter`` is a worker's limiter of one account (``ratelimit.set_limiter_factory``).
  It asks the actor for a *grant* (``Limiter.take``): up to ``LEASE_S`` seconds' worth of
  the limit, at most as many requests as are waiting in the worker, and spends it locally,
  so a worker calls the actor once per grant, not per request; while more requests wait
  than its grant holds, the next grant is already asked for (the actor's capacity never
  idles during a worker's round trip to it). A grant not spent within
  ``LEASE_TTL_S`` expires (an idle or dead worker holds no share of the limit); the requests
  a worker ended, the tokens they used beyond their estimates and the last rate-limit
  headers it saw travel with its next request for a grant.
- A 429 seen by any worker pauses the account at the actor, which tells every worker of the
  batch (``BatchWorker.pause``): each drops its grant and waits out the pause.

Until a limit is configured or the provider sends rate-limit headers, a worker's requests
go straight through, as with a plain ``Limiter`` (no actor call).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any, Protocol

from ..llms.ratelimit import (
    LEASE_MAX,
    Limiter,
    Limits,
    RateLimit,
    Ticket,
    pause_s,
    reports,
    too_long_error,
    wait_bound,
)

__all__ = [
    "HEADER_LEASE",
    "LEASE_S",
    "LEASE_TTL_S",
    "ActorSource",
    "LeasedLimiter",
    "LimitActor",
    "grant_size",
]

#: What the rate-limit headers a worker saw said (``ratelimit.Limits``), and how many
#: seconds ago.
Headers = tuple[Limits, float] | None

#: A grant holds at most this many seconds of a configured limit (at least one request).
LEASE_S = 0.05
#: What is left of a grant after this long is given back.
LEASE_TTL_S = 0.5
#: The most requests in one grant when only provider headers set the pace.
HEADER_LEASE = 8


def grant_size(limit: RateLimit | None, requests: int, tokens: int) -> tuple[int, int]:
    """``requests`` (asking ``tokens`` in all) cut to one grant of ``limit``."""
    requests = max(1, requests)
    each = max(0, tokens) / requests
    cap = HEADER_LEASE if limit is None else LEASE_MAX
    if limit is not None and limit.requests_per_minute is not None:
        cap = min(cap, max(1, math.floor(limit.requests_per_minute / 60 * LEASE_S)))
    if limit is not None and limit.tokens_per_minute is not None and each > 0:
        cap = min(cap, max(1, math.floor(limit.tokens_per_minute / 60 * LEASE_S / each)))
    n = min(requests, cap)
    return n, tokens if n == requests else math.ceil(each * n)


class LimitActor:
    """The account limiters of one Ray batch (an async actor; see the module)."""

    def __init__(self) -> None:
        self.limiters: dict[str, Limiter] = {}
        self.workers: dict[Any, Any] = {}  # the BatchWorkers told of 429 pauses, by id
        self.headers_at: dict[str, float] = {}  # when the newest headers applied arrived

    def _limiter(self, account: str, limit: RateLimit | None) -> Limiter:
        limiter = self.limiters.get(account)
        if limiter is None:
            limiter = self.limiters[account] = Limiter()
        if limit is not None:
            limiter.configure(limit)
        return limiter

    def _observe(self, account: str, limiter: Limiter, headers: Headers) -> None:
        """Apply headers a worker saw ``age`` seconds ago, unless newer ones were applied."""
        if headers is None:
            return
        seen, age = headers
        at = time.monotonic() - age
        if at >= self.headers_at.get(account, -math.inf):
            self.headers_at[account] = at
            limiter.observe(seen, age)

    async def add_worker(self, worker: Any, worker_id: str | None = None) -> None:
        """``worker`` (a ``BatchWorker`` actor) is told of every 429 pause; once per
        ``worker_id`` (a worker Ray restarted registers again)."""
        self.workers[worker_id if worker_id is not None else id(worker)] = worker

    async def lease(
        self,
        account: str,
        limit: RateLimit | None,
        requests: int,
        tokens: int,
        ended: int,
        correction: int,
        headers: Headers,
        unused: int = 0,
    ) -> tuple[int, int]:
        """A grant of up to ``requests`` requests (``tokens`` in all), once one may be sent;
        ``ended``, ``correction`` and ``headers`` report what the worker saw since its last
        grant (see ``LeasedLimiter``)."""
        limiter = self._limiter(account, limit)
        limiter.give_back(ended, correction, unused)
        self._observe(account, limiter, headers)
        n, t = grant_size(limiter.limit, requests, tokens)
        return await limiter.take(n, t)

    async def throttle(
        self,
        account: str,
        limit: RateLimit | None,
        pause: float,
        headers: Headers,
    ) -> None:
        """A worker got a 429: pause the account and tell every worker."""
        limiter = self._limiter(account, limit)
        self._observe(account, limiter, headers)
        before = limiter.pause_until
        limiter.throttle(pause)
        if limiter.pause_until > before:
            for worker in self.workers.values():
                with contextlib.suppress(Exception):  # a dead worker is replaced anyway
                    worker.pause.remote(account, pause)

    async def stats(self, account: str) -> dict[str, float]:
        """The account's 429s seen and seconds that grants waited (for tests and tuning)."""
        limiter = self._limiter(account, None)
        return {"throttled": limiter.throttled, "waited_s": limiter.waited_s}


class ActorSource(Protocol):
    """Where a ``LeasedLimiter`` finds the batch's ``LimitActor`` (``BatchWorker``)."""

    limit_handle: Any  # the actor, or None until this worker first needed it

    async def limit_actor(self) -> Any: ...


class LeasedLimiter(Limiter):
    """A worker's limiter of one account, spending grants of the batch's ``LimitActor``."""

    def __init__(self, account: str, source: ActorSource) -> None:
        super().__init__()
        self.account = account
        self.source = source
        self.left_requests = 0
        self.left_tokens = 0
        self.expires = 0.0
        self.ended = 0  # requests ended (or grants unspent) since the last grant
        self.unused = 0  # ... of them never sent: grants dropped unspent
        self.correction = 0  # tokens used beyond the estimates since the last grant
        self.headers: Limits | None = None  # what the last rate-limit headers seen said
        self.headers_at = 0.0  # ... when
        self.waiting = 0
        self.leasing: asyncio.Future[None] | None = None
        self.grants = 0  # grants received (for tests and tuning)
        self.unlimited = Limiter()  # settles the requests sent before a limit was known

    async def acquire(self, estimate: int) -> Ticket:
        estimate = max(0, int(estimate))
        self.waiting += 1
        try:
            while True:
                now = self._clock()
                if now < self.pause_until:
                    # bounded as in one process: a longer pause fails the request unsent
                    if self.pause_until - now > wait_bound():
                        raise too_long_error(self.pause_until - now, wait_bound())
                    await asyncio.sleep(self.pause_until - now)
                    continue
                if not self.engaged:  # no limit known: nothing to ask or report
                    return Ticket(self.unlimited, estimate)
                if now >= self.expires:
                    self._drop()
                if self.left_requests >= 1 and self.left_tokens >= estimate:
                    self.left_requests -= 1
                    self.left_tokens -= estimate
                    self.in_flight += 1
                    if self.waiting - 1 > self.left_requests:  # more wait than it holds:
                        self._ask(estimate)  # the next grant is asked for now
                    return Ticket(self, estimate)
                await asyncio.shield(self._ask(estimate))
        finally:
            self.waiting -= 1

    def _ask(self, estimate: int) -> asyncio.Future[None]:
        """The grant asked for now, or the one already on its way."""
        if self.leasing is None or self.leasing.done():
            self.leasing = asyncio.ensure_future(self._lease(estimate))
            # its failure is raised to the requests that wait for it, if any
            self.leasing.add_done_callback(lambda f: f.cancelled() or f.exception())
        return self.leasing

    async def _lease(self, estimate: int) -> None:
        requests = max(1, self.waiting)
        ended, correction, headers = self.ended, self.correction, self._take_headers()
        unused = self.unused
        self.ended = self.correction = self.unused = 0
        actor = await self.source.limit_actor()
        n, tokens = await actor.lease.remote(
            self.account,
            self.limit,
            requests,
            estimate * requests,
            ended,
            correction,
            headers,
            unused,
        )
        self.grants += 1
        self.left_requests += n
        self.left_tokens += tokens
        self.expires = self._clock() + LEASE_TTL_S

    def _take_headers(self) -> Headers:
        headers, self.headers = self.headers, None
        return None if headers is None else (headers, self._clock() - self.headers_at)

    def _drop(self) -> None:
        """Give back what is left of the grant (with the next request for one): its
        requests were never sent and its tokens never spent."""
        self.ended += self.left_requests
        self.unused += self.left_requests
        self.correction -= self.left_tokens
        self.left_requests = self.left_tokens = 0

    def _settle(self, estimate: int, tokens: int | None) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self.ended += 1
        if tokens is not None:
            self.correction += tokens - estimate

    def observe(self, limits: Limits, age_s: float = 0.0) -> None:
        if reports(limits):
            self.headers, self.headers_at = limits, self._clock() - max(0.0, age_s)
            self.engaged = True

    def throttle(self, retry_after: float | None) -> None:
        self.throttled += 1
        if not self.engaged:
            return  # no limit known: the retry policy's alone, as with a plain Limiter
        pause = pause_s(retry_after)
        self.pause(pause)
        actor = self.source.limit_handle
        if actor is None:
            return  # no grant asked for yet: the pause stays in this worker
        headers = self._take_headers()
        with contextlib.suppress(Exception):
            actor.throttle.remote(self.account, self.limit, pause, headers)

    def pause(self, seconds: float) -> None:
        """Send nothing for ``seconds`` (a 429 somewhere in the cluster) and drop the grant."""
        self.pause_until = max(self.pause_until, self._clock() + seconds)
        self._drop()
