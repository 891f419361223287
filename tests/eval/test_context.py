"""Evaluators take one typed ``lf.eval.EvalContext``; the earlier ``(case, output, trace)``
form still works, with one ``DeprecationWarning`` per evaluator and run."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms.fake import Scripted


async def _shout(text: str, session: lf.Session) -> str:
    return await session.query("{{t}}", lm=Scripted(["HELLO"], loop=True), vars={"t": text})


async def test_an_evaluator_gets_the_trial_in_one_context() -> None:
    seen: list[lf.eval.EvalContext] = []

    async def polite(ctx: lf.eval.EvalContext) -> bool:
        seen.append(ctx)
        assert ctx.session is not None  # a model call through it is traced under this check
        verdict = await ctx.session.query("polite? {{o}}", lm=Scripted(["yes"]), vars={"o": 1})
        return verdict == "yes"

    cases = [lf.eval.Case("hello", expected="HELLO", metadata={"tone": "calm"}, id="h")]
    report = await lf.eval.run(_shout, cases, [polite], repeats=2, progress=False, live=False)

    assert [r.scores["polite"].score.score for r in report] == [True, True]
    first = seen[0]
    assert (first.inputs, first.expected, first.metadata) == ("hello", "HELLO", {"tone": "calm"})
    assert first.case.id == "h"
    assert first.output == "HELLO"
    assert sorted(c.repeat for c in seen) == [0, 1]
    # the trace is the task's node; the duration is its time
    assert first.trace is not None and first.trace.name == "task"
    assert [n.kind for n in first.trace.walk()] == ["action", "query"]
    assert first.duration == first.trace.duration and first.duration is not None
    # the evaluator's own query is a node under its check, apart from the task's
    item = report.session.find(report[0].node_id)
    evaluate = next(n for n in item.children if n.name == "evaluate")
    check = next(n for n in evaluate.children if n.name == "polite")
    assert [n.kind for n in check.children] == ["query"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.output = "changed"  # type: ignore[misc]


async def test_a_judge_asks_through_the_contexts_session_or_plainly_without_one() -> None:
    judge_lm = Scripted(["Verdict(reason='fine', passed=True)"], loop=True)
    judge = lf.eval.judge(judge_lm, "It is loud.")
    alone = await judge(lf.eval.EvalContext(lf.eval.Case("hi"), "HI"))  # no session: lf.query
    assert alone == lf.eval.Score(True, "pass", "fine")
    report = await lf.eval.run(_shout, ["hi"], [judge], progress=False, live=False)
    item = report.session.find(report[0].node_id)
    check = next(n for n in item.walk() if n.kind == "action" and n.name == "judge")
    assert [(n.kind, n.name) for n in check.children] == [("query", "query:Verdict")]


async def test_the_three_argument_form_still_works_and_warns_once_per_evaluator() -> None:
    calls: list[tuple[Any, Any, Any]] = []

    def legacy(case: Any, output: Any, trace: Any) -> bool:
        calls.append((case, output, trace))
        return bool(output == case.expected)

    cases = [lf.eval.Case(w, expected=w.upper()) for w in ("a", "b", "c")]

    async def upper(text: str) -> str:
        return text.upper()

    with pytest.warns(DeprecationWarning, match="'legacy' takes \\(case, output, trace\\)") as got:
        report = await lf.eval.run(
            upper, cases, [legacy, lf.eval.exact], progress=False, live=False
        )
    assert len(got) == 1  # once for the run, not once per trial
    assert got[0].filename == __file__  # pointing at the caller's lf.eval.run
    assert report.metrics["legacy"].value == 1.0 and len(calls) == 3
    case, output, trace = calls[0]
    assert isinstance(case, lf.eval.Case) and output == "A" and trace.name == "task"

    old = {"short": lambda c, o, t: len(o) == 1, "traced": lambda c, o, t=None: t is not None}
    with pytest.warns(DeprecationWarning) as got:  # lambdas, a defaulted trace: the old form
        named = await lf.eval.run(upper, cases, old, progress=False, live=False)
    assert len(got) == 2
    assert named.metrics["short"].value == 1.0 and named.metrics["traced"].value == 1.0


async def test_an_evaluator_of_another_shape_is_refused_before_any_trial() -> None:
    called: list[str] = []

    async def task(text: str) -> str:
        called.append(text)
        return text

    def two(case: Any, output: Any) -> bool:
        return True

    with pytest.raises(TypeError, match="one argument"):
        await lf.eval.run(task, ["a"], [two], progress=False, live=False)
    assert called == []


async def test_an_old_form_evaluator_still_finds_its_session_through_current_session() -> None:
    async def polite(case: Any, output: Any, trace: Any) -> bool:
        with pytest.warns(DeprecationWarning, match="current_session"):
            session = lf.eval.current_session()
        assert session is not None
        return (
            await session.query("polite? {{o}}", lm=Scripted(["yes"]), vars={"o": output}) == "yes"
        )

    with pytest.warns(DeprecationWarning, match="'polite' takes"):
        report = await lf.eval.run(_shout, ["hi"], [polite], progress=False, live=False)
    assert report[0].scores["polite"].score.score is True
    item = report.session.find(report[0].node_id)
    check = next(n for n in item.walk() if n.kind == "action" and n.name == "polite")
    assert [n.kind for n in check.children] == ["query"]  # traced under its check, as before
    with pytest.warns(DeprecationWarning):
        assert lf.eval.current_session() is None  # outside a run
