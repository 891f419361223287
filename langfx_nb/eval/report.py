"""``lf.eval.Report``: what an evaluation found, case by case and in aggregate.

A report holds one ``CaseResult`` per (case, repeat): the task's output (or the error it
raised), one ``ScoreRecord`` per metric, the case's trace node id, its usage, cost and
duration. ``metrics`` aggregates every metric over the trials of the run: a pass/fail metric
as a pass rate over every trial with its Wilson interval (a trial whose evaluator raised or
whose task failed is not a pass: it never raises the rate), a numeric one as a mean of the
scored trials with its standard error (see ``stats``); evaluator errors and failed tasks are
shown beside the value (``errors``, ``missing``). ``by(key)`` gives the same aggregates per
value of a metadata key.

A report saves as JSON (``save`` / ``Report.load``) so two runs recorded on different days
can be compared (``lf.eval.compare``); ``to_records`` / ``to_pandas`` give one row per trial.
In a notebook it displays as the report widget (``lf.nb.EvalReportView``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from ..agentic.trace_json import regular_file
from ..agentic.usage import cost_label
from ..jsonable import walk
from ..messages import Usage
from .dataset import Case
from .score import ScoreRecord, traceback_from_json
from .stats import Interval, mean_interval, wilson

__all__ = ["REPORT_FORMAT", "CaseResult", "Metric", "Report", "aggregate"]

REPORT_FORMAT = "langfx_nb.eval.report"
REPORT_VERSION = 1
MAX_REPORT_BYTES = 1 << 30  # a report file larger than this is refused, not read

CaseStatus = Literal["ok", "failed", "cancelled", "skipped"]


_report_view: Callable[[Any], Any] | None = None


def set_report_view(factory: Callable[[Any], Any] | None) -> None:
    """Called by the notebook layer when it loads: how a ``Report`` or ``Comparison``
    becomes a widget (the hook goes from the notebook to the core, never the other way)."""
    global _report_view
    _report_view = factory


def report_view(value: Any) -> Any:
    """The registered widget of a report or comparison."""
    if _report_view is None:
        raise ImportError("the report widget needs the notebook layer: %load_ext langfx_nb")
    return _report_view(value)


class LiveReport(Protocol):
    """What ``lf.eval.run`` feeds while it goes on: each trial of this process as it
    finishes (``add``), then the finished ``Report`` (``show``), or why the run stopped
    before it (``stop``: cancelled, or an error raised out of the run)."""

    def add(self, index: int, result: CaseResult) -> None: ...

    def show(self, source: Any) -> None: ...

    def stop(self, reason: str) -> None: ...


#: makes (and displays) the view of a run: ``factory(name, trials)`` (see ``set_live_view``)
LiveFactory = Callable[[str, int], LiveReport | None]
_live_view: LiveFactory | None = None


def set_live_view(factory: LiveFactory | None) -> LiveFactory | None:
    """Called by the notebook layer when it loads: ``factory(name, trials)`` makes (and
    displays) the view a run fills in live, or returns ``None`` where there is none (outside
    a kernel). Returns the factory it replaces."""
    global _live_view
    previous, _live_view = _live_view, factory
    return previous


def live_view(name: str, trials: int) -> LiveReport | None:
    """The live view of a run starting now (``None`` without the notebook layer, outside a
    kernel, or when the factory fails: a view never stops a run)."""
    factory = _live_view
    if factory is None:
        return None
    try:
        return factory(name, trials)
    except Exception:
        return None


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One trial: a case's task run once (``repeat`` counts from 0) and its scores.

    ``status`` is the task's: ``ok`` (it answered, ``output``), ``failed`` (it raised:
    ``error`` holds the class and short message, ``{"type": ..., "message": ...}``, and
    ``traceback`` where it was raised; no scores), or ``cancelled``/``skipped`` when the run
    stopped first. ``traceback`` is the task's frames and its causes', bounded, secrets
    masked, never a provider body (``agentic/tracebacks.py``, as ``lf.batch`` keeps for a
    failed item); ``None`` unless the task raised, or when unknown. ``node_id`` is the
    trial's ``item`` node (the run manifest's id with ``run=``, as ``BatchResult.node_ids``;
    ``None`` when resumed from the manifest, or for a loaded report); ``resumed`` says the
    result came from the run manifest without running again; ``redo`` why a stored trial of
    this case was not reused (``re-scored: the expected answer changed; output kept``,
    ``re-run: the inputs changed``), ``None`` when there was none to reuse or it was."""

    case: Case
    repeat: int
    status: CaseStatus
    output: Any = None
    error: Mapping[str, str] | None = None
    scores: Mapping[str, ScoreRecord] = field(default_factory=dict)
    node_id: str | None = None
    usage: Usage | None = None
    cost: float | None = None
    duration: float | None = None
    resumed: bool = False
    unpriced: int = 0  # model requests with no known price, left out of ``cost``
    redo: str | None = None
    traceback: str | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """``case_id#repeat``: the trial's name in the report, the trace and the live view;
        its run manifest key adds digests of its inputs, expected answer and evaluators."""
        return f"{self.case.id}#{self.repeat}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "case": self.case.to_json(),
            "repeat": self.repeat,
            "status": self.status,
            "output": walk(self.output),
            "scores": [s.to_json() for s in self.scores.values()],
            "node_id": self.node_id,
            "resumed": self.resumed,
        }
        for key in ("error", "traceback", "cost", "duration", "redo"):
            value = getattr(self, key)
            if value is not None:
                out[key] = dict(value) if key == "error" else value
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        if self.unpriced:
            out["unpriced"] = self.unpriced
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], output_type: Any = None) -> CaseResult:
        raw = data["case"]
        metadata, error = raw.get("metadata") or {}, data.get("error")
        if not isinstance(metadata, Mapping) or not isinstance(error, Mapping | None):
            raise TypeError("a case's metadata and a trial's error are mappings")
        case = Case(raw["inputs"], raw.get("expected"), metadata, raw.get("id"))
        output = data.get("output")
        if output_type is not None and output is not None and data.get("status") == "ok":
            from pydantic import TypeAdapter

            output = TypeAdapter(output_type).validate_python(output)
        scores = [ScoreRecord.from_json(s) for s in data.get("scores") or ()]
        usage = data.get("usage")
        status = data.get("status", "ok")
        if status not in get_args(CaseStatus):
            raise ValueError(f"unknown status {str(status)[:40]!r}")
        return cls(
            case,
            int(data.get("repeat", 0)),
            status,
            output,
            error,
            {s.name: s for s in scores},
            _optional(data, "node_id", str),
            Usage.from_json(usage) if usage else None,
            _optional(data, "cost", float),
            _optional(data, "duration", float),
            bool(data.get("resumed", False)),
            int(data.get("unpriced") or 0),
            _optional(data, "redo", str),
            traceback_from_json(data),
        )


