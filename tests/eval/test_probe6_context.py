"""Evaluators as ``lf.eval.run`` reads their signature (``eval/context.py`` one_argument:
"Any other signature raises ``TypeError`` before a trial runs"): an evaluator that cannot be
called with one context is refused before the task is called (and paid for)."""

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
