"""A real HTTP/1.1 server on 127.0.0.1 for tests that need real sockets: stalls, pooled
connections, headers, echoed secrets.

Each request gets the next scripted ``Reply`` (the last one repeats). A reply is a status,
headers and a list of body pieces; a piece is ``bytes`` (sent and flushed), a ``float``
(sleep that many seconds), ``STALL`` (stop sending and keep the connection open until the
server closes) or ``Repeat`` (send a piece again and again, for ever); a reply whose body
starts with ``DROP`` closes the connection unanswered. ``head_every`` > 0 sends the status
line and headers one byte at a time, that many seconds apart; a reply with ``raw=True``
sends its pieces as they are, with no status line or headers of its own.
Bodies are sent chunked unless the reply fixes a ``content-length``, and
connections are kept alive, so a client can reuse them. ``connections`` counts accepted TCP
connections; ``requests`` keeps each request's method, path, headers and body.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tests.http_server import HttpServer, Request, response_head

STALL = object()
DROP = object()  # as a reply's first body piece: close the connection without any response


@dataclass(frozen=True)
class Repeat:
    """A body piece sent again and again, ``every`` seconds apart, until the client leaves."""

    piece: bytes
    every: float = 0.0


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: list[object] = field(default_factory=list)
    head_every: float = 0.0
    raw: bool = False

    @classmethod
    def sse(cls, data: bytes, *pieces: object) -> Reply:
        return cls(200, {"content-type": "text/event-stream"}, [data, *pieces])

    @classmethod
    def json(cls, data: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        hdrs = {"content-type": "application/json", "content-length": str(len(data))}
        return cls(status, {**hdrs, **(headers or {})}, [data])


class LocalServer(HttpServer):
    def __init__(self, replies: list[Reply]) -> None:
        super().__init__()
        self.replies = list(replies)
        self.requests: list[Request] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _next(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    async def respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Send the next reply; False when the connection must not be reused."""
        self.requests.append(request)
        reply = self._next()
        if reply.body[:1] == [DROP]:
            return False
        headers = dict(reply.headers)
        chunked = "content-length" not in headers and not reply.raw
        if chunked:
            headers["transfer-encoding"] = "chunked"
        head = b"" if reply.raw else response_head(reply.status, headers)
        for i in range(0, len(head), 1 if reply.head_every else len(head) or 1):
            writer.write(head[i : i + 1] if reply.head_every else head)
            await writer.drain()
            await asyncio.sleep(reply.head_every)
        for piece in reply.body:
            if piece is STALL:
                await asyncio.Event().wait()  # until aclose() ends this handler
                return False
            if isinstance(piece, Repeat):
                data = f"{len(piece.piece):x}\r\n".encode() + piece.piece + b"\r\n"
                while not writer.is_closing():  # until the client leaves or aclose()
                    writer.write(data if chunked else piece.piece)
                    await writer.drain()
                    await asyncio.sleep(piece.every)
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
    await server.listen()
    try:
        yield server
    finally:
        await server.aclose()
