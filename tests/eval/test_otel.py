"""Each trial's scores reach OpenTelemetry as GenAI evaluation events on the trial's span."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import langfx_nb as lf
from langfx_nb.llms import StaticResponse


async def _exported(capture_content: bool) -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    session = lf.Session()
    lf.otel.export(session, provider, capture_content=capture_content)
    judge = lf.eval.judge(StaticResponse("Verdict(reason='secret words', passed=False)"), "ok?")

    def broken(ctx: lf.eval.EvalContext) -> bool:
        raise KeyError("x")

    async def task(x: str) -> str:
        return x

    await lf.eval.run(
        task,
        [lf.eval.Case("a", expected="a", id="only")],
        [lf.eval.exact, judge, broken],
        session=session,
        progress=False,
    )
    await session.dispose()
    lf.otel.flush()
    return list(exporter.get_finished_spans())


async def test_scores_are_evaluation_events_on_the_trial_span() -> None:
    spans = await _exported(capture_content=False)
    item = next(s for s in spans if s.name == "only#0")
    events = [e for e in item.events if e.name == "gen_ai.evaluation.result"]
    by_name = {e.attributes["gen_ai.evaluation.name"]: dict(e.attributes) for e in events}
    assert by_name["exact"] == {
        "gen_ai.evaluation.name": "exact",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
    }
    assert by_name["judge"]["gen_ai.evaluation.score.value"] == 0.0
    assert "gen_ai.evaluation.explanation" not in by_name["judge"]  # content is opt-in
    assert by_name["broken"] == {"gen_ai.evaluation.name": "broken", "error.type": "KeyError"}


async def test_the_judge_explanation_only_with_capture_content() -> None:
    spans = await _exported(capture_content=True)
    item = next(s for s in spans if s.name == "only#0")
    judge = next(
        e
        for e in item.events
        if e.name == "gen_ai.evaluation.result"
        and e.attributes["gen_ai.evaluation.name"] == "judge"
    )
    assert judge.attributes["gen_ai.evaluation.explanation"] == "secret words"


async def test_every_trial_span_carries_its_own_scores() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    session = lf.Session()
    lf.otel.export(session, provider)

    async def task(x: str) -> str:
        return x if x != "b" else "wrong"

    cases = [lf.eval.Case(x, expected=x, id=x) for x in "abc"]
    report = await lf.eval.run(
        task, cases, [lf.eval.exact], repeats=2, session=session, progress=False
    )
    await session.dispose()
    lf.otel.flush()
    spans = {s.context.span_id: s for s in exporter.get_finished_spans()}
    keys = [r.key for r in report]
    items = [s for s in spans.values() if s.name in keys]  # named by the trial, case_id#repeat
    assert len(items) == len(report) == 6  # one span per trial, repeats apart
    for span in items:
        index = keys.index(span.name)
        events = [e for e in span.events if e.name == "gen_ai.evaluation.result"]
        assert len(events) == 1  # its own score, once
        passed = report[index].scores["exact"].score.score
        assert events[0].attributes["gen_ai.evaluation.score.value"] == (1.0 if passed else 0.0)
        assert events[0].attributes["gen_ai.evaluation.score.label"] == (
            "pass" if passed else "fail"
        )
    # the task's and evaluators' spans are children of the trial's span, without events
    inner = [s for s in spans.values() if s.name in ("task", "evaluate")]
    assert len(inner) == 12
    for span in inner:
        assert span.parent is not None and spans[span.parent.span_id] in items
        assert not [e for e in span.events if e.name == "gen_ai.evaluation.result"]
