"""Cancelling the consumer of a stream behaves exactly as asyncio does, at every layer.

For ``lm.stream`` (through a real provider adapter over httpx), ``lf.query_stream`` and
``Session.query_stream``, and for each way a consumer is cancelled (``task.cancel()``,
``asyncio.timeout``, ``asyncio.wait_for``, ``contextlib.aclosing`` + ``break``): the
``CancelledError``/``TimeoutError`` reaches the consumer unchanged, ``task.cancelling()`` is
balanced afterwards, no event takes its place, and the upstream HTTP response is closed. The
``cancelled`` terminal event appears only when the model run is cancelled by someone else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms.base import LanguageModel, LMRequest
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.streaming import StreamAccumulator, StreamChunk

from .llms.wire import SECRET_KEY, Reply, Server


class Point(BaseModel):
    x: int
    y: int


_FIRST = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "{\\"result\\": {\\"x\\": 1"}}]}\n\n'
)


class Setup:
    """A model whose HTTP stream sends one event and then stalls until closed."""

    def __init__(self) -> None:
        self.server = Server(Reply.sse([_FIRST, b"never sent"], hang_after=1))
        self.lm = OpenAI("gpt-test", api_key=SECRET_KEY, transport=self.server.transport)
        self.session = lf.Session(self.lm)

    def open(self, api: str) -> AsyncIterator[Any]:
        if api == "lm.stream":
            return self.lm.stream("q")
        if api == "query_stream":
            return lf.query_stream("q", Point, lm=self.lm, protocol="json")
        return self.session.query_stream("q", Point, protocol="json")

    def check_closed(self, api: str, status: str = "cancelled") -> None:
        assert self.server.all_closed() and len(self.server.streams) == 1
        if api == "Session.query_stream":
            (node,) = self.session.all_queries
            assert node.status == status


APIS = ["lm.stream", "query_stream", "Session.query_stream"]


async def _consume(stream: AsyncIterator[Any], seen: list[Any], started: asyncio.Event) -> None:
    async for item in stream:
        seen.append(item)
        started.set()


def _no_terminal(seen: list[Any]) -> None:
    terminal = (lf.GenerationComplete, lf.ParsingFailed, lf.GenerationFailed, lf.Cancelled)
    assert seen and not any(isinstance(e, terminal) for e in seen)


@pytest.mark.parametrize("api", APIS)
async def test_task_cancel_propagates(api: str) -> None:
    s = Setup()
    seen: list[Any] = []
    started = asyncio.Event()
    task = asyncio.create_task(_consume(s.open(api), seen, started))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    _no_terminal(seen)
    s.check_closed(api)


@pytest.mark.parametrize("api", APIS)
async def test_asyncio_timeout_raises_timeout_error(api: str) -> None:
    s = Setup()
    seen: list[Any] = []
    reached_after_block = False
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            async for item in s.open(api):
                seen.append(item)
        reached_after_block = True
    assert not reached_after_block
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    _no_terminal(seen)
    s.check_closed(api)


@pytest.mark.parametrize("api", APIS)
async def test_asyncio_timeout_with_aclosing_raises_timeout_error(api: str) -> None:
    s = Setup()
    seen: list[Any] = []
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            async with contextlib.aclosing(s.open(api)) as stream:  # type: ignore[type-var]
                async for item in stream:
                    seen.append(item)
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    _no_terminal(seen)
    s.check_closed(api)


@pytest.mark.parametrize("api", APIS)
async def test_wait_for_raises_timeout_error(api: str) -> None:
    s = Setup()
    seen: list[Any] = []
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(_consume(s.open(api), seen, asyncio.Event()), 0.05)
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    _no_terminal(seen)
    s.check_closed(api)
    await asyncio.sleep(0)  # the loop goes on: nothing is left cancelled


@pytest.mark.parametrize("api", APIS)
async def test_aclosing_and_break_closes_at_once(api: str) -> None:
    s = Setup()
    async with contextlib.aclosing(s.open(api)) as stream:  # type: ignore[type-var]
        async for _ in stream:
            break
    s.check_closed(api)
    await asyncio.sleep(0)  # no cancellation was left pending on this task


# -- a run cancelled by someone else ----------------------------------------------------------
class CancelledElsewhere(LanguageModel):
    """The stream awaits work another party cancels: CancelledError arises in the consumer's
    task although nobody cancelled that task."""

    provider = "test"

    def __init__(self) -> None:
        super().__init__("m")
        self.closed = False

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        acc = StreamAccumulator(self.model_id)
        try:
            yield acc.text('{"result": {"x": 1')
            work: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(work.cancel)
            await work
        finally:
            self.closed = True


@pytest.mark.parametrize(
    "open_stream",
    [
        lambda lm, session: lf.query_stream("q", Point, lm=lm, protocol="json"),
        lambda lm, session: session.query_stream("q", Point, protocol="json"),
    ],
    ids=["query_stream", "Session.query_stream"],
)
async def test_cancelled_event_only_for_a_run_cancelled_by_someone_else(
    open_stream: Callable[[LanguageModel, lf.Session], AsyncIterator[Any]],
) -> None:
    lm = CancelledElsewhere()
    session = lf.Session(lm)
    events = [ev async for ev in open_stream(lm, session)]  # ends normally
    assert isinstance(events[-1], lf.Cancelled)
    assert sum(isinstance(e, lf.Cancelled) for e in events) == 1
    assert lm.closed
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    if session.all_queries:
        (node,) = session.all_queries
        assert node.status == "cancelled"


async def test_session_query_cancelled_is_recorded_and_propagates() -> None:
    s = Setup()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            # lf.query does not stream; the hang is in the one request it sends
            s.server.replies = [Reply.json(b"{}", hang_after=0)]
            await s.session.query("q")
    (node,) = s.session.all_queries
    assert node.status == "cancelled"


# -- a real server: the connection is really closed ------------------------------------------
async def test_timeout_closes_the_connection_of_a_real_server() -> None:
    """Against a real HTTP server on 127.0.0.1 that sends one event and stalls: after
    ``asyncio.timeout`` fires, the client has closed the connection (the server reads EOF)."""
    connection_closed = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # request line and headers; the body is read below
        await reader.read(1)  # at least the start of the JSON body
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        writer.write(b"%x\r\n%s\r\n" % (len(_FIRST), _FIRST))
        await writer.drain()
        while await reader.read(65536):  # until the client closes the connection
            pass
        connection_closed.set()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = httpx.AsyncClient()  # injected: the suite blocks requests by models' own clients
    lm = OpenAI("gpt-test", base_url=f"http://127.0.0.1:{port}/v1", http_client=client)
    seen: list[Any] = []
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                async for ev in lf.query_stream("q", Point, lm=lm, protocol="json"):
                    seen.append(ev)
        current = asyncio.current_task()
        assert current is not None and current.cancelling() == 0
        _no_terminal(seen)  # the first events arrived before the stall; no Cancelled event
        await asyncio.wait_for(connection_closed.wait(), 5)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("api", ["query_stream", "Session.query_stream"])
async def test_timeout_around_a_loop_that_stops_at_its_outcome_still_times_out(api: str) -> None:
    """The usual consumer loop ends at the terminal event; a timeout must still surface."""
    s = Setup()
    outcome: list[Any] = []
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            async with contextlib.aclosing(s.open(api)) as stream:  # type: ignore[type-var]
                async for ev in stream:
                    if ev.type in ("generation_complete", "parsing_failed", "cancelled"):
                        outcome.append(ev)
                        break
    assert outcome == []
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    s.check_closed(api)
