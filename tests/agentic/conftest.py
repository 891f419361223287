from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from langfx_nb.agentic import FakeClock
from langfx_nb.llms import Fake, LMRequest, StreamAccumulator, StreamChunk


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


class Ledger:
    """What the test tools ran, in order: (tool name, arguments)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


class Gated(Fake):
    """Streams ``first``, then waits for ``gate`` before finishing; records that it closed."""

    def __init__(self, first: str = "Hel", rest: str = "lo", **kw: Any) -> None:
        super().__init__("gated", **kw)
        self.first = first
        self.rest = rest
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()
        self.closed = False

    def respond(self, request: LMRequest) -> str:
        return self.first + self.rest

    async def _sample(self, request: LMRequest) -> Any:
        self.reached.set()
        await self.gate.wait()
        return self._response(request)

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        acc = StreamAccumulator(self.model_id)
        try:
            yield acc.text(self.first)
            self.reached.set()
            await self.gate.wait()
            yield acc.text(self.rest)
            yield acc.finish()
        finally:
            self.closed = True


async def settle() -> None:
    """Let every ready task run until nothing changes (zero-length sleeps only)."""
    for _ in range(20):
        await asyncio.sleep(0)
