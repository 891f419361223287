"""lf.RateLimit and the account limiter, against a real rate-limited local server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import ratelimit
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI, rate_limits
from langfx_nb.llms.ratelimit import Limiter, parse_reset

from .limited_server import LimitedServer


class Label(pydantic.BaseModel):
    item: str
    label: str


@pytest.fixture
def server_factory() -> Iterator[list[LimitedServer]]:
    servers: list[LimitedServer] = []
    yield servers
    for s in servers:
        s.stop()


def serve(servers: list[LimitedServer], **kw: object) -> LimitedServer:
    server = LimitedServer(**kw).start()  # type: ignore[arg-type]
    servers.append(server)
    return server


MODELS: list[OpenAI] = []


@pytest.fixture(autouse=True)
async def _close_models() -> object:
    yield
    while MODELS:
        await MODELS.pop().aclose()


def model(server: LimitedServer, key: str = "sk-test", **kw: object) -> OpenAI:
    lm = OpenAI(
        "gpt-test",
        api_key=key,
        base_url=server.url,
        transport=httpx.AsyncHTTPTransport(),
        max_tokens=12,
        max_attempts=6,
        **kw,  # type: ignore[arg-type]
    )
    MODELS.append(lm)
    return lm


async def label(row: dict[str, int], session: lf.Session) -> Label:
    return await session.query("Label: item={{id}}", Label, vars=row, protocol="json")  # type: ignore[no-any-return]


def after_first_window(server: LimitedServer) -> list[float]:
    return [t for t in server.rejected if t >= server.window_s]


def test_rate_limit_values_are_checked() -> None:
    assert lf.RateLimit(60, None).requests_per_minute == 60
    for bad in (0, -1, float("inf"), float("nan"), True, "10"):
        with pytest.raises(ValueError, match="requests_per_minute"):
            lf.RateLimit(requests_per_minute=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"lf\.RateLimit"):
        OpenAI("m", api_key="k", rate_limit={"rpm": 1})  # type: ignore[arg-type]


def test_reset_headers_of_each_provider_parse() -> None:
    assert parse_reset("1s") == 1.0
    assert parse_reset("6m0s") == 360.0
    assert parse_reset("20ms") == pytest.approx(0.02)
    assert parse_reset("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_reset("2.5") == 2.5
    assert parse_reset("2030-01-01T00:00:10Z", now=1893456000.0) == pytest.approx(10.0)
    assert parse_reset("soon") is None and parse_reset(None) is None


def test_models_of_one_account_share_one_limiter_and_the_key_is_not_kept() -> None:
    a = OpenAI("gpt-4o", api_key="sk-secret-1", base_url="http://127.0.0.1:9/v1")
    b = OpenAI("gpt-4o-mini", api_key="sk-secret-1", base_url="http://127.0.0.1:9/v1")
    c = OpenAI("gpt-4o", api_key="sk-secret-2", base_url="http://127.0.0.1:9/v1")
    d = Anthropic("claude", api_key="sk-secret-1", base_url="http://127.0.0.1:9/v1")
    assert a.rate_limiter() is b.rate_limiter()
    assert a.rate_limiter() is not c.rate_limiter()
    assert a.rate_limiter() is not d.rate_limiter()
    limited = OpenAI(
        "gpt-4o",
        api_key="sk-secret-1",
        base_url="http://127.0.0.1:9/v1",
        rate_limit=lf.RateLimit(requests_per_minute=100),
    )
    assert limited.rate_limiter() is a.rate_limiter()
    assert a.rate_limiter().limit == lf.RateLimit(100, None)  # one limit for the account
    from langfx_nb.llms import ratelimit

    assert not any("sk-secret" in k for k in ratelimit._REGISTRY)
    assert "sk-secret" not in repr(a.rate_limiter().__dict__)


async def test_configured_request_limit_sends_no_429_after_the_first_window(
    server_factory: list[LimitedServer],
) -> None:
    server = serve(server_factory, requests=40, window_s=0.5, headers=False)
    # 90 % of the server's limit: headroom for this loaded test machine's scheduling jitter
    lm = model(server, rate_limit=lf.RateLimit(requests_per_minute=0.9 * 40 / 0.5 * 60))
    result = await lf.batch(
        label,
        [{"id": i} for i in range(100)],
        session=lf.Session(lm),
        max_concurrency=16,
        progress=False,
    )
    assert result.ok and len(server.answered) == 100
    assert after_first_window(server) == []


async def test_configured_token_limit_counts_estimates_corrected_by_usage(
    server_factory: list[LimitedServer],
) -> None:
    server = serve(server_factory, tokens=3000, window_s=0.5, headers=False)
    lm = model(server, rate_limit=lf.RateLimit(tokens_per_minute=0.9 * 3000 / 0.5 * 60))
    result = await lf.batch(
        label,
        [{"id": i} for i in range(40)],
        session=lf.Session(lm),
        max_concurrency=16,
        progress=False,
    )
    assert result.ok
    assert after_first_window(server) == []
    assert result.totals.usage.total_tokens == server.tokens_used


async def test_without_a_limit_the_providers_headers_set_it(
    server_factory: list[LimitedServer],
) -> None:
    server = serve(server_factory, requests=10, window_s=0.5, headers=True)
    lm = model(server)
    result = await lf.batch(
        label,
        [{"id": i} for i in range(30)],
        session=lf.Session(lm),
        max_concurrency=8,
        progress=False,
    )
    assert result.ok and len(server.answered) == 30 and not server.duplicates
    assert after_first_window(server) == []
    assert lm.rate_limiter().engaged


async def test_a_429_pauses_every_request_of_the_account() -> None:
    now = [0.0]
    limiter = Limiter(clock=lambda: now[0])
    limiter.configure(lf.RateLimit(requests_per_minute=600_000))
    first = await limiter.acquire(10)
    first.settle(10)
    limiter.throttle(0.2)
    waiting = [asyncio.ensure_future(limiter.acquire(10)) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in waiting)  # all of them wait, not just one
    now[0] = 0.3
    tickets = await asyncio.gather(*waiting)
    assert len(tickets) == 3 and limiter.throttled == 1


async def test_a_429_without_limits_or_headers_is_left_to_the_retry_policy() -> None:
    limiter = Limiter()
    limiter.throttle(30.0)
    ticket = await asyncio.wait_for(limiter.acquire(1), 1.0)  # no pause: nothing engaged
    ticket.settle(1)
    assert limiter.throttled == 1 and not limiter.engaged


async def test_token_estimates_are_corrected_by_the_usage_returned() -> None:
    now = [0.0]
    limiter = Limiter(clock=lambda: now[0])  # frozen: nothing refills
    limiter.configure(lf.RateLimit(tokens_per_minute=1_200_000))  # holds ~970 tokens
    first = await limiter.acquire(2000)  # let through, leaving the bucket in debt
    second = asyncio.ensure_future(limiter.acquire(900))
    await asyncio.sleep(0.02)
    assert not second.done()
    first.settle(50)  # it used far less than estimated: the rest is given back
    ticket = await asyncio.wait_for(second, 2.0)
    ticket.settle(900)


async def test_a_lease_takes_many_requests_at_once_and_what_they_used_is_given_back() -> None:
    now = [0.0]
    limiter = Limiter(clock=lambda: now[0])  # frozen: nothing refills
    limiter.configure(lf.RateLimit(requests_per_minute=6000, tokens_per_minute=60_000))
    assert await limiter.take(5, 50) == (5, 50)  # into debt for all five at once
    assert limiter.in_flight == 5
    later = asyncio.ensure_future(limiter.take(1, 10))
    await asyncio.sleep(0.02)
    assert not later.done()  # the debt is paid off by time only
    now[0] = 0.1
    assert await asyncio.wait_for(later, 2.0) == (1, 10)
    limiter.give_back(6, -30)  # ended, using 30 tokens fewer than taken
    assert limiter.in_flight == 0
    # without a configured limit, what the provider says remains caps a lease
    headers = Limiter()
    headers.observe(
        rate_limits({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "5s"})
    )
    assert await headers.take(8, 80) == (3, 30)


def test_gemini_sends_no_headers_so_only_a_configured_limit_holds() -> None:
    g = Gemini("gemini-2.0-flash", api_key="k", base_url="http://127.0.0.1:9/v1beta")
    assert g.rate_limiter().limit is None and not g.rate_limiter().engaged
    limited = Gemini(
        "gemini-2.0-flash",
        api_key="k2",
        base_url="http://127.0.0.1:9/v1beta",
        rate_limit=lf.RateLimit(requests_per_minute=10),
    )
    assert limited.rate_limiter().engaged


async def test_rate_limits_hold_outside_batches_too(server_factory: list[LimitedServer]) -> None:
    server = serve(server_factory, requests=10, window_s=0.5, headers=False)
    lm = model(server, rate_limit=lf.RateLimit(requests_per_minute=0.9 * 10 / 0.5 * 60))
    other = model(server)  # the same account, no limit of its own: shares the limiter
    calls = [
        lf.query(f"Label: item={i}", Label, lm=lm if i % 2 else other, protocol="json")
        for i in range(25)
    ]
    results = await asyncio.gather(*calls)
    assert len(results) == 25 and after_first_window(server) == []


async def test_a_grant_given_back_unspent_returns_its_requests_and_tokens() -> None:
    now = [0.0]
    limiter = Limiter(clock=lambda: now[0])  # frozen: nothing refills
    limiter.configure(lf.RateLimit(requests_per_minute=6000, tokens_per_minute=60_000))
    capacity = await limiter.take(50_000, 0)  # every request the bucket holds now
    assert capacity[0] >= 1
    blocked = asyncio.ensure_future(limiter.take(1, 0))
    await asyncio.sleep(0.02)
    assert not blocked.done()  # nothing left, and the clock does not move
    blocked.cancel()
    # a worker's grant expired unspent: its requests were never sent
    limiter.give_back(capacity[0], 0, unused=capacity[0])
    assert await asyncio.wait_for(limiter.take(1, 0), 1.0) == (1, 0)


def after_the_opening(server: LimitedServer) -> list[float]:
    """The 429s after the window of the first answer and the next one: the requests sent
    before any headers arrived may reach a loaded server across two windows."""
    first = server.first_at or 0.0
    start = (first // server.window_s + 2) * server.window_s
    return [t for t in server.rejected if t >= start]


@pytest.mark.parametrize("limit", [{"tokens": 3000}, {"requests": 10}])
async def test_limits_learned_from_headers_resume_at_the_limit_after_a_reset(
    server_factory: list[LimitedServer], limit: dict[str, int]
) -> None:
    # on main every waiting request went at each reset: hundreds of 429s, items failed
    server = serve(server_factory, window_s=0.5, headers=True, **limit)
    lm = model(server)
    result = await lf.batch(
        label,
        [{"id": i} for i in range(100)],
        session=lf.Session(lm),
        max_concurrency=64,
        progress=False,
    )
    assert result.ok and len(server.answered) == 100 and not server.duplicates
    assert after_the_opening(server) == []


async def test_a_configured_limit_slows_down_after_a_429_with_large_requests(
    server_factory: list[LimitedServer],
) -> None:
    # ~300-token requests against a 3000-token window: 97 % of the limit still lets a
    # tenth request into some windows (on main one 429 every three windows, for ever)
    server = serve(server_factory, tokens=3000, window_s=0.5, headers=False)
    lm = model(server, rate_limit=lf.RateLimit(tokens_per_minute=3000 / 0.5 * 60))
    filler = "x" * 800

    async def big(row: dict[str, int], session: lf.Session) -> Label:
        prompt = "Label: item={{id}} " + filler
        return await session.query(prompt, Label, vars=row, protocol="json")  # type: ignore[no-any-return]

    result = await lf.batch(
        big,
        [{"id": i} for i in range(120)],
        session=lf.Session(lm),
        max_concurrency=32,
        progress=False,
    )
    assert result.ok
    assert len(server.rejected) <= 3  # the pace adapts after one or two (on main: 7)


async def test_a_window_reset_holds_back_what_is_still_unanswered() -> None:
    now = [0.0]
    limiter = Limiter(clock=lambda: now[0])
    headers = {
        "x-ratelimit-limit-requests": "4",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
    }

    async def sent_at_once() -> bool:
        try:
            await asyncio.wait_for(limiter.take(1, 1), 0.05)
        except TimeoutError:
            return False
        return True

    in_flight = [await limiter.acquire(1) for _ in range(3)]
    limiter.observe(
        rate_limits(headers)
    )  # the first one's answer (a stream, say: it stays in flight)
    now[0] = 1.05  # the window has reset: 4 again, less the 2 sent and not answered yet
    assert await limiter.take(10, 10) == (2, 2)
    assert not await sent_at_once()  # not every waiting request at once
    now[0] = 1.1  # an answer given late in the old window, read now, must not count
    limiter.observe(
        rate_limits(
            {**headers, "x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "50ms"}
        )
    )
    assert not await sent_at_once()
    now[0] = 2.05  # the new window, taken to last as long as the last one (1 s), is over
    assert await sent_at_once()
    for ticket in in_flight:
        ticket.settle(1)


async def test_a_per_minute_window_is_waited_out_a_longer_one_fails_at_once() -> None:
    for reset, fails in (("45s", False), ("2h", True)):
        limiter = Limiter(clock=lambda: 0.0)
        limiter.observe(
            rate_limits(
                {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": reset}
            )
        )
        if fails:  # a daily limit used up: the request is not sent, and says why
            with pytest.raises(lf.RateLimitError, match=r"7,200\.0 s") as info:
                await limiter.take(1, 1)
            assert info.value.retry_after == 7200.0
        else:  # the pace of a per-minute limit: it waits, though max_delay is 30 s
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(limiter.take(1, 1), 0.05)


async def test_a_configured_limit_keeps_every_fixed_minute_under_it_with_large_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # requests of ~10 % of a minute's limit: a server counting fixed minutes saw up to
    # 106 % of the limit in some of them (11 requests of 2,900 tokens against 30,000)
    now = [0.0]

    async def sleep(seconds: float) -> None:  # the limiter's waits pass on its own clock
        now[0] += max(seconds, 1e-6)  # as a real sleep would, however short

    monkeypatch.setattr(ratelimit, "asyncio", SimpleNamespace(sleep=sleep))
    limiter = Limiter(clock=lambda: now[0])
    limiter.configure(lf.RateLimit(tokens_per_minute=30_000))
    sent: list[float] = []
    while now[0] < 600:
        ticket = await limiter.acquire(2_900)
        sent.append(now[0])
        ticket.settle(2_900)
    for start in range(60):  # wherever the server's minutes begin
        per_minute: dict[int, int] = {}
        for t in sent:
            minute = int((t + start) // 60)
            per_minute[minute] = per_minute.get(minute, 0) + 2_900
        del per_minute[0]  # the first, partial one: all of it may go at once
        assert max(per_minute.values()) <= 30_000
