"""The evaluation report widget, kernel side: rows, live batches, the static copy, and a
click on a row opening that trial's trace."""

from __future__ import annotations

from typing import Any

import langfx_nb as lf
from langfx_nb.notebook.bridge import MessageKind
from langfx_nb.notebook.eval_report import EvalReportView
from langfx_nb.notebook.trace_explorer import TraceExplorer


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Any) -> Any:
        class T:
            def cancel(self) -> None:
                pass

        return T()


async def _report(session: lf.Session | None = None) -> lf.eval.Report:
    async def task(x: str) -> str:
        return "<script>alert(1)</script>" if x == "b" else x

    return await lf.eval.run(
        task,
        [
            lf.eval.Case("a", expected="a", metadata={"t": "x"}),
            lf.eval.Case("b", expected="b", metadata={"t": "y"}),
        ],
        [lf.eval.exact],
        session=session,
        progress=False,
        name="demo",
    )


async def test_rows_summary_and_static_copy_escape_model_text() -> None:
    view = EvalReportView(await _report())
    rows = view.rows
    assert [r["key"] for r in rows] == ["0#0", "1#0"]
    assert rows[1]["scores"] == {"exact": False}
    state = view.snapshot
    assert state["finished"] and state["summary"]["metrics"][0]["name"] == "exact"
    assert state["summary"]["breakdown"]["t"]["x"][0]["value"] == 1.0
    html = view._static_html()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "exact" in html and "50.0%" in html
    assert view._fallback_text().startswith("EvalReport 'demo': 2 trials; exact 50.0%")


async def test_live_rows_are_batched_into_few_messages() -> None:
    sent: list[dict[str, Any]] = []
    clock = FakeClock()
    view = EvalReportView(clock=clock)
    view._send_message = sent.append  # type: ignore[method-assign]
    view._bridge._send = sent.append
    report = await _report()
    for i, r in enumerate(report):
        view.add(i, r)
    view._bridge.flush()
    events = [e for m in sent if m["kind"] == "events" for e in m["events"]]
    assert [e["row"]["key"] for e in events] == ["0#0", "1#0"]
    assert len([m for m in sent if m["kind"] == "events"]) == 1


async def test_a_click_opens_the_trial_trace_in_an_explorer() -> None:
    session = lf.Session()
    report = await _report(session)
    view = EvalReportView(report)
    sent: list[dict[str, Any]] = []
    view._send_message = sent.append  # type: ignore[method-assign]
    node_id = report[0].node_id
    assert node_id is not None
    data = view.trial_trace(node_id)
    assert data is not None
    kinds = [n["kind"] for n in data["nodes"]]
    assert kinds[:3] == ["session", "batch", "item"] and "action" in kinds
    # one explorer per report, made up front, a child of the report's own view (one anywidget
    # output: hosts that keep only anywidget models draw it), shown from the first click
    assert isinstance(view.explorer, TraceExplorer) and not view.trace_open
    assert view.get_state()["explorer"] == f"IPY_MODEL_{view.explorer.model_id}"
    explorer = view.open_trace(node_id)  # what a click shows: the trial's subtree
    assert explorer is view.explorer and view.trace_open
    assert {n["id"] for n in explorer.nodes} == {n["id"] for n in data["nodes"]}
    assert explorer.view_state["selected"] == node_id
    # another click reuses the same explorer: only the second trial's nodes are shown
    other = report[1].node_id
    assert other is not None
    assert view.open_trace(other) is explorer
    ids = {n["id"] for n in explorer.nodes}
    assert other in ids and node_id not in ids
    assert explorer.view_state["selected"] == other and explorer.title == f"trace of node {other}"
    assert view.explorer is explorer
    click = {"kind": MessageKind.OPEN_TRACE.value, "id": node_id, "key": "0#0"}
    view._on_view_message(view, click, [])
    assert sent[-1] == {"kind": "trace_opened", "id": node_id, "ok": True, "message": ""}
    assert explorer.title == "trace of 0#0"  # named by the trial's key
    view._on_view_message(view, {"kind": MessageKind.OPEN_TRACE.value, "id": "nope"}, [])
    assert sent[-1]["ok"] is False and "not held" in sent[-1]["message"]
    await session.dispose()


