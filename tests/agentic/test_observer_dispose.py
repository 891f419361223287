"""Events still queued for an async observer at ``dispose()`` are delivered or counted."""

from __future__ import annotations

import asyncio
from typing import Any

import langfx_nb as lf
from langfx_nb.llms import Echo


async def test_queued_events_are_delivered_at_dispose() -> None:
    received: list[int] = []

    async def observer(event: dict[str, Any]) -> None:
        received.append(event["seq"])
        await asyncio.sleep(0)

    session = lf.Session(Echo())
    session.subscribe(observer)
    for i in range(3000):  # no await in between: everything is still queued
        session.log("info", f"step {i}")
    await session.dispose()
    assert received == list(range(1, len(received) + 1))
    assert len(received) == 3001  # 3000 logs and the root's node_end
    assert session.dropped_events == 0


async def test_events_a_stuck_observer_never_took_are_counted_as_dropped() -> None:
    never = asyncio.Event()
    received: list[int] = []

    async def stuck(event: dict[str, Any]) -> None:
        received.append(event["seq"])
        await never.wait()

    session = lf.Session(Echo())
    session._state.hub.drain_timeout = 0.05
    session.subscribe(stuck)
    for i in range(500):
        session.log("info", f"step {i}")
    await asyncio.sleep(0)
    await session.dispose()
    assert received == [1]
    assert session.dropped_events == 500  # 499 logs and the root's node_end
    assert len(received) + session.dropped_events == 501


async def test_events_queued_for_an_observer_that_unsubscribes_are_counted() -> None:
    received: list[int] = []

    async def observer(event: dict[str, Any]) -> None:
        received.append(event["seq"])

    session = lf.Session(Echo())
    unsubscribe = session.subscribe(observer)
    for i in range(100):
        session.log("info", f"step {i}")
    unsubscribe()
    await session.dispose()
    assert len(received) + session.dropped_events == 100
