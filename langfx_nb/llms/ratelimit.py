"""Requests- and tokens-per-minute limits, shared by every model of one provider account.

``lf.RateLimit(requests_per_minute=, tokens_per_minute=)`` given to a model
(``rate_limit=``) configures the ``Limiter`` of its *account*: the provider, base URL and
API key (a hash of them: the key itself is never kept). Every request of every model on
that account in this process, in a batch or not, takes its turn from that one limiter.

- **Configured limits** are smooth token buckets refilled continuously at
  ``SAFETY`` × the limit, holding at most ``BURST_S`` seconds' worth (at least one request);
  a request goes once the bucket holds its amount (all it can hold, for a larger one). The
  token pace keeps one request of the largest size seen back from each minute's share, so
  a server counting fixed minutes never sees more than ``SAFETY`` × its token limit (for
  requests up to ~45 % of it). One counting shorter windows (``W`` seconds, the limit
  scaled) sees at most ``SAFETY`` × its limit plus the larger of one request and the bucket
  per window: nothing over its limit while that is under 3 % of a window's limit. Beyond, each 429
  slows the pace to ``SLOW_DOWN`` of what it was (never below ``SLOWEST`` × the limit), so
  after a 429 or two it holds. A request's tokens are estimated before it is sent (prompt
  characters / 4 plus ``max_tokens``) and corrected by the usage the response reports (the
  difference is given back or taken).
- **Provider headers** set the pace when no limit is configured (a configured limit
  wins: headers arrive a response late, and following both cost ~10 % of the limit): a
  provider's model reads what its answers' headers say of each limit (``Limits``: what
  remains of the requests and tokens, when each resets, its size; the provider's module
  names the headers) and the limiter ``observe``s it. When what remains (less what is still
  in flight) is used up, new requests wait until the reported reset; then the window holds
  the limit again, less what was sent and not answered yet, for as long as the last window
  lasted or until an answer's headers say more: sending resumes at the limit, not with
  every waiting request at once (see ``_Window``). What remains of a window is the least
  any of its answers said (answers are read in any order), so once headers were seen no
  request sent is refused for the requests limit, as long as the time from the server
  counting a request to its answer being read varies by less than half the longest time
  to a reset any answer reported (about half a window, less a round trip): answers
  further apart may be taken for an older window's, ignored, and let a request more in.
- **A 429** pauses the whole limiter, every waiting and new request, for the server's
  ``retry-after`` (1 s without one), and empties the buckets so that sending resumes at
  the limit, not in a burst. Without a configured limit this happens only once the
  account has sent rate-limit headers: before that a 429 is the retry policy's alone.
- **No wait the provider asks for is longer than ``max_delay``**, the bound of the model's
  ``RetryPolicy`` (its default, 30 s, without one; ``max_wait`` sets it for the requests a
  block admits): a request that would have to wait longer for a 429's pause, or for a
  reported reset longer than both ``max_delay`` and a minute (the window of a per-minute
  limit is waited out), fails at once with a ``RateLimitError`` whose ``retry_after`` and
  text say how long the provider asked for (the pause stays, so the account is not
  hammered meanwhile). A
  wait hint that is malformed, not finite or absurd (beyond ``MAX_PLAUSIBLE_WAIT_S``, a
  month) is ignored with a ``RateLimitWarning``. Waits of a configured limit are the pace
  the user chose and are not bounded so.
- A provider that sends no rate-limit headers leaves each 429 to the model's
  ``RetryPolicy`` unless ``rate_limit=`` is configured, which shares one limit and one 429
  pause across requests.

``Limiter.take`` / ``give_back`` hand out several requests at once, for a limiter that leases
capacity to other processes (the Ray engine's, ``batch/ray_limiter.py``).

Waiting uses ``asyncio.sleep`` on the caller's loop; the limiter's state is guarded by a
thread lock, so models used from several threads' loops share it safely.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import email.utils
import hashlib
import math
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import RateLimitError

__all__ = [
    "BURST_S",
    "DEFAULT_MAX_WAIT_S",
    "MAX_PLAUSIBLE_WAIT_S",
    "SAFETY",
    "Limiter",
    "Limits",
    "RateLimit",
    "RateLimitWarning",
    "Reading",
    "Ticket",
    "account_id",
    "checked_wait",
    "estimate_tokens",
    "header_limit",
    "header_number",
    "limiter_for",
    "max_wait",
    "parse_reset",
    "parse_retry_after",
    "pause_s",
    "plausible_wait",
    "reports",
    "set_limiter_factory",
    "too_long_error",
    "wait_bound",
]

#: Share of a configured limit the buckets refill at: headroom for clocks and estimates.
SAFETY = 0.97
#: Seconds of a configured limit a bucket may hold (the largest burst).
BURST_S = 0.05
#: What each 429 under a configured limit leaves of the pace, and the slowest it gets.
SLOW_DOWN = 0.95
SLOWEST = 0.5
#: How long a 429 without ``retry-after`` pauses the limiter.
DEFAULT_429_PAUSE_S = 1.0
#: The most requests one ``Limiter.take`` hands out.
LEASE_MAX = 1 << 20
#: The longest wait a provider asks for that a request waits out here (``max_wait``):
#: ``RetryPolicy``'s default ``max_delay``.
DEFAULT_MAX_WAIT_S = 30.0
#: The shortest a window that started without headers saying so is taken to last.
_MIN_WINDOW_S = 0.01
#: A wait hint longer than this (a month: the longest quota period providers use) is taken
#: for a broken header and ignored.
MAX_PLAUSIBLE_WAIT_S = 31 * 86400.0

_MAX_WAIT: ContextVar[float] = ContextVar("langfx_nb_max_wait", default=DEFAULT_MAX_WAIT_S)

#: What a response's headers say of one limit: ``(remaining, seconds to reset, limit)``.
Reading = tuple[float | None, float | None, float | None]
#: ``{"requests" | "tokens": Reading}``: what one response's headers say of the account's
#: limits (a provider's model reads them; kinds it does not report are left out).
Limits = dict[str, Reading]


class RateLimitWarning(UserWarning):
    """A provider's rate-limit or retry header was malformed or absurd and was ignored."""


