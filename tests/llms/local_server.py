"""A real HTTP/1.1 server on 127.0.0.1 for tests that need real sockets: stalls, pooled
connections, headers, echoed secrets.

Each request gets the next scripted ``Reply`` (the last one repeats). A reply is a status,
headers and a list of body pieces; a piece is ``bytes`` (sent and flushed), a ``float``
(sleep that many seconds) or ``STALL`` (stop sending and keep the connection open until the
server closes); a reply whose body starts with ``DROP`` closes the connection unanswered.
Bodies are sent chunked unless the reply fixes a ``content-length``, and
connections are kept alive, so a client can reuse them. ``connections`` counts accepted TCP
connections; ``requests`` keeps each request's method, path, headers and body.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

STALL = object()
DROP = object()  # as a reply's first body piece: close the connection without any response


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: list[object] = field(default_factory=list)

    @classmethod
    def sse(cls, data: bytes, *pieces: object) -> Reply:
        return cls(200, {"content-type": "text/event-stream"}, [data, *pieces])

    @classmethod
    def json(cls, data: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        hdrs = {"content-type": "application/json", "content-length": str(len(data))}
        return cls(status, {**hdrs, **(headers or {})}, [data])


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class LocalServer:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.connections = 0
        self.requests: list[Request] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = asyncio.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening, end stalls, close every connection and wait for the handlers."""
        self._closing.set()
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _next(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append(Request(method, path, headers, body))
                if not await self._reply(self._next(), writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _reply(self, reply: Reply, writer: asyncio.StreamWriter) -> bool:
        """Send one reply; False when the connection must not be reused."""
        if reply.body[:1] == [DROP]:
            return False
        reasons = {200: "OK", 401: "Unauthorized", 429: "Too Many Requests", 500: "Error"}
        headers = dict(reply.headers)
        chunked = "content-length" not in headers
        if chunked:
            headers["transfer-encoding"] = "chunked"
        head = f"HTTP/1.1 {reply.status} {reasons.get(reply.status, 'X')}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        await writer.drain()
        for piece in reply.body:
            if piece is STALL:
                await self._closing.wait()
                return False
            if isinstance(piece, (int, float)):
                await asyncio.sleep(piece)
                continue
            assert isinstance(piece, bytes)
            if not piece:
                continue
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
            await writer.drain()
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return True


@contextlib.asynccontextmanager
async def local_server(*replies: Reply) -> AsyncIterator[LocalServer]:
    server = LocalServer(list(replies))
    await server.start()
    try:
        yield server
    finally:
        await server.close()
