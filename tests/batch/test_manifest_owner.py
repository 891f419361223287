"""One run owns a run manifest at a time, and a crash re-sends only what was in flight:
real processes (two at once, SIGKILL), a real SQLite file, the local OpenAI-wire server or
a counting fake model that records every request before answering it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pydantic
import pytest

import langfx_nb as lf

from .limited_server import LimitedServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("run_script.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _committed(path: Path) -> set[int]:
    """The items the manifest holds as done (read-only, while its owner runs)."""
    if not path.exists():
        return set()
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return {i for (i,) in conn.execute("SELECT idx FROM items WHERE status = 'ok'")}
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()


def _wait_for(proc: subprocess.Popen[bytes], run: Path, count: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while len(_committed(run)) < count:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _killed_after(args: list[str], run: Path, count: int, log: Path) -> int:
    """Run ``args`` (the run script) in a child, SIGKILL it once ``run`` holds ``count``
    items done, and return its exit code (its output goes to ``log``)."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(args, env=ENV, stdout=sink, stderr=sink)
    try:
        _wait_for(proc, run, count, log)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    return proc.returncode


def test_a_second_process_on_a_running_manifest_is_refused_naming_the_owner(
    tmp_path: Path,
) -> None:
    n = 120
    run = tmp_path / "shared.sqlite"
    # item 60 is held 20 s: the first run is still running when the second has started
    with LimitedServer(delay_s=0.01, slow_items={"60"}, slow_s=20) as server:
        args = [sys.executable, str(SCRIPT), server.url, str(run), str(n), "4"]
        log = tmp_path / "first.log"
        with log.open("wb") as sink:
            first = subprocess.Popen(args, env=ENV, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 60
            while not server.holding:
                assert first.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.01)
            second = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=60)
            still_running = first.poll() is None
            assert first.wait(timeout=120) == 0, log.read_text()[-3000:]
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
    assert second.returncode != 0, "the second run was not refused"
    assert still_running  # (the owner held the manifest all along)
    error = second.stderr.strip().splitlines()[-1]
    assert error.startswith("langfx_nb.errors.RunManifestError: run manifest"), error
    assert "is in use by another run" in error
    assert f"pid {first.pid} on host {socket.gethostname()}, started 20" in error
    assert "if_owned='wait'" in error
    # nothing was sent twice: the second run sent nothing at all
    assert server.duplicates == {}
    assert sum(server.answered.values()) == n


def test_a_killed_owner_frees_the_manifest_at_once(tmp_path: Path) -> None:
    n = 400
    run = tmp_path / "killed.sqlite"
    with LimitedServer(delay_s=0.02) as server:
        args = [sys.executable, str(SCRIPT), server.url, str(run), str(n), "4"]
        _killed_after(args, run, 20, tmp_path / "first.log")
        assert (run.parent / "killed.sqlite.lock").exists()  # left behind, not locked
        again = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    out = json.loads(again.stdout.splitlines()[-1])
    assert out["statuses"] == ["ok"] * n and out["resumed"] >= 20


class Echo(pydantic.BaseModel):
    x: int


CALLS: list[int] = []


async def slow_echo(x: int) -> Echo:
    CALLS.append(x)
    await asyncio.sleep(0.01)
    return Echo(x=x)


async def test_in_one_process_a_second_run_is_refused_or_waits_when_asked(
    tmp_path: Path,
) -> None:
    CALLS.clear()
    run = tmp_path / "one.sqlite"
    items = list(range(40))
    first = asyncio.ensure_future(
        lf.batch(slow_echo, items, run=run, max_concurrency=2, progress=False)
    )
    while not CALLS:
        await asyncio.sleep(0.005)
    with pytest.raises(lf.RunManifestError, match=f"pid {os.getpid()} on host") as refused:
        await lf.batch(slow_echo, items, run=run, progress=False)
    assert refused.value.path == str(run)
    waited = await lf.batch(slow_echo, items, run=run, progress=False, if_owned="wait")
    assert first.done() and first.result().ok
    assert waited.ok and waited.totals.resumed == len(items) and waited.totals.requests == 0
    assert sorted(CALLS) == items  # each item ran once, in the first run
    with pytest.raises(ValueError, match="if_owned"):
        await lf.batch(slow_echo, items, run=run, progress=False, if_owned="steal")  # type: ignore[arg-type]


def test_a_kill_re_sends_at_most_the_items_in_flight(tmp_path: Path) -> None:
    """A fake that answers at once finishes hundreds of items in 50 ms: each must be
    committed before its worker takes the next one, so at most ``concurrency`` items were
    asked but not recorded when the process is killed."""
    n, concurrency = 20_000, 8
    run = tmp_path / "fast.sqlite"
    asked = tmp_path / "asked.txt"
    args = [sys.executable, str(SCRIPT), f"fake:{asked}", str(run), str(n), str(concurrency)]
    assert _killed_after(args, run, 2_000, tmp_path / "first.log") == -signal.SIGKILL
    done = _committed(run)
    requested = [int(line) for line in asked.read_text().split()]
    assert len(set(requested)) == len(requested)
    lost = set(requested) - done
    assert len(lost) <= concurrency, f"{len(lost)} items paid for and not recorded"
    assert len(done) < n
    again = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    out = json.loads(again.stdout.splitlines()[-1])
    assert out["resumed"] == len(done) and out["requests"] == n - len(done)
    requested_again = [int(line) for line in asked.read_text().split()]
    twice = len(requested_again) - len(set(requested_again))
    assert twice == len(lost) <= concurrency
