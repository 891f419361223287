"""Ready evaluators that compare a task's answer with the case's expected answer.

Each is an evaluator ``(ctx: EvalContext) -> bool | float | Score | {name: ...}`` (an
evaluator of the deprecated form may still call one as ``exact(case, output, trace)``):
``exact`` and ``contains`` are used as they are (``evaluators=[lf.eval.exact]``), ``numeric``
and ``fields`` are built with options (``lf.eval.numeric(tol=0.01)``). A case without an
expected answer is an error for these (there is nothing to compare with), not a fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .context import EvalContext, context_of
from .score import Score

__all__ = ["contains", "exact", "fields", "numeric"]


def _expected(ctx: EvalContext) -> Any:
    expected = ctx.expected
    if expected is None:
        raise ValueError(f"case {ctx.case.id!r} has no expected answer")
    return expected


def exact(ctx: EvalContext, *old: Any) -> bool:
    """``output == expected`` (pydantic models compare field by field)."""
    ctx = context_of(ctx, old)
    return bool(ctx.output == _expected(ctx))


def contains(ctx: EvalContext, *old: Any) -> bool:
    """The expected text appears in the answer (``str(output)``); an expected list or tuple
    passes when every item appears."""
    ctx = context_of(ctx, old)
    expected = _expected(ctx)
    wanted = expected if isinstance(expected, list | tuple) else [expected]
    text = str(ctx.output)
    return all(str(w) in text for w in wanted)


class numeric:
    """The answer is a number within ``tol`` of the expected one (``rel_tol`` relative to it
    instead, or as well: either bound passes). Text answers are read as numbers; an answer
    that is not a number is a fail with that reason."""

    name = "numeric"

    def __init__(self, tol: float = 0.0, *, rel_tol: float = 0.0) -> None:
        if tol < 0 or rel_tol < 0:
            raise ValueError("tol and rel_tol must be >= 0")
        self.tol = tol
        self.rel_tol = rel_tol

    def __call__(self, ctx: EvalContext, *old: Any) -> Score:
        ctx = context_of(ctx, old)
        expected = float(_expected(ctx))
        output = ctx.output
        try:
            got = float(output.strip().replace(",", "") if isinstance(output, str) else output)
        except (TypeError, ValueError):
            return Score(False, "fail", f"not a number: {str(output)[:80]!r}")
        if math.isclose(got, expected, rel_tol=self.rel_tol, abs_tol=self.tol):
            return Score(True, "pass")
        return Score(False, "fail", f"{got} is {abs(got - expected):.6g} from {expected}")

    def __repr__(self) -> str:
        return f"numeric(tol={self.tol}, rel_tol={self.rel_tol})"


def _values(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return {name: getattr(value, name) for name in type(value).model_fields}
    raise TypeError(f"fields compares pydantic models or mappings, not {type(value).__name__}")


class fields:
    """One pass/fail score per field of a pydantic (or mapping) answer: ``fields.city`` is
    ``output.city == expected.city``. ``only`` limits the fields, ``compare`` maps a field
    name to its own comparison ``(got, want) -> bool`` (e.g. case-insensitive text).

    An answer that is not a model or mapping is an error for the case."""

    name = "fields"

    def __init__(
        self,
        *,
        only: Sequence[str] | None = None,
        compare: Mapping[str, Callable[[Any, Any], bool]] | None = None,
    ) -> None:
        self.only = None if only is None else tuple(only)
        self.compare = dict(compare or {})

    def _names(self, expected: Mapping[str, Any]) -> Iterable[str]:
        return self.only if self.only is not None else expected.keys()

    def __call__(self, ctx: EvalContext, *old: Any) -> dict[str, bool]:
        ctx = context_of(ctx, old)
        want = _values(_expected(ctx))
        got = _values(ctx.output)
        out: dict[str, bool] = {}
        for name in self._names(want):
            if name not in want:
                raise KeyError(f"the expected answer has no field {name!r}")
            same = self.compare.get(name, _equal)
            out[name] = name in got and bool(same(got[name], want[name]))
        return out

    def __repr__(self) -> str:
        return "fields()" if self.only is None else f"fields(only={list(self.only)})"


def _equal(a: Any, b: Any) -> bool:
    return bool(a == b)
