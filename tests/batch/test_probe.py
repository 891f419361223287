"""Batch runs as a new maintainer reads them: what a manifest keeps of a failed item, a
damaged or hostile manifest from elsewhere, and the trace a crash leaves."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from tests.local import python_bounded
from tests.stored_tables import edit_sqlite

SECRET = "sk-proj-abcdefghijklmnop1234567890"


async def leaky(item: int, session: Any) -> int:
    if item == 1:
        raise ValueError(f"request failed: Authorization: Bearer {SECRET}")
    return item


def test_a_failed_items_message_never_stores_a_credential(tmp_path: Path) -> None:
    # neither the traceback nor the short message beside it, in the BatchResult, the
    # manifest file or the item's trace node
    path = tmp_path / "run.sqlite"
    session = lf.Session()
    result = asyncio.run(lf.batch(leaky, range(3), run=path, session=session, progress=False))
    error = result.errors[1]
    assert error is not None and error.traceback is not None
    assert SECRET not in error.traceback  # masked already
    assert SECRET not in error.message
    assert SECRET not in session.trace_json_str()
    assert SECRET.encode() not in path.read_bytes()


async def numbered(item: dict[str, int], session: Any) -> dict[str, int]:
    if item["q"] == 2:
        raise ValueError("boom")
    return {"v": item["q"]}


def _manifest(tmp_path: Path) -> Path:
    path = tmp_path / "run.sqlite"
    items = [{"q": i} for i in range(5)]
    asyncio.run(lf.batch(numbered, items, run=path, progress=False))
    return path


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE items SET idx = -1 WHERE idx = 0",  # not a position
        "UPDATE items SET idx = 1 WHERE idx = 0",  # two rows at one index (a resumed run may)
        "UPDATE items SET idx = 'abc' WHERE idx = 0",  # not a number
    ],
)
def test_a_damaged_item_index_is_refused_not_reordered(tmp_path: Path, damage: str) -> None:
    # BatchResult.load lists rows in input order: an index that is no position is refused;
    # one shared by two rows (as a run that added a row first leaves them) keeps the rows in
    # the order written, each with its own key, input and outcome (an index past the end
    # cannot be told from a run that stopped early: the rows keep their order and inputs)
    path = _manifest(tmp_path)
    assert lf.BatchResult.load(path).statuses[2] == "failed"
    edit_sqlite(path, damage)
    try:
        loaded = lf.BatchResult.load(path)
    except lf.RunManifestError:
        return
    assert loaded.statuses[2] == "failed"
    assert loaded.results[1] == {"v": 1}


def test_a_huge_item_row_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    # the manifest writes an input cut at 4,000 characters and reads it so: a manifest
    # from elsewhere with a 300 MB input does not take the process to MemoryError
    path = _manifest(tmp_path)
    edit_sqlite(path, "UPDATE items SET input = printf('%.*c', 300000000, 'x') WHERE idx = 0")
    code = (
        "import sys, langfx_nb as lf\n"
        "try:\n    lf.BatchResult.load(sys.argv[1])\n"
        "except lf.RunManifestError as exc:\n    print('RunManifestError')\n"
    )
    done = python_bounded(code, str(path), timeout=120)
    assert done.returncode == 0, done.stderr[-300:]


_KILLED = """
import asyncio, os, signal, sys
import langfx_nb as lf

async def fn(item, session):
    if item == 300:
        os.kill(os.getpid(), signal.SIGKILL)  # a crash: items 0..299 finished
    with session.track("action", "step"):
        await asyncio.sleep(0)
    return item

asyncio.run(lf.batch(fn, range(1000), run=sys.argv[1], progress=False, max_concurrency=1))
"""


def test_after_a_kill_every_finished_item_is_in_the_manifests_trace(tmp_path: Path) -> None:
    # docs/batch.md: each item's nodes are "committed with the item rows": a resume never
    # runs a kept item again, so a trace node lost in a crash would be lost for good
    path = tmp_path / "run.sqlite"
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(path)], capture_output=True, timeout=120, check=False
    )
    assert done.returncode == -signal.SIGKILL
    finished = sum(s in ("ok", "failed") for s in lf.BatchResult.load(path).statuses)
    assert finished == 300
    nodes = lf.Session.load_trace(path).trace_json()["nodes"]
    assert sum(n["kind"] == "item" for n in nodes) == finished


async def one(item: Any, session: Any) -> int:
    return 1


def test_an_items_input_is_masked_in_the_whole_manifest(tmp_path: Path) -> None:
    # docs/batch.md: the manifest stores each item's input "credential-shaped text masked";
    # items.input is masked, but the item's trace node (trace_nodes, in the same file) keeps
    # the input as given, credential and all
    path = tmp_path / "run.sqlite"
    items = [{"prompt": "hi", "auth": f"Bearer {SECRET}"}]
    asyncio.run(lf.batch(one, items, run=path, progress=False))
    assert "<redacted>" in str(lf.BatchResult.load(path).inputs[0])
    assert SECRET.encode() not in path.read_bytes()


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr boom")


def test_an_item_whose_repr_raises_keeps_fns_result(tmp_path: Path) -> None:
    # with key=, an item with no JSON form is stored as its repr; a repr that raises turns the
    # item's outcome into "failed: RuntimeError: repr boom", the result of fn lost
    result = asyncio.run(
        lf.batch(one, [_BadRepr()], run=tmp_path / "r.sqlite", key=lambda _: "k", progress=False)
    )
    assert result.statuses == ["ok"] and result.results == [1]


def test_a_deeply_nested_item_is_a_type_error_naming_it(tmp_path: Path) -> None:
    # docs/batch.md: items that cannot be keyed with run= raise TypeError naming the item
    # before any request; json's RecursionError escapes instead
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TypeError, match=r"items\[0\]"):
        asyncio.run(lf.batch(one, [deep], run=tmp_path / "r.sqlite", progress=False))


_ON_A_FIFO = """
import asyncio, sys
import langfx_nb as lf

async def fn(item, session):
    return item

try:
    if sys.argv[1] == "load":
        lf.BatchResult.load(sys.argv[2])
    else:
        asyncio.run(lf.batch(fn, [1], run=sys.argv[2], progress=False))
except lf.RunManifestError:
    print("RunManifestError")
"""


@pytest.mark.parametrize("how", ["load", "batch"])
def test_a_run_manifest_path_that_is_a_fifo_is_refused(tmp_path: Path, how: str) -> None:
    # read_run / Manifest open the path with sqlite3 without checking it is a regular file:
    # opening a FIFO blocks for ever (the trace readers refuse it: "not a regular file")
    path = tmp_path / "run.sqlite"
    os.mkfifo(path)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _ON_A_FIFO, how, str(path)],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{how} on a FIFO hung")
    assert done.stdout.strip() == "RunManifestError", done.stderr[-300:]
