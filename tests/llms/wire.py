"""Wire-level test kit: fixture bytes, split patterns, and a recording mock transport.

Adapters are tested only through ``httpx.MockTransport`` with the bytes a provider sends; the
byte stream records whether it was closed, so tests can prove no response is left open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from langfx_nb.llms.base import LanguageModel

FIXTURES = Path(__file__).parent / "fixtures"
SECRET_KEY = "sk-test-SECRET-KEY-0123456789"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def to_crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def splits(data: bytes) -> dict[str, list[bytes]]:
    """The same bytes cut in the ways a network may cut them."""
    out: dict[str, list[bytes]] = {"whole": [data]}
    sep = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
    events = [e + sep for e in data.split(sep) if e]
    out["per_event"] = events
    out["one_byte"] = [data[i : i + 1] for i in range(len(data))]
    # cut inside every multi-byte UTF-8 character (after its first byte)
    cuts = [i + 1 for i, b in enumerate(data) if b >= 0xC0]
    out["inside_utf8"] = _cut(data, cuts)
    crlf = to_crlf(data)
    out["crlf_between_cr_lf"] = _cut(
        crlf, [i + 1 for i in range(len(crlf)) if crlf[i : i + 2] == b"\r\n"]
    )
    out["inside_data_prefix"] = _cut(
        data, [i + 2 for i in range(len(data)) if data[i : i + 5] == b"data:"]
    )
    return out


def _cut(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    pieces, last = [], 0
    for c in sorted(set(cuts)):
        if 0 < c < len(data):
            pieces.append(data[last:c])
            last = c
    pieces.append(data[last:])
    return pieces


SPLITS = [
    "whole",
    "per_event",
    "one_byte",
    "inside_utf8",
    "crlf_between_cr_lf",
    "inside_data_prefix",
]


# An OpenAI chat-completions stream whose text is a python-protocol answer
# ``City(name='Paris', landmarks=['Louvre'])`` (City: name str, landmarks list[str]).
CITY_SSE = (
    b'data: {"id":"1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"id":"1","choices":[{"index":0,"delta":{"content":"City(name=\'Paris\', "}}]}\n\n'
    b'data: {"id":"1","choices":[{"index":0,"delta":{"content":"landmarks=[\'Louvre\'])"}}]}\n\n'
    b'data: {"id":"1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


class TrackedStream(httpx.AsyncByteStream):
    """Response body that yields given chunks and records ``aclose``.

    ``hang_after`` blocks forever after that many chunks (to test cancellation);
    ``fail_after`` raises ``httpx.ReadError`` after that many chunks.
    """

    def __init__(
        self, chunks: list[bytes], *, hang_after: int | None = None, fail_after: int | None = None
    ) -> None:
        self.chunks = chunks
        self.hang_after = hang_after
        self.fail_after = fail_after
        self.closed = False
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, chunk in enumerate(self.chunks):
            if self.hang_after is not None and i >= self.hang_after:
                await asyncio.Event().wait()
            if self.fail_after is not None and i >= self.fail_after:
                raise httpx.ReadError("connection reset by peer")
            self.sent += 1
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    hang_after: int | None = None
    fail_after: int | None = None
    raise_exc: Exception | None = None

    @classmethod
    def sse(cls, data: bytes | list[bytes], **kw: Any) -> Reply:
        chunks = data if isinstance(data, list) else [data]
        return cls(200, chunks, {"content-type": "text/event-stream"}, **kw)

    @classmethod
    def json(cls, body: bytes | Any, status: int = 200, **kw: Any) -> Reply:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"content-type": "application/json", **kw.pop("headers", {})}
        return cls(status, [raw], headers, **kw)


class Server:
    """A MockTransport that answers requests in order from a list of replies."""

    def __init__(self, *replies: Reply | Callable[[httpx.Request], Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.streams: list[TrackedStream] = []
        self.transport = httpx.MockTransport(self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        if not self.replies:
            raise AssertionError("unexpected extra request")
        reply = self.replies.pop(0)
        if callable(reply):
            reply = reply(request)
        if reply.raise_exc is not None:
            raise reply.raise_exc
        stream = TrackedStream(
            reply.chunks, hang_after=reply.hang_after, fail_after=reply.fail_after
        )
        self.streams.append(stream)
        return httpx.Response(reply.status, headers=reply.headers, stream=stream)

    @property
    def body(self) -> Any:
        """The JSON body of the last request."""
        return json.loads(self.requests[-1].content)

    def all_closed(self) -> bool:
        return all(s.closed for s in self.streams)


async def check_error_reply(
    make_model: Callable[[Server], LanguageModel],
    name: str,
    status: int,
    error: type[Exception],
    code: str,
    *,
    stream: bool,
    headers: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> None:
    """A provider error body becomes ``error``, whose text names the status and the short
    error code only (never the body's message or the key), and the response is closed."""
    body = fixture(name)
    server = Server(Reply.json(body, status=status, headers=headers or {}))
    lm = make_model(server)
    with pytest.raises(error) as info:
        if stream:
            async for _ in lm.stream("x"):
                pass
        else:
            await lm.call("x")
    text = str(info.value) + repr(info.value)
    assert f"HTTP {status} ({code})" in text
    assert "SECRET" not in text
    assert json.loads(body)["error"]["message"] not in text
    if status == 429:
        assert info.value.retry_after == retry_after  # type: ignore[attr-defined]
    assert server.all_closed()