async def test_a_comparison_shows_changes_regressions_first() -> None:
    a = await _report()

    async def better(x: str) -> str:
        return "wrong" if x == "a" else x

    b = await lf.eval.run(
        better,
        [lf.eval.Case("a", expected="a"), lf.eval.Case("b", expected="b")],
        [lf.eval.exact],
        progress=False,
        name="b",
    )
    view = EvalReportView(lf.eval.compare(a, b))
    rows = view.rows
    assert [r["change"] for r in rows] == ["regressed", "improved"]
    assert rows[0]["a"] == {"exact": 1.0} and rows[0]["b"] == {"exact": 0.0}
    assert view.snapshot["mode"] == "compare"
    html = view._static_html()
    assert "regressed" in html and "within noise" in html


async def test_a_live_run_fills_its_view_in_at_most_four_batches_a_second() -> None:
    from tests.notebook._fakes import FakeClock as TimerClock

    report = await _report()
    clock = TimerClock()
    view = EvalReportView(title="live", trials=40, clock=clock)
    sent: list[dict[str, Any]] = []
    view._bridge._send = sent.append
    assert view.snapshot["summary"]["expected"] == 40  # from the start: "n of 40 trials"
    for step in range(40):  # a trial every 25 ms for one second
        base = report[step % 2]
        view.add(step, lf.eval.CaseResult(base.case, step, base.status, base.output))
        clock.advance(0.025)
    clock.advance(1.0)
    batches = [m for m in sent if m["kind"] == "events"]
    assert sum(len(m["events"]) for m in batches) == 40  # every trial, none lost
    assert 2 <= len(batches) <= 5  # 1 s of trials: at most ~4 messages, never one per trial
    view.show(report)  # the run ends: the finished report replaces the live rows
    assert view.snapshot["finished"] and len(view.rows) == 2


async def test_a_stopped_run_keeps_its_rows_and_says_it_stopped() -> None:
    report = await _report()
    view = EvalReportView(title="live", trials=40)
    view.add(0, report[0])
    view.stop("cancelled")  # what lf.eval.run says when the run is cancelled or raises
    state = view.snapshot
    assert state["finished"] and state["summary"]["stopped"] == "cancelled"
    assert state["summary"]["expected"] == 40 and len(view.rows) == 1


async def test_a_view_that_has_the_report_gets_no_second_copy() -> None:
    view = EvalReportView(await _report())
    sent: list[dict[str, Any]] = []
    view.send = lambda content, buffers=None, **kw: sent.append(content)
    seq = view.snapshot["seq"]
    view._on_view_message(view, {"kind": MessageKind.SYNC.value, "seq": seq}, [])
    assert sent == []  # the state trait it rendered from is current: nothing to resend
    view._on_view_message(view, {"kind": MessageKind.SYNC.value, "seq": seq - 1}, [])
    assert [m["kind"] for m in sent] == ["snapshot"]


async def test_a_failed_trial_row_carries_where_its_task_and_evaluator_raised() -> None:
    async def task(x: str) -> str:
        if x == "bad":
            raise KeyError("name")
        return x

    def picky(ctx: lf.eval.EvalContext) -> bool:
        raise RuntimeError("no rubric")

    report = await lf.eval.run(
        task, [lf.eval.Case("bad"), lf.eval.Case("ok")], [picky], progress=False, name="tb"
    )
    bad, ok = EvalReportView(report).rows
    assert bad["error"] == "KeyError: 'name'"
    assert "in task" in bad["traceback"] and "KeyError" in bad["traceback"]
    assert "traceback" not in ok
    assert "RuntimeError" in ok["error_tracebacks"]["picky"]