def _optional(data: Mapping[str, Any], name: str, kind: type[float] | type[str]) -> Any:
    """``data[name]`` when it is a ``kind`` (a finite number for ``float``) or missing;
    ``TypeError`` naming it otherwise."""
    value = data.get(name)
    if value is None:
        return None
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif isinstance(value, str):
        return value
    raise TypeError(f"{name} must be a {'number' if kind is float else 'str'} or null")


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric over every trial of a run (see ``aggregate``).

    ``kind`` is ``pass_rate`` (every score was a bool) or ``mean``. A pass rate counts every
    trial: ``interval`` is the Wilson interval of the passes over ``trials``, so a trial whose
    evaluator raised (``errors``) or whose task did not answer (``missing``) counts as not
    passed and can never raise the rate. A mean is over the ``scored`` trials (an error has no
    number to average): ``interval`` is mean ± 1.96·se from ``scored`` values, and ``errors``
    and ``missing`` say how many trials it leaves out."""

    name: str
    kind: Literal["pass_rate", "mean"]
    interval: Interval
    errors: int = 0
    missing: int = 0
    scored: int = 0

    @property
    def value(self) -> float:
        return self.interval.value

    @property
    def n(self) -> int:
        """The trials the headline value is over (a pass rate: every trial)."""
        return self.interval.n

    @property
    def trials(self) -> int:
        """Every trial of the run this metric is counted over."""
        return self.scored + self.errors + self.missing

    def __str__(self) -> str:
        iv = self.interval
        if self.kind == "pass_rate":
            text = f"{iv.value:.1%} [{iv.low:.1%}, {iv.high:.1%}]" if iv.n else "—"
        elif iv.se is not None:
            text = f"{iv.value:.4g} ± {iv.se:.2g}"
        else:
            text = "—" if math.isnan(iv.value) else f"{iv.value:.4g}"
        return f"{self.name}: {text} ({counts_text(self.to_json())})"

    def to_json(self) -> dict[str, Any]:
        iv = self.interval
        return {
            "name": self.name,
            "kind": self.kind,
            "value": finite_or_none(iv.value),
            "low": finite_or_none(iv.low),
            "high": finite_or_none(iv.high),
            "n": iv.n,
            "se": None if iv.se is None else finite_or_none(iv.se),
            "trials": self.trials,
            "scored": self.scored,
            "errors": self.errors,
            "missing": self.missing,
        }


def counts_text(metric: Mapping[str, Any]) -> str:
    """``n=10, 2 errors, 1 task failed`` from a ``Metric``'s JSON: what the value is over,
    and what it counts as not passed (a pass rate) or leaves out (a mean: ``n=8 of 10``)."""
    n = metric.get("n") or 0
    trials = metric.get("trials", n)
    errors, missing = metric.get("errors") or 0, metric.get("missing") or 0
    text = f"n={n}" if n == trials else f"n={n} of {trials}"
    if errors:
        text += f", {errors} error{'s' if errors != 1 else ''}"
    if missing:
        text += f", {missing} task{'s' if missing != 1 else ''} failed"
    return text


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def metric_names(results: Iterable[CaseResult]) -> list[str]:
    """Every metric name in the order first seen; an evaluator that gives one score per key
    (``fields.city``) and raised on some trial (an error named ``fields``) is counted in
    its keys' metrics, not as a metric of its own."""
    names: dict[str, None] = {}
    for r in results:
        for name in r.scores:
            names.setdefault(name, None)
    return [n for n in names if not any(o.startswith(n + ".") for o in names)]


