"""The scaffolding of the tests' real HTTP servers: keep-alive HTTP/1.1 on 127.0.0.1, one
request read at a time and answered by the subclass's ``respond``.

``HttpServer`` runs in the test's own loop (``await listen()`` ... ``await aclose()``);
``ThreadedServer`` runs it in a loop of its own in a daemon thread (``with Server() as s`` or
``s = Server().start()`` ... ``s.stop()``), so a test may block, or run subprocesses against
it, while it serves.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Self

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


@dataclass
class Request:
    method: str
    path: str  # the request target as sent, query included
    headers: dict[str, str]  # names lower-cased
    body: bytes
    #: the connection's reader: a handler holding its answer back may watch it for the
    #: client closing the connection (see ``client_closed``)
    reader: asyncio.StreamReader | None = field(default=None, repr=False, compare=False)


async def client_closed(request: Request, within_s: float) -> bool:
    """Whether the client closes the connection (end of file) within ``within_s`` seconds,
    while it waits for the answer (clients here never pipeline)."""
    if request.reader is None:
        await asyncio.sleep(within_s)
        return False
    try:
        data = await asyncio.wait_for(request.reader.read(1), within_s)
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return data == b""


async def read_request(reader: asyncio.StreamReader) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body, reader)


def response_head(status: int, headers: dict[str, str]) -> bytes:
    head = f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1")


async def send(
    writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes
) -> None:
    """One whole response, its length in ``content-length``."""
    writer.write(response_head(status, {**headers, "content-length": str(len(body))}) + body)
    await writer.drain()


class HttpServer:
    limit = 2**16  # the reader's buffer, so the longest request head

    def __init__(self) -> None:
        self.port = 0
        self.connections = 0  # accepted TCP connections
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must not be reused."""
        raise NotImplementedError

    async def listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=self.limit)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        """Stop listening, close every connection and end its handler (a stalled one too)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            while await self.respond(await read_request(reader), writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._handlers.discard(task)
            self._writers.discard(writer)
            writer.close()


class ThreadedServer(HttpServer):
    def __init__(self) -> None:
        super().__init__()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.listen(), self._loop).result(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.aclose(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
