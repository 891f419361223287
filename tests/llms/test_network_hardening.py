"""Provider streams against a real HTTP server on 127.0.0.1: secrets echoed by a server
never reach an error, a log or a trace; a stalled stream ends with a classified error;
sequential streams reuse one pooled connection; a 200 body that is no event stream is a
protocol error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.openai_responses import OpenAIResponses

from .local_server import DROP, STALL, LocalServer, Repeat, Reply, local_server
from .wire import fixture

pytestmark = pytest.mark.usefixtures("local_network")

KEY = "sk-live-ECHOED-key-0123456789abcdef"
TOKEN = "gw-token-SECRET-4242424242"

Factory = Callable[..., Any]
PROVIDERS: dict[str, tuple[Factory, str]] = {
    "openai": (lambda url, **kw: OpenAI("gpt-4o", base_url=url, **kw), "openai_text.sse"),
    "anthropic": (
        lambda url, **kw: Anthropic("claude", base_url=url, max_tokens=64, **kw),
        "anthropic_text.sse",
    ),
    "gemini": (lambda url, **kw: Gemini("gemini-x", base_url=url, **kw), "gemini_text.sse"),
}
RESPONSES: tuple[Factory, str] = (
    lambda url, **kw: OpenAIResponses("gpt-4o", base_url=url, **kw),
    "openai_responses_text.sse",
)


@contextlib.asynccontextmanager
async def served(
    provider: str, *replies: Reply, **kw: Any
) -> AsyncIterator[tuple[LocalServer, Any]]:
    make, _ = RESPONSES if provider == "responses" else PROVIDERS[provider]
    async with local_server(*replies) as server:
        lm = make(server.url, api_key=kw.pop("api_key", KEY), **kw)
        try:
            yield server, lm
        finally:
            await lm.aclose()


async def _drain(lm: Any) -> str:
    return "".join([c.delta async for c in lm.stream("hi")])


# -- secrets -----------------------------------------------------------------------------------
ECHOING_ERRORS = {
    "openai": {"error": {"message": f"bad key {KEY}", "type": KEY, "code": KEY}},
    "anthropic": {"type": "error", "error": {"type": KEY, "message": f"bad key {KEY}"}},
    "gemini": {
        "error": {
            "code": 401,
            "message": f"bad key {KEY}",
            "status": KEY,
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": KEY}],
        }
    },
}


def _all_text(exc: BaseException) -> str:
    """Everything an exception shows: its str/repr/args and those of its whole chain."""
    out: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out += [str(e), repr(e), repr(e.args), repr(getattr(e, "__notes__", ""))]
        todo += [e.__cause__, e.__context__]
    return "\n".join(out)


def _secret_free(*texts: str) -> None:
    for text in texts:
        assert KEY not in text
        assert TOKEN not in text
        assert "ECHOED" not in text


@pytest.mark.parametrize("provider", list(PROVIDERS))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [401, 400, 429, 500])
async def test_echoed_key_never_reaches_an_error_or_a_trace(
    provider: str, stream: bool, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    # our own loggers (httpcore's DEBUG log prints raw headers: that is the user's opt-in)
    caplog.set_level(logging.DEBUG, logger="langfx_nb")
    body = json.dumps(ECHOING_ERRORS[provider]).encode()
    reply = Reply.json(body, status, {"x-echo": KEY})
    async with served(provider, reply, headers={"x-gateway-token": TOKEN}) as (server, lm):
        session = lf.Session(lm)
        with pytest.raises(lf.LMError) as info:
            if stream:
                async for _ in session.query_stream("q"):
                    pass
            else:
                await session.query("q")
        await session.dispose()
        assert server.requests[0].headers.get("x-gateway-token") == TOKEN  # it was sent
    _secret_free(_all_text(info.value), session.trace_json_str(), caplog.text)


@pytest.mark.parametrize("name", ["authorization", "x-api-key", "api-key", "x-goog-api-key"])
async def test_configured_secret_headers_are_redacted(name: str) -> None:
    body = json.dumps({"error": {"code": TOKEN, "type": TOKEN}}).encode()
    async with served("openai", Reply.json(body, 400), headers={name: TOKEN}) as (_, lm):
        with pytest.raises(lf.LMError) as info:
            await lm.call("q")
    _secret_free(_all_text(info.value))


async def test_key_from_a_resolver_is_redacted_too() -> None:
    async def resolve() -> str:
        return KEY

    body = json.dumps(ECHOING_ERRORS["openai"]).encode()
    async with served("openai", Reply.json(body, 401), api_key=resolve) as (_, lm):
        with pytest.raises(lf.AuthenticationError) as info:
            await lm.call("q")
    _secret_free(_all_text(info.value))
    assert "HTTP 401" in str(info.value)


async def test_in_stream_error_echoing_the_key_is_redacted() -> None:
    event = json.dumps({"error": {"message": KEY, "type": KEY, "code": KEY}})
    reply = Reply.sse(f"data: {event}\n\n".encode())
    async with served("openai", reply) as (_, lm):
        with pytest.raises(lf.LMError) as info:
            await _drain(lm)
    _secret_free(_all_text(info.value))


# -- stalled streams ---------------------------------------------------------------------------
FIRST_EVENT = {
    "openai": b'data: {"id":"1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
    "anthropic": (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":'
        b'"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":1,'
        b'"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hel"}}\n\n'
    ),
    "gemini": b'data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}\n\n',
}
PING = {
    "openai": b": keep-alive\n\n",
    "anthropic": b'event: ping\ndata: {"type": "ping"}\n\n',
    "gemini": b": keep-alive\n\n",
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_a_stream_that_stops_sending_ends_with_a_classified_error(provider: str) -> None:
    reply = Reply.sse(FIRST_EVENT[provider], STALL)
    async with served(provider, reply, stream_idle_timeout=0.3) as (_, lm):
        seen: list[str] = []
        with pytest.raises(lf.ServerError, match="stalled") as info:
            async for chunk in lm.stream("hi"):
                seen.append(chunk.delta)
    assert "Hel" in "".join(seen)
    assert "0.3" in str(info.value)
    assert isinstance(info.value.__cause__, TimeoutError)  # the cause is kept (chained)


@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_keep_alive_pings_alone_do_not_keep_a_stream_alive(provider: str) -> None:
    pings: list[object] = [PING[provider], 0.05] * 200  # ten seconds of pings, no content
    reply = Reply.sse(FIRST_EVENT[provider], *pings)
    async with served(provider, reply, stream_idle_timeout=0.3) as (_, lm):
        with pytest.raises(lf.ServerError, match="stalled"):
            await _drain(lm)


async def test_a_stall_before_any_event_is_retried() -> None:
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)

    retry = lf.llms.RetryPolicy(max_attempts=2, sleep=sleep)
    stalled = Reply.sse(b"", STALL)
    ok = Reply.sse(fixture("openai_text.sse"))
    async with served("openai", stalled, ok, stream_idle_timeout=0.3, retry=retry) as (_, lm):
        assert await _drain(lm)
    assert len(sleeps) == 1


async def test_a_slow_consumer_is_not_a_stalled_stream() -> None:
    """Time the consumer spends on a chunk is not the server's silence."""
    pieces: list[object] = []
    for line in fixture("openai_text.sse").split(b"\n\n"):
        if line.strip():
            pieces += [line + b"\n\n", 0.01]
    async with served("openai", Reply.sse(b"", *pieces), stream_idle_timeout=0.2) as (_, lm):
        text = ""
        async for chunk in lm.stream("hi"):
            text += chunk.delta
            await asyncio.sleep(0.3)
    assert text