def record_of(result: CaseResult, name: str) -> ScoreRecord | None:
    """``name``'s record in a trial: its own, or the error of the evaluator it is a key of
    (``fields`` raised: ``fields.city`` is an error too)."""
    record = result.scores.get(name)
    if record is not None:
        return record
    for other, rec in result.scores.items():
        if rec.error is not None and name.startswith(other + "."):
            return rec
    return None


def aggregate(
    results: Sequence[CaseResult], names: Sequence[str] | None = None
) -> dict[str, Metric]:
    """The ``Metric`` of each name over ``results`` (see ``Metric``: a pass rate counts an
    error or a failed task as not passed). A trial whose task answered but whose evaluators
    gave no record of ``name`` (a mapping evaluator with other keys) is left out."""
    out: dict[str, Metric] = {}
    for name in names if names is not None else metric_names(results):
        values: list[float] = []
        all_bool = True
        errors = missing = 0
        for r in results:
            record = record_of(r, name)
            if r.status != "ok":
                missing += 1
            elif record is None:
                continue
            elif record.score is None:
                errors += 1
            else:
                values.append(record.score.value)
                all_bool = all_bool and isinstance(record.score.score, bool)
        scored = len(values)
        if all_bool:
            interval = wilson(int(sum(values)), scored + errors + missing)
            out[name] = Metric(name, "pass_rate", interval, errors, missing, scored)
        else:
            out[name] = Metric(name, "mean", mean_interval(values), errors, missing, scored)
    return out


