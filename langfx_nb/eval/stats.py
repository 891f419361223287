"""The statistics an evaluation report shows: intervals, standard errors, a paired test.

- A pass rate ``k/n`` is shown with its **Wilson score interval** (95 % unless ``z`` says
  otherwise): unlike ``p ± z·sqrt(p(1-p)/n)`` it stays inside [0, 1] and is not empty at
  0 % or 100 %.
- A mean score is shown with its **standard error** ``s/sqrt(n)`` (sample standard
  deviation) and the normal interval ``mean ± z·se``.
- ``paired_difference`` is what ``lf.eval.compare`` uses to say whether two runs differ on
  a metric beyond noise: over the cases both runs scored, the mean of the per-case
  differences ``b - a`` with its standard error; the difference is *beyond noise* when its
  95 % normal interval excludes 0 (a paired z-test at the 5 % level; for pass/fail scores
  this is the large-sample form of McNemar's test). Pairing by case removes the spread
  between easy and hard cases, so it detects smaller changes than comparing two
  independent intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Z95", "Interval", "mean_interval", "paired_difference", "wilson"]

Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate with its interval: ``value`` in [``low``, ``high``] from ``n`` values;
    ``se`` is the standard error (``None`` for a Wilson interval or fewer than 2 values)."""

    value: float
    low: float
    high: float
    n: int
    se: float | None = None

    def excludes(self, x: float) -> bool:
        return x < self.low or x > self.high


def wilson(k: int, n: int, z: float = Z95) -> Interval:
    """The Wilson score interval of ``k`` passes in ``n`` trials (n = 0: [0, 1])."""
    if n <= 0:
        return Interval(math.nan, 0.0, 1.0, 0)
    if not 0 <= k <= n:
        raise ValueError(f"{k} passes in {n} trials")
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n)


def mean_interval(values: Sequence[float], z: float = Z95) -> Interval:
    """The mean with its standard error and ``mean ± z·se`` (one value: no spread known,
    the interval is infinite; none: NaN)."""
    n = len(values)
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, 0)
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, -math.inf, math.inf, 1)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    se = math.sqrt(var / n)
    return Interval(mean, mean - z * se, mean + z * se, n, se)


def paired_difference(pairs: Sequence[tuple[float, float]], z: float = Z95) -> Interval:
    """Mean of ``b - a`` over ``(a, b)`` pairs with its normal interval (see the module).

    With identical differences (e.g. every case moved by the same amount) the spread is 0
    and the interval is that one point."""
    return mean_interval([b - a for a, b in pairs], z)
