"""What a batch's views say: failed items in input order, counts with their nouns."""

from __future__ import annotations

import asyncio
import io

import pytest

import langfx_nb as lf
from langfx_nb.batch.progress import MAX_GROUP_ITEMS, TextReporter, stopped_note
from langfx_nb.notebook.render import trace_text
from langfx_nb.notebook.trace_live import index_of


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
    assert trace_text(index_of([session.root.to_json()])).startswith("TraceExplorer: 1 node (")


async def test_a_stopped_batch_says_what_finished_and_that_results_are_lost() -> None:
    stream = io.StringIO()
    started = asyncio.Event()

    async def fn(x: int) -> int:
        if x == 3:
            started.set()
            await asyncio.Event().wait()  # until the batch is cancelled
        return x

    task = asyncio.ensure_future(
        lf.batch(fn, range(10), max_concurrency=1, progress=TextReporter(stream))
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = stream.getvalue().splitlines()[-1]
    assert last == (
        "stopped with 3 of 10 items finished (7 not run);"
        " without run= their results are lost (pass run='name' to keep them)"
    )


def test_a_stopped_batch_with_run_says_where_its_results_are() -> None:
    progress = {"total": 10, "done": 2, "failed": 1, "finished": True, "run": "r.sqlite"}
    assert stopped_note(progress) == (
        "stopped with 3 of 10 items finished (7 not run);"
        " the finished results are kept in r.sqlite: run it again to resume"
    )
    assert stopped_note({**progress, "done": 9}) == ""  # every item settled
