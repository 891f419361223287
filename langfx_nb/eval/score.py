"""Scores, and how an evaluator's answer becomes one.

An evaluator is any callable ``(ctx: EvalContext) -> bool | float | Score`` (or a mapping
of names to those, for one score per field), sync or async (``context.py``).
``True``/``False`` is a pass or a fail; a number is a score; ``Score`` adds a label and a
reason. What an evaluator raises is recorded as that case's *error* for that evaluator
(class and message, and its traceback), never as a 0; so is a score that is not a finite
number (``inf``, ``1e999``, NaN: it has no mean and no JSON form). A pass rate counts an
error as not passed (``report.Metric``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..agentic.tracebacks import error_info, format_traceback
from .context import EvalContext

__all__ = ["Evaluator", "Score", "ScoreRecord", "evaluate", "evaluator_names"]

#: An evaluator: a callable of one ``EvalContext`` (the ``(case, output, trace)`` form is
#: deprecated but still accepted by ``lf.eval.run``)
Evaluator = Callable[[EvalContext], Any] | Callable[[Any, Any, Any], Any]


@dataclass(frozen=True, slots=True)
class Score:
    """One evaluator's verdict on one case.

    ``score`` is ``True``/``False`` (a pass or a fail: aggregated as a pass rate) or a number
    (aggregated as a mean). ``label`` is a short category (``"pass"``, ``"partial"``), ``reason``
    why (a judge's explanation)."""

    score: bool | float
    label: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.score, bool):
            if not isinstance(self.score, int | float):
                raise TypeError(f"a score is a bool or a number, not {type(self.score).__name__}")
            if not math.isfinite(self.score):  # no mean, no JSON: an error of the trial
                raise ValueError(f"a score must be a finite number, not {self.score!r}")

    @property
    def passed(self) -> bool | None:
        """``True``/``False`` for a pass/fail score, ``None`` for a numeric one."""
        return self.score if isinstance(self.score, bool) else None

    @property
    def value(self) -> float:
        """The score as a number (a pass is 1.0, a fail 0.0)."""
        return float(self.score)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score}
        if self.label is not None:
            out["label"] = self.label
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Score:
        score = data["score"]
        return cls(
            score if isinstance(score, bool) else float(score),
            data.get("label"),
            data.get("reason"),
        )


@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """What one evaluator gave one case: a ``score``, or the ``error`` it raised
    (``{"type": ..., "message": ...}``) with its ``traceback``: where the evaluator raised,
    bounded, secrets masked, never a provider body (``agentic/tracebacks.py``)."""

    name: str
    score: Score | None = None
    error: Mapping[str, str] | None = None
    traceback: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.score is not None:
            out.update(self.score.to_json())
        if self.error is not None:
            out["error"] = dict(self.error)
        if self.traceback is not None:
            out["traceback"] = self.traceback
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoreRecord:
        error = data.get("error")
        return cls(
            str(data["name"]),
            Score.from_json(data) if "score" in data else None,
            dict(error) if error is not None else None,
            traceback_from_json(data),
        )


def traceback_from_json(data: Mapping[str, Any]) -> str | None:
    """The ``traceback`` of a stored record (``None`` when it has none); ``TypeError`` when
    it is not text (a report or a manifest is data)."""
    traceback = data.get("traceback")
    if traceback is not None and not isinstance(traceback, str):
        raise TypeError(f"a traceback is text, not {type(traceback).__name__}")
    return traceback


def evaluator_names(evaluators: Iterable[Evaluator] | Mapping[str, Evaluator]) -> dict[str, Any]:
    """Name → evaluator. A mapping keeps its names; otherwise each evaluator's ``name``
    attribute or ``__name__``. Two evaluators with one name raise ``ValueError``."""
    if isinstance(evaluators, Mapping):
        named = {str(k): v for k, v in evaluators.items()}
    else:
        named = {}
        for ev in evaluators:
            name = str(getattr(ev, "name", None) or getattr(ev, "__name__", None) or "")
            if not name or name == "<lambda>":
                raise ValueError(
                    "an evaluator without a name (a lambda): pass evaluators as a dict "
                    "{name: evaluator}"
                )
            if name in named:
                raise ValueError(f"two evaluators are named {name!r}: pass a dict to rename one")
            named[name] = ev
    for name, ev in named.items():
        if isinstance(ev, type):
            raise TypeError(f"evaluator {name!r} is a class: build it first ({name}(...))")
        if not callable(ev):
            raise TypeError(f"evaluator {name!r} is not callable")
    return named


def _as_score(name: str, value: Any) -> Score:
    if isinstance(value, Score):
        return value
    if isinstance(value, bool):
        return Score(value, "pass" if value else "fail")
    if isinstance(value, int | float):
        return Score(float(value))
    raise TypeError(
        f"evaluator {name!r} returned {type(value).__name__}; "
        "return a bool, a number, an lf.eval.Score or a mapping of those"
    )


async def evaluate(
    name: str, evaluator: Callable[[EvalContext], Any], ctx: EvalContext
) -> list[ScoreRecord]:
    """Run one evaluator on one case. A mapping answer gives one record per key
    (``name.key``). What it raises (or returns that is not a score) is an error record;
    cancellation propagates as asyncio does."""
    try:
        value = evaluator(ctx)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, Mapping):
            return [
                ScoreRecord(f"{name}.{k}", _as_score(f"{name}.{k}", v)) for k, v in value.items()
            ]
        return [ScoreRecord(name, _as_score(name, value))]
    except Exception as exc:  # an evaluator's bug is that case's error, never a silent 0
        return [ScoreRecord(name, error=error_info(exc), traceback=format_traceback(exc))]