async def test_cancelling_the_consumer_is_not_turned_into_a_stall() -> None:
    reply = Reply.sse(FIRST_EVENT["openai"], STALL)
    async with served("openai", reply, stream_idle_timeout=30) as (_, lm):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await _drain(lm)


def test_stream_idle_timeout_is_validated() -> None:
    with pytest.raises(ValueError):
        OpenAI("m", api_key="k", stream_idle_timeout=0)
    assert OpenAI("m", api_key="k").stream_idle_timeout > 0


# -- pooled connections ------------------------------------------------------------------------
@pytest.mark.parametrize("provider", [*PROVIDERS, "responses"])
async def test_sequential_streams_reuse_one_connection(provider: str) -> None:
    _, name = RESPONSES if provider == "responses" else PROVIDERS[provider]
    async with served(provider, Reply.sse(fixture(name))) as (server, lm):
        for _ in range(15):
            assert await _drain(lm)
        assert len(server.requests) == 15
        assert server.connections == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_a_pooled_connection_closed_by_the_server_is_replaced(stream: bool) -> None:
    """Some servers (llama-server) close a connection right after a stream; reusing it can
    race that close. A request the server drops unanswered goes once more on a fresh one."""
    ok = Reply.sse(fixture("openai_text.sse"))
    ok_json = Reply.json(fixture("openai_completion_json.json"))
    then = ok if stream else ok_json
    async with served("openai", ok, Reply(body=[DROP]), then) as (server, lm):
        assert await _drain(lm)
        if stream:
            assert await _drain(lm)
        else:
            assert (await lm.call("again")).text
        assert len(server.requests) == 3 and server.connections == 2


