"""``await lf.eval.run(task, dataset, evaluators)``: an evaluation as one ``lf.batch``.

Every (case, repeat) is one trial, one batch item whose node is named ``case_id#repeat``
with the case's inputs (the name the report, its rows and the trace share). A trial runs the
task on the case's inputs under an ``action`` node named ``task`` (the evaluators'
``EvalContext.trace``), then every evaluator in order under an ``action`` node named
``evaluate``, each in its own node named by the metric, whose outputs are its verdicts and
which ends ``failed`` on a fail or an error (a judge's queries, made through its context's
``session``, are traced there, apart from the task's); the scores are kept in the item
node's ``metadata.evaluations`` (the OpenTelemetry export makes each a
``gen_ai.evaluation.result`` event on the trial's span). The item's result, stored in
the run manifest with ``run=``, is the output and the scores, so a resumed run sends nothing
for a trial that finished: neither the task nor its judges run again. A trial whose task
raised is a failed item: it has no scores, keeps the item's traceback
(``CaseResult.traceback``) and runs again on resume, as ``lf.batch`` does.

A stored trial is reused only for the same case and the same scoring: its manifest key is
``case_id#repeat@I.E.V``, digests of the inputs, the expected answer and the evaluators. When
one changed, the key is new and the trial is done again (``_plan`` reads the manifest first):
*re-scored* when a stored trial had the same inputs (its output is kept, that of the same
case first, the task is not called; the evaluators see no trace, so trace checks are errors
for it), *re-run* when the inputs changed. ``CaseResult.redo`` says which and why.

``task`` is a callable of the case's ``inputs``, or of ``(inputs, session)``, async or plain:
model calls made through that session view (``session.query``) are traced under the trial
and counted in its usage and cost; ``lf.query(..., lm=lm)`` calls run but are not traced.
The evaluators run outside a provider batch's capture: with ``engine=ProviderBatch()`` a
judge is asked online once the task's batched call has answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RunManifestError
from ..jsonable import Bounds, walk
from ..llms.deferred import capturing
from ..messages import Usage
from .context import EvalContext, one_argument
from .dataset import Case, Dataset
from .report import CaseResult, LiveReport, Report, live_view
from .score import Evaluator, ScoreRecord, evaluate, evaluator_names

if TYPE_CHECKING:
    from ..agentic.recorder import Tracked
    from ..agentic.session import Session
    from ..batch import ItemError
    from ..batch.identity import RunIdentity
    from ..batch.owner import IfOwned

__all__ = ["run"]

_log = logging.getLogger("langfx_nb.eval")
#: how a trial's output is stored: as JSON data, its NaN and infinities as they are
_STORED = Bounds(nonfinite=True)


class _Shared:
    """What the trials of one ``run`` share: the task, each trial's ``(case, repeat)`` by
    index, the evaluators (each a callable of an ``EvalContext``), the ``on_trial`` hook,
    and what the run finds out per trial index (below). The batch's ``fn`` is
    ``partial(_trial, shared)``."""

    def __init__(
        self,
        task: Callable[..., Any],
        trials: list[tuple[Case, int]],
        evaluators: dict[str, Callable[[EvalContext], Any]],
        on_trial: Callable[[int, CaseResult], None] | None,
    ) -> None:
        self.task = task
        from ..batch.runner import takes_session

        self.with_session = takes_session(task)
        self.trials = trials
        self.evaluators = evaluators
        self.outputs: dict[int, Any] = {}  # the live (typed) outputs of this process's trials
        self.on_trial = on_trial
        self.hook_failed = False  # on_trial raised once (logged once: the run goes on)
        #: per trial done again: why (``CaseResult.redo``), and the kept output to re-score
        self.redo: dict[int, str] = {}
        self.kept: dict[int, Any] = {}
        self.kept_duration: dict[int, float | None] = {}  # of the task that made the output
        #: what a trial whose task raised had spent (usage, cost, unpriced requests): the
        #: provider billed its requests, so the report counts them (this process's trials)
        self.spent: dict[int, tuple[Usage | None, float | None, int]] = {}


async def _trial(shared: _Shared, index: int, session: Session) -> dict[str, Any]:
    """One batch item: the task, then the evaluators (see the module)."""
    from ..agentic.usage import UsageMeter

    case, repeat = shared.trials[index]
    session.rename(f"{case.id}#{repeat}", inputs=case.inputs)  # one name per trial everywhere
    meter = UsageMeter()
    kept = index in shared.kept
    meta = {"kept": shared.redo[index]} if kept else None
    try:
        with session.track(
            "action", "task", inputs=case.inputs, metadata=meta, meter=meter
        ) as task:
            if kept:  # re-scored: the stored output of the same inputs, no task call
                output = shared.kept[index]
            else:  # a plain function's answer as it is, as lf.batch takes it
                args = (case.inputs, task.session) if shared.with_session else (case.inputs,)
                output = shared.task(*args)
                if inspect.isawaitable(output):
                    output = await output
            task.outputs = output
    except Exception:
        usage = meter.usage if meter.usage.to_json() else None
        shared.spent[index] = (usage, meter.cost()[0], meter.unpriced_requests)
        raise
    # a kept output has no trace of its making
    trace, duration = (None, None) if kept else (task.node, task.node.duration)
    records: list[ScoreRecord] = []
    # a judge is asked online: with engine=ProviderBatch() only the task's call is the item's
    # (batched) request, and its answer has come back by now
    with capturing(None), session.track("action", "evaluate", meter=meter) as ev:
        for name, evaluator in shared.evaluators.items():
            with ev.session.track("action", name) as check:
                trial = EvalContext(case, output, trace, check.session, duration, repeat)
                records.extend(await _check(check, name, evaluator, trial))
    shared.outputs[index] = output
    scores = [r.to_json() for r in records]
    # on the trial's node: the OpenTelemetry export turns these into evaluation events
    session.node.metadata["evaluations"] = scores
    cost, _ = meter.cost()
    result = {
        "output": walk(output, _STORED),
        "scores": scores,
        "usage": meter.usage.to_json(),
        "cost": cost,
        "duration": shared.kept_duration.get(index) if kept else task.node.duration,
    }
    if meter.unpriced_requests:  # requests left out of cost: no price known
        result["unpriced"] = meter.unpriced_requests
    if index in shared.redo:
        result["redo"] = shared.redo[index]
    if shared.on_trial is not None:
        trial_result = _result(shared, index, "ok", result, None, session.node.id, False)
        try:
            shared.on_trial(index, trial_result)
        except Exception:  # the user's hook: its bug never fails a trial that was paid for
            if not shared.hook_failed:
                shared.hook_failed = True
                _log.warning("on_trial raised; the run continues", exc_info=True)
    return result


async def _check(
    check: Tracked[Session],
    name: str,
    evaluator: Callable[[EvalContext], Any],
    trial: EvalContext,
) -> list[ScoreRecord]:
    """One evaluator under its own node ``check``, named by the metric: its verdicts are the
    node's outputs, and a fail or an error ends it ``failed``, so the trial's trace shows
    which check failed (a judge's query, made through ``trial.session``, is traced inside
    it)."""
    records = await evaluate(name, evaluator, trial)
    verdicts = [r.to_json() for r in records]
    if any(r.score is None or r.score.passed is False for r in records):
        check.end("failed", outputs=verdicts)
    else:
        check.outputs = verdicts
    return records


def _result(
    shared: _Shared,
    index: int,
    status: Any,
    stored: Mapping[str, Any] | None,
    error: ItemError | None,
    node_id: str | None,
    resumed: bool,
    output_type: Any = None,
) -> CaseResult:
    """Trial ``index`` as the report shows it: from its ``stored`` result (the output and
    scores ``_trial`` returned) or, when its task raised, from the batch's ``error``."""
    case, repeat = shared.trials[index]
    redo = None if resumed else shared.redo.get(index)
    if stored is None:
        usage, cost, unpriced = shared.spent.get(index, (None, None, 0))
        return CaseResult(
            case,
            repeat,
            status,
            error=None if error is None else {"type": error.type, "message": error.message},
            node_id=node_id,
            usage=usage,
            cost=cost,
            unpriced=unpriced,
            resumed=resumed,
            redo=redo,
            traceback=None if error is None else error.traceback,
        )
    if index in shared.outputs:
        output = shared.outputs[index]
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
        scores={s.name: s for s in scores},
        node_id=node_id,
        usage=Usage.from_json(usage) if usage else None,
        cost=stored.get("cost"),
        duration=stored.get("duration"),
        resumed=resumed,
        unpriced=int(stored.get("unpriced") or 0),
        redo=redo,
    )


