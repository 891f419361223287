"""What a batch's views say: failed items in input order, counts with their nouns."""

from __future__ import annotations

import asyncio

import langfx_nb as lf
from langfx_nb.batch.progress import MAX_GROUP_ITEMS
from langfx_nb.notebook.render import trace_text


async def test_failed_items_are_listed_in_input_order_whatever_order_they_failed_in() -> None:
    n = MAX_GROUP_ITEMS + 10

    async def fn(x: int) -> int:
        for _ in range(n - x):  # later items fail first
            await asyncio.sleep(0)
        raise ValueError(f"bad {x}")

    snapshots: list[lf.BatchProgress] = []
    result = await lf.batch(fn, range(n), max_concurrency=n, progress=snapshots.append)
    assert result.failed == list(range(n))
    (group,) = snapshots[-1].errors
    assert group.count == n
    assert group.items == tuple(range(MAX_GROUP_ITEMS))
    assert group.first_message == "bad 0"


def test_one_node_is_one_node() -> None:
    session = lf.Session(lf.llms.StaticResponse("x"))
    assert trace_text([session.root.to_json()]).startswith("TraceExplorer: 1 node (")