@pytest.mark.parametrize("stream", [True, False])
async def test_a_request_dropped_on_a_fresh_connection_is_sent_once(stream: bool) -> None:
    """A server that takes a request on a new connection and dies before answering may have
    processed (billed) it: the request is not sent again, and the failure says what happened."""
    ok = Reply.sse(fixture("openai_text.sse"))
    async with served("openai", Reply(body=[DROP]), ok) as (server, lm):
        with pytest.raises(lf.ServerError, match="connection failed"):
            if stream:
                await _drain(lm)
            else:
                await lm.call("hi")
        assert len(server.requests) == 1 and server.connections == 1
        assert await _drain(lm)  # the next request is a new one, on a new connection


async def test_bytes_after_done_are_read_before_the_connection_is_reused() -> None:
    tail = b": trailing comment after the end\n\n" * 50
    reply = Reply.sse(fixture("openai_text.sse"), tail)
    async with served("openai", reply) as (server, lm):
        for _ in range(5):
            assert await _drain(lm)
        assert server.connections == 1


# -- Gemini: a 200 body that is no event stream -------------------------------------------------
@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/html", b"<html><body>Sign in to continue</body></html>"),
        ("text/event-stream", b""),
        ("text/event-stream", b": just a comment\n\n: and another\n\n"),
        ("text/plain", b"upstream connect error"),
    ],
)
async def test_gemini_body_without_events_is_a_protocol_error(
    content_type: str, body: bytes
) -> None:
    reply = Reply(200, {"content-type": content_type}, [body])
    async with served("gemini", reply) as (_, lm):
        with pytest.raises(lf.StreamProtocolError):
            await _drain(lm)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_redirect_on_another_api_endpoint_is_an_error_and_not_followed(
    provider: str,
) -> None:
    """A provider batch's results read through ``api_request``: a redirect's empty body must
    not read as an empty results file (every item would be paid for again), and the key must
    not follow it to another address."""
    async with local_server(Reply(200, {"content-length": "2"}, [b"ok"])) as elsewhere:
        moved = Reply(302, {"location": f"{elsewhere.url}/results", "content-length": "0"})
        async with served(provider, moved) as (server, lm):
            with pytest.raises(lf.InvalidRequestError, match="HTTP 302"):
                await lm.api_request("GET", f"{server.url}/v1/batches/b1/results")
        assert len(server.requests) == 1
        assert elsewhere.requests == []


# -- credentials in a base URL and on other API endpoints ---------------------------------------
PASSWORD = "pw-URLSECRET-987654321"


