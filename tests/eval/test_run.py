"""``lf.eval.run``: trials on lf.batch, aggregates, repeats, and resume after a SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.errors import RunManifestError

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("_crash_child.py")


def _child(manifest: Path, log: Path, mode: str) -> subprocess.Popen[bytes]:
    """The child process; its stdout and stderr go to files beside the log."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LFX_EVAL_BLOCK", None)
    if mode == "block":
        env["LFX_EVAL_BLOCK"] = "1"
    with (
        (log.parent / f"{mode}.out").open("wb") as out,
        (log.parent / f"{mode}.err").open("wb") as err,
    ):
        return subprocess.Popen(
            [sys.executable, str(CHILD), str(manifest), str(log)], stdout=out, stderr=err, env=env
        )


def _finish(proc: subprocess.Popen[bytes], timeout: float) -> None:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _committed(manifest: Path) -> int:
    if not manifest.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{manifest}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM items WHERE status='ok'").fetchone()[0])
    except sqlite3.Error:  # created but no table yet
        return 0


def test_a_resumed_run_after_sigkill_reruns_no_finished_case(tmp_path: Path) -> None:
    manifest, log = tmp_path / "eval.sqlite", tmp_path / "calls.log"
    first = _child(manifest, log, "block")
    try:
        for _ in range(600):  # bounded: at most 60 s
            if _committed(manifest) >= 12 or first.poll() is not None:
                break
            time.sleep(0.1)
        assert first.poll() is None, (tmp_path / "block.err").read_text()
        assert _committed(manifest) == 12
        first.send_signal(signal.SIGKILL)
    finally:
        _finish(first, 30)
    assert first.returncode == -signal.SIGKILL
    ran_first = log.read_text().split()
    finished = {f"c{i}" for i in range(12)}
    assert finished <= set(ran_first)
    log.write_text("")
    second = _child(manifest, log, "run")
    _finish(second, 120)
    assert second.returncode == 0, (tmp_path / "run.err").read_text()
    out = (tmp_path / "run.out").read_text()
    ran_second = log.read_text().split()
    assert not finished & set(ran_second)  # 0 finished cases ran again
    assert sorted(ran_second) == sorted(f"c{i}" for i in range(12, 30))
    summary = json.loads(out)
    assert summary["resumed"] == 12
    assert summary["ids"] == [f"c{i}" for i in range(30)]
    assert summary["n"] == 30
    assert summary["exact"] == pytest.approx(24 / 30)  # multiples of 5 answer wrong


async def test_repeats_aggregates_breakdown_usage_and_a_refused_manifest(tmp_path: Path) -> None:
    lm = lf.llms.Echo()

    async def task(text: str, session: lf.Session) -> str:
        return await session.query("{{t}}", lm=lm, vars={"t": text})

    def length(ctx: lf.eval.EvalContext) -> float:
        return float(len(ctx.output))

    ds = lf.eval.Dataset(
        [
            lf.eval.Case("aa", expected="aa", metadata={"kind": "short"}),
            lf.eval.Case("bbbb", expected="no", metadata={"kind": "long"}),
            lf.eval.Case("cccc", expected="cccc", metadata={"kind": "long"}),
        ]
    )
    path = tmp_path / "r.sqlite"
    report = await lf.eval.run(
        task, ds, [lf.eval.exact, length], repeats=2, run=path, progress=False
    )
    assert [r.key for r in report] == ["0#0", "0#1", "1#0", "1#1", "2#0", "2#1"]
    exact = report.metrics["exact"]
    assert exact.kind == "pass_rate" and exact.n == 6 and exact.value == pytest.approx(4 / 6)
    assert 0 < exact.interval.low < exact.value < exact.interval.high < 1
    mean = report.metrics["length"]
    assert mean.kind == "mean" and mean.value == pytest.approx(10 / 3)
    assert mean.interval.se is not None and mean.interval.se > 0
    by_kind = report.by("kind")
    assert by_kind["short"]["exact"].value == 1.0
    assert by_kind["long"]["exact"].value == 0.5
    assert report.usage.total_tokens and report.usage.total_tokens > 0
    assert all(r.node_id is not None and r.usage is not None for r in report)
    item = report.session.find(report[0].node_id)
    assert [n.name for n in item.children] == ["task", "evaluate"]
    # the same evaluation again: everything comes from the manifest, nothing runs
    calls = 0

    async def counting(text: str, session: lf.Session) -> str:
        nonlocal calls
        calls += 1
        return text

    again = await lf.eval.run(
        task, ds, [lf.eval.exact, length], repeats=2, run=path, progress=False
    )
    assert all(r.resumed for r in again) and again.metrics["exact"].value == exact.value
    # another task on the same manifest is refused, and the manifest is untouched
    with pytest.raises(RunManifestError):
        await lf.eval.run(counting, ds, [lf.eval.exact, length], repeats=2, run=path)
    assert calls == 0
    # other evaluators re-score the stored outputs (the task is not called again)
    rescored = await lf.eval.run(task, ds, [lf.eval.exact], repeats=2, run=path, progress=False)
    assert all(r.redo == "re-scored: the evaluators changed; output kept" for r in rescored)
    assert not rescored.usage.total_tokens and list(rescored.metrics) == ["exact"]


