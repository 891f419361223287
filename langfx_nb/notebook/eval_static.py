"""The evaluation report's saved-notebook copy: its metrics and first rows as escaped text
and HTML (what a notebook shows without the widget, and what nbval compares)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..eval.report import counts_text
from .render import CSS, clip, esc

__all__ = ["MAX_EVAL_ROWS", "eval_static_html", "eval_text"]

MAX_EVAL_ROWS = 200  # the static copy of a report: the metrics and this many rows


def _metric_text(m: Mapping[str, Any]) -> str:
    value, low, high = m.get("value"), m.get("low"), m.get("high")
    if value is None:
        text = "—"
    elif m.get("kind") == "pass_rate":
        text = f"{value:.1%} [{(low or 0):.1%}, {(high or 0):.1%}]"
    elif m.get("se") is not None:
        text = f"{value:.4g} ± {m['se']:.2g}"
    else:
        text = f"{value:.4g}"
    return f"{text} ({counts_text(m)})"


def _score_cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "pass" if value else "fail"
    return f"{float(value):.3g}"


def _delta_text(m: Mapping[str, Any]) -> str:
    delta = m.get("delta")
    if delta is None:
        return "—"
    low, high = m.get("low"), m.get("high")
    interval = "" if low is None or high is None else f" [{low:+.3g}, {high:+.3g}]"
    noise = "beyond noise" if m.get("beyond_noise") else "within noise"
    return f"{delta:+.3g}{interval}, {noise}"


def eval_text(state: Mapping[str, Any], *, title: str = "") -> str:
    """One deterministic line: trials and each metric (what nbval compares)."""
    summary = state.get("summary") or {}
    name = f"EvalReport {title!r}" if title else "EvalReport"
    if state.get("mode") == "compare":
        counts = summary.get("counts") or {}
        head = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        return f"{name} (compare): {head}"
    parts = [f"{len(state.get('rows') or ())} trials"]
    parts += [f"{m['name']} {_metric_text(m)}" for m in summary.get("metrics") or ()]
    return f"{name}: " + "; ".join(parts)


def eval_static_html(state: Mapping[str, Any], *, title: str = "") -> str:
    """The report for a saved notebook: the metrics, then the first ``MAX_EVAL_ROWS`` rows
    (a comparison: regressions first). Every value is escaped text."""
    summary = state.get("summary") or {}
    rows = list(state.get("rows") or ())
    compare = state.get("mode") == "compare"
    metrics = list(summary.get("metrics") or ())
    names = [str(m["name"]) for m in metrics]
    cell = 'style="padding:1px 8px;text-align:left;border-bottom:1px solid #8884"'
    head = f"<b>{esc(title)}</b> " if title else ""
    head += f'<div class="lfx-k">{esc(eval_text(state, title=title))}</div>'
    if compare:
        mrows = "".join(
            f"<tr><td {cell}>{esc(m['name'])}</td>"
            f"<td {cell}>{esc(_metric_text(m.get('a') or {}))}</td>"
            f"<td {cell}>{esc(_metric_text(m.get('b') or {}))}</td>"
            f"<td {cell}>{esc(_delta_text(m))}</td></tr>"
            for m in metrics
        )
        mhead = (
            f"<tr><th {cell}>metric</th><th {cell}>a</th><th {cell}>b</th>"
            f"<th {cell}>b − a [95% interval]</th></tr>"
        )
    else:
        mrows = "".join(
            f"<tr><td {cell}>{esc(m['name'])}</td><td {cell}>{esc(_metric_text(m))}</td></tr>"
            for m in metrics
        )
        mhead = f"<tr><th {cell}>metric</th><th {cell}>value [95% interval]</th></tr>"
    table = f'<table style="border-collapse:collapse">{mhead}{mrows}</table>'
    cols = ["case", "change" if compare else "status", *names, "output"]
    body = []
    for row in rows[:MAX_EVAL_ROWS]:
        if compare:
            scores = [
                f"{_score_cell(row['a'].get(n))} → {_score_cell(row['b'].get(n))}" for n in names
            ]
            values = [row["id"], row["change"], *scores, row.get("output_b", "")]
        else:
            scores = [_score_cell((row.get("scores") or {}).get(n)) for n in names]
            output = row.get("error") or row.get("output", "")
            values = [row["key"], row["status"], *scores, output]
        body.append(
            "<tr>" + "".join(f"<td {cell}>{esc(clip(str(v), 300))}</td>" for v in values) + "</tr>"
        )
    more = (
        f"<div>… {len(rows) - MAX_EVAL_ROWS} more rows</div>" if len(rows) > MAX_EVAL_ROWS else ""
    )
    cases = (
        '<table style="border-collapse:collapse;margin-top:6px"><tr>'
        + "".join(f"<th {cell}>{esc(c)}</th>" for c in cols)
        + "</tr>"
        + "".join(body)
        + "</table>"
    )
    return f'{CSS}<div class="lfx-fb lfx-eval-static">{head}{table}{cases}{more}</div>'
