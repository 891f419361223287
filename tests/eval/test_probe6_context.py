"""Evaluators and tasks as ``lf.eval.run`` reads them: an evaluator that cannot be called
with one context is refused before a trial runs (``eval/context.py`` one_argument: "Any other
signature raises ``TypeError`` before a trial runs"), and a plain (sync) task is run as
``lf.batch`` runs one, or refused before it is called (and paid for)."""

from __future__ import annotations

from typing import Any

import pytest

import langfx_nb as lf


async def test_an_evaluator_needing_a_keyword_is_refused_before_any_trial() -> None:
    calls: list[str] = []

    async def task(text: str) -> str:
        calls.append(text)
        return text

    def within(ctx: lf.eval.EvalContext, *, limit: int) -> bool:
        return len(ctx.output) < limit

    with pytest.raises(TypeError, match="within"):
        evaluators: list[Any] = [within]  # a notebook user has no type checker
        await lf.eval.run(task, ["a", "b"], evaluators, progress=False, live=False)
    assert calls == []


async def test_a_sync_task_is_run_or_refused_before_it_is_called() -> None:
    calls: list[str] = []

    def task(text: str) -> str:  # a sync client's call, made and paid for
        calls.append(text)
        return text.upper()

    cases = [lf.eval.Case("a", expected="A"), lf.eval.Case("b", expected="B")]
    sync_task: Any = task  # a notebook user has no type checker
    try:
        report = await lf.eval.run(sync_task, cases, [lf.eval.exact], progress=False, live=False)
    except TypeError:  # refused: then before the task was called
        assert calls == []
        return
    assert [trial.status for trial in report] == ["ok", "ok"]
    assert [trial.output for trial in report] == ["A", "B"]