async def test_a_failing_task_is_a_failed_trial_without_scores() -> None:
    async def task(x: int) -> int:
        if x == 2:
            raise ValueError("the task broke")
        return x

    report = await lf.eval.run(
        task, [lf.eval.Case(x, expected=x) for x in range(4)], lf.eval.exact, progress=False
    )
    broken = report[2]
    assert broken.status == "failed" and broken.error == {
        "type": "ValueError",
        "message": "the task broke",
    }
    assert broken.scores == {}
    exact = report.metrics["exact"]  # the failed trial counts, as not passed
    assert exact.n == 4 and exact.scored == 3 and exact.missing == 1 and exact.value == 0.75
    assert report.failed == [broken]
    assert "1 failed" in report.summary()


def test_records_and_pandas() -> None:
    pd = pytest.importorskip("pandas")
    report = lf.eval.Report(
        [
            lf.eval.CaseResult(
                lf.eval.Case("q", "a", {"t": "x"}, "c1"),
                0,
                "ok",
                "a",
                scores={"exact": lf.eval.ScoreRecord("exact", lf.eval.Score(True))},
            )
        ]
    )
    rows = report.to_records()
    assert rows[0]["case_id"] == "c1" and rows[0]["exact"] is True and rows[0]["meta.t"] == "x"
    frame = report.to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame["case_id"]) == ["c1"]


async def test_another_judge_model_or_rubric_re_scores(tmp_path: Path) -> None:
    from langfx_nb.llms.fake import StaticResponse

    async def task(x: str) -> str:
        return x

    verdict = "Verdict(reason='ok', passed=True)"
    path = tmp_path / "j.sqlite"
    judge = lf.eval.judge(StaticResponse(verdict, model="judge-a"), "Is it right?")
    first = await lf.eval.run(task, ["a"], [judge], run=path, progress=False)
    assert first[0].scores["judge"].score is not None
    same = lf.eval.judge(StaticResponse(verdict, model="judge-a"), "Is it right?")
    again = await lf.eval.run(task, ["a"], [same], run=path, progress=False)
    assert again[0].resumed
    for other in (
        lf.eval.judge(StaticResponse(verdict, model="judge-b"), "Is it right?"),
        lf.eval.judge(StaticResponse(verdict, model="judge-a"), "Is it polite?"),
    ):
        rescored = await lf.eval.run(task, ["a"], [other], run=path, progress=False)
        assert rescored[0].redo == "re-scored: the evaluators changed; output kept"
        assert rescored[0].scores["judge"].score is not None


