"""The shared HTTP layer: keys, clients, blocking, error mapping, and closing responses."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import subprocess
import sys

import httpx
import pytest

import langfx_nb as lf
from langfx_nb.llms._http import HTTPModel
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini, parse_google_duration
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.openai_responses import OpenAIResponses
from langfx_nb.llms.ratelimit import RateLimitWarning, parse_retry_after

from .wire import SECRET_KEY, Reply, Server, fixture

STREAMS = {
    Gemini: "gemini_text.sse",
    Anthropic: "anthropic_text.sse",
    OpenAI: "openai_text.sse",
    OpenAIResponses: "openai_responses_text.sse",
}
PROVIDERS = list(STREAMS)


def make(cls: type[HTTPModel], server: Server | None = None, **kw: object) -> HTTPModel:
    if server is not None:
        kw["transport"] = server.transport
    return cls("m-1", **kw)


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_explicit_key_resolver_and_env_read_at_request_time(
    cls: type[HTTPModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in cls.env_vars:
        monkeypatch.delenv(var, raising=False)
    calls = 0

    async def resolver() -> str:
        nonlocal calls
        calls += 1
        return SECRET_KEY

    server = Server(Reply.sse(fixture(STREAMS[cls])))
    lm = make(cls, server, api_key=resolver)
    assert calls == 0  # nothing happens at construction
    [c async for c in lm.stream("x")]
    assert calls == 1
    assert SECRET_KEY in " ".join(server.requests[0].headers.values())
    # environment key: read when the request is made, not when the model is built
    server = Server(Reply.sse(fixture(STREAMS[cls])))
    lm = make(cls, server)
    monkeypatch.setenv(cls.env_vars[-1], "env-SECRET-key")
    [c async for c in lm.stream("x")]
    assert "env-SECRET-key" in " ".join(server.requests[0].headers.values())


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_missing_key_fails_before_sending(
    cls: type[HTTPModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in cls.env_vars:
        monkeypatch.delenv(var, raising=False)
    lf.llms.allow_model_requests(True)
    try:
        with pytest.raises(lf.AuthenticationError, match=cls.env_vars[0]):
            await make(cls).call("x")
    finally:
        lf.llms.allow_model_requests(False)
    # a custom transport (gateway) may authenticate on its own: sent without a key
    server = Server(Reply.sse(fixture(STREAMS[cls])))
    [c async for c in make(cls, server).stream("x")]
    headers = server.requests[0].headers
    assert not ({"x-goog-api-key", "x-api-key", "authorization"} & set(headers))


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_real_network_is_blocked_but_injected_transport_is_not(cls: type[HTTPModel]) -> None:
    with pytest.raises(lf.NetworkBlockedError):
        await make(cls, api_key=SECRET_KEY).call("x")
    with pytest.raises(lf.NetworkBlockedError):
        [c async for c in make(cls, api_key=SECRET_KEY).stream("x")]
    server = Server(Reply.sse(fixture(STREAMS[cls])))
    client = httpx.AsyncClient(transport=server.transport)
    async with client:
        chunks = [c async for c in make(cls, api_key=SECRET_KEY, http_client=client).stream("x")]
    assert chunks[-1].final


@pytest.mark.parametrize("cls", PROVIDERS)
def test_keys_stay_out_of_repr_and_cache_identity(cls: type[HTTPModel]) -> None:
    lm = make(cls, api_key=SECRET_KEY, base_url="https://gw.example/v1")
    for text in (repr(lm), str(vars(lm)), str(lm.cache_identity())):
        assert SECRET_KEY not in text
    assert lm.cache_identity()["base_url"] == "https://gw.example/v1"
    with_password = make(cls, base_url="https://me:hunter2-pass@gw.example:8443/v1")
    assert "hunter2" not in repr(with_password)
    assert "<redacted>@gw.example:8443/v1" in repr(with_password)
    assert with_password.server == "gw.example:8443"
    with pytest.raises(ValueError):
        cls("")  # no default model id


@pytest.mark.parametrize("cls", PROVIDERS)
@pytest.mark.parametrize(
    "exc",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("bad")],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_transport_errors_become_server_errors(
    cls: type[HTTPModel], exc: Exception, stream: bool
) -> None:
    # a transport that reports no pooled connection: whatever failed is never sent again
    server = Server(Reply(raise_exc=exc))
    lm = make(cls, server, api_key=SECRET_KEY)
    with pytest.raises(lf.ServerError) as info:
        if stream:
            [c async for c in lm.stream("x")]
        else:
            await lm.call("x")
    assert info.value.__cause__ is exc
    assert SECRET_KEY not in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_connection_dropped_mid_stream_closes_and_raises(cls: type[HTTPModel]) -> None:
    data = fixture(STREAMS[cls])
    pieces = [data[i : i + 40] for i in range(0, len(data), 40)]
    server = Server(Reply.sse(pieces, fail_after=5))
    with pytest.raises(lf.ServerError) as info:
        [c async for c in make(cls, server, api_key=SECRET_KEY).stream("x")]
    assert isinstance(info.value.__cause__, httpx.ReadError)
    assert server.all_closed()


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_early_break_closes_the_response(cls: type[HTTPModel]) -> None:
    data = fixture(STREAMS[cls])
    pieces = [data[i : i + 30] for i in range(0, len(data), 30)]
    # with aclosing (or an explicit aclose) the response is closed right away
    server = Server(Reply.sse(pieces))
    async with contextlib.aclosing(make(cls, server, api_key=SECRET_KEY).stream("x")) as it:
        async for chunk in it:
            if chunk.delta:
                break
    assert server.streams[0].closed
    assert server.streams[0].sent < len(pieces)
    # a bare break leaves closing to the event loop's async-generator finalizer
    server = Server(Reply.sse(pieces))
    async for chunk in make(cls, server, api_key=SECRET_KEY).stream("x"):
        if chunk.delta:
            break
    for _ in range(10):
        await asyncio.sleep(0)
    assert server.streams[0].closed


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_cancellation_closes_the_response(cls: type[HTTPModel]) -> None:
    data = fixture(STREAMS[cls])
    pieces = [data[i : i + 30] for i in range(0, len(data), 30)]
    server = Server(Reply.sse(pieces, hang_after=len(pieces) - 2))
    seen = asyncio.Event()

    async def consume() -> None:
        async for chunk in make(cls, server, api_key=SECRET_KEY).stream("x"):
            if chunk.delta:
                seen.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(10):  # a guard only: the stream hangs after the first text
        await seen.wait()
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.streams[0].closed


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250"}, ms="retry-after-ms") == 0.25
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == 30.0
    with pytest.warns(RateLimitWarning, match="ignored retry-after: 'soon'"):
        assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_google_duration("1.5s") == 1.5
    assert parse_google_duration("x") is None


async def test_retry_after_from_header_drives_the_retry_delay() -> None:
    sleeps: list[float] = []

    async def fake_sleep(s: float) -> None:
        sleeps.append(s)

    server = Server(
        Reply.json(fixture("openai_error_429.json"), status=429, headers={"retry-after": "3"}),
        Reply.json(fixture("openai_completion_json.json")),
    )
    lm = OpenAI(
        "gpt-4o",
        api_key=SECRET_KEY,
        transport=server.transport,
        retry=lf.llms.RetryPolicy(max_attempts=2, sleep=fake_sleep),
    )
    await lm.call("x")
    assert sleeps == [3.0]


def test_registry() -> None:
    assert isinstance(lf.llms.get("gemini:gemini-2.5-flash"), Gemini)
    assert isinstance(lf.llms.get("google:gemini-2.5-flash"), Gemini)
    assert isinstance(lf.llms.get("anthropic:claude-x", max_tokens=10), Anthropic)
    lm = lf.llms.get("openai:llama3", base_url="http://localhost:8000/v1")
    assert isinstance(lm, OpenAI) and lm.model == "llama3"
    assert isinstance(lf.llms.get("fake:echo"), lf.llms.Echo)
    static = lf.llms.get("fake:static?text=hello%20world")
    assert isinstance(static, lf.llms.StaticResponse) and static.response == "hello world"
    for bad in ("gemini", "gemini:", "nope:x", "fake:unknown", "fake:static"):
        with pytest.raises(ValueError):
            lf.llms.get(bad)
    assert lf.llms.GoogleGenAI is Gemini


def test_import_does_not_load_provider_code() -> None:
    code = (
        "import sys, langfx_nb as lf; "
        "names = ('gemini', 'anthropic', 'openai', '_http'); "
        "assert not [n for n in names if 'langfx_nb.llms.' + n in sys.modules]; "
        "lf.llms.get('fake:echo'); "
        "assert 'langfx_nb.llms.gemini' not in sys.modules; "
        "lf.llms.Gemini; assert 'langfx_nb.llms.gemini' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_json_body_where_a_stream_was_expected(cls: type[HTTPModel]) -> None:
    error = {"error": {"code": 503, "message": "SECRET", "status": "UNAVAILABLE", "type": "x"}}
    server = Server(Reply.json(error), Reply.json({"id": "not a stream"}))
    with pytest.raises(lf.ServerError) as info:
        [c async for c in make(cls, server, api_key=SECRET_KEY).stream("x")]
    assert "SECRET" not in str(info.value)
    with pytest.raises(lf.StreamProtocolError):
        [c async for c in make(cls, server, api_key=SECRET_KEY).stream("x")]
    assert server.all_closed()


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_event_stream_mislabelled_as_json_is_still_read(cls: type[HTTPModel]) -> None:
    reply = Reply.sse(fixture(STREAMS[cls]))
    reply.headers["content-type"] = "application/json"
    server = Server(reply)
    chunks = [c async for c in make(cls, server, api_key=SECRET_KEY).stream("x")]
    assert chunks[-1].final and chunks[-1].aggregated.text
    assert server.all_closed()


@pytest.mark.parametrize("cls", PROVIDERS)
async def test_blocked_network_wins_over_a_missing_key(
    cls: type[HTTPModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in cls.env_vars:
        monkeypatch.delenv(var, raising=False)
    called = False

    async def resolver() -> str:
        nonlocal called
        called = True
        return "k"

    with pytest.raises(lf.NetworkBlockedError):
        await make(cls).call("x")
    with pytest.raises(lf.NetworkBlockedError):
        [c async for c in make(cls, api_key=resolver).stream("x")]
    assert not called
