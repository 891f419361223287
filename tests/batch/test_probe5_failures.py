"""A failed item, read as a data scientist debugging item 3,217 of a long run: its traceback
is in the ``BatchResult``, the item's trace node, the run manifest (``BatchResult.load``) and
the stored trace (``lf.Session.load_trace``), also after a ``kill -9``; it stays bounded for
huge messages and deep recursion; an odd exception fails only its item."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import langfx_nb as lf
from langfx_nb.agentic.tracebacks import MAX_TRACEBACK_CHARS

from ..spend.provider_server import ProviderServer, openai_model

ROOT = Path(__file__).resolve().parents[2]


def _name_of(row: dict[str, Any]) -> Any:
    return row["name"]


async def tag(row: dict[str, Any]) -> Any:
    if row["i"] == 3217:
        return _name_of({"nom": "x"})  # the bug a traceback must point at
    return row["i"]


def _failed_nodes(path: Path) -> list[dict[str, Any]]:
    loaded = lf.Session.load_trace(path).trace_json()
    return [n for n in loaded["nodes"] if n["kind"] == "item" and n["status"] == "failed"]


async def test_item_3217_of_5000_keeps_its_traceback_everywhere(tmp_path: Path) -> None:
    run = tmp_path / "big.sqlite"
    rows = [{"i": i} for i in range(5000)]
    result = await lf.batch(tag, rows, run=run, progress=False)
    assert result.failed == [3217]
    error = result.errors[3217]
    assert error is not None and str(error) == "KeyError: 'name'"
    tb = error.traceback or ""
    assert "in tag" in tb and "in _name_of" in tb and 'return row["name"]' in tb
    assert tb.rstrip().endswith("KeyError: 'name'")
    assert result.inputs[3217] == {"i": 3217}
    # the live trace node
    assert result.session is not None
    node = result.session.find(result.node_ids[3217] or "")
    assert node is not None and node.error is not None and node.error["traceback"] == tb
    # the manifest, read back without running anything: the input that failed, and where
    stored = lf.BatchResult.load(run)
    failed = [i for i, s in enumerate(stored.statuses) if s == "failed"]
    assert len(failed) == 1 and stored.inputs[failed[0]] == {"i": 3217}
    assert stored.errors[failed[0]] is not None
    assert stored.errors[failed[0]].traceback == tb  # type: ignore[union-attr]
    # the stored trace a person opens later (what the explorer reads)
    [item] = _failed_nodes(run)
    assert item["name"] == "item 3217" and item["error"]["traceback"] == tb


_KILLED = """
import asyncio, sys
import langfx_nb as lf

def _name_of(row):
    return row["name"]

async def fn(row):
    if row["i"] == 3:
        return _name_of(row)
    if row["i"] >= 5:
        await asyncio.Event().wait()  # in flight when the process is killed
    return row["i"]

asyncio.run(lf.batch(fn, [{"i": i} for i in range(8)], run=sys.argv[1], max_concurrency=2,
                     progress=False))
"""


def _failed_row(run: Path) -> bool:
    if not run.exists():
        return False
    try:
        conn = sqlite3.connect(f"{run.as_uri()}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT count(*) FROM items WHERE status = 'failed'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return bool(row[0])


def test_a_killed_run_keeps_the_failed_items_traceback(tmp_path: Path) -> None:
    run = tmp_path / "killed.sqlite"
    script = tmp_path / "killed.py"
    script.write_text(_KILLED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, str(script), str(run)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not _failed_row(run) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None, "the child ended before it was killed"
        assert _failed_row(run), "the failed item was never committed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    stored = lf.BatchResult.load(run)
    [index] = [i for i, s in enumerate(stored.statuses) if s == "failed"]
    assert stored.inputs[index] == {"i": 3}
    tb = stored.errors[index].traceback or ""  # type: ignore[union-attr]
    assert "in _name_of" in tb and tb.rstrip().endswith("KeyError: 'name'")
    # the trace records committed with the row carry it too (no stored trace was written)
    [item] = _failed_nodes(run)
    assert item["name"] == "item 3" and item["error"]["traceback"] == tb


def _deep(n: int) -> None:
    if n == 0:
        raise ValueError("bottom " + "y" * 1_000_000)
    _deep(n - 1)


def _forever(n: int) -> int:
    return _forever(n + 1)


class Cycle(Exception):
    pass


async def odd(kind: str) -> str:
    if kind == "deep":
        _deep(10_000)
    if kind == "recursion":
        _forever(0)
    if kind == "cycle":
        a, b = Cycle("a"), Cycle("b")
        a.__cause__, b.__cause__ = b, a
        raise a
    if kind == "huge context":
        try:
            raise KeyError("x" * 2_000_000)
        except KeyError:
            raise ValueError("z" * 2_000_000)  # noqa: B904 (the context is the point)
    return kind


async def test_huge_and_deep_tracebacks_stay_bounded_and_end_at_the_raise(tmp_path: Path) -> None:
    run = tmp_path / "odd.sqlite"
    kinds = ["deep", "recursion", "cycle", "huge context", "fine"]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(30_000)  # room for 10,000 frames of _deep
    try:
        result = await lf.batch(odd, kinds, run=run, progress=False)
    finally:
        sys.setrecursionlimit(limit)
    assert result.statuses == ["failed"] * 4 + ["ok"]
    tracebacks = [e.traceback or "" for e in result.errors if e is not None]
    lasts = ["ValueError: bottom y", "RecursionError", "Cycle: a", "ValueError: zzz"]
    for tb, last in zip(tracebacks, lasts, strict=True):
        assert 0 < len(tb) <= MAX_TRACEBACK_CHARS
        assert tb.rstrip().splitlines()[-1].startswith(last)
    assert "in _deep" in tracebacks[0] and "in _forever" in tracebacks[1]
    assert "Cycle: b" in tracebacks[2]  # the cause, shown once although the chain loops
    stored = lf.BatchResult.load(run)
    assert sorted(len(e.traceback or "") for e in stored.errors if e) == sorted(
        len(t) for t in tracebacks
    )
    assert run.stat().st_size < 2_000_000  # no megabyte message reached the file


class BrokenStr(Exception):
    """A user's exception whose ``__str__`` fails (here: it reads an argument never given)."""

    def __init__(self, code: int) -> None:
        super().__init__()
        self.code = code

    def __str__(self) -> str:
        return str(self.args[0])  # IndexError: the class forgot to pass its message up


