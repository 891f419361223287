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
class StallingServer:
    """A real HTTP server on 127.0.0.1 that answers every request halfway and then stalls.

    A streamed request gets one SSE event and the first bytes of the next; any other request
    gets its headers and the first bytes of a JSON body. The server then reads until the
    client closes the connection, so ``all_closed`` tells whether the client really did.
    """

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self.answering = asyncio.Event()  # some response has begun

    async def __aenter__(self) -> StallingServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.client = httpx.AsyncClient()  # injected: the suite blocks models' own clients
        self.lm = OpenAI(
            "gpt-test", base_url=f"http://127.0.0.1:{port}/v1", http_client=self.client
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        self.server.close()
        await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # request line and headers
        body = await reader.read(65536)  # the (small) JSON request body
        if b'"stream":true' in body.replace(b" ", b""):
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            for part in (_FIRST, b'data: {"choices": [{"ind'):  # the second event is cut
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
        else:
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b'content-length: 1000\r\n\r\n{"id": '
            )
        await writer.drain()
        self.answering.set()
        while await reader.read(65536):  # until the client closes the connection
            pass
        self.closed += 1
        writer.close()

    async def all_closed(self) -> bool:
        """Every connection was closed by the client (waits up to 5 s for the server side)."""
        for _ in range(500):
            if self.opened and self.closed == self.opened:
                return True
            await asyncio.sleep(0.01)
        return False


async def test_timeout_closes_the_connection_of_a_real_server() -> None:
    """Against a real HTTP server on 127.0.0.1 that sends one event and stalls: after
    ``asyncio.timeout`` fires, the client has closed the connection (the server reads EOF)."""
    seen: list[Any] = []
    async with StallingServer() as server:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                async for ev in lf.query_stream("q", Point, lm=server.lm, protocol="json"):
                    seen.append(ev)
        current = asyncio.current_task()
        assert current is not None and current.cancelling() == 0
        _no_terminal(seen)  # the first events arrived before the stall; no Cancelled event
        assert await server.all_closed()


async def _run(api: str, lm: LanguageModel, session: lf.Session) -> Any:
    """Run ``api`` to its end against ``lm`` (a server that stalls halfway)."""
    if api == "lf.query":
        return await lf.query("q", Point, lm=lm, protocol="json")
    if api == "Session.query":
        return await session.query("q", Point, protocol="json")
    if api.startswith("Agent"):
        return await lf.Agent("hi", stream=api == "Agent(stream=True)").invoke(session)
    stream = (
        lm.stream("q") if api == "lm.stream" else session.query_stream("q", Point, protocol="json")
    )
    return [item async for item in stream]


MID_READ_APIS = [
    "lm.stream",
    "Session.query_stream",
    "lf.query",
    "Session.query",
    "Agent",
    "Agent(stream=True)",
]


@pytest.mark.parametrize("api", MID_READ_APIS)
@pytest.mark.parametrize("way", ["asyncio.timeout", "TaskGroup sibling failure"])
async def test_cancelled_mid_read_on_a_real_server(api: str, way: str) -> None:
    """While the client waits for the rest of a response from a real server, the consumer is
    cancelled by a timeout or by a failing sibling in its TaskGroup: the consumer sees exactly
    what asyncio raises, the connection is closed, and the session's node says cancelled."""
    async with StallingServer() as server:
        session = lf.Session(server.lm)
        if way == "asyncio.timeout":
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await _run(api, server.lm, session)
            current = asyncio.current_task()
            assert current is not None and current.cancelling() == 0
        else:

            async def sibling() -> None:
                await server.answering.wait()
                await asyncio.sleep(0.05)  # the client is now waiting for more bytes
                raise KeyError("sibling")

            with pytest.raises(ExceptionGroup) as info:
                async with asyncio.TaskGroup() as group:
                    group.create_task(_run(api, server.lm, session))
                    group.create_task(sibling())
            assert [type(e) for e in info.value.exceptions] == [KeyError]
        assert await server.all_closed()
        if api not in ("lm.stream", "lf.query"):  # these two use no session
            assert [n.status for n in session.all_queries] == ["cancelled"]


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


# -- what a stream received before it stopped stays in the trace ------------------------------
@pytest.mark.parametrize("api", ["Session.query_stream", "Agent(stream=True)"])
async def test_a_cancelled_stream_keeps_the_text_it_received_in_the_trace(api: str) -> None:
    async with StallingServer() as server:
        session = lf.Session(server.lm)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await _run(api, server.lm, session)
        assert await server.all_closed()
    (node,) = session.all_queries
    assert node.status == "cancelled"
    assert node.to_json()["outputs"] == {"text": '{"result": {"x": 1', "partial": True}


@pytest.mark.parametrize("api", ["Session.query_stream", "Agent(stream=True)"])
async def test_a_failed_stream_keeps_the_text_it_received_in_the_trace(api: str) -> None:
    """The server ends the stream after one event, without [DONE]: the run fails, and its node
    shows the text that arrived, marked partial, beside the error."""
    server = Server(Reply.sse([_FIRST]))
    lm = OpenAI("gpt-test", api_key=SECRET_KEY, transport=server.transport)
    session = lf.Session(lm)
    with contextlib.suppress(lf.LMError):
        await _run(api, lm, session)
    (node,) = session.all_queries
    assert node.status == "failed"
    data = node.to_json()
    assert data["outputs"] == {"text": '{"result": {"x": 1', "partial": True}
    assert "[DONE]" in data["error"]["message"]