def _scoring(evaluators: Mapping[str, Any]) -> str:
    """The evaluators' names, code digests and settings (``_settings``: a rubric, a judge's
    model, a tolerance): another value is another scoring, and stored trials are re-scored."""
    from ..batch.identity import code_digest

    return "\n".join(f"{name}={code_digest(ev)}:{_settings(ev)}" for name, ev in evaluators.items())


def _digest(value: Any) -> str:
    text = json.dumps(walk(value), sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def _trial_key(case: Case, repeat: int, scoring: str) -> str:
    """``case_id#repeat@I.E.V``: the trial's manifest key (see the module)."""
    digests = (_digest(case.inputs), _digest(case.expected), _digest(scoring))
    return f"{case.id}#{repeat}@{'.'.join(digests)}"


def _check_stored(path: Path, index: int, trial: Any) -> None:
    """``RunManifestError`` naming item ``index`` unless its stored ``trial`` reads back as
    ``_result`` will read it, its usage, cost and unpriced requests as a meter writes them (a
    manifest is data from elsewhere): checked before any request."""
    from ..batch.run_usage import read_cost, read_count, read_usage

    try:
        if not isinstance(trial, Mapping):
            raise TypeError(f"a {type(trial).__name__}, not an object")
        for score in trial.get("scores") or ():
            ScoreRecord.from_json(score)
        if trial.get("usage"):
            read_usage(trial["usage"])
        if trial.get("cost") is not None:
            read_cost(trial["cost"])
        read_count(trial.get("unpriced") or 0)
    except (AttributeError, KeyError, OverflowError, TypeError, ValueError) as exc:
        raise RunManifestError(
            f"run manifest {path}: the stored trial of item {index} is damaged ({exc})",
            path=str(path),
        ) from exc


def _plan(
    fn: Callable[..., Any],
    identity: RunIdentity,
    run: str | Path,
    shared: _Shared,
    keys: list[str],
) -> None:
    """Before the batch: which trials of ``run`` are done again and why (``shared.redo``), and
    the stored output each re-scored trial keeps (``shared.kept``; see the module)."""
    from ..batch.codec import ResultCodec
    from ..batch.manifest import Manifest, manifest_path

    path = manifest_path(run)
    if not path.exists():
        return
    manifest = Manifest.open(path, identity, ResultCodec(fn))
    try:
        stored = manifest.stored(lambda key: "@" in key)
    finally:
        manifest.close()
    slots: dict[str, list[str]] = {}  # "id#repeat" -> stored digests
    trials: dict[str, Mapping[str, Any]] = {}  # "id#repeat" -> its stored trial
    outputs: dict[tuple[str, str], Mapping[str, Any]] = {}  # (inputs digest, repeat) -> one
    for key, value in stored.items():
        slot, _, digests = key.rpartition("@")
        parts = digests.split(".")
        if len(parts) != 3 or not isinstance(value, Mapping):
            continue
        slots[slot] = parts
        trials[slot] = value
        outputs[parts[0], slot.rpartition("#")[2]] = value
    for index, key in enumerate(keys):
        if key in stored:  # the same case and scoring: reused as it is, once it reads back
            _check_stored(path, index, stored[key])
            continue
        slot, _, digests = key.rpartition("@")
        now, before = digests.split("."), slots.get(slot)
        found = (now[0], slot.rpartition("#")[2])
        if before is not None and before[0] == now[0]:  # this case's own trial, same inputs
            changed = [
                w for w, i in (("expected answer", 1), ("evaluators", 2)) if before[i] != now[i]
            ]
            why, kept = f"the {' and the '.join(changed)} changed", trials[slot]
        elif found in outputs:
            why, kept = "a stored trial of the same inputs had another case id", outputs[found]
        else:
            if before is not None:
                shared.redo[index] = "re-run: the inputs changed"
            continue
        shared.redo[index] = f"re-scored: {why}; output kept"
        shared.kept[index] = kept.get("output")
        duration = kept.get("duration")  # data from a file: a number or unknown
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            duration = None
        shared.kept_duration[index] = (
            duration if duration is None or math.isfinite(duration) else None
        )


def _settings(ev: Any) -> str:
    """The settings of a built evaluator: plain values as they are, anything else (a judge's
    model and sampling, its verdict class and query options, ``fields``' comparisons) as
    ``setting_text`` describes it. A setting left at its constructor's default, or an empty
    mapping, is left out, as it was before such settings were described, so an evaluator
    built the same way keeps its stored trials."""
    from ..batch.identity import setting_text

    values = getattr(ev, "__dict__", None)
    if not isinstance(values, dict):
        return ""
    try:
        parameters = inspect.signature(type(ev)).parameters
    except (TypeError, ValueError):
        parameters = {}  # type: ignore[assignment]
    shown: dict[str, Any] = {}
    for k, v in values.items():
        if isinstance(v, str | int | float | bool | tuple):
            shown[k] = v
        elif (k in parameters and v is parameters[k].default) or (isinstance(v, Mapping) and not v):
            continue
        else:
            shown[k] = setting_text(v)
    return repr(sorted(shown.items()))


async def run(
    task: Callable[..., Any],
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
    version: str | None = None,
    if_owned: IfOwned = "raise",
) -> Report:
    """Run ``task`` on every case ``repeats`` times, score each answer, and report.
    ``task(inputs)`` (or ``task(inputs, session)``) is async, or a plain function whose
    answer is taken as it is (as ``lf.batch`` takes one; it holds the event loop meanwhile).

    ``dataset`` is a ``Dataset`` (or anything ``Dataset(...)`` takes); ``evaluators`` a list
    (named by each one's ``name``/``__name__``), a ``{name: evaluator}`` dict, or one
    evaluator. ``run``, ``engine``, ``session``, ``max_concurrency`` and ``progress`` are
    ``lf.batch``'s: with ``run=`` a second call (in any process) re-runs no finished
    trial of the same case and evaluators (others are re-scored or re-run: see the module);
    a manifest made by another task is refused (``RunManifestError`` naming what changed:
    the run's identity is the task's, with ``version=`` as ``lf.batch``'s: docs/batch.md;
    ``version=`` without ``run=`` is a ``ValueError``; ``if_owned`` as ``lf.batch``'s: a
    manifest another live process is running is refused, or waited for with ``"wait"``).
    While the live view shows the run, the batch's own progress view is not shown (unless
    ``progress=`` asks for one). ``on_trial(index, result)`` is called as each trial of this
    process finishes; an exception it raises is logged (once, on ``langfx_nb.eval``) and
    the trial stays as it finished. ``live``: in a notebook (the notebook layer loaded, in
    a kernel) the report widget is shown in the running cell and fills in as trials finish
    (rows arrive in batches, a few per second), then shows the finished report;
    ``live=False`` shows nothing. The returned report's ``widget()`` is that view. With
    ``engine=Ray()`` the trials run in other processes: the view shows the finished report
    when the run ends.
    """
    from ..batch.identity import check_version, run_identity
    from ..batch.runner import run_batch

    check_version(version, run)
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    data = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    if callable(evaluators) and not isinstance(evaluators, Mapping):
        evaluators = [evaluators]
    named = evaluator_names(evaluators)
    if not callable(task):
        raise TypeError(f"task must be callable, not {type(task).__name__}")
    trials = [(case, r) for case in data for r in range(repeats)]
    if run is not None:
        _check_keyable(data)
    run_name = name or data.name or "eval"
    view = live_view(run_name, len(trials)) if live else None
    # the view lives in this process: trials run elsewhere (Ray workers) cannot feed it, and
    # it must not travel with the trial function; it shows the finished report then
    hook = on_trial
    if view is not None and getattr(engine, "in_process", True):  # None: asyncio, here
        hook = _feed(view, on_trial)
    if view is not None and progress is None:
        progress = False  # one view per run: the report shows the progress, not a batch view
    called: dict[str, Callable[[EvalContext], Any]] = {}
    for metric, evaluator in named.items():  # a loop, not a comprehension: the warning's frame
        called[metric] = one_argument(metric, evaluator)
    shared = _Shared(task, trials, called, hook)
    # the manifest belongs to the task; each trial's key names its case and scoring
    fn = functools.partial(_trial, shared)
    identity = run_identity(task, version=version, session=session)
    scoring = _scoring(named)
    keys = [_trial_key(case, repeat, scoring) for case, repeat in trials]
    if run is not None:
        _plan(fn, identity, run, shared, keys)
        _type_kept(shared, data.output_type)
    started = time.perf_counter()
    try:
        result = await run_batch(
            fn,
            range(len(trials)),
            session=session,
            run=run,
            engine=engine,
            max_concurrency=max_concurrency,
            on_error="collect",
            progress=progress,
            key=keys.__getitem__,
            name=run_name,
            identity=identity,
            inputs=[case.inputs for case, _ in trials],
            if_owned=if_owned,
        )
    except BaseException as exc:  # the view says the run stopped; the exception goes on
        if view is not None:
            reason = "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
            with contextlib.suppress(Exception):
                view.stop(reason)
        raise
    results = [
        _result(
            shared,
            i,
            status,
            result.results[i] if status == "ok" else None,
            result.errors[i],
            result.node_ids[i],
            result.resumed[i],
            data.output_type,
        )
        for i, status in enumerate(result.statuses)
    ]
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


def _check_keyable(data: Dataset) -> None:
    """``TypeError`` naming the first case whose inputs or expected answer have no JSON
    form (``lf.batch``'s rule for an item): its stored trial could not be found again, so
    every run would call the task again."""
    from ..batch.codec import item_keys

    for case in data:
        try:
            item_keys([case.inputs, case.expected])
        except TypeError as exc:
            raise TypeError(
                f"case {case.id!r}: its inputs or expected answer have no JSON form, so run= "
                "could not find its stored trial again: give it inputs JSON can hold (text, "
                "numbers, a path, a pydantic model)"
            ) from exc


def _type_kept(shared: _Shared, output_type: Any) -> None:
    """Kept outputs (stored as JSON) back into ``output_type`` for the evaluators."""
    if output_type is None:
        return
    from pydantic import TypeAdapter, ValidationError

    adapter = TypeAdapter(output_type)
    for index, output in list(shared.kept.items()):
        try:
            shared.kept[index] = adapter.validate_python(output)
        except ValidationError:  # the output's type changed since: run the task again
            del shared.kept[index]
            shared.redo[index] = "re-run: the stored output is not a valid output_type any more"


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
