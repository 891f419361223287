"""Retries never sleep longer than ``max_delay``, whatever ``Retry-After`` says.

Against a real HTTP server on 127.0.0.1 (the header travels as a server sends it) with an
injected sleep that records instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator

import pytest

import langfx_nb as lf
from langfx_nb.llms import RetryPolicy
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.ratelimit import RateLimitWarning

from .local_server import LocalServer, Reply, local_server
from .wire import fixture

pytestmark = pytest.mark.usefixtures("local_network")


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@contextlib.asynccontextmanager
async def _served(sleeps: Sleeps, *replies: Reply) -> AsyncIterator[tuple[LocalServer, OpenAI]]:
    """A local server with ``replies`` and an OpenAI model with retries pointed at it."""
    retry = RetryPolicy(max_attempts=3, max_delay=30.0, sleep=sleeps, random=lambda: 0.0)
    async with local_server(*replies) as server:
        lm = OpenAI("gpt-4o", api_key="k", base_url=server.url, retry=retry)
        try:
            yield server, lm
        finally:
            await lm.aclose()


def _429(retry_after: str, name: str = "retry-after") -> Reply:
    return Reply.json(fixture("openai_error_429.json"), 429, {name: retry_after})


OK = Reply.json(fixture("openai_completion_json.json"))


@pytest.mark.parametrize(
    ("header", "name"),
    [("86400", "retry-after"), ("31", "retry-after"), ("86400000", "retry-after-ms")],
)
async def test_server_asking_for_more_than_max_delay_raises_at_once(header: str, name: str) -> None:
    sleeps = Sleeps()
    async with _served(sleeps, _429(header, name), OK) as (server, lm):
        with pytest.raises(lf.RateLimitError) as info:
            await lm.call("x")
    assert sleeps == []
    assert len(server.requests) == 1
    wait = info.value.retry_after
    assert wait is not None and wait > 30.0


async def test_http_date_far_in_the_future_raises_at_once() -> None:
    sleeps = Sleeps()
    async with _served(sleeps, _429("Fri, 31 Dec 2100 23:59:59 GMT"), OK) as (_server, lm):
        with pytest.raises(lf.RateLimitError):
            await lm.call("x")
    assert sleeps == []


@pytest.mark.parametrize("header", ["inf", "Infinity", "nan", "-5", "1e999", "soon", "", "0x10"])
async def test_odd_retry_after_never_sleeps_beyond_max_delay(header: str) -> None:
    sleeps = Sleeps()
    async with _served(sleeps, _429(header), OK) as (_server, lm):
        if header == "-5":
            assert (await lm.call("x")).text
        else:  # ignored, with a warning
            with pytest.warns(RateLimitWarning, match="ignored retry-after"):
                assert (await lm.call("x")).text
    assert len(sleeps) == 1
    assert 0.0 <= sleeps[0] <= 30.0 and math.isfinite(sleeps[0])


async def test_retry_after_within_max_delay_is_honoured() -> None:
    sleeps = Sleeps()
    async with _served(sleeps, _429("30"), OK) as (_server, lm):
        assert (await lm.call("x")).text
    assert sleeps == [30.0]


@pytest.mark.parametrize("value", [math.inf, math.nan, -3.0, 10**400, "7", None])
def test_policy_delay_is_always_finite_and_bounded(value: object) -> None:
    policy = RetryPolicy(max_delay=5.0, random=lambda: 0.0)
    error = lf.RateLimitError("x", retry_after=value)  # type: ignore[arg-type]
    for attempt in (1, 2, 50, 5000):
        delay = policy.delay(attempt, error)
        assert delay is None or (math.isfinite(delay) and 0.0 <= delay <= 5.0)
    assert policy.delay(1, lf.ServerError("x")) == 1.0
    assert policy.delay(5000, lf.ServerError("x")) == 5.0  # no OverflowError


async def test_stream_retry_respects_max_delay_too() -> None:
    sleeps = Sleeps()
    async with _served(sleeps, _429("86400"), Reply.sse(fixture("openai_text.sse"))) as (
        _server,
        lm,
    ):
        with pytest.raises(lf.RateLimitError):
            async for _ in lm.stream("x"):
                pass
    assert sleeps == []


# -- the account's limiter obeys max_delay too ----------------------------------------------
HEADERS = {"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "1s"}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_long_429_pause_fails_the_accounts_next_requests_at_once(stream: bool) -> None:
    sleeps = Sleeps()
    limited = Reply.json(fixture("openai_error_429.json"), 429, {"retry-after": "86400", **HEADERS})
    async with _served(sleeps, limited, OK) as (server, lm):
        with pytest.raises(lf.RateLimitError):
            await lm.call("x")  # the policy refuses to wait a day: raised at once
        other = OpenAI("gpt-4o-mini", api_key="k", base_url=server.url)  # same account
        for model in (lm, other):
            with pytest.raises(lf.RateLimitError, match=r"86,400\.0 s") as info:
                async with asyncio.timeout(10):  # on main: paused for a day
                    if stream:
                        async for _ in model.stream("x"):
                            pass
                    else:
                        await model.call("x")
            assert info.value.retry_after is not None and info.value.retry_after > 86_000
            assert "max_delay=30" in str(info.value)
        await other.aclose()
    assert len(server.requests) == 1  # the paused account was not hammered meanwhile
    assert sleeps == []


@pytest.mark.parametrize("reset", ["inf", "1e308", "99999h", "9999-12-31T23:59:59Z", "soon", "nan"])
async def test_an_absurd_reset_header_is_ignored_with_a_warning(reset: str) -> None:
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": reset}
    answer = Reply.json(fixture("openai_completion_json.json"), headers=headers)
    async with _served(Sleeps(), answer) as (server, lm):
        with pytest.warns(RateLimitWarning, match="x-ratelimit-reset-requests"):
            async with asyncio.timeout(10):  # on main: the next request waits for ever
                for _ in range(2):
                    assert (await lm.call("x")).text
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("name", "value"),
    [("retry-after-ms", "1e15"), ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")],
)
async def test_an_absurd_retry_after_does_not_pause_the_account_for_ever(
    name: str, value: str
) -> None:
    limited = Reply.json(fixture("openai_error_429.json"), 429, {name: value, **HEADERS})
    async with _served(Sleeps(), limited, OK) as (server, lm):
        with (
            pytest.warns(RateLimitWarning, match="not plausible"),
            pytest.raises(lf.RateLimitError),
        ):
            await lm.call("x")  # far beyond max_delay: not retried
        async with asyncio.timeout(10):  # on main: paused for ever
            assert (await lm.call("x")).text
    assert len(server.requests) == 2
