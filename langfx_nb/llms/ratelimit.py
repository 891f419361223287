"""Requests- and tokens-per-minute limits, shared by every model of one provider account.

``lf.RateLimit(requests_per_minute=, tokens_per_minute=)`` given to a model
(``rate_limit=``) configures the ``Limiter`` of its *account*: the provider, base URL and
API key (a hash of them: the key itself is never kept). Every request of every model on
that account in this process, in a batch or not, takes its turn from that one limiter.

- **Configured limits** are smooth token buckets refilled continuously at
  ``SAFETY`` × the limit, holding at most ``BURST_S`` seconds' worth (at least one request):
  a server counting in windows of any length down to a fraction of a second never sees
  more than its limit once the first window has passed. A request's tokens are estimated
  before it is sent (prompt characters / 4 plus ``max_tokens``) and corrected by the usage
  the response reports (the difference is given back or taken).
- **Provider headers** set the pace when no limit is configured (a configured limit
  wins: headers arrive a response late, and following both cost ~10 % of the limit):
  OpenAI ``x-ratelimit-remaining-requests``/``-tokens`` with ``x-ratelimit-reset-*``,
  Anthropic ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-remaining``
  with ``-reset``. When what remains (less the requests still in flight) is used up, new
  requests wait until the reported reset.
- **A 429** pauses the whole limiter, every waiting and new request, for the server's
  ``retry-after`` (1 s without one), and empties the buckets so that sending resumes at
  the limit, not in a burst. Without a configured limit this happens only once the
  account has sent rate-limit headers: before that a 429 is the retry policy's alone.
- Gemini sends no rate-limit headers: without ``rate_limit=`` each 429 is retried by the
  model's ``RetryPolicy`` on its own (using the delay in the error's ``RetryInfo``);
  configure ``rate_limit=`` to share one limit and one 429 pause across requests.

``Limiter.take`` / ``give_back`` hand out several requests at once, for a limiter that leases
capacity to other processes (the Ray engine's, ``batch/ray_limiter.py``).

Waiting uses ``asyncio.sleep`` on the caller's loop; the limiter's state is guarded by a
thread lock, so models used from several threads' loops share it safely.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BURST_S",
    "SAFETY",
    "Limiter",
    "RateLimit",
    "Ticket",
    "account_id",
    "estimate_tokens",
    "limiter_for",
    "parse_reset",
    "pause_s",
    "rate_headers",
    "set_limiter_factory",
]

#: Share of a configured limit the buckets refill at: headroom for clocks and estimates.
SAFETY = 0.97
#: Seconds of a configured limit a bucket may hold (the largest burst).
BURST_S = 0.05
#: How long a 429 without ``retry-after`` pauses the limiter.
DEFAULT_429_PAUSE_S = 1.0
#: The most requests one ``Limiter.take`` hands out.
LEASE_MAX = 1 << 20


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Limits of one provider account, per minute (``None``: no limit of that kind)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is None:
                continue
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number (or None), not {value!r}")


class _Bucket:
    """A token bucket: ``rate`` units a second, at most ``capacity`` held; a request goes
    through once the bucket is out of debt and takes its amount (possibly into debt)."""

    __slots__ = ("at", "capacity", "level", "rate")

    def __init__(self, per_minute: float, now: float, minimum: float) -> None:
        self.rate = per_minute / 60.0 * SAFETY
        self.capacity = max(minimum, self.rate * BURST_S)
        self.level = self.capacity
        self.at = now

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
            self.at = now

    def wait(self) -> float:
        """Seconds until the bucket is out of debt: a request is let through then and takes
        its whole amount (debt, not waiting for the amount to be held, so time a waiter
        oversleeps still accumulates instead of overflowing a bucket smaller than it)."""
        return -self.level / self.rate if self.level < 0 else 0.0


class _Window:
    """What a provider's headers say remains until a reset."""

    __slots__ = ("remaining", "reset_at")

    def __init__(self) -> None:
        self.remaining: float | None = None
        self.reset_at = 0.0

    def wait(self, amount: float, now: float) -> float:
        if self.remaining is None:
            return 0.0
        if now >= self.reset_at:
            self.remaining = None
            return 0.0
        return self.reset_at - now if self.remaining < amount else 0.0

    def take(self, amount: float) -> None:
        if self.remaining is not None:
            self.remaining -= amount

    def room(self, each: float) -> int:
        """How many of ``each`` fit in what remains (``LEASE_MAX`` when unknown)."""
        if self.remaining is None or each <= 0:
            return LEASE_MAX
        return max(0, min(LEASE_MAX, math.floor(self.remaining / each)))


