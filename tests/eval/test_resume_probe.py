"""Resuming ``lf.eval.run(..., run=path)`` on a manifest from elsewhere (issue #40's check): a
damaged stored trial must be ``RunManifestError`` naming its item, as a damaged batch result
is."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf


async def task(x: int) -> int:
    return x * 2


def big(ctx: Any) -> bool:
    return bool(ctx.output > 2)


def _run(path: Path) -> Any:
    return asyncio.run(lf.eval.run(task, [1, 2, 3], {"big": big}, run=path, progress=False))


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE items SET value = '[1, 2]' WHERE idx = 0",  # a trial that is not an object
        "UPDATE items SET value = json_set(value, '$.scores', json('[1, 2]')) WHERE idx = 0",
        "UPDATE items SET value = json_set(value, '$.cost', 'a lot') WHERE idx = 0",
        "UPDATE items SET value = json_set(value, '$.cost', -1) WHERE idx = 0",
        "UPDATE items SET value = json_set(value, '$.usage', json('{\"prompt_tokens\": \"x\"}'))"
        " WHERE idx = 0",
        "UPDATE items SET value = json_set(value, '$.unpriced', -2) WHERE idx = 0",
    ],
)
def test_a_damaged_stored_trial_is_a_run_manifest_error(tmp_path: Path, damage: str) -> None:
    # valid JSON of the wrong shape, as '{bad', NULL or a foreign class tag: before any
    # request
    path = tmp_path / "eval.sqlite"
    _run(path)
    conn = sqlite3.connect(path)
    conn.execute(damage)
    conn.commit()
    conn.close()
    with pytest.raises(lf.RunManifestError, match="item 0"):
        _run(path)
