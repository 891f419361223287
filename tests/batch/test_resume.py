"""Run manifests: resume without re-sending, typed results back, refusal of another fn or
schema, bad input before any request, unwritable manifests, and a real kill -9."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.batch.manifest import manifest_path
from langfx_nb.llms.openai import OpenAI

from .limited_server import LimitedServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("run_script.py")


class Label(pydantic.BaseModel):
    item: int
    label: str


CALLS: list[int] = []
FAIL_ONCE: set[int] = set()


async def label(x: int) -> Label:
    CALLS.append(x)
    if x in FAIL_ONCE:
        FAIL_ONCE.discard(x)
        raise ConnectionError(f"flaky {x}")
    await asyncio.sleep(0)
    return Label(item=x, label=f"l{x}")


async def other(x: int) -> Label:
    return Label(item=x, label="other")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    FAIL_ONCE.clear()


async def test_resume_sends_nothing_for_done_items_and_returns_typed_results(
    tmp_path: Path,
) -> None:
    run = tmp_path / "labels.sqlite"
    FAIL_ONCE.update({3, 7})
    first = await lf.batch(label, range(10), run=run, progress=False)
    assert first.failed == [3, 7] and first.run_path == str(run)
    assert sorted(CALLS) == list(range(10))
    CALLS.clear()
    second = await lf.batch(label, range(10), run=run, progress=False)
    assert CALLS == [3, 7]  # only the failed ones run again
    assert second.ok and second.totals.resumed == 8
    assert all(type(r) is Label for r in second.results)
    assert second.results == [Label(item=i, label=f"l{i}") for i in range(10)]
    assert second.resumed == [i not in (3, 7) for i in range(10)]
    CALLS.clear()
    third = await lf.batch(label, list(range(12)), run=run, progress=False)
    assert CALLS == [10, 11] and third.ok  # new items only


def _item_rows(run: Path) -> tuple[int, int, int]:
    """(rows, distinct keys, ok rows) of a manifest's items."""
    with sqlite3.connect(run) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT key), sum(status = 'ok') FROM items"
        ).fetchone()
    return row[0], row[1], row[2]


@pytest.mark.parametrize("version", ["3", "2"])
async def test_an_item_run_again_replaces_its_row(tmp_path: Path, version: str) -> None:
    """A failed item that succeeds on resume has one row, its new one; a manifest of
    format 2 (its items under a unique key index) is resumed the same way."""
    run = tmp_path / "again.sqlite"
    FAIL_ONCE.update({3, 7})
    await lf.batch(label, range(10), run=run, progress=False)
    if version == "2":  # the items table as format 2 made it
        with sqlite3.connect(run) as conn:
            conn.executescript(
                "ALTER TABLE items RENAME TO old; CREATE TABLE items (key TEXT PRIMARY KEY, "
                "idx INTEGER NOT NULL, status TEXT NOT NULL, tag TEXT, value TEXT, "
                "error_type TEXT, error_message TEXT, at REAL NOT NULL, traceback TEXT, "
                "input TEXT); INSERT INTO items SELECT * FROM old; DROP TABLE old; "
                "UPDATE meta SET value = '2' WHERE name = 'version';"
            )
    assert _item_rows(run) == (10, 10, 8)
    CALLS.clear()
    again = await lf.batch(label, range(10), run=run, progress=False)
    assert CALLS == [3, 7] and again.ok
    assert _item_rows(run) == (10, 10, 10)
    assert lf.BatchResult.load(run).statuses == ["ok"] * 10


async def test_plain_json_results_come_back_as_they_were(tmp_path: Path) -> None:
    async def fn(x: int) -> Any:
        return {"x": x, "tags": ["a", None]} if x else "zero"

    run = tmp_path / "plain.sqlite"
    first = await lf.batch(fn, [0, 1], run=run, progress=False)
    again = await lf.batch(fn, [0, 1], run=run, progress=False)
    assert again.results == first.results == ["zero", {"x": 1, "tags": ["a", None]}]
    assert again.totals.resumed == 2


async def test_a_manifest_of_another_function_is_refused_untouched(tmp_path: Path) -> None:
    run = tmp_path / "r.sqlite"
    await lf.batch(label, range(3), run=run, progress=False)
    before = digest(run)
    with pytest.raises(lf.RunManifestError, match="made by another run: fn changed") as info:
        await lf.batch(other, range(3), run=run, progress=False)
    assert "test_resume.label to tests.batch.test_resume.other" in str(info.value)
    assert digest(run) == before


async def test_a_changed_prompt_counts_as_another_function(tmp_path: Path) -> None:
    run = tmp_path / "p.sqlite"
    prompt = "first prompt"

    async def fn(x: int) -> str:
        return prompt + str(x)

    await lf.batch(fn, range(2), run=run, progress=False)
    prompt = "second prompt"
    with pytest.raises(lf.RunManifestError, match="the value of prompt that fn reads changed"):
        await lf.batch(fn, range(2), run=run, progress=False)


