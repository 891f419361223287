"""EvalReportView: an evaluation report (or a comparison of two) as a live notebook view.

The view shows the metric summary (pass rates with their Wilson interval, means ± standard
error), a breakdown by metadata, usage and cost, and a table of trials that sorts and filters
in the page and draws only the rows on screen (10,000 rows stay fast). A click on a row asks
the kernel for that trial's trace, which opens in a ``TraceExplorer`` below the table (the
trial's subtree only, so it opens at once whatever the session holds), drawn inside the report's
own view: the report is one anywidget output, which every host draws (marimo keeps only
anywidget models, so a box of ipywidgets would stay blank there). A comparison shows
both runs' scores per case, changed cases highlighted, regressions first.

Live: in a notebook ``await lf.eval.run(...)`` shows a view in the running cell that fills in
as trials finish (``live_report``); by hand, ``view = lf.nb.EvalReportView(); display(view)``,
then ``await lf.eval.run(..., on_trial=view.add, live=False)`` and ``view.show(report)``. Rows
are batched: at most one message per ``interval`` (250 ms), never one per trial. Model text
(outputs, reasons, errors) is sent as data and drawn as text, never HTML.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from ipywidgets import widget_serialization

from ..jsonable import walk
from .bridge import Clock, EventBridge, MessageKind
from .eval_static import eval_static_html, eval_text
from .render import WidgetDisplayMixin, esc
from .trace_explorer import TraceExplorer
from .trace_live import subtrace

__all__ = ["EvalReducer", "EvalReportView", "case_row", "delta_row", "live_report"]

_STATIC = Path(__file__).parent / "static"
LIVE_INTERVAL = 0.25  # live rows: at most one message (a batch of rows) per 250 ms
OUTPUT_CHARS = 300  # what a table cell shows of an output; the trace holds the rest


def _short(value: Any, limit: int = OUTPUT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(walk(value), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def case_row(result: Any) -> dict[str, Any]:
    """One trial (``lf.eval.CaseResult``) as a table row: plain JSON, outputs cut short."""
    scores: dict[str, Any] = {}
    errors: dict[str, str] = {}
    tracebacks: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for name, record in result.scores.items():
        if record.score is None:
            scores[name] = None
            errors[name] = f"{record.error['type']}: {record.error['message']}"
            if record.traceback:
                tracebacks[name] = record.traceback
        else:
            scores[name] = record.score.score
            if record.score.reason:
                reasons[name] = _short(record.score.reason, 200)
    row: dict[str, Any] = {
        "key": result.key,
        "id": result.case.id,
        "repeat": result.repeat,
        "status": result.status,
        "inputs": _short(result.case.inputs, 200),
        "output": "" if result.output is None else _short(result.output),
        "scores": scores,
        "meta": {str(k): _short(v, 80) for k, v in result.case.metadata.items()},
        "node": result.node_id,
    }
    if result.case.expected is not None:
        row["expected"] = _short(result.case.expected, 200)
    if errors:
        row["errors"] = errors
    if reasons:
        row["reasons"] = reasons
    if tracebacks:
        row["error_tracebacks"] = tracebacks
    if result.error is not None:
        row["error"] = f"{result.error['type']}: {result.error['message']}"
        if result.traceback:
            row["traceback"] = result.traceback
    if result.usage is not None:
        row["tokens"] = result.usage.total_tokens
    if result.cost is not None:
        row["cost"] = result.cost
    if result.unpriced:
        row["unpriced"] = result.unpriced
    if result.duration is not None:
        row["duration"] = result.duration
    if result.redo is not None:
        row["redo"] = result.redo
    return row


def delta_row(delta: Any) -> dict[str, Any]:
    """One case of a comparison (``lf.eval.CaseDelta``) as a table row."""
    return {
        "key": delta.case_id,
        "id": delta.case_id,
        "change": delta.change,
        "inputs": _short(delta.inputs, 200),
        "a": {m: v[0] for m, v in delta.scores.items()},
        "b": {m: v[1] for m, v in delta.scores.items()},
        "output_a": "" if delta.output_a is None else _short(delta.output_a),
        "output_b": "" if delta.output_b is None else _short(delta.output_b),
        "node": delta.node_b or delta.node_a,
        "node_a": delta.node_a,
        "node_b": delta.node_b,
    }


class EvalReducer:
    """The view's cumulative state: rows by key in arrival order, plus the summary."""

    def __init__(self) -> None:
        self.mode = "report"
        self.rows: dict[str, dict[str, Any]] = {}
        self.summary: dict[str, Any] = {}
        self.finished = False

    def apply(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        if event.get("type") == "row":
            row = dict(event["row"])
            self.rows[row["key"]] = row
            return [{"op": "row", "row": row}]
        return []

    def snapshot(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "rows": list(self.rows.values()),
            "summary": self.summary,
            "finished": self.finished,
        }


def report_summary(report: Any) -> dict[str, Any]:
    """Metrics, the breakdown by each metadata key (keys with at most 50 values), totals."""
    breakdown: dict[str, Any] = {}
    for key in report.metadata_keys:
        groups = report.by(key)
        if len(groups) <= 50:
            breakdown[key] = {
                value: [m.to_json() for m in metrics.values()] for value, metrics in groups.items()
            }
    usage = report.usage
    return {
        "title": report.name,
        "metrics": [m.to_json() for m in report.metrics.values()],
        "breakdown": breakdown,
        "trials": len(report),
        "cases": len({r.case.id for r in report}),
        "repeats": report.repeats,
        "failed": len(report.failed),
        "redone": {k: n for k, n in report.redone.items() if n},
        "tokens": usage.total_tokens,
        "cost": report.cost,
        "unpriced": report.unpriced,
        "elapsed_s": report.elapsed_s,
    }


def compare_summary(comparison: Any) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for c in comparison.cases:
        counts[c.change] = counts.get(c.change, 0) + 1
    return {
        "title": f"{comparison.a.name or 'a'} → {comparison.b.name or 'b'}",
        "a": comparison.a.name or "a",
        "b": comparison.b.name or "b",
        "metrics": [m.to_json() for m in comparison.metrics.values()],
        "counts": counts,
        "test": next(iter(comparison.metrics.values())).test if comparison.metrics else "",
    }


def live_report(name: str, trials: int) -> EvalReportView:
    """A report view of a run starting now, displayed in the running cell (``lf.eval.run``
    feeds it: ``add`` per trial, then ``show`` of the finished report)."""
    view = EvalReportView(title=name, trials=trials)
    view._ipython_display_()  # what display(view) calls in Jupyter; marimo's output there
    return view


class EvalReportView(WidgetDisplayMixin, anywidget.AnyWidget):
    """The report widget: ``EvalReportView(report)``, ``EvalReportView(comparison)``, or
    ``EvalReportView()`` to fill live with ``add`` (see the module)."""

    _esm = _STATIC / "eval_report.js"
    state = traitlets.Bytes(b"").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    view_state = traitlets.Dict().tag(sync=True)  # sort, filter: kept across reloads
    #: the explorer a clicked trial's trace opens in, drawn inside the report's view once
    #: ``trace_open`` (the first click); made up front and reused, so a click makes no widget
    explorer = traitlets.Instance(TraceExplorer).tag(sync=True, **widget_serialization)
    trace_open = traitlets.Bool(False).tag(sync=True)

    def __init__(
        self,
        source: Any = None,
        *,
        title: str = "",
        trials: int | None = None,
        interval: float = LIVE_INTERVAL,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        self._reducer = EvalReducer()
        if trials is not None:  # a live run: how many trials to expect
            self._reducer.summary = {"title": title, "expected": trials}
        self._source: Any = None
        self._session: Any = None
        if source is not None:
            self._load(source)
            title = title or str(self._reducer.summary.get("title") or "")
        # the report (or what a live run expects) travels with the widget's opening message
        initial = b""
        if source is not None or trials is not None:
            initial = self._encode({**self._reducer.snapshot(), "seq": 0})
        super().__init__(
            title=title, state=initial, explorer=TraceExplorer(title="trace"), **kwargs
        )
        self._bridge = EventBridge(
            self._send_message,
            self._reducer,
            on_state=self._set_state,
            interval=interval,
            clock=clock,
        )
        self.on_msg(self._on_view_message)

    # -- public ---------------------------------------------------------------------------
    def add(self, index: int, result: Any) -> None:
        """One finished trial (the ``on_trial`` hook of ``lf.eval.run``): a row now."""
        with contextlib.suppress(Exception):  # a view must never break the run it watches
            self._bridge.push({"type": "row", "row": case_row(result)})

    def show(self, source: Any) -> None:
        """Show a finished ``Report`` or ``Comparison`` (replaces the rows)."""
        self._load(source)
        if not self.title:
            self.title = str(self._reducer.summary.get("title") or "")
        self._bridge.publish_now()
        self._refresh_displays()

    def stop(self, reason: str) -> None:
        """The run ended before its report (``reason``: ``cancelled`` or the error's class):
        the rows so far stay, and the head says it stopped instead of running."""
        self._reducer.summary = {**self._reducer.summary, "stopped": reason}
        self._reducer.finished = True
        self._bridge.publish_now()

    def _load(self, source: Any) -> None:
        """Take a report's or comparison's rows and summary into the reducer."""
        from ..eval.compare import Comparison

        self._source = source
        reducer = self._reducer
        if isinstance(source, Comparison):
            reducer.mode = "compare"
            reducer.rows = {r["key"]: r for r in map(delta_row, source.cases)}
            reducer.summary = compare_summary(source)
            self._session = source.b.session or source.a.session
        else:
            reducer.mode = "report"
            reducer.rows = {r["key"]: r for r in map(case_row, source.results)}
            reducer.summary = report_summary(source)
            self._session = source.session
        reducer.finished = True

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self._reducer.rows.values())

    @property
    def snapshot(self) -> dict[str, Any]:
        return json.loads(self.state) if self.state else {}

    def trial_trace(self, node_id: str) -> dict[str, Any] | None:
        """The trace of one trial as a saved-trace dict: the session root, the batch node
        and the trial's subtree (``None`` when the session no longer holds it)."""
        session = self._session
        return None if session is None else subtrace(session, [str(node_id)])

    def open_trace(self, node_id: str, *, title: str | None = None) -> Any:
        """Show a trial's trace in ``explorer`` (below the view; what a click on a row
        does), selected and expanded; the explorer, or ``None`` when the trace is not
        available."""
        data = self.trial_trace(node_id)
        if data is None:
            return None
        ids = [n["id"] for n in data["nodes"]]
        explorer = self.explorer
        explorer.show(
            data,
            title=title or f"trace of node {node_id}",
            view_state={"selected": str(node_id), "expanded": [[i, True] for i in ids]},
        )
        self.trace_open = True
        return explorer

    def close(self) -> None:
        self.explorer.close()
        super().close()

    # -- fallbacks ------------------------------------------------------------------------
    def _fallback_html(self) -> str:
        return f"<pre>{esc(self._fallback_text())}</pre>"

    def _fallback_text(self) -> str:
        return eval_text(self._reducer.snapshot(), title=self.title)

    def _static_html(self) -> str:
        return eval_static_html(self._reducer.snapshot(), title=self.title)

    # -- plumbing -------------------------------------------------------------------------
    @staticmethod
    def _encode(state: Mapping[str, Any]) -> bytes:
        return json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode()

    def _set_state(self, state: dict[str, Any]) -> None:
        self.state = self._encode(state)

    def _send_message(self, message: dict[str, Any]) -> None:
        if self.comm is not None:
            self.send(message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, Mapping):
            return
        kind = content.get("kind")
        if kind == MessageKind.OPEN_TRACE.value:
            node_id = str(content.get("id"))
            key = content.get("key")
            title = f"trace of {key}" if isinstance(key, str) else None
            try:
                ok = self.open_trace(node_id, title=title) is not None
                message = "" if ok else "this trial's trace is not held any more (or was resumed)"
            except Exception as exc:  # the page gets a reason, the kernel keeps running
                ok, message = False, f"{type(exc).__name__}: {exc}"[:300]
            self._send_message(
                {
                    "kind": MessageKind.TRACE_OPENED.value,
                    "id": node_id,
                    "ok": ok,
                    "message": message,
                }
            )
        elif kind == MessageKind.SYNC.value:
            if content.get("seq") == self._bridge.seq and self._bridge.is_current:
                return  # the view has exactly this state (a finished report): send no copy
            snapshot = self._bridge.snapshot_message()
            state = snapshot.pop("state")
            if self.comm is not None:
                self.send(snapshot, buffers=[json.dumps(state, ensure_ascii=False).encode()])
