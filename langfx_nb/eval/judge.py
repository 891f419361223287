"""``lf.eval.judge(lm, rubric)``: a language model grades each answer against a rubric.

The judge is an ``lf.query`` with a typed verdict (a pydantic model, ``Verdict`` by default:
a ``reason`` written before the ``passed`` decision, so the model explains before it
decides). Inside ``lf.eval.run`` the query goes through the context's session view
(``EvalContext.session``), so it is a node of the case's trace, with its usage and cost;
with no session (an ``EvalContext`` made by hand) it is a plain ``lf.query``. A verdict
that does not parse or validate is an error for that case (the query's ``MappingError``),
never a fail: ``repair=`` asks the judge again with the exact error.

A custom ``verdict`` model is read by field name: ``passed`` (bool) or ``score`` (a number)
is the score, ``label`` and ``reason`` are kept when present.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..jsonable import walk
from .context import EvalContext, context_of
from .score import Score

if TYPE_CHECKING:
    from ..llms.base import LanguageModel

__all__ = ["JUDGE_PROMPT", "Verdict", "judge"]


class Verdict(BaseModel):
    """What the judge answers by default."""

    reason: str = Field(description="one or two sentences: how the answer meets the rubric")
    passed: bool = Field(description="true when the answer meets the rubric")


JUDGE_PROMPT = """You are grading an answer against a rubric. Be strict and brief.

Rubric:
{{rubric}}

Task inputs:
{{inputs}}

Expected answer (may be empty):
{{expected}}

Answer to grade:
{{output}}"""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(walk(value), ensure_ascii=False, indent=1, default=str)


class judge:
    """An evaluator asking ``lm`` whether each answer meets ``rubric``.

    ``verdict`` is the pydantic model the judge answers with (``Verdict``); ``prompt`` a
    template over ``rubric``, ``inputs``, ``expected`` and ``output`` (``JUDGE_PROMPT``);
    ``name`` the metric's name; other keyword options go to ``lf.query`` (``repair=1``,
    ``temperature=0``, ``protocol="json"`` ...)."""

    def __init__(
        self,
        lm: LanguageModel,
        rubric: str,
        *,
        verdict: type[BaseModel] = Verdict,
        prompt: str = JUDGE_PROMPT,
        name: str = "judge",
        **options: Any,
    ) -> None:
        fields = verdict.model_fields
        if "passed" not in fields and "score" not in fields:
            raise TypeError(f"{verdict.__name__} needs a 'passed' (bool) or 'score' field")
        self.lm = lm
        self.rubric = rubric
        self.verdict = verdict
        self.prompt = prompt
        self.name = name
        self.options = options

    async def __call__(self, ctx: EvalContext, *old: Any) -> Score:
        ctx = context_of(ctx, old)
        variables = {
            "rubric": self.rubric,
            "inputs": _text(ctx.inputs),
            "expected": _text(ctx.expected),
            "output": _text(ctx.output),
        }
        session = ctx.session
        if session is not None:  # inside lf.eval.run: traced under the evaluator's node
            answer = await session.query(
                self.prompt, self.verdict, lm=self.lm, vars=variables, **self.options
            )
        else:
            from ..structured.query import query

            answer = await query(
                self.prompt, self.verdict, lm=self.lm, vars=variables, **self.options
            )
        return verdict_score(answer)

    def __repr__(self) -> str:
        return f"judge({self.lm!r}, {self.rubric[:40]!r})"


def verdict_score(answer: Any) -> Score:
    """A verdict model → ``Score`` (``passed`` or ``score``; ``label``, ``reason``)."""
    passed = getattr(answer, "passed", None)
    score: bool | float = bool(passed) if passed is not None else float(answer.score)
    label = getattr(answer, "label", None)
    if label is None and isinstance(score, bool):
        label = "pass" if score else "fail"
    reason = getattr(answer, "reason", None)
    return Score(
        score, None if label is None else str(label), None if reason is None else str(reason)
    )