@contextlib.contextmanager
def max_wait(seconds: float) -> Iterator[None]:
    """Within the block, a request waits for a provider's pause or reset at most
    ``seconds`` (a model passes its ``RetryPolicy.max_delay``); a longer one fails at once."""
    token = _MAX_WAIT.set(seconds)
    try:
        yield
    finally:
        _MAX_WAIT.reset(token)


def wait_bound() -> float:
    """The longest wait a provider asks for that a request waits out here, in this context
    (set by ``max_wait``)."""
    return _MAX_WAIT.get()


def too_long_error(asked: float, bound: float) -> RateLimitError:
    """The error of a request not sent because the provider asked to wait ``asked`` s."""
    return RateLimitError(
        f"rate limit: the provider asked to wait {asked:,.1f} s before the next request of "
        f"this account (a 429's retry-after or a reported reset), longer than "
        f"max_delay={bound:g} s: not sent",
        status=None,
        retry_after=asked,
    )


def plausible_wait(seconds: float | None, what: str) -> float | None:
    """``seconds`` (negative counts as 0) when it is a finite wait up to
    ``MAX_PLAUSIBLE_WAIT_S``; else ``None``, with a ``RateLimitWarning`` naming ``what``."""
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds > MAX_PLAUSIBLE_WAIT_S:
        warnings.warn(
            f"ignored {what}: a wait of {seconds:g} s is not plausible",
            RateLimitWarning,
            stacklevel=2,
        )
        return None
    return max(0.0, seconds)


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
    through once the bucket holds its amount (see ``wait``).

    A minute counted as a fixed window receives at most ``rate`` × 60 plus the larger of
    the bucket and one request. A bucket told the size of each request (``note``: the
    tokens') keeps the larger of the bucket and the largest request seen back from each
    minute's share, so a minute never receives more than ``SAFETY`` × the limit (while that
    leaves ``floor``: requests under ~45 % of a minute's limit). The request bucket needs
    none: a minute gets fewer than ``rate`` × 60 + 1 whole requests, so at most the limit."""

    __slots__ = ("at", "capacity", "floor", "level", "pace", "rate", "reserve")

    def __init__(self, per_minute: float, now: float, minimum: float) -> None:
        self.pace = per_minute / 60.0 * SAFETY  # before what is kept back
        self.floor = self.pace * SLOWEST
        self.capacity = max(minimum, self.pace * BURST_S)
        self.reserve = 0.0  # kept back from each minute's share (see ``note``)
        self.level = self.capacity
        self.at = now
        self.rate = self._rate()

    def _rate(self) -> float:
        return max(self.floor, self.pace - self.reserve / 60.0)

    def note(self, amount: float) -> None:
        """A request of ``amount`` is about to wait here: keep one of that size (at least
        the bucket) back from each minute's share when it is the largest yet."""
        if amount > self.reserve:
            self.reserve = max(amount, self.capacity)
            self.rate = self._rate()

    def slow_down(self) -> None:
        """A 429 despite the pace: the server counts in windows too short for this pace and
        these requests' size (``wait``); go ``SLOW_DOWN`` slower, never below ``floor``."""
        self.pace *= SLOW_DOWN
        self.rate = self._rate()

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
            self.at = now

    def wait(self, amount: float) -> float:
        """Seconds until the bucket holds ``amount`` (all it can hold, when ``amount`` is
        more): a request is let through then and takes its whole amount, into debt when it
        is larger than the bucket. So what is sent in any span of ``t`` seconds is at most
        ``rate * t`` plus the larger of the bucket and one request."""
        need = min(amount, self.capacity)
        return (need - self.level) / self.rate if self.level < need else 0.0


class _Window:
    """What a provider's headers say of one limit: its size, what remains, when it resets.

    What remains is the least any answer of the current window reported, less what was
    sent and not answered since (``unseen``: the server may have counted those after it):
    a server's count only grows within a window, and answers are read in any order, so one
    the server counted early and read late says more remains than there is. The window
    ends at the latest end its answers reported (each is read after the server gave it,
    so never before the server's end).

    Then the window holds the limit again, less what was sent and not answered (the server
    may count those requests in the new window), and is taken to last as long as the
    longest time to a reset ever reported (``span``), until an answer's headers say more:
    sending resumes at the limit, never with every waiting request at once.

    An answer whose end falls more than ``span / 2`` before the earliest end an answer of
    the current window reported was given in a window that is over (read late) and is
    ignored: it would grant the new window again what it already gave. So no window is
    sent more than its limit while the time from the server counting a request to its
    answer being read varies by less than ``span / 2``. An answer of the next window read
    before the current one is seen to end counts in the current one: the limiter then
    holds back more than it needs to, until the end that answer reports."""

    __slots__ = ("earliest", "limit", "remaining", "reported", "reset_at", "span")

    def __init__(self) -> None:
        self.limit: float | None = None  # the header's, else the most ever said to remain
        self.remaining: float | None = None  # None: nothing known, nothing held back
        self.reported = 0.0  # the least an answer of the current window said remains
        self.reset_at = 0.0  # when the current window ends: the latest end said
        self.earliest = 0.0  # the earliest end an answer of the current window said
        self.span = 0.0  # the longest time to a reset ever reported: about a window

    def seen(
        self, remaining: float, now: float, reset: float, limit: float | None, unseen: float
    ) -> None:
        self.span = max(self.span, reset)
        end = now + reset
        self._roll(now, unseen)
        if self.remaining is None:
            self.earliest = self.reset_at = end
        else:
            if end < self.earliest - self.span / 2:
                return  # the answer was given in a window that is over
            remaining = min(remaining, self.reported)
            self.earliest = min(self.earliest, end)
            self.reset_at = max(self.reset_at, end)
        self.limit = limit if limit is not None else max(self.limit or 0.0, remaining)
        self.reported = remaining
        self.remaining = remaining - max(0.0, unseen)

    def _roll(self, now: float, unanswered: float) -> None:
        """Once the current window is over, the next one holds the limit less
        ``unanswered`` (without a known size, nothing is held back)."""
        if self.remaining is None or now < self.reset_at:
            return
        if not self.limit:
            self.remaining = None
            return
        self.reported = self.limit
        self.remaining = self.limit - unanswered
        self.reset_at = self.earliest = max(self.reset_at + self.span, now + _MIN_WINDOW_S)

    def wait(self, amount: float, now: float, unanswered: float) -> float:
        """Seconds until ``amount`` fits (``unanswered``: the amount sent and not answered
        yet, which the server may count in a new window)."""
        self._roll(now, unanswered)
        if self.remaining is None:
            return 0.0
        if self.remaining >= amount or (self.limit and self.remaining >= self.limit):
            return 0.0  # it fits, or the window is whole (a request larger than it goes)
        return self.reset_at - now

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
        self.in_flight_tokens = 0.0  # the estimates of the requests in flight
        self.unanswered = 0  # requests in flight whose answer's headers have not arrived
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

    def _wait_s(self, estimate: int, now: float, bound: float) -> tuple[float, float]:
        """Seconds until a request may go, and how long the provider asked it to wait when
        that is beyond ``bound`` (a 429's pause), or beyond a minute too (a reported reset:
        the window of a per-minute limit is waited out); else 0."""
        pause = self.pause_until - now
        window = 0.0
        if self.limit is None:  # headers set the pace only without a configured limit
            requests, tokens = self._windows["requests"], self._windows["tokens"]
            unseen = self._unseen_tokens(self.unanswered)
            window = max(requests.wait(1.0, now, self.unanswered), window)
            window = max(tokens.wait(float(estimate), now, unseen), window)
        wait = max(pause, window)
        for bucket, amount in ((self._requests, 1.0), (self._tokens, float(estimate))):
            if bucket is not None:
                bucket.refill(now)
                if bucket is self._tokens:
                    bucket.note(amount)
                wait = max(wait, bucket.wait(amount))
        too_long = max(pause if pause > bound else 0.0, window if window > max(bound, 60) else 0)
        return wait, too_long

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
        it counts as in flight until ``give_back``. A wait the provider asked for beyond
        ``max_wait`` raises ``RateLimitError`` at once (see the module docstring)."""
        requests = max(1, int(requests))
        tokens = max(0, int(tokens))
        each = tokens / requests
        bound = wait_bound()
        while True:
            with self._lock:
                now = self._clock()
                wait, asked = self._wait_s(math.ceil(each), now, bound)
                if asked:
                    raise too_long_error(asked, bound)
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
                    self.unanswered += n
                    self.in_flight_tokens += taken
                    return n, taken
                self.waited_s += wait
            await asyncio.sleep(wait)

    def give_back(self, requests: int, correction: int, unused: int = 0) -> None:
        """``requests`` taken by ``take`` are no longer in flight (answered, failed or never
        sent), and together they used ``correction`` tokens more than taken (less when
        negative: given back); ``unused`` of them were never sent, so the request limit
        gets them back."""
        with self._lock:
            ended = min(self.in_flight, max(0, int(requests)))
            if ended:  # their share of the tokens in flight
                self.in_flight_tokens -= self.in_flight_tokens * ended / self.in_flight
            self.in_flight -= ended
            self.unanswered = min(self.unanswered, self.in_flight)
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
            # what a request used beyond its estimate is taken from the window; what it
            # left unused is not given back: the window may have reset since it was sent,
            # and the next answer's headers say what remains
            self._windows["tokens"].take(max(0.0, float(correction)))

    def _unseen_tokens(self, requests: int) -> float:
        """The estimated tokens of ``requests`` of the requests in flight."""
        return self.in_flight_tokens * requests / self.in_flight if self.in_flight else 0.0

    def _settle(self, estimate: int, tokens: int | None) -> None:
        self.give_back(1, 0 if tokens is None else tokens - estimate)

    def observe(self, limits: Limits, age_s: float = 0.0) -> None:
        """What a response's headers said about the account's limits (read by the provider's
        model: ``HTTPModel._rate_limits``); the response arrived ``age_s`` seconds ago
        (another process saw it, ``batch/ray_limiter.py``). Called once per response, with
        or without limits: the response is no longer unanswered."""
        seen = False
        with self._lock:
            now = self._clock() - max(0.0, age_s)
            self.unanswered = max(0, self.unanswered - 1)  # this one is answered
            others = self.unanswered  # sent, and maybe not counted in these headers yet
            for kind, (remaining, reset, limit) in limits.items():
                if remaining is None or kind not in self._windows:
                    continue
                seen = True
                unseen: float = others
                if kind == "tokens":
                    unseen = self._unseen_tokens(others)
                reset_s = reset if reset is not None else 1.0
                self._windows[kind].seen(remaining, now, reset_s, limit, unseen)
            if seen:
                self.engaged = True

    def throttle(self, retry_after: float | None) -> None:
        """A 429: pause every request of the account for ``retry_after`` seconds (1 s when
        unknown) and empty the buckets, once a limit is configured or headers were seen;
        a configured pace is slowed (``_Bucket.slow_down``)."""
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
                    bucket.slow_down()


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
    """How long a 429 pauses a limiter: the server's ``retry-after`` (1 s when unknown,
    malformed or absurd: see ``plausible_wait``)."""
    if isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)):
        return DEFAULT_429_PAUSE_S
    try:
        asked = float(retry_after)
    except OverflowError:  # an int beyond float range
        asked = math.inf
    seconds = plausible_wait(asked, "a 429's retry-after")
    return DEFAULT_429_PAUSE_S if seconds is None else seconds


def reports(limits: Limits) -> bool:
    """Whether ``limits`` say what remains of any limit."""
    return any(remaining is not None for remaining, _, _ in limits.values())


def estimate_tokens(text_chars: int, max_tokens: int | None) -> int:
    """Tokens a request may use before it is sent: prompt characters / 4 + ``max_tokens``."""
    return text_chars // 4 + 1 + (max_tokens or 0)


# -- wait hints of a 429 ----------------------------------------------------------------
def header_number(text: str, scale: float = 1.0) -> float | None:
    """A header number divided by ``scale``; ``None`` when it is not a number."""
    try:
        return float(text) / scale
    except ValueError:
        return None


def parse_retry_after(
    headers: Mapping[str, str], *, ms: str | None = None, now: float | None = None
) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or HTTP-date), or first from the header
    named ``ms`` (milliseconds) when a provider sends one.

    Negative values give 0. A header that is malformed or not finite is ignored with a
    ``RateLimitWarning`` (``None``). Huge values are kept: the retry policy refuses to wait
    longer than its ``max_delay`` and raises at once; the account's limiter ignores absurd
    ones (``ratelimit.pause_s``) and fails requests that would wait beyond ``max_delay``.
    """
    if ms is not None and (millis := headers.get(ms)) is not None:
        seconds = header_number(millis, 1000.0)
        if seconds is not None or headers.get("retry-after") is None:
            return checked_wait(seconds, ms, millis)
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if (seconds := header_number(value)) is not None:
        return checked_wait(seconds, "retry-after", value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        when = None
    if when is None:
        return checked_wait(None, "retry-after", value)
    current = time.time() if now is None else now
    return checked_wait(when.timestamp() - current, "retry-after", value)


def checked_wait(seconds: float | None, name: str, value: str) -> float | None:
    """``seconds`` ≥ 0, or ``None`` with a ``RateLimitWarning`` when malformed or infinite."""
    if seconds is None or not math.isfinite(seconds):
        warnings.warn(
            f"ignored {name}: {value[:40]!r} is not a finite number of seconds or a date",
            RateLimitWarning,
            stacklevel=4,
        )
        return None
    return max(0.0, seconds)


# -- rate-limit headers --------------------------------------------------------------------
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
    r"(?:(\d+(?:\.\d+)?)ms)?"
)


def parse_reset(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a reset: a duration (``1s``, ``6m0s``, ``20ms``), a bare number of
    seconds, or an RFC 3339 time. ``None`` when malformed."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return None if math.isnan(seconds) else max(0.0, seconds)
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


def _reset(value: str | None, name: str) -> float | None:
    """Seconds until the reset a header reports; ``None`` (with a ``RateLimitWarning`` when
    the header is there) when it is missing, malformed or absurd."""
    if value is None:
        return None
    seconds = parse_reset(value)
    if seconds is None:
        warnings.warn(
            f"ignored {name}: {value[:40]!r} is not a duration or a time",
            RateLimitWarning,
            stacklevel=4,
        )
        return None
    return plausible_wait(seconds, name)


def header_limit(headers: Mapping[str, str], remaining: str, reset: str, limit: str) -> Reading:
    """What the headers named ``remaining``, ``reset`` and ``limit`` say of one limit:
    ``(remaining, seconds to reset, limit)``; all ``None`` without a number remaining."""
    left = _number(headers.get(remaining))
    if left is None:
        return None, None, None
    return left, _reset(headers.get(reset), reset), _number(headers.get(limit))
