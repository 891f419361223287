"""``lf.eval.EvalContext``: everything an evaluator is given about one trial, in one object.

An evaluator is a callable of one argument, the context: ``def short(ctx) -> float: return
6 / len(ctx.output.city)``. New fields can be added to the context without breaking any
evaluator. The deprecated form, positional parameters ``(case, output, trace)``, still
works: ``lf.eval.run`` tells the two forms apart by the evaluator's signature, once per
evaluator and run, and warns (``DeprecationWarning``) for the three-parameter form.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .dataset import Case

if TYPE_CHECKING:
    from ..agentic.session import Session
    from ..agentic.trace import TraceNode

__all__ = ["EvalContext", "context_of", "current_session", "one_argument"]

_OLD_FORM_SESSION: ContextVar[Session | None] = ContextVar("lf_eval_session", default=None)


@dataclass(frozen=True, slots=True)
class EvalContext:
    """One trial as its evaluators see it.

    ``case`` is the dataset's case (``inputs``, ``expected`` and ``metadata`` read from it),
    ``output`` the task's answer, ``repeat`` the trial's repeat number. ``trace`` is the
    ``TraceNode`` the task ran under (``None`` when there is none: a re-scored trial keeps its
    stored output and has no trace of its making). ``session`` is the session view of the
    evaluator's own node: model calls made through it (a judge's query) are traced there and
    counted in the trial's usage and cost; ``None`` outside ``lf.eval.run``. ``duration`` is
    the task's time in seconds (``None`` with no trace)."""

    case: Case
    output: Any
    trace: TraceNode | None = None
    session: Session | None = None
    duration: float | None = None
    repeat: int = 0

    @property
    def inputs(self) -> Any:
        return self.case.inputs

    @property
    def expected(self) -> Any:
        return self.case.expected

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.case.metadata


class _ThreeArguments:
    """A ``(case, output, trace)`` evaluator called with a context."""

    __slots__ = ("evaluator",)

    def __init__(self, evaluator: Callable[..., Any]) -> None:
        self.evaluator = evaluator

    def __call__(self, ctx: EvalContext) -> Any:
        token = _OLD_FORM_SESSION.set(ctx.session)  # what current_session() gives it
        try:
            result = self.evaluator(ctx.case, ctx.output, ctx.trace)
        finally:
            _OLD_FORM_SESSION.reset(token)
        return _awaited(ctx.session, result) if inspect.isawaitable(result) else result


async def _awaited(session: Session | None, result: Awaitable[Any]) -> Any:
    """An async old-form evaluator's result, with its session current while it runs."""
    token = _OLD_FORM_SESSION.set(session)
    try:
        return await result
    finally:
        _OLD_FORM_SESSION.reset(token)


def context_of(ctx: EvalContext, old: tuple[Any, ...]) -> EvalContext:
    """What a built-in evaluator scores: ``ctx``; or, called the deprecated way from an
    evaluator of the old form (``lf.eval.exact(case, output, trace)``), ``ctx`` is the case
    and ``old`` the output and trace, made into a context (with a ``DeprecationWarning``)."""
    if not old:
        return ctx
    warnings.warn(
        "built-in evaluators take one lf.eval.EvalContext: call them as lf.eval.exact(ctx); "
        "(case, output, trace) will be removed",
        DeprecationWarning,
        stacklevel=3,
    )
    if not isinstance(ctx, Case) or len(old) > 2:
        raise TypeError("a built-in evaluator takes (ctx) or, deprecated, (case, output, trace)")
    trace = old[1] if len(old) == 2 else None
    return EvalContext(ctx, old[0], trace, session=_OLD_FORM_SESSION.get())


def current_session() -> Session | None:
    """Deprecated: the session a ``(case, output, trace)`` evaluator makes its model calls
    through (``None`` elsewhere). Evaluators that take an ``EvalContext`` use ``ctx.session``."""
    warnings.warn(
        "lf.eval.current_session() is deprecated: take one lf.eval.EvalContext and use ctx.session",
        DeprecationWarning,
        stacklevel=2,
    )
    return _OLD_FORM_SESSION.get()


def one_argument(name: str, evaluator: Callable[..., Any]) -> Callable[[EvalContext], Any]:
    """``evaluator`` as a callable of an ``EvalContext``, told by its signature: at most one
    required positional parameter is the context form; two or three, with room for three,
    is ``(case, output, trace)``, called as before with a ``DeprecationWarning`` (once,
    here). Any other signature (a required keyword-only parameter too) raises
    ``TypeError`` before a trial runs."""
    try:
        parameters = inspect.signature(evaluator).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): the context form
        return evaluator
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in positional)
    varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    keywords = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keywords:
        raise TypeError(
            f"evaluator {name!r} must take one argument, an lf.eval.EvalContext "
            f"(it also requires the keyword arguments {', '.join(keywords)}: give them "
            "defaults, or bind them with functools.partial)"
        )
    if required <= 1 and (positional or varargs):
        return evaluator
    if required <= 3 and (len(positional) >= 3 or varargs):
        warnings.warn(
            f"evaluator {name!r} takes (case, output, trace): take one lf.eval.EvalContext "
            "instead (ctx.case, ctx.output, ctx.trace, ...); the three-argument form will be "
            "removed",
            DeprecationWarning,
            stacklevel=3,
        )
        return _ThreeArguments(evaluator)
    raise TypeError(
        f"evaluator {name!r} must take one argument, an lf.eval.EvalContext "
        f"(it takes {required} required positional arguments)"
    )