async def test_a_manifest_whose_result_schema_changed_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "s.sqlite"
    await lf.batch(label, range(3), run=run, progress=False)
    before = digest(run)

    class Changed(pydantic.BaseModel):
        item: int
        label: str
        score: float

    Changed.__qualname__ = "Label"
    Changed.__module__ = __name__
    monkeypatch.setitem(globals(), "Label", Changed)
    with pytest.raises(lf.RunManifestError, match="another schema"):
        await lf.batch(label, range(3), run=run, progress=False)
    assert digest(run) == before and CALLS == [0, 1, 2]


@pytest.mark.parametrize(
    "damage",
    ['{"item": 4}', '{"item": 4, "label": ', "[1, 2]", None],
    ids=["invalid", "truncated", "wrong-shape", "null"],
)
async def test_a_damaged_stored_result_is_refused_before_any_request(
    tmp_path: Path, damage: str | None
) -> None:
    run = tmp_path / "d.sqlite"
    await lf.batch(label, range(8), run=run, progress=False)
    with sqlite3.connect(run) as conn:
        conn.execute("UPDATE items SET value = ? WHERE idx = 4", (damage,))
    conn.close()
    before = digest(run)
    CALLS.clear()
    with pytest.raises(lf.RunManifestError, match="stored result of item 4 ") as info:
        await lf.batch(label, range(10), run=run, progress=False)
    assert "does not validate as Label" in str(info.value)
    assert CALLS == [] and digest(run) == before  # nothing sent, nothing changed


async def test_not_a_manifest_is_refused_untouched(tmp_path: Path) -> None:
    run = tmp_path / "x.sqlite"
    conn = sqlite3.connect(run)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    before = digest(run)
    with pytest.raises(lf.RunManifestError, match="not a langfx_nb run manifest"):
        await lf.batch(label, range(3), run=run, progress=False)
    assert digest(run) == before and CALLS == []


async def test_items_that_cannot_be_keyed_fail_before_any_request(tmp_path: Path) -> None:
    run = tmp_path / "k.sqlite"
    with pytest.raises(TypeError, match=r"items\[1\]: a object has no JSON form"):
        await lf.batch(label, [1, object(), 3], run=run, progress=False)
    with pytest.raises(TypeError, match="NaN"):
        await lf.batch(label, [{"x": float("nan")}], run=run, progress=False)
    with pytest.raises(ValueError, match="same key"):
        await lf.batch(label, [1, 2], run=run, key=lambda x: "k", progress=False)
    assert CALLS == [] and not run.exists()


async def test_repeated_items_get_their_own_keys(tmp_path: Path) -> None:
    result = await lf.batch(label, [1, 1, 2], run=tmp_path / "d.sqlite", progress=False)
    assert len(set(result.keys)) == 3 and CALLS == [1, 1, 2]


async def test_a_result_that_cannot_be_stored_fails_its_item_visibly(tmp_path: Path) -> None:
    async def fn(x: int) -> Any:
        return object() if x else {"fine": 1}

    result = await lf.batch(fn, [0, 1], run=tmp_path / "o.sqlite", progress=False)
    assert result.statuses == ["ok", "failed"]
    error = result.errors[1]
    assert error is not None and error.type == "TypeError" and "run manifest" in error.message


async def test_a_manifest_that_cannot_be_created_fails_before_any_request() -> None:
    with pytest.raises(lf.RunManifestError, match="cannot create it"):
        await lf.batch(label, range(3), run="/proc/langfx_runs/r.sqlite", progress=False)
    assert CALLS == []


async def test_a_run_name_lives_under_dot_langfx_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LANGFX_RUNS_DIR", raising=False)
    result = await lf.batch(label, range(2), run="my-run", progress=False)
    assert Path(result.run_path or "") == tmp_path / ".langfx_runs" / "my-run.sqlite"
    assert (tmp_path / ".langfx_runs" / "my-run.sqlite").exists()
    with pytest.raises(ValueError, match="run name"):
        manifest_path("bad name!")


async def test_cancelling_leaves_the_manifest_consistent(tmp_path: Path) -> None:
    run = tmp_path / "c.sqlite"

    async def slow(x: int) -> Label:
        CALLS.append(x)
        await asyncio.sleep(0 if x < 20 else 30)
        return Label(item=x, label=f"l{x}")

    task = asyncio.ensure_future(lf.batch(slow, range(40), run=run, max_concurrency=4))
    while len(CALLS) < 24:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with sqlite3.connect(run) as conn:
        rows = conn.execute("SELECT idx, status FROM items ORDER BY idx").fetchall()
    assert rows == [(i, "ok") for i in range(20)]
    CALLS.clear()

    async def fast(x: int) -> Label:  # same code as `slow` but not the same function
        return Label(item=x, label=f"l{x}")

    with pytest.raises(lf.RunManifestError):
        await lf.batch(fast, range(40), run=run, progress=False)