async def test_a_live_view_gets_each_trial_then_the_report() -> None:
    from langfx_nb.eval.report import set_live_view

    class Recorder:
        def __init__(self, name: str, trials: int) -> None:
            self.started = (name, trials)
            self.added: list[str] = []
            self.shown: Any = None

        def add(self, index: int, result: Any) -> None:
            assert self.shown is None  # every row arrives while the run goes on
            self.added.append(result.key)

        def show(self, source: Any) -> None:
            self.shown = source

        def stop(self, reason: str) -> None:
            raise AssertionError(f"a finished run does not stop its view ({reason})")

    views: list[Recorder] = []

    def factory(name: str, trials: int) -> Recorder:
        views.append(Recorder(name, trials))
        return views[-1]

    async def task(x: str) -> str:
        return x

    cases = [lf.eval.Case(c, expected=c, id=c) for c in "abc"]
    seen: list[int] = []
    previous = set_live_view(factory)
    try:
        report = await lf.eval.run(
            task,
            cases,
            [lf.eval.exact],
            repeats=2,
            name="live",
            progress=False,
            on_trial=lambda i, r: seen.append(i),
        )
        (view,) = views
        assert view.started == ("live", 6)
        assert sorted(view.added) == sorted(r.key for r in report)
        assert sorted(seen) == list(range(6))  # the caller's hook still runs
        assert view.shown is report and report.widget() is view
        await lf.eval.run(task, cases, [lf.eval.exact], progress=False, live=False)
        assert len(views) == 1  # live=False: no view

        def broken(name: str, trials: int) -> Recorder:
            raise RuntimeError("no frontend")

        set_live_view(broken)  # a view that cannot be made never stops the run
        assert len(await lf.eval.run(task, cases, [lf.eval.exact], progress=False)) == 3
    finally:
        set_live_view(previous)


async def test_a_cancelled_run_tells_its_live_view_it_stopped() -> None:
    from langfx_nb.eval.report import set_live_view

    class Recorder:
        def __init__(self) -> None:
            self.added = 0
            self.stopped: str | None = None

        def add(self, index: int, result: Any) -> None:
            self.added += 1

        def show(self, source: Any) -> None:
            raise AssertionError("a cancelled run shows no report")

        def stop(self, reason: str) -> None:
            self.stopped = reason

    views: list[Recorder] = []
    started = asyncio.Event()

    async def task(x: str) -> str:
        if x == "slow":
            started.set()
            await asyncio.sleep(60)
        return x

    cases = [lf.eval.Case(c, expected=c, id=c) for c in ("a", "b", "slow")]
    previous = set_live_view(lambda name, trials: views.append(Recorder()) or views[-1])
    try:
        run = asyncio.ensure_future(
            lf.eval.run(task, cases, [lf.eval.exact], progress=False, max_concurrency=3)
        )
        await asyncio.wait_for(started.wait(), 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    finally:
        set_live_view(previous)
    (view,) = views
    assert view.stopped == "cancelled"


async def test_a_failed_trial_keeps_where_its_task_raised(tmp_path: Path) -> None:
    """A bug in the task at one case shows its traceback (as a failed batch item's), not
    only ``KeyError: 'name'``; credential-shaped text in it is masked, and it is kept when
    the report is saved and loaded."""

    def lookup(row: dict[str, str]) -> str:
        return row["name"]  # the bug: one row has no name

    async def task(row: dict[str, str]) -> str:
        if row.get("key"):
            raise RuntimeError(f"refused key {row['key']}")
        return lookup(row)

    secret = "sk-" + "A" * 40
    cases = [lf.eval.Case({"name": "a"}), lf.eval.Case({"nom": "b"}), lf.eval.Case({"key": secret})]
    report = await lf.eval.run(task, cases, {"ran": lambda ctx: True}, progress=False, live=False)
    ok, missing, refused = report
    assert ok.traceback is None
    assert missing.error == {"type": "KeyError", "message": "'name'"}
    assert missing.traceback is not None
    assert "in lookup" in missing.traceback and 'return row["name"]' in missing.traceback
    assert missing.traceback.rstrip().endswith("KeyError: 'name'")
    assert refused.traceback is not None and secret not in refused.traceback
    assert "refused key" in refused.traceback
    assert report.to_records()[1]["error_traceback"] == missing.traceback
    report.save(tmp_path / "r.json")
    assert lf.eval.Report.load(tmp_path / "r.json")[1].traceback == missing.traceback
