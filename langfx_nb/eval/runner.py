"""``await lf.eval.run(task, dataset, evaluators)``: an evaluation as one ``lf.batch``.

Every (case, repeat) is one trial, one batch item keyed ``case_id#repeat``. A trial runs the
task on the case's inputs under an ``action`` node named ``task`` (the ``trace`` the
evaluators read), then every evaluator in order under an ``action`` node named ``evaluate``
(a judge's queries are traced there, apart from the task's); the scores are kept in the
item node's ``metadata.evaluations`` (the OpenTelemetry export makes each a
``gen_ai.evaluation.result`` event on the trial's span). The item's result, stored in
the run manifest with ``run=``, is the output and the scores, so a resumed run sends nothing
for a trial that finished: neither the task nor its judges run again. A trial whose task
raised is a failed item: it has no scores and runs again on resume, as ``lf.batch`` does.

``task`` is an async callable of the case's ``inputs``, or of ``(inputs, session)``: model
calls made through that session view (``session.query``) are traced under the trial and
counted in its usage and cost; ``lf.query(..., lm=lm)`` calls run but are not traced.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..jsonable import walk
from ..messages import Usage
from .dataset import Case, Dataset
from .report import CaseResult, LiveReport, Report, live_view
from .score import Evaluator, ScoreRecord, evaluate, evaluator_names

if TYPE_CHECKING:
    from ..agentic.session import Session

__all__ = ["current_session", "run"]

#: The session view of the ``evaluate`` node while a trial's evaluators run: an evaluator
#: that makes model calls (``judge``) makes them through it, so they are traced there.
_EVAL_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "langfx_nb_eval_session", default=None
)


def current_session() -> Session | None:
    """The session view an evaluator should make its model calls through (``None`` outside
    ``lf.eval.run``): calls made through it are traced under the trial's ``evaluate`` node."""
    return _EVAL_SESSION.get()


class _Context:
    """What every trial of one run shares (``functools.partial`` keeps it out of the
    batch's fingerprint; the identity string passed beside it is in it)."""

    def __init__(
        self,
        task: Callable[..., Awaitable[Any]],
        trials: list[tuple[Case, int]],
        evaluators: dict[str, Evaluator],
        on_trial: Callable[[int, CaseResult], None] | None,
    ) -> None:
        self.task = task
        from ..batch.runner import takes_session

        self.with_session = takes_session(task)
        self.trials = trials
        self.evaluators = evaluators
        self.outputs: dict[int, Any] = {}  # the live (typed) outputs of this process's trials
        self.on_trial = on_trial


async def _trial(identity: str, ctx: _Context, index: int, session: Session) -> dict[str, Any]:
    """One batch item: the task, then the evaluators (see the module)."""
    from ..agentic.usage import UsageMeter

    case = ctx.trials[index][0]
    meter = UsageMeter()
    with session.track("action", "task", inputs=case.inputs, meter=meter) as task:
        if ctx.with_session:
            output = await ctx.task(case.inputs, task.session)
        else:
            output = await ctx.task(case.inputs)
        task.outputs = output
    records: list[ScoreRecord] = []
    with session.track("action", "evaluate", meter=meter) as ev:
        token = _EVAL_SESSION.set(ev.session)
        try:
            for name, evaluator in ctx.evaluators.items():
                records.extend(await evaluate(name, evaluator, case, output, task.node))
        finally:
            _EVAL_SESSION.reset(token)
    ctx.outputs[index] = output
    scores = [r.to_json() for r in records]
    # on the trial's node: the OpenTelemetry export turns these into evaluation events
    session.node.metadata["evaluations"] = scores
    cost, _ = meter.cost()
    result = {
        "output": walk(output),
        "scores": scores,
        "usage": meter.usage.to_json(),
        "cost": cost,
        "duration": task.node.duration,
    }
    if meter.unpriced_requests:  # requests left out of cost: no price known
        result["unpriced"] = meter.unpriced_requests
    if ctx.on_trial is not None:
        ctx.on_trial(index, _result(ctx, index, "ok", result, None, session.node.id, False))
    return result


def _result(
    ctx: _Context,
    index: int,
    status: Any,
    stored: Mapping[str, Any] | None,
    error: Mapping[str, str] | None,
    node_id: str | None,
    resumed: bool,
    output_type: Any = None,
) -> CaseResult:
    case, repeat = ctx.trials[index]
    if stored is None:
        return CaseResult(case, repeat, status, None, error, {}, node_id, resumed=resumed)
    if index in ctx.outputs:
        output = ctx.outputs[index]
    else:
        output = stored.get("output")
        if output_type is not None and output is not None:
            from pydantic import TypeAdapter

            output = TypeAdapter(output_type).validate_python(output)
    scores = [ScoreRecord.from_json(s) for s in stored.get("scores") or ()]
    usage = stored.get("usage")
    return CaseResult(
        case,
        repeat,
        status,
        output,
        error,
        {s.name: s for s in scores},
        node_id,
        Usage.from_json(usage) if usage else None,
        stored.get("cost"),
        stored.get("duration"),
        resumed,
        int(stored.get("unpriced") or 0),
    )


