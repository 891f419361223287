"""``lf.eval.compare(a, b)``: what changed between two evaluation runs of the same cases.

Cases are matched by id. Per case, each metric's score is its mean over the case's scored
repeats in each run; the case ``change`` is ``regressed`` (some metric went down, none up),
``improved``, ``mixed`` (some down, some up), ``same``, ``added`` (only in ``b``) or
``removed`` (only in ``a``). ``cases`` lists regressions first (then mixed, improved,
removed, added, and unchanged cases last), the largest drop first within a group.

Per metric, ``metrics[name]`` gives both runs' aggregates and the paired difference
``b - a`` over the cases both runs scored, with its 95 % interval; ``beyond_noise`` is True
when that interval excludes 0 (a paired z-test at the 5 % level: ``stats.paired_difference``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..jsonable import walk
from .report import Metric, Report, finite_or_none, report_view
from .stats import Interval, paired_difference

__all__ = ["CaseDelta", "Comparison", "MetricDelta", "compare"]

Change = Literal["regressed", "mixed", "improved", "same", "removed", "added"]
_ORDER: dict[str, int] = {
    "regressed": 0,
    "mixed": 1,
    "improved": 2,
    "removed": 3,
    "added": 4,
    "same": 5,
}
PAIRED_TEST = "paired difference of per-case scores, 95% normal interval (paired z-test)"


@dataclass(frozen=True, slots=True)
class CaseDelta:
    """One case in both runs: per metric ``(score in a, score in b)`` (``None`` where that
    run has no score), the ``change``, and both runs' outputs and trace node ids (the first
    repeat's)."""

    case_id: str
    change: Change
    scores: Mapping[str, tuple[float | None, float | None]]
    output_a: Any = None
    output_b: Any = None
    node_a: str | None = None
    node_b: str | None = None
    inputs: Any = None

    @property
    def deltas(self) -> dict[str, float]:
        """``b - a`` per metric both runs scored."""
        return {m: b - a for m, (a, b) in self.scores.items() if a is not None and b is not None}

    @property
    def worst(self) -> float:
        return min(self.deltas.values(), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "change": self.change,
            "scores": {m: list(v) for m, v in self.scores.items()},
            "output_a": walk(self.output_a),
            "output_b": walk(self.output_b),
            "node_a": self.node_a,
            "node_b": self.node_b,
            "inputs": walk(self.inputs),
        }


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """One metric in both runs and the paired difference ``b - a`` (see the module)."""

    name: str
    a: Metric | None
    b: Metric | None
    difference: Interval
    beyond_noise: bool
    test: str = PAIRED_TEST

    def __str__(self) -> str:
        d = self.difference
        if d.n == 0:
            return f"{self.name}: no case scored in both runs"
        verdict = "beyond noise" if self.beyond_noise else "within noise"
        low = "-inf" if d.low == float("-inf") else f"{d.low:+.3g}"
        high = "inf" if d.high == float("inf") else f"{d.high:+.3g}"
        return f"{self.name}: {d.value:+.3g} [{low}, {high}] over {d.n} cases, {verdict}"

    def to_json(self) -> dict[str, Any]:
        d = self.difference
        return {
            "name": self.name,
            "a": None if self.a is None else self.a.to_json(),
            "b": None if self.b is None else self.b.to_json(),
            "delta": finite_or_none(d.value),
            "low": finite_or_none(d.low),
            "high": finite_or_none(d.high),
            "n": d.n,
            "beyond_noise": self.beyond_noise,
            "test": self.test,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """``compare``'s answer: ``cases`` (regressions first) and ``metrics`` by name."""

    a: Report
    b: Report
    cases: list[CaseDelta]
    metrics: dict[str, MetricDelta] = field(default_factory=dict)

    @property
    def regressions(self) -> list[CaseDelta]:
        return [c for c in self.cases if c.change in ("regressed", "mixed")]

    @property
    def improvements(self) -> list[CaseDelta]:
        return [c for c in self.cases if c.change in ("improved", "mixed")]

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.cases:
            counts[c.change] = counts.get(c.change, 0) + 1
        head = ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda x: _ORDER[x[0]]))
        names = f"{self.a.name or 'a'} → {self.b.name or 'b'}"
        return "\n".join(
            [f"Comparison {names}: {head}", *(f"  {m}" for m in self.metrics.values())]
        )

    def __repr__(self) -> str:
        return self.summary()

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a.name,
            "b": self.b.name,
            "metrics": [m.to_json() for m in self.metrics.values()],
            "cases": [c.to_json() for c in self.cases],
        }

    def widget(self) -> Any:
        """The compare view (see ``Report.widget``)."""
        return report_view(self)

    def _ipython_display_(self) -> None:
        try:
            view = self.widget()
        except ImportError:
            print(self.summary())
            return
        from IPython.display import display

        display(view)  # type: ignore[no-untyped-call]


def _change(scores: Mapping[str, tuple[float | None, float | None]], eps: float) -> Change:
    down = up = False
    for a, b in scores.values():
        if a is None or b is None:
            continue
        down = down or b < a - eps
        up = up or b > a + eps
    if down and up:
        return "mixed"
    return "regressed" if down else "improved" if up else "same"


def compare(a: Report, b: Report, *, eps: float = 1e-9) -> Comparison:
    """Compare run ``b`` against the baseline ``a`` (see the module). A score change of at
    most ``eps`` counts as no change."""
    sa, sb = a.case_scores(), b.case_scores()
    first_a = {r.case.id: r for r in reversed(a.results)}
    first_b = {r.case.id: r for r in reversed(b.results)}
    names = list(dict.fromkeys([*a.metrics, *b.metrics]))
    ids = list(dict.fromkeys([*(r.case.id for r in a.results), *(r.case.id for r in b.results)]))
    deltas = []
    for cid in ids:
        ra, rb = first_a.get(cid), first_b.get(cid)
        pa, pb = sa.get(cid or "", {}), sb.get(cid or "", {})
        scores = {m: (pa.get(m), pb.get(m)) for m in names if m in pa or m in pb}
        change: Change = (
            "added" if ra is None else "removed" if rb is None else _change(scores, eps)
        )
        source = rb or ra
        deltas.append(
            CaseDelta(
                cid or "",
                change,
                scores,
                None if ra is None else ra.output,
                None if rb is None else rb.output,
                None if ra is None else ra.node_id,
                None if rb is None else rb.node_id,
                None if source is None else source.case.inputs,
            )
        )
    deltas.sort(key=lambda d: (_ORDER[d.change], d.worst))
    metrics = {}
    for m in names:
        pairs = [(pa[m], sb[cid][m]) for cid, pa in sa.items() if m in pa and m in sb.get(cid, {})]
        diff = paired_difference(pairs)
        metrics[m] = MetricDelta(
            m, a.metrics.get(m), b.metrics.get(m), diff, diff.n > 1 and diff.excludes(0.0)
        )
    return Comparison(a, b, deltas, metrics)