@pytest.mark.parametrize(
    ("provider", "answer"),
    [
        ("openai", "openai_completion_json.json"),
        ("anthropic", "anthropic_message_thinking.json"),
        ("gemini", "gemini_generate_thoughts.json"),
    ],
)
async def test_a_password_in_the_base_url_is_never_shown_or_stored(
    provider: str, answer: str, tmp_path: Any
) -> None:
    from langfx_nb.llms.cache import SQLiteCache

    make, _ = PROVIDERS[provider]
    ok = Reply.json(fixture(answer))
    echo = json.dumps({"error": {"message": f"no {PASSWORD}", "code": PASSWORD}}).encode()
    async with local_server(ok, ok, Reply.json(echo, 500)) as server:
        url = server.url.replace("http://", f"http://alice:{PASSWORD}@")
        cache = SQLiteCache(tmp_path / "cache.sqlite")
        lm = make(url, api_key=KEY, cache=cache)
        try:
            first = await lm.call("hi")
            # the answer's continuation and reasoning are still recognised as this model's
            second = await lm.call([lf.UserMessage("hi"), first, lf.UserMessage("more")])
            with pytest.raises(lf.LMError) as info:
                await lm.call("fails")
        finally:
            await lm.aclose()
            cache.close()
    assert len(server.requests) == 3
    stored = (tmp_path / "cache.sqlite").read_bytes().decode("utf-8", "replace")
    shown = [json.dumps(first.to_json()), json.dumps(second.to_json()), repr(lm), stored]
    for text in [*shown, _all_text(info.value)]:
        assert PASSWORD not in text
    assert "127.0.0.1" in json.dumps(first.to_json())  # where it came from is still said


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_401_on_another_api_endpoint_never_shows_the_key(provider: str) -> None:
    body = json.dumps(ECHOING_ERRORS[provider]).encode()
    async with served(provider, Reply.json(body, 401, {"x-echo": KEY})) as (server, lm):
        with pytest.raises(lf.AuthenticationError) as info:
            await lm.api_request("GET", f"{server.url}/v1/batches/b1")
    _secret_free(_all_text(info.value))
    assert "HTTP 401" in str(info.value)


# -- servers that never finish: every shape ends, bounded in time and memory ------------------
JSON = {"content-type": "application/json"}
ENDLESS_HEAD = Reply(raw=True, body=[b"HTTP/1.1 200 OK\r\nx-slow: ", Repeat(b"x", 0.01)])
SHAPES: dict[str, tuple[Reply, bool, type[Exception], str]] = {
    "keep-alive comments only": (
        Reply.sse(b"", Repeat(b": keep-alive\n\n", 0.01)),
        True,
        lf.ServerError,
        "stalled",
    ),
    "blank lines only": (Reply.sse(b"", Repeat(b"\n", 0.01)), True, lf.ServerError, "stalled"),
    "events without content only": (
        Reply.sse(b"", Repeat(b'data: {"id":"1","choices":[{"index":0,"delta":{}}]}\n\n', 0.01)),
        True,
        lf.ServerError,
        "stalled",
    ),
    "headers a byte at a time (stream)": (ENDLESS_HEAD, True, lf.ServerError, "headers"),
    "headers a byte at a time (call)": (ENDLESS_HEAD, False, lf.ServerError, "headers"),
    "trickling error body (stream)": (
        Reply(500, JSON, [Repeat(b" ", 0.01)]),
        True,
        lf.ServerError,
        "HTTP 500",
    ),
    "trickling error body (call)": (
        Reply(500, JSON, [Repeat(b" ", 0.01)]),
        False,
        lf.ServerError,
        "HTTP 500",
    ),
    "trickling answer (call)": (
        Reply(200, JSON, [b'{"id": ', Repeat(b" ", 0.01)]),
        False,
        lf.ServerError,
        "in time",
    ),
    "endless JSON instead of a stream": (
        Reply(200, JSON, [b"[", Repeat(b" " * 65536)]),
        True,
        lf.StreamProtocolError,
        "max_event_bytes",
    ),
    "endless JSON answer (call)": (
        Reply(200, JSON, [b"[", Repeat(b" " * 65536)]),
        False,
        lf.StreamProtocolError,
        "max_event_bytes",
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_server_that_never_finishes_is_given_up_on(shape: str) -> None:
    reply, stream, error, match = SHAPES[shape]
    limits = {"stream_idle_timeout": 0.3, "timeout": 0.5, "max_event_bytes": 1 << 20}
    async with served("openai", reply, **limits) as (_, lm):
        with pytest.raises(error, match=match):
            async with asyncio.timeout(10):  # on main: for ever, or until memory runs out
                if stream:
                    await _drain(lm)
                else:
                    await lm.call("hi")


async def test_anthropic_pings_alone_from_the_start_end_as_a_stall() -> None:
    reply = Reply.sse(b"", Repeat(PING["anthropic"], 0.01))
    async with served("anthropic", reply, stream_idle_timeout=0.3) as (_, lm):
        with pytest.raises(lf.ServerError, match="stalled"):
            async with asyncio.timeout(10):
                await _drain(lm)
