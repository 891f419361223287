"""One evaluation, one view, one name per trial: the report is the only view of a run in a
notebook, every trial's trace node is named ``case_id#repeat`` with the case's inputs, and
its evaluators' verdicts are nodes of that trace, a failing check marked failed."""

from __future__ import annotations

from typing import Any

import langfx_nb as lf
from langfx_nb.batch.progress import set_default_reporter
from langfx_nb.eval.report import set_live_view


class Recorder:
    def add(self, index: int, result: Any) -> None:
        pass

    def show(self, source: Any) -> None:
        pass

    def stop(self, reason: str) -> None:
        pass


async def test_a_run_with_its_report_view_shows_no_second_batch_view() -> None:
    batch_views: list[Any] = []

    def batch_view(session: Any, first: Any) -> Any:
        batch_views.append(first)
        return None  # fall back to the terminal bar

    async def task(x: str) -> str:
        return x

    cases = [lf.eval.Case("a", "a", id="egypt")]
    old_view = set_live_view(lambda name, trials: Recorder())
    old_reporter = set_default_reporter(batch_view)
    try:
        await lf.eval.run(task, cases, [lf.eval.exact])
        assert batch_views == []  # the report is the run's one view
        await lf.eval.run(task, cases, [lf.eval.exact], live=False)
        assert len(batch_views) == 1  # no report view: the batch's progress is shown
    finally:
        set_live_view(old_view)
        set_default_reporter(old_reporter)


async def test_the_trial_trace_is_named_by_the_trial_and_shows_which_check_failed() -> None:
    async def task(country: str) -> str:
        return {"egypt": "Cairo", "peru": "Quito"}[country]

    def short(ctx: lf.eval.EvalContext) -> bool:
        return len(ctx.output) < 10

    def broken(ctx: lf.eval.EvalContext) -> bool:
        raise KeyError("no reference")

    cases = [lf.eval.Case("egypt", "Cairo", id="egypt"), lf.eval.Case("peru", "Lima", id="peru")]
    session = lf.Session()
    report = await lf.eval.run(
        task,
        cases,
        [lf.eval.exact, short, broken],
        repeats=2,
        session=session,
        live=False,
        progress=False,
    )
    for result in report:
        item = session.find(result.node_id)
        assert item is not None
        assert item.name == result.key == f"{result.case.id}#{result.repeat}"
        assert item.inputs == result.case.inputs  # not the trial's index
    peru = session.find(report[2].node_id)
    assert peru is not None
    evaluate = next(n for n in peru.children if n.name == "evaluate")
    checks = {n.name: n for n in evaluate.children}
    assert list(checks) == ["exact", "short", "broken"]
    assert checks["exact"].status == "failed"
    assert checks["exact"].outputs == [{"name": "exact", "score": False, "label": "fail"}]
    assert checks["short"].status == "ok"
    assert checks["broken"].status == "failed"
    assert checks["broken"].outputs[0]["error"]["type"] == "KeyError"
    egypt = session.find(report[0].node_id)
    assert egypt is not None
    evaluate = next(n for n in egypt.children if n.name == "evaluate")
    assert [n.status for n in evaluate.children] == ["ok", "ok", "failed"]
    # the report widget opens the same trace under the same name
    from langfx_nb.notebook.eval_report import EvalReportView

    view = EvalReportView(report)
    data = view.trial_trace(report[2].node_id)
    assert data is not None
    names = [n["name"] for n in data["nodes"]]
    assert "peru#0" in names and "exact" in names
    assert view.rows[2]["key"] == "peru#0"