FULL_DISK = """
import asyncio, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import langfx_nb as lf

async def fn(x):
    await asyncio.sleep(0.002)
    return "y" * 200 + str(x)

async def main():
    resource.setrlimit(resource.RLIMIT_FSIZE, (200 * 1024, 200 * 1024))
    try:
        await lf.batch(fn, range(3000), run=sys.argv[1], max_concurrency=4, progress=False)
    except lf.RunManifestError as exc:
        r = exc.result
        print("ERROR", type(exc).__name__, "|", str(exc)[:200])
        print("KEPT", sum(1 for s in r.statuses if s == "ok"), r.results[0][-1:])
    else:
        print("NO ERROR")

asyncio.run(main())
"""


def test_a_full_disk_is_a_clear_error_and_finished_results_are_kept(tmp_path: Path) -> None:
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "full.sqlite")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ERROR RunManifestError | run manifest"), out.stdout
    assert "cannot write results to it" in lines[0]
    kept = lines[1].split()
    assert kept[0] == "KEPT" and int(kept[1]) > 0 and kept[2] == "0"
    with sqlite3.connect(tmp_path / "full.sqlite") as conn:  # what was committed is intact
        committed = conn.execute("SELECT count(*) FROM items WHERE status='ok'").fetchone()[0]
    assert 0 < committed <= int(kept[1])


def _manifest_rows(path: Path) -> dict[int, str]:
    if not path.exists():
        return {}
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT idx, status FROM items").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def test_kill_9_mid_run_then_resume_sends_no_request_for_done_items(tmp_path: Path) -> None:
    n = 200
    run = tmp_path / "crash.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with LimitedServer(delay_s=0.01) as server:
        args = [sys.executable, str(SCRIPT), server.url, str(run), str(n), "8"]
        log = tmp_path / "first.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(args, env=env, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 60
            while len(_manifest_rows(run)) < n // 3:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        done_at_kill = {i for i, s in _manifest_rows(run).items() if s == "ok"}
        assert n // 3 <= len(done_at_kill) < n
        answered_at_kill = dict(server.answered)
        resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        out = json.loads(resumed.stdout.splitlines()[-1])
        # no second request for any item the manifest held as done
        assert all(server.answered[str(i)] == 1 for i in done_at_kill), server.duplicates
        # only items in flight at the kill (answered, not yet committed) were asked twice
        assert set(server.duplicates) <= {k for k in answered_at_kill if int(k) not in done_at_kill}
        assert len(server.duplicates) <= 8 + 64
        assert out["resumed"] == len(done_at_kill)
        assert out["requests"] == n - len(done_at_kill)
        assert out["statuses"] == ["ok"] * n
        assert out["results"] == [
            ["Label", {"item": str(i), "label": f"label-{i}"}] for i in range(n)
        ]


class ServerLabel(pydantic.BaseModel):
    item: str
    label: str


async def server_label(row: dict[str, int], session: lf.Session) -> ServerLabel:
    return await session.query("Label this: item={{id}}", ServerLabel, vars=row, protocol="json")  # type: ignore[no-any-return]


async def test_cancelling_a_batch_closes_its_requests_and_a_resume_sends_only_the_missing(
    tmp_path: Path,
) -> None:
    n, workers = 40, 4
    slow = {str(i) for i in range(30, 30 + workers)}  # the last requests in flight
    run = tmp_path / "interrupt.sqlite"
    with LimitedServer(slow_items=slow, slow_s=120) as server:
        lm = OpenAI(
            "gpt-test",
            api_key="sk-test",
            base_url=server.url,
            transport=httpx.AsyncHTTPTransport(),
            max_tokens=12,
        )
        try:
            rows = [{"id": i} for i in range(n)]
            task = asyncio.ensure_future(
                lf.batch(
                    server_label,
                    rows,
                    session=lf.Session(lm),
                    run=run,
                    max_concurrency=workers,
                    progress=False,
                )
            )
            deadline = time.monotonic() + 60
            while server.holding != slow:  # every worker waits on a held request
                assert not task.done() and time.monotonic() < deadline
                await asyncio.sleep(0.01)
            task.cancel()
            # the batch stops at once: long before the server would answer (120 s)
            finished, _ = await asyncio.wait({task}, timeout=30)
            assert task in finished and task.cancelled()
            while len(server.abandoned) < workers:  # the server sees the connections close
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            assert sorted(server.abandoned) == sorted(slow) and not server.holding
            assert sum(server.answered.values()) == 30
            # the manifest holds exactly the items answered, each once
            assert _manifest_rows(run) == {i: "ok" for i in range(30)}

            server.slow_items = set()
            again = await lf.batch(
                server_label, rows, session=lf.Session(lm), run=run, progress=False
            )
        finally:
            await lm.aclose()
    assert again.ok and again.totals.resumed == 30
    assert again.totals.requests == n - 30  # exactly the missing items, nothing twice
    assert server.duplicates == {} and all(server.answered[str(i)] == 1 for i in range(n))
    assert again.results == [ServerLabel(item=str(i), label=f"label-{i}") for i in range(n)]