class Ticket:
    """One admitted request: ``settle`` it with the usage the response reported."""

    __slots__ = ("_done", "estimate", "limiter")

    def __init__(self, limiter: Limiter, estimate: int) -> None:
        self.limiter = limiter
        self.estimate = estimate
        self._done = False

    def settle(self, tokens: int | None) -> None:
        """The request ended having used ``tokens`` (``None``: unknown, the estimate
        stands). Only the first call counts."""
        if self._done:
            return
        self._done = True
        self.limiter._settle(self.estimate, tokens)


class Limiter:
    """The rate limits of one provider account (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.limit: RateLimit | None = None
        self._requests: _Bucket | None = None
        self._tokens: _Bucket | None = None
        self._windows = {"requests": _Window(), "tokens": _Window()}
        self.pause_until = 0.0
        self.in_flight = 0
        self.engaged = False  # a limit is configured or headers were seen
        self.throttled = 0  # 429s seen
        self.waited_s = 0.0  # total time requests spent waiting here

    def configure(self, limit: RateLimit) -> None:
        """Apply ``limit`` (the tighter of each kind when models configure it twice)."""
        with self._lock:
            now = self._clock()
            old = self.limit
            rpm = _tighter(limit.requests_per_minute, old.requests_per_minute if old else None)
            tpm = _tighter(limit.tokens_per_minute, old.tokens_per_minute if old else None)
            new = RateLimit(rpm, tpm)
            if new == old:
                return
            self.limit = new
            self._requests = None if rpm is None else _Bucket(rpm, now, 1.0)
            self._tokens = None if tpm is None else _Bucket(tpm, now, 1.0)
            self.engaged = True

    def _wait_s(self, estimate: int, now: float) -> float:
        wait = self.pause_until - now
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                bucket.refill(now)
                wait = max(wait, bucket.wait())
        if self.limit is None:  # headers set the pace only without a configured limit
            wait = max(wait, self._windows["requests"].wait(1.0, now))
            wait = max(wait, self._windows["tokens"].wait(float(estimate), now))
        return wait

    async def acquire(self, estimate: int) -> Ticket:
        """Wait until a request estimated at ``estimate`` tokens may be sent; its ticket."""
        estimate = max(0, int(estimate))
        await self.take(1, estimate)
        return Ticket(self, estimate)

    async def take(self, requests: int, tokens: int) -> tuple[int, int]:
        """Wait until one request may be sent, then take up to ``requests`` requests and
        their share of ``tokens`` at once (a lease for another process's limiter,
        ``batch/ray_limiter.py``): the buckets go into debt for all of them, the provider's
        windows give no more than they say remain. What was taken, at least one request;
        it counts as in flight until ``give_back``."""
        requests = max(1, int(requests))
        tokens = max(0, int(tokens))
        each = tokens / requests
        while True:
            with self._lock:
                now = self._clock()
                wait = self._wait_s(math.ceil(each), now)
                if wait <= 0:
                    n = requests
                    if self.limit is None:
                        n = min(n, self._windows["requests"].room(1.0))
                        n = min(n, self._windows["tokens"].room(each))
                    n = max(1, n)
                    taken = tokens if n == requests else math.ceil(each * n)
                    if self._requests is not None:
                        self._requests.level -= n
                    if self._tokens is not None:
                        self._tokens.level -= taken
                    self._windows["requests"].take(float(n))
                    self._windows["tokens"].take(float(taken))
                    self.in_flight += n
                    return n, taken
                self.waited_s += wait
            await asyncio.sleep(wait)

    def give_back(self, requests: int, correction: int, unused: int = 0) -> None:
        """``requests`` taken by ``take`` are no longer in flight (answered, failed or never
        sent), and together they used ``correction`` tokens more than taken (less when
        negative: given back); ``unused`` of them were never sent, so the request limit
        gets them back."""
        with self._lock:
            self.in_flight = max(0, self.in_flight - max(0, int(requests)))
            unused = max(0, int(unused))
            if unused:
                if self._requests is not None:
                    self._requests.refill(self._clock())
                    self._requests.level = min(
                        self._requests.capacity, self._requests.level + unused
                    )
                self._windows["requests"].take(-float(unused))
            if not correction:
                return
            if self._tokens is not None:
                self._tokens.refill(self._clock())
                self._tokens.level = min(self._tokens.capacity, self._tokens.level - correction)
            self._windows["tokens"].take(float(correction))

    def _settle(self, estimate: int, tokens: int | None) -> None:
        self.give_back(1, 0 if tokens is None else tokens - estimate)

    def observe(self, headers: Mapping[str, str], age_s: float = 0.0) -> None:
        """What a response's headers say about the account's limits (the response arrived
        ``age_s`` seconds ago: headers another process saw, ``batch/ray_limiter.py``)."""
        seen = False
        with self._lock:
            now = self._clock() - max(0.0, age_s)
            for kind, (remaining, reset) in _header_limits(headers).items():
                if remaining is None:
                    continue
                seen = True
                window = self._windows[kind]
                # requests still in flight may not be counted in these headers yet
                unseen = self.in_flight - 1 if kind == "requests" else 0
                window.remaining = remaining - max(0, unseen)
                window.reset_at = now + (reset if reset is not None else 1.0)
            if seen:
                self.engaged = True

    def throttle(self, retry_after: float | None) -> None:
        """A 429: pause every request of the account for ``retry_after`` seconds (1 s when
        unknown) and empty the buckets, once a limit is configured or headers were seen."""
        with self._lock:
            self.throttled += 1
            if not self.engaged:
                return
            now = self._clock()
            self.pause_until = max(self.pause_until, now + pause_s(retry_after))
            for bucket in (self._requests, self._tokens):
                if bucket is not None:  # empty, refilling only once the pause is over
                    bucket.refill(now)
                    bucket.level = min(bucket.level, 0.0)
                    bucket.at = max(bucket.at, self.pause_until)


def _tighter(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


_REGISTRY: dict[str, Limiter] = {}
_REGISTRY_LOCK = threading.Lock()
_FACTORY: list[Callable[[str], Limiter]] = []


def set_limiter_factory(factory: Callable[[str], Limiter] | None) -> None:
    """Make this process's new account limiters with ``factory(account)`` (``None``: plain
    ``Limiter``s). The Ray engine's workers use it so that every request of an account takes
    its turn from one limiter for the whole cluster (``batch/ray_worker.py``)."""
    with _REGISTRY_LOCK:
        _FACTORY[:] = [] if factory is None else [factory]
        _REGISTRY.clear()


def account_id(provider: str, base_url: str, key: str | None) -> str:
    """The limiter's name for one account: a hash, never the key itself."""
    text = f"{provider}\0{base_url}\0{key or ''}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def limiter_for(account: str, limit: RateLimit | None = None) -> Limiter:
    """The process-wide limiter of ``account`` (made on first use), with ``limit`` applied."""
    with _REGISTRY_LOCK:
        limiter = _REGISTRY.get(account)
        if limiter is None:
            limiter = _REGISTRY[account] = _FACTORY[0](account) if _FACTORY else Limiter()
    if limit is not None:
        limiter.configure(limit)
    return limiter


