"""An engine is an object with ``name``, ``in_process`` and ``async run(job)``: engines
written outside the library run ``lf.batch`` with its manifest, resume, trace and progress,
and the runner never needs to know them."""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.batch.progress import BatchProgress
from langfx_nb.llms import StaticResponse


class Label(pydantic.BaseModel):
    item: int
    label: str


class Serial:
    """Runs the items here, one at a time, each committed before the next."""

    name = "serial"
    in_process = True

    def __init__(self) -> None:
        self.ran: list[int] = []

    async def run(self, job: lf.engines.BatchJob) -> None:
        for i in job.pending:
            self.ran.append(i)
            await job.run_item(i)
            await job.commit()


class Threads:
    """Runs ``fn(item)`` on its own event loop in other threads (as a remote engine runs it
    elsewhere) and records each outcome through the job."""

    name = "threads"
    in_process = False

    async def run(self, job: lf.engines.BatchJob) -> None:
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {
                i: loop.run_in_executor(pool, asyncio.run, job.fn(job.values[i]))
                for i in job.pending
            }
            for i, future in futures.items():
                try:
                    result = await future
                except Exception as exc:
                    job.record_failed(i, type(exc).__name__, str(exc), None, exc)
                else:
                    job.record_ok(i, result, None)
                await job.commit()


async def label(row: dict[str, int], session: lf.Session) -> Label:
    if row["id"] == 3:
        raise ValueError("no label for 3")
    return await session.query("Label item {{id}}", Label, vars=row, protocol="json")


async def test_an_engine_of_ones_own_runs_traced_resumable_batches(tmp_path: Path) -> None:
    lm = StaticResponse('{"item": 1, "label": "x"}')
    rows = [{"id": i} for i in range(6)]
    run = tmp_path / "run.sqlite"
    engine = Serial()
    seen: list[BatchProgress] = []
    first = await lf.batch(
        label, rows, session=lf.Session(lm), run=run, engine=engine, progress=seen.append
    )
    local = await lf.batch(label, rows, session=lf.Session(lm), progress=False)
    assert first.results == local.results and first.statuses == local.statuses
    assert first.errors == local.errors and first.totals.requests == local.totals.requests == 5
    batch = first.session.find(first.batch_node_id or "")
    assert batch is not None and batch.metadata["engine"] == "serial"
    item = first.session.find(first.node_ids[5] or "")
    assert item is not None and item.parent_id == first.batch_node_id
    assert seen[-1].finished and seen[-1].done == 5 and seen[-1].failed == 1
    # resumed: only the failed item runs again, through the same engine
    again = await lf.batch(label, rows, session=lf.Session(lm), run=run, engine=engine)
    assert engine.ran == [0, 1, 2, 3, 4, 5, 3]
    assert again.resumed == [True, True, True, False, True, True]
    assert again.totals.requests == 0


async def double(x: int) -> int:
    if x == 2:
        raise KeyError("name")
    return x * 2


async def test_an_engine_that_runs_items_elsewhere_records_them_through_the_job(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run.sqlite"
    result = await lf.batch(double, range(5), run=run, engine=Threads(), progress=False)
    assert result.results == [0, 2, None, 6, 8]
    assert result.statuses == ["ok", "ok", "failed", "ok", "ok"]
    assert result.errors[2] is not None and result.errors[2].type == "KeyError"
    again = await lf.batch(double, range(5), run=run, engine=Threads(), progress=False)
    assert again.resumed == [True, True, False, True, True]
    with pytest.raises(KeyError):
        await lf.batch(double, range(5), engine=Threads(), on_error="raise", progress=False)


async def test_the_default_engine_is_asyncio_and_other_objects_are_refused() -> None:
    result = await lf.batch(double, [1], engine=lf.engines.Asyncio(), progress=False)
    batch = result.session.find(result.batch_node_id or "")
    assert batch is not None and batch.metadata["engine"] == "asyncio"
    bare = await lf.batch(double, [1], progress=False)
    found = bare.session.find(bare.batch_node_id or "")
    assert found is not None and found.metadata["engine"] == "asyncio"

    class Nameless:
        async def run(self, job: Any) -> None: ...

    with pytest.raises(ValueError, match="engine= takes an engine object"):
        await lf.batch(double, [1], engine=Nameless())