class Report(Sequence[CaseResult]):
    """An evaluation's results (see the module). Iterating gives the ``CaseResult``s in
    dataset order, repeats together."""

    def __init__(
        self,
        results: Iterable[CaseResult],
        *,
        name: str = "",
        repeats: int = 1,
        elapsed_s: float | None = None,
        run_path: str | None = None,
        session: Any = None,
        output_type: Any = None,
        view: LiveReport | None = None,
    ) -> None:
        self.results: list[CaseResult] = list(results)
        #: the live view the run filled in (a notebook's), which ``widget()`` returns
        self.view = view
        self.name = name
        self.repeats = repeats
        self.elapsed_s = elapsed_s
        self.run_path = run_path
        self.session = session
        self.output_type = output_type
        self.metrics: dict[str, Metric] = aggregate(self.results)

    # -- Sequence ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: Any) -> Any:
        return self.results[index]

    def __iter__(self) -> Iterator[CaseResult]:
        return iter(self.results)

    # -- aggregates ----------------------------------------------------------------------
    @property
    def failed(self) -> list[CaseResult]:
        """Trials whose task did not answer (raised, or the run stopped first)."""
        return [r for r in self.results if r.status != "ok"]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for r in self.results:
            if r.usage is not None:
                total = total + r.usage
        return total

    @property
    def cost(self) -> float | None:
        """The summed cost of the requests with a known price (``None`` if none had one);
        ``unpriced`` counts those it leaves out, and ``cost_text`` labels the sum."""
        costs = [r.cost for r in self.results if r.cost is not None]
        return math.fsum(costs) if costs else None

    @property
    def unpriced(self) -> int:
        """Model requests of the trials with no known price (left out of ``cost``)."""
        return sum(r.unpriced for r in self.results)

    @property
    def cost_text(self) -> str:
        """``$1.23``; ``≥ $1.23 (3 calls unpriced)`` when requests had no price; ``cost
        unknown`` when none had one (``agentic.usage.cost_label``)."""
        return cost_label(self.cost, self.unpriced)

    def by(self, key: str) -> dict[str, dict[str, Metric]]:
        """The metrics per value of metadata ``key`` (cases without it under ``"—"``),
        values in order first seen."""
        groups: dict[str, list[CaseResult]] = {}
        for r in self.results:
            value = r.case.metadata.get(key)
            groups.setdefault("—" if value is None else str(value), []).append(r)
        names = list(self.metrics)
        return {value: aggregate(rs, names) for value, rs in groups.items()}

    @property
    def metadata_keys(self) -> list[str]:
        keys: dict[str, None] = {}
        for r in self.results:
            for k in r.case.metadata:
                keys.setdefault(str(k), None)
        return list(keys)

    def case_scores(self) -> dict[str, dict[str, float]]:
        """Per case id, each metric's mean score over that case's repeats, by the rule of
        ``Metric``: for a pass rate an error or a failed task is a 0 (not passed); a mean
        leaves those repeats out (a case with none scored has no value)."""
        sums: dict[str, dict[str, list[float]]] = {}
        for r in self.results:
            per = sums.setdefault(r.case.id or "", {})
            for name, metric in self.metrics.items():
                record = record_of(r, name)
                if record is not None and record.score is not None and r.status == "ok":
                    per.setdefault(name, []).append(record.score.value)
                elif metric.kind == "pass_rate" and (r.status != "ok" or record is not None):
                    per.setdefault(name, []).append(0.0)
        return {
            cid: {m: math.fsum(v) / len(v) for m, v in per.items()} for cid, per in sums.items()
        }

    @property
    def redone(self) -> dict[str, int]:
        """How many stored trials were ``re-scored`` and ``re-run`` (see ``CaseResult.redo``)."""
        counts = {"re-scored": 0, "re-run": 0}
        for r in self.results:
            if r.redo is not None:
                kind = r.redo.partition(":")[0]
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def summary(self) -> str:
        """Lines a person reads: the metrics, failures, what was done again, usage and cost."""
        head = f"Report {self.name!r}" if self.name else "Report"
        cases = len({r.case.id for r in self.results})
        plural = "case" if cases == 1 else "cases"
        lines = [f"{head}: {cases} {plural} × {self.repeats} repeat(s), {len(self.failed)} failed"]
        redone = {k: n for k, n in self.redone.items() if n}
        if redone:
            said = ", ".join(f"{n} {k}" for k, n in redone.items())
            lines.append(
                f"  stored trials not reused: {said} (their case or evaluators changed: "
                "see each trial's redo)"
            )
        lines += [f"  {m}" for m in self.metrics.values()]
        usage = self.usage
        if usage.total_tokens or usage.prompt_tokens:
            if self.cost is not None:
                cost = f", cost: {self.cost_text}"
            else:  # "cost unknown (12 calls unpriced)": never a $0
                cost = f", {self.cost_text}" if self.unpriced else ""
            lines.append(f"  tokens: {usage.total_tokens or 0}{cost}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    # -- records and files ---------------------------------------------------------------
    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per trial: ``case_id``, ``repeat``, ``status``, ``output``,
        ``error`` and ``error_traceback`` (a failed task's), the metadata as ``meta.KEY``,
        each metric's score (``None`` if it raised) and ``NAME.error``, ``tokens``,
        ``cost``, ``node_id``."""
        rows = []
        for r in self.results:
            row: dict[str, Any] = {
                "case_id": r.case.id,
                "repeat": r.repeat,
                "status": r.status,
                "output": walk(r.output),
                "error": None if r.error is None else f"{r.error['type']}: {r.error['message']}",
                "error_traceback": r.traceback,
            }
            for k, v in r.case.metadata.items():
                row[f"meta.{k}"] = v
            for name, record in r.scores.items():
                row[name] = None if record.score is None else record.score.score
                if record.error is not None:
                    row[f"{name}.error"] = f"{record.error['type']}: {record.error['message']}"
            row["tokens"] = None if r.usage is None else r.usage.total_tokens
            row["cost"] = r.cost
            row["node_id"] = r.node_id
            rows.append(row)
        return rows

    def to_pandas(self) -> Any:
        """``to_records()`` as a ``pandas.DataFrame`` (pandas is optional)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "Report.to_pandas() needs pandas, which is not installed: pip install pandas"
            ) from exc
        return pd.DataFrame.from_records(self.to_records())

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "name": self.name,
            "repeats": self.repeats,
            "elapsed_s": self.elapsed_s,
            "run_path": self.run_path,
            "metrics": [m.to_json() for m in self.metrics.values()],
            "results": [r.to_json() for r in self.results],
        }

    def save(self, path: str | Path) -> None:
        """Write the report as JSON (``Report.load`` reads it back)."""
        Path(path).write_text(json.dumps(self.to_json(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, output_type: Any = None) -> Report:
        """A report from its JSON; ``ValueError`` naming what is wrong when malformed."""
        if not isinstance(data, Mapping) or data.get("format") != REPORT_FORMAT:
            raise ValueError("not a langfx_nb evaluation report")
        if data.get("version") != REPORT_VERSION:
            raise ValueError(f"unsupported report version: {data.get('version')!r}")
        results, malformed = [], (AttributeError, KeyError, OverflowError, TypeError, ValueError)
        raw_results = data.get("results") or []
        if not isinstance(raw_results, list):
            raise ValueError("malformed report: results is not a list")
        for i, raw in enumerate(raw_results):
            try:
                results.append(CaseResult.from_json(raw, output_type))
            except malformed as exc:
                raise ValueError(f"malformed report: results[{i}]: {exc}") from exc
        try:
            repeats = int(data.get("repeats", 1))
        except malformed as exc:
            raise ValueError(f"malformed report: repeats: {exc}") from exc
        return cls(
            results,
            name=str(data.get("name", "")),
            repeats=repeats,
            elapsed_s=data.get("elapsed_s"),
            run_path=data.get("run_path"),
            output_type=output_type,
        )

    @classmethod
    def load(cls, path: str | Path, *, output_type: Any = None) -> Report:
        """The report saved at ``path`` (``save``). A report file may come from elsewhere:
        ``ValueError`` when it is no regular file, is larger than ``MAX_REPORT_BYTES``, or
        is malformed; it is never read past that size."""
        path = Path(path)
        regular_file(path)
        with path.open("rb") as file:
            data = file.read(MAX_REPORT_BYTES + 1)
        if len(data) > MAX_REPORT_BYTES:
            raise ValueError(f"{path}: larger than {MAX_REPORT_BYTES} bytes, not read")
        try:
            parsed = json.loads(data)
        except RecursionError as exc:
            raise ValueError(f"{path}: malformed report: nested too deeply") from exc
        return cls.from_json(parsed, output_type=output_type)

    # -- display -------------------------------------------------------------------------
    def widget(self) -> Any:
        """The report widget: the view the notebook layer registered (``%load_ext langfx_nb``
        or ``lf.nb``), or the one the run filled in live. ``ImportError`` before it is
        loaded: the core never imports it."""
        if self.view is not None:
            return self.view
        return report_view(self)

    def _ipython_display_(self) -> None:
        try:
            view = self.widget()
        except ImportError:  # no notebook extra: the text form
            print(self.summary())
            return
        from IPython.display import display

        display(view)  # type: ignore[no-untyped-call]