def pause_s(retry_after: float | None) -> float:
    """How long a 429 pauses a limiter: the server's ``retry-after`` (1 s when unknown)."""
    if isinstance(retry_after, (int, float)) and math.isfinite(retry_after):
        return max(0.0, float(retry_after))
    return DEFAULT_429_PAUSE_S


def rate_headers(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The rate-limit headers of a response (OpenAI's or Anthropic's), when it says what
    remains of a limit; else ``None``."""
    if not any(remaining is not None for remaining, _ in _header_limits(headers).values()):
        return None
    return {k.lower(): v for k, v in headers.items() if "ratelimit" in k.lower()}


def estimate_tokens(text_chars: int, max_tokens: int | None) -> int:
    """Tokens a request may use before it is sent: prompt characters / 4 + ``max_tokens``."""
    return text_chars // 4 + 1 + (max_tokens or 0)


# -- provider headers ----------------------------------------------------------------------
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
    r"(?:(\d+(?:\.\d+)?)ms)?"
)


def parse_reset(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a reset: OpenAI durations (``1s``, ``6m0s``, ``20ms``), a bare number
    of seconds, or an RFC 3339 time (Anthropic). ``None`` when malformed."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    m = _DURATION.fullmatch(text)
    if m and any(m.groups()):
        h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
        return h * 3600 + mi * 60 + s + ms / 1000
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        n = float(value)
    except ValueError:
        return None
    return n if math.isfinite(n) and n >= 0 else None


def _header_limits(headers: Mapping[str, str]) -> dict[str, tuple[float | None, float | None]]:
    """``{requests|tokens: (remaining, seconds to reset)}`` from OpenAI or Anthropic headers."""
    out: dict[str, tuple[float | None, float | None]] = {}
    get: Any = headers.get
    for kind in ("requests", "tokens"):
        remaining = _number(get(f"x-ratelimit-remaining-{kind}"))
        reset = parse_reset(get(f"x-ratelimit-reset-{kind}"))
        if remaining is None:
            remaining = _number(get(f"anthropic-ratelimit-{kind}-remaining"))
            reset = parse_reset(get(f"anthropic-ratelimit-{kind}-reset"))
        if remaining is None and kind == "tokens":  # Anthropic's input/output split
            parts = [
                (
                    _number(get(f"anthropic-ratelimit-{p}-tokens-remaining")),
                    parse_reset(get(f"anthropic-ratelimit-{p}-tokens-reset")),
                )
                for p in ("input", "output")
            ]
            known = [(r, s) for r, s in parts if r is not None]
            if known:
                remaining = min(r for r, _ in known if r is not None)
                resets = [s for _, s in known if s is not None]
                reset = max(resets) if resets else None
        out[kind] = (remaining, reset)
    return out
