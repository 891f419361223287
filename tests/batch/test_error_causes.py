"""Errors keep their cause (``raise ... from exc``): the sqlite3 error behind a
``RunManifestError``, the JSON error behind a bad dataset line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import langfx_nb as lf
from langfx_nb.eval.dataset import Dataset


async def _one(x: int) -> int:
    return x


async def test_a_file_that_is_not_sqlite_names_the_sqlite_error(tmp_path: Path) -> None:
    run = tmp_path / "junk.sqlite"
    run.write_bytes(b"not a database, just bytes" * 100)
    with pytest.raises(lf.RunManifestError) as info:
        await lf.batch(_one, [1], run=run, progress=False)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


async def test_an_uncreatable_manifest_names_the_os_error() -> None:
    with pytest.raises(lf.RunManifestError, match="cannot create it") as info:
        await lf.batch(_one, [1], run="/proc/langfx_runs/r.sqlite", progress=False)
    assert isinstance(info.value.__cause__, OSError)


def test_a_bad_dataset_line_names_the_json_error(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"inputs": 1}) + "\n{oops\n")
    with pytest.raises(ValueError, match="line 2 is not JSON") as info:
        Dataset.from_jsonl(path)
    assert isinstance(info.value.__cause__, json.JSONDecodeError)