async def broken(i: int) -> int:
    if i == 1:
        raise BrokenStr(42)
    return i


async def test_an_exception_whose_str_fails_fails_only_its_item() -> None:
    result = await lf.batch(broken, [0, 1, 2], progress=False)
    assert result.statuses == ["ok", "failed", "ok"]
    assert result.errors[1] is not None and result.errors[1].type == "BrokenStr"


async def first_file(folder: str) -> str:
    for name in os.listdir(folder):  # str names: a non-UTF-8 byte becomes a lone surrogate
        raise ValueError(f"cannot parse {name}")
    return "empty"


async def test_an_error_naming_a_non_utf8_file_fails_its_item(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb"):
        pass
    batch = lf.batch(first_file, [str(folder)], run=tmp_path / "s.sqlite", progress=False)
    result = await asyncio.wait_for(batch, 5)  # (a hang fails the test, not the suite)
    assert result.statuses == ["failed"] and result.errors[0] is not None
    assert result.errors[0].type == "ValueError"


def _parse(row: dict[str, Any]) -> Any:
    return row["name"]


async def _part(row: dict[str, Any]) -> Any:
    return _parse(row)


async def fan_out(rows: list[dict[str, Any]]) -> list[Any]:
    async with asyncio.TaskGroup() as group:  # asyncio's own way to fan out
        tasks = [group.create_task(_part(row)) for row in rows]
    return [t.result() for t in tasks]


async def test_a_task_groups_failure_shows_the_sub_exception() -> None:
    result = await lf.batch(fan_out, [[{"name": 1}, {"nom": 2}]], progress=False)
    error = result.errors[0]
    assert error is not None and error.type == "ExceptionGroup"
    tb = error.traceback or ""
    assert "in _parse" in tb and "KeyError: 'name'" in tb


def _checked(text: str, row: dict[str, str]) -> str:
    if row["id"] == "t2":
        raise KeyError("missing")
    return text


async def test_provider_batch_items_keep_their_tracebacks(tmp_path: Path) -> None:
    run = tmp_path / "provider.sqlite"
    with ProviderServer(steps_to_finish=1, fail_items=frozenset({"t3"})) as server:
        lm = openai_model(server)

        async def label(row: dict[str, str], session: lf.Session) -> str:
            text = await session.query("Label this ticket: item={{id}}", vars=row, lm=lm)
            return _checked(str(text), row)

        engine = lf.engines.ProviderBatch(poll_interval=0.0, max_resubmits=0)
        rows = [{"id": f"t{i}"} for i in range(5)]
        try:
            result = await lf.batch(label, rows, run=run, engine=engine, progress=False)
        finally:
            await lm.aclose()
    assert result.failed == [2, 3]
    replayed, errored = result.errors[2], result.errors[3]
    assert replayed is not None and "in _checked" in (replayed.traceback or "")
    assert errored is not None and errored.type == "ProviderBatchError"
    assert "in label" in (errored.traceback or "")  # where fn asked for the answer
    stored = lf.BatchResult.load(run)
    tracebacks = {
        row["id"]: e.traceback
        for row, e in zip(stored.inputs, stored.errors, strict=True)
        if e is not None
    }
    assert tracebacks == {"t2": replayed.traceback, "t3": errored.traceback}
