"""Pass rates a person can trust: every trial of the run counts, an error or a failed task is
never a pass (in a report, its text, its widget and a comparison), and a non-finite score is
an error of its trial, not a broken view or a crash after the run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf


def _no_constants(name: str) -> Any:
    raise AssertionError(f"not JSON: {name}")


async def _seven_of_ten() -> lf.eval.Report:
    """10 cases: 7 right, 1 wrong, 2 whose evaluator raises."""

    async def task(x: int) -> int:
        return x if x != 7 else -1

    def checked(ctx: lf.eval.EvalContext) -> bool:
        if ctx.inputs >= 8:
            raise KeyError("no reference for this case")
        return bool(ctx.output == ctx.expected)

    cases = [lf.eval.Case(i, expected=i, id=f"c{i}") for i in range(10)]
    return await lf.eval.run(task, cases, [checked], progress=False, live=False)


async def test_errors_count_as_not_passed_and_are_shown_beside_the_rate() -> None:
    report = await _seven_of_ten()
    metric = report.metrics["checked"]
    assert metric.kind == "pass_rate"
    assert metric.value == pytest.approx(0.7) and metric.n == 10  # not 87.5% n=8
    assert metric.errors == 2 and metric.scored == 8 and metric.trials == 10
    assert "checked: 70.0% [39.7%, 89.2%] (n=10, 2 errors)" in report.summary()
    from langfx_nb.notebook.eval_report import EvalReportView

    view = EvalReportView(report)
    (shown,) = view.snapshot["summary"]["metrics"]
    assert shown["value"] == pytest.approx(0.7) and shown["n"] == 10 and shown["errors"] == 2
    assert "checked 70.0% [39.7%, 89.2%] (n=10, 2 errors)" in view._fallback_text()


async def test_a_failed_task_is_not_a_pass_and_a_mean_says_what_it_leaves_out() -> None:
    async def task(x: int) -> int:
        if x == 0:
            raise ValueError("the model is down")
        return x

    def size(ctx: lf.eval.EvalContext) -> float:
        return float(ctx.output)

    cases = [lf.eval.Case(i, expected=i, id=f"c{i}") for i in range(4)]
    report = await lf.eval.run(task, cases, [lf.eval.exact, size], progress=False, live=False)
    exact = report.metrics["exact"]
    assert exact.value == pytest.approx(0.75) and exact.n == 4 and exact.missing == 1
    mean = report.metrics["size"]
    assert mean.kind == "mean" and mean.value == pytest.approx(2.0)
    assert mean.n == 3 and mean.trials == 4
    assert "size: 2 ± 0.58 (n=3 of 4, 1 task failed)" in report.summary()
    # by metadata: the same rule per group
    assert report.by("none")["—"]["exact"].value == pytest.approx(0.75)


async def test_a_mapping_evaluator_that_raised_is_an_error_of_each_of_its_keys() -> None:
    class City(BaseModel):
        city: str
        country: str

    async def task(x: str) -> Any:
        return City(city=x, country="X") if x != "bad" else "not a model"

    cases = [lf.eval.Case(x, expected=City(city=x, country="X"), id=x) for x in ("a", "b", "bad")]
    report = await lf.eval.run(task, cases, [lf.eval.fields()], progress=False, live=False)
    assert sorted(report.metrics) == ["fields.city", "fields.country"]
    city = report.metrics["fields.city"]
    assert city.value == pytest.approx(2 / 3) and city.n == 3 and city.errors == 1


async def test_compare_counts_an_error_as_not_passed() -> None:
    async def task(x: int) -> int:
        return x

    def flaky(broken: set[int]) -> Any:
        def checked(ctx: lf.eval.EvalContext) -> bool:
            if ctx.inputs in broken:
                raise TimeoutError("judge timed out")
            return True

        return checked

    cases = [lf.eval.Case(i, expected=i, id=f"c{i}") for i in range(6)]
    a = await lf.eval.run(task, cases, {"ok": flaky(set())}, progress=False, live=False)
    b = await lf.eval.run(task, cases, {"ok": flaky({0, 1, 2})}, progress=False, live=False)
    comparison = lf.eval.compare(a, b)
    assert b.metrics["ok"].value == pytest.approx(0.5)
    delta = comparison.metrics["ok"]
    assert delta.difference.n == 6 and delta.difference.value == pytest.approx(-0.5)
    assert [c.case_id for c in comparison.regressions] == ["c0", "c1", "c2"]
    assert comparison.cases[0].scores["ok"] == (1.0, 0.0)


class Graded(BaseModel):
    reason: str
    score: float


async def test_non_finite_scores_are_errors_of_their_trial() -> None:
    from langfx_nb.llms.fake import StaticResponse
    from langfx_nb.notebook.eval_report import EvalReportView

    async def task(x: str) -> str:
        return x

    def wild(ctx: lf.eval.EvalContext) -> float:
        return {"up": float("inf"), "down": -float("inf"), "big": 1e999}.get(ctx.inputs, 1.0)

    judge = lf.eval.judge(
        StaticResponse("Graded(reason='great', score=1e999)", model="j"), "grade", verdict=Graded
    )
    cases = [lf.eval.Case(x, id=x) for x in ("up", "down", "big", "fine")]
    report = await lf.eval.run(task, cases, [wild, judge], progress=False, live=False)
    assert [r.status for r in report] == ["ok"] * 4
    for r in report[:3]:
        record = r.scores["wild"]
        assert record.score is None and record.error is not None
        assert record.error["type"] == "ValueError" and "finite" in record.error["message"]
    assert report[3].scores["wild"].score == lf.eval.Score(1.0)
    assert all(r.scores["judge"].error is not None for r in report)
    assert report.metrics["wild"].errors == 3 and report.metrics["wild"].value == 1.0
    view = EvalReportView(report)
    state = json.loads(view.state, parse_constant=_no_constants)  # valid JSON, no Infinity
    assert len(state["rows"]) == 4
    with pytest.raises(ValueError, match="finite"):
        lf.eval.Score(float("inf"))
