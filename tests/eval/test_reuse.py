"""A stored trial is reused only for the same case and the same evaluators (``run=``).

Fixing a case's expected answer re-scores the stored output (no task call) and says so;
inserting a case into a dataset with position ids never hands it another case's output or
verdict; other evaluators re-score instead of mixing two evaluations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import langfx_nb as lf


class Calls:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def task(self, x: str) -> str:
        self.seen.append(x)
        return x.upper()


async def _run(calls: Calls, cases: list[Any], path: Path, evaluators: Any = None) -> Any:
    return await lf.eval.run(
        calls.task,
        cases,
        evaluators or [lf.eval.exact],
        run=path,
        progress=False,
        live=False,
    )


async def test_a_fixed_expected_answer_is_re_scored_and_the_report_says_so(tmp_path: Path) -> None:
    path = tmp_path / "fix.sqlite"
    calls = Calls()
    wrong = [lf.eval.Case("a", "A", id="a"), lf.eval.Case("b", "wrong", id="b")]
    first = await _run(calls, wrong, path)
    assert [r.scores["exact"].score.passed for r in first] == [True, False]
    calls.seen.clear()
    fixed = [lf.eval.Case("a", "A", id="a"), lf.eval.Case("b", "B", id="b")]
    second = await _run(Calls(), fixed, path)
    assert second[0].resumed and second[0].redo is None
    b = second[1]
    assert not b.resumed and b.scores["exact"].score.passed is True  # the new answer's verdict
    assert b.redo == "re-scored: the expected answer changed; output kept"
    assert b.output == "B"
    assert second.redone == {"re-scored": 1, "re-run": 0}
    assert "stored trials not reused: 1 re-scored" in second.summary()
    # the task was not called again for it; a third run reuses the new verdict as it is
    third = await _run(calls, fixed, path)
    assert calls.seen == [] and all(r.resumed and r.redo is None for r in third)
    assert third.metrics["exact"].value == 1.0


async def test_an_inserted_case_never_gets_another_cases_output(tmp_path: Path) -> None:
    path = tmp_path / "insert.sqlite"
    before = lf.eval.Dataset([lf.eval.Case("x", "X"), lf.eval.Case("y", "Y")])
    calls = Calls()
    await _run(calls, list(before), path)
    assert [c.id for c in before] == ["0", "1"]
    after = lf.eval.Dataset(
        [lf.eval.Case("new", "NEW"), lf.eval.Case("x", "X"), lf.eval.Case("y", "Y")]
    )
    calls.seen.clear()
    report = await _run(calls, list(after), path)
    assert [r.output for r in report] == ["NEW", "X", "Y"]
    assert all(r.scores["exact"].score.passed for r in report)
    assert calls.seen == ["new"]  # x and y keep their outputs (same inputs), re-scored
    assert report[0].redo == "re-run: the inputs changed"
    assert report[1].redo is not None and report[1].redo.startswith("re-scored")


async def test_other_evaluators_re_score_the_stored_outputs(tmp_path: Path) -> None:
    path = tmp_path / "evals.sqlite"
    calls = Calls()
    cases = [lf.eval.Case("a", "A", id="a")]
    await _run(calls, cases, path)

    def long_enough(ctx: lf.eval.EvalContext) -> bool:
        return len(ctx.output) > 3

    calls.seen.clear()
    report = await _run(calls, cases, path, [lf.eval.exact, long_enough])
    assert calls.seen == []
    assert report[0].redo == "re-scored: the evaluators changed; output kept"
    assert report[0].scores["long_enough"].score.passed is False
