"""Engines as a new maintainer writes one from docs/batch.md ("Your own engine"): the
documented ``Serial`` engine runs, resumes and keeps tracebacks with no runner edit; an engine
that runs items elsewhere and records them through ``job.record_ok``/``job.record_failed``
gets the same masking and bounds as the built-in engines."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import langfx_nb as lf
from langfx_nb.agentic.tracebacks import MAX_ERROR_CHARS


class Serial:
    """docs/batch.md's example, as written there."""

    name = "serial"
    in_process = True

    async def run(self, job: lf.engines.BatchJob) -> None:
        for i in job.pending:
            await job.run_item(i)
            await job.commit()


def _check(x: int) -> int:
    if x == 2:
        raise ValueError("two is not allowed")
    return x * 10


async def tens(x: int) -> int:
    return _check(x)


async def test_the_documented_serial_engine_runs_resumes_and_keeps_tracebacks(
    tmp_path: Path,
) -> None:
    run = tmp_path / "serial.sqlite"
    engine: lf.engines.Engine = Serial()  # the Protocol accepts it
    result = await lf.batch(tens, [0, 1, 2, 3], run=run, engine=engine, progress=False)
    assert result.results == [0, 10, None, 30] and result.failed == [2]
    tb = result.errors[2].traceback if result.errors[2] else None
    assert tb is not None and "in _check" in tb
    batch_node = result.session.find(result.batch_node_id or "") if result.session else None
    assert batch_node is not None and batch_node.metadata["engine"] == "serial"
    again = await lf.batch(tens, [0, 1, 2, 3], run=run, engine=Serial(), progress=False)
    assert again.resumed == [True, True, False, True]
    assert again.errors[2] is not None and again.errors[2].traceback == tb


class Elsewhere:
    """Runs each item in another thread (as a pool or a remote worker would) and records
    its outcome through the job, with the exception that travelled back."""

    name = "elsewhere"
    in_process = False

    async def run(self, job: lf.engines.BatchJob) -> None:
        for i in job.pending:
            try:
                value = await asyncio.to_thread(asyncio.run, job.fn(job.values[i]))
            except Exception as exc:
                job.record_failed(i, type(exc).__name__, str(exc), None, exc)
            else:
                job.record_ok(i, value, None)
            await job.commit()


async def leaky(x: int) -> int:
    raise RuntimeError(f"refused: api_key=sk-live-0123456789abcdef {'x' * 5000}")


async def test_an_engine_recording_a_failure_gets_it_masked_bounded_and_traced(
    tmp_path: Path,
) -> None:
    run = tmp_path / "elsewhere.sqlite"
    result = await lf.batch(leaky, [1], run=run, engine=Elsewhere(), progress=False)
    error = result.errors[0]
    assert error is not None and error.type == "RuntimeError"
    assert "0123456789abcdef" not in error.message and len(error.message) <= MAX_ERROR_CHARS
    assert b"0123456789abcdef" not in run.read_bytes()
    assert error.traceback is not None and "in leaky" in error.traceback


async def test_an_engine_recording_a_result_elsewhere_is_stored_and_resumed(
    tmp_path: Path,
) -> None:
    async def double(x: int) -> int:
        return x * 2

    run = tmp_path / "ok.sqlite"
    result = await lf.batch(double, [1, 2], run=run, engine=Elsewhere(), progress=False)
    assert result.results == [2, 4]
    stored: Any = lf.BatchResult.load(run)
    assert sorted(stored.results) == [2, 4] and sorted(stored.inputs) == [1, 2]
    again = await lf.batch(double, [1, 2, 3], run=run, engine=Elsewhere(), progress=False)
    assert again.resumed == [True, True, False] and again.results == [2, 4, 6]