def _identity(task: Callable[..., Any], evaluators: Mapping[str, Any]) -> str:
    """What makes two runs the same evaluation for a manifest: the task's fingerprint and
    the evaluators' names and fingerprints (a changed rubric or task is a new run)."""
    from ..batch.codec import fingerprint

    parts = [fingerprint(task)[1]]
    for name, ev in evaluators.items():
        parts.append(f"{name}={fingerprint(ev)[1]}:{_plain_attrs(ev)}")
    return "\n".join(parts)


def _plain_attrs(ev: Any) -> str:
    """The plain settings of a built evaluator (a judge's rubric and model id, a tolerance)."""
    values = getattr(ev, "__dict__", None)
    if not isinstance(values, dict):
        return ""
    plain: dict[str, Any] = {}
    for k, v in values.items():
        if isinstance(v, str | int | float | bool | tuple):
            plain[k] = v
        elif isinstance(getattr(v, "model_id", None), str):  # a judge's model: its id only
            plain[k] = v.model_id
    return repr(sorted(plain.items()))


async def run(
    task: Callable[..., Awaitable[Any]],
    dataset: Dataset | Iterable[Any],
    evaluators: Iterable[Evaluator] | Mapping[str, Evaluator] | Evaluator,
    *,
    repeats: int = 1,
    run: str | Path | None = None,
    engine: Any = None,
    session: Session | None = None,
    max_concurrency: int = 16,
    progress: Any = None,
    name: str | None = None,
    on_trial: Callable[[int, CaseResult], None] | None = None,
    live: bool = True,
) -> Report:
    """Run ``task`` on every case ``repeats`` times, score each answer, and report.

    ``dataset`` is a ``Dataset`` (or anything ``Dataset(...)`` takes); ``evaluators`` a list
    (named by each one's ``name``/``__name__``), a ``{name: evaluator}`` dict, or one
    evaluator. ``run``, ``engine``, ``session``, ``max_concurrency`` and ``progress`` are
    ``lf.batch``'s: with ``run=`` a second call (in any process) re-runs no finished
    trial; a manifest made by another task or other evaluators is refused
    (``RunManifestError``). ``on_trial(index, result)`` is called as each trial of this
    process finishes. ``live``: in a notebook (the notebook layer loaded, in a kernel) the
    report widget is shown in the running cell and fills in as trials finish (rows arrive
    in batches, a few per second), then shows the finished report; ``live=False`` shows
    nothing. The returned report's ``widget()`` is that view. With ``engine=Ray()`` the
    trials run in other processes: the view shows the finished report when the run ends.
    """
    from ..batch import batch
    from ..batch.ray_engine import Ray

    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    data = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    if callable(evaluators) and not isinstance(evaluators, Mapping):
        evaluators = [evaluators]
    named = evaluator_names(evaluators)
    if not callable(task):
        raise TypeError(f"task must be an async callable, not {type(task).__name__}")
    trials = [(case, r) for case in data for r in range(repeats)]
    run_name = name or data.name or "eval"
    view = live_view(run_name, len(trials)) if live else None
    # the view lives in this process: trials run elsewhere (Ray workers) cannot feed it, and
    # it must not travel with the trial function; it shows the finished report then
    hook = on_trial
    if view is not None and not isinstance(engine, Ray):
        hook = _feed(view, on_trial)
    ctx = _Context(task, trials, named, hook)
    fn = functools.partial(_trial, _identity(task, named), ctx)
    started = time.perf_counter()
    try:
        result = await batch(
            fn,
            range(len(trials)),
            session=session,
            run=run,
            engine=engine,
            max_concurrency=max_concurrency,
            on_error="collect",
            progress=progress,
            key=lambda i: f"{trials[i][0].id}#{trials[i][1]}",
            name=run_name,
        )
    except BaseException as exc:  # the view says the run stopped; the exception goes on
        if view is not None:
            reason = "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
            with contextlib.suppress(Exception):
                view.stop(reason)
        raise
    results = []
    for i in range(len(trials)):
        error = result.errors[i]
        stored = result.results[i]
        results.append(
            _result(
                ctx,
                i,
                result.statuses[i],
                stored if result.statuses[i] == "ok" else None,
                None if error is None else {"type": error.type, "message": error.message},
                result.node_ids[i],
                result.resumed[i],
                data.output_type,
            )
        )
    report = Report(
        results,
        name=name or data.name,
        repeats=repeats,
        elapsed_s=time.perf_counter() - started,
        run_path=result.run_path,
        session=result.session,
        output_type=data.output_type,
        view=view,
    )
    if view is not None:
        with contextlib.suppress(Exception):  # a view never breaks the run it shows
            view.show(report)
    return report


def _feed(
    view: LiveReport, on_trial: Callable[[int, CaseResult], None] | None
) -> Callable[[int, CaseResult], None]:
    """``on_trial`` that feeds the live view first, then the caller's hook."""

    def hook(index: int, result: CaseResult) -> None:
        with contextlib.suppress(Exception):  # a view never breaks the run it shows
            view.add(index, result)
        if on_trial is not None:
            on_trial(index, result)

    return hook
