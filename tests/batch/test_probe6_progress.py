"""What the progress view says when a batch stops early, read against ``BatchProgress``'s
docstring: "``failed``: items whose ``fn`` raised (or that were cancelled)", "``left``: not
started yet", and ``done + failed + running + left == total``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.batch import BatchProgress


async def test_the_final_snapshot_counts_items_cancelled_in_flight() -> None:
    started: list[int] = []
    snapshots: list[BatchProgress] = []

    async def fn(x: int) -> int:
        started.append(x)
        if x == 0:
            while len(started) < 3:  # the other two workers' items are in flight
                await asyncio.sleep(0)
            raise KeyError("name")
        await asyncio.Event().wait()  # until the batch stops
        return x

    with pytest.raises(KeyError):
        await lf.batch(fn, range(6), progress=snapshots.append, on_error="raise", max_concurrency=3)
    final = snapshots[-1]
    assert final.finished and sorted(started) == [0, 1, 2]
    assert (final.done, final.running) == (0, 0)
    assert final.left == 3  # items 3, 4 and 5 never started
    assert final.failed == 3  # item 0 raised, items 1 and 2 were cancelled


async def test_a_bad_progress_argument_is_refused_before_the_manifest_is_made(
    tmp_path: Path,
) -> None:
    run = tmp_path / "typo.sqlite"
    called: list[int] = []

    async def fn(x: int) -> int:
        called.append(x)
        return x

    bad: Any = "bar"  # a notebook user's guess at a value
    with pytest.raises(TypeError, match="progress"):
        await lf.batch(fn, [1, 2], run=run, progress=bad)
    assert called == []
    assert not run.exists()  # nothing made: a corrected call starts a fresh run
