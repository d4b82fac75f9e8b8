"""The one rule that turns measured numbers into a verdict on a paper's claim.

A claim says that condition A scores above (or below) condition B. Over the seeds of a recipe we have
A's and B's values; the verdict looks at the 95 % t-interval of the difference A - B:

* **holds**: the interval excludes 0 on the side the paper claims;
* **does not hold**: the interval excludes 0 on the other side;
* **inconclusive**: the interval covers 0 (or there are fewer than two seeds, so no interval exists).

Where both sides have the same seeds the differences are paired by seed (the same data order, mapping
and head initialisation on both sides; scipy's ``ttest_rel``), otherwise Welch's unequal-variance
interval (``ttest_ind(equal_var=False)``). The words of a verdict come from :func:`decide` only; reports
never write their own.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
INCONCLUSIVE = "inconclusive"
NOT_MEASURED = "not measured"  # a side has no finished run yet: no verdict at all
WORDS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_MEASURED)
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict with the numbers that decided it."""

    claim: str  # the claim's id in its recipe
    word: str  # one of WORDS
    a: str  # the condition claimed to be higher (direction +1) or lower (-1)
    b: str
    direction: int  # +1: the paper claims a > b; -1: a < b
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    difference: float  # mean of a - b (paired: the mean of the per-seed differences)
    ci_low: float
    ci_high: float
    paired: bool
    metric: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sentence(self) -> str:
        """The numbers behind the word, for the report (the word itself is :attr:`word`)."""
        if self.word == NOT_MEASURED:
            return f"{self.a}: {self.n_a} finished, {self.b}: {self.n_b} finished; nothing to compare yet"
        relation = ">" if self.direction > 0 else "<"
        diff = f"{self.a} - {self.b} = {self.difference:+.3f}"
        if math.isnan(self.ci_low):
            why = f"n = {min(self.n_a, self.n_b)}: no interval from fewer than two seeds"
            return f"claimed {self.a} {relation} {self.b}; {diff} ({why})"
        how = "paired by seed" if self.paired else "Welch"
        return (f"claimed {self.a} {relation} {self.b}; {diff}, 95 % interval [{self.ci_low:+.3f}, {self.ci_high:+.3f}] "
                f"({how}, n = {self.n_a} and {self.n_b})")


def _finite(values: Mapping[int, float]) -> dict[int, float]:
    return {int(k): float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))}


def difference_interval(a: Mapping[int, float], b: Mapping[int, float],
                        confidence: float = CONFIDENCE) -> tuple[float, float, float, bool]:
    """(mean difference, low, high, paired) of a - b; values keyed by seed. NaN bounds below two values."""
    from scipy import stats

    paired = len(a) >= 2 and set(a) == set(b)
    if paired:
        seeds = sorted(a)
        diffs = np.array([a[s] - b[s] for s in seeds])
        mean = float(diffs.mean())
        if np.ptp(diffs) == 0:  # no spread: the t-interval is the point itself
            return mean, mean, mean, True
        ci = stats.ttest_rel([a[s] for s in seeds], [b[s] for s in seeds]).confidence_interval(confidence)
        return mean, float(ci.low), float(ci.high), True
    xa, xb = np.array(list(a.values())), np.array(list(b.values()))
    if not len(xa) or not len(xb):
        return math.nan, math.nan, math.nan, False
    mean = float(xa.mean() - xb.mean())
    if len(xa) < 2 or len(xb) < 2:
        return mean, math.nan, math.nan, False
    if np.ptp(xa) == 0 and np.ptp(xb) == 0:
        return mean, mean, mean, False
    ci = stats.ttest_ind(xa, xb, equal_var=False).confidence_interval(confidence)
    return mean, float(ci.low), float(ci.high), False


def decide(claim: str, a: str, b: str, values_a: Mapping[int, float], values_b: Mapping[int, float], *,
           direction: int = 1, metric: str = "") -> Verdict:
    """The verdict on "``a`` scores above ``b``" (``direction=-1``: below), values keyed by seed."""
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1, got {direction}")
    va, vb = _finite(values_a), _finite(values_b)
    mean_a = float(np.mean(list(va.values()))) if va else math.nan
    mean_b = float(np.mean(list(vb.values()))) if vb else math.nan
    if not va or not vb:
        return Verdict(claim, NOT_MEASURED, a, b, direction, len(va), len(vb), mean_a, mean_b, math.nan, math.nan,
                       math.nan, False, metric)
    diff, low, high, paired = difference_interval(va, vb)
    if math.isnan(low) or low <= 0 <= high:
        word = INCONCLUSIVE
    elif (low > 0) == (direction > 0):
        word = HOLDS
    else:
        word = DOES_NOT_HOLD
    return Verdict(claim, word, a, b, direction, len(va), len(vb), mean_a, mean_b, diff, low, high, paired, metric)


__all__ = ["CONFIDENCE", "DOES_NOT_HOLD", "HOLDS", "INCONCLUSIVE", "NOT_MEASURED", "Verdict", "WORDS", "decide",
           "difference_interval"]
