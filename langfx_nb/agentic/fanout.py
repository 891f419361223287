"""The worker pool behind ``Session.concurrent_map``.

A fixed pool of at most ``max_concurrency`` workers pulls items in order (no task per item),
each item running in its own view of the session, closed when the item finishes. Results keep
the input order; progress ``{done, total, failed}`` is reported on the calling view's node.
The workers are registered with the session, so ``Session.dispose`` cancels and settles them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, TypeVar

__all__ = ["DEFAULT_MAX_CONCURRENCY", "fan_out", "settle_first_failure"]

ItemT = TypeVar("ItemT")
R = TypeVar("R")
S = TypeVar("S")

DEFAULT_MAX_CONCURRENCY = 32


def check_fan_out(max_concurrency: int, on_error: str) -> None:
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1")
    if on_error not in ("fail_fast", "collect"):
        raise ValueError("on_error must be 'fail_fast' or 'collect'")


async def fan_out(
    items: Iterable[ItemT],
    fn: Callable[[ItemT, S], Awaitable[R]],
    *,
    branch: Callable[[], AbstractContextManager[S]],
    report: Callable[[dict[str, Any]], None],
    tasks: set[asyncio.Task[Any]],
    max_concurrency: int,
    on_error: Literal["fail_fast", "collect"],
) -> list[Any]:
    """``session.concurrent_map(items, fn, ...)``: what it does is documented there.

    ``branch()`` gives each item its context (a session view, closed when the item ends);
    ``report`` receives the progress after each item; the workers are added to ``tasks``
    while they run (the session cancels what is left there when it is disposed)."""
    check_fan_out(max_concurrency, on_error)
    values = list(items)
    total = len(values)
    if not total:
        return []
    results: list[Any] = [None] * total
    indices = iter(range(total))
    counts = [0, 0]  # done, failed
    collect = on_error == "collect"

    async def worker() -> None:
        for i in indices:
            try:
                with branch() as view:
                    results[i] = await fn(values[i], view)
            except Exception as exc:
                counts[1] += 1
                if not collect:
                    raise
                results[i] = exc
            finally:
                counts[0] += 1
                report({"done": counts[0], "total": total, "failed": counts[1]})

    workers = [asyncio.ensure_future(worker()) for _ in range(min(max_concurrency, total))]
    tasks.update(workers)
    try:
        await settle_first_failure(workers)
    finally:
        tasks.difference_update(workers)
    return results


async def settle_first_failure(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Wait for every task; at the first failure (or cancellation) cancel the others, wait
    until they have settled, and raise it — as a ``TaskGroup`` would, but the error itself
    rather than a group, so callers catch what the work raised."""
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if t.cancelled():
                    raise asyncio.CancelledError()
                exc = t.exception()
                if exc is not None:
                    raise exc
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
