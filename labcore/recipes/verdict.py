"""The one rule that turns measured numbers into a verdict on a claim: a group-sequential paired test.

A claim compares condition A with condition B over seeds, paired by seed (both sides share the data
order, the token mapping and the head's initialisation). It is of one of two kinds, fixed before anything
runs (:class:`ClaimTest`):

* a **difference**: A scores above B (``direction=+1``) or below it (``-1``); two-sided paired t-test of
  the per-seed differences;
* an **equivalence**: |A - B| < a margin stated with its reason; two one-sided tests (TOST).

The rule looks at the claim after :data:`LOOKS` pairs (3, then 5, then 8). Looking again after adding
seeds spends error: each look tests at the nominal level :data:`NOMINAL_ALPHA`, a constant (Pocock-type)
level calibrated by simulation so that the chance of any directional verdict under a true null, over all
three looks, stays at or below :data:`ALPHA` = 5 % (:func:`labcore.recipes.sequential_check.error_rates`
shows it; the tests run it). A claim decided at a look stops there; one still open gets more seeds, and one
open at the last look (or when the plan cannot grow) is **inconclusive**.

The learnt gate (:mod:`labcore.recipes.gate`): a look whose runs did not learn their task (the better side
of a difference, both sides of an equivalence, no higher than the task's floor plus the claim's smallest effect
of interest) tests nothing; a claim whose latest look fails it reads **not tested**, is counted apart and
leaves Holm's family.

Guards: a zero or tiny spread of the differences would give an interval of no width that "decides"
anything, so the spread is taken as at least the claim's :attr:`ClaimTest.resolution`; pairs are kept (only
seeds finished on both sides count, and a missing partner is named, never dropped to an unpaired test).
Many claims in one report: :func:`settle` runs Holm's step-down correction over a family (the paper's
headline claims; the lab's own questions apart) at every look. The words of a verdict come from here only;
reports never write their own.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from labcore.recipes import gate as gates
from labcore.recipes.gate import EFFECT, Gate

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
INCONCLUSIVE = "inconclusive"  # final: the last look (or the seeds the plan allows) did not decide it
OPEN = "open"  # not decided yet: the rule's next look will add seeds to it
NOT_MEASURED = "not measured"  # a side has no finished run yet: no verdict at all
# final: the runs did not learn their task (the learnt gate), so the comparison says nothing of the claim
NOT_TESTED = "not tested"
WORDS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, OPEN, NOT_MEASURED, NOT_TESTED)
DECIDED = (HOLDS, DOES_NOT_HOLD)

DIFFERENCE = "difference"
EQUIVALENCE = "equivalence"
KINDS = (DIFFERENCE, EQUIVALENCE)

ALPHA = 0.05  # the rule's overall false-positive rate under a true null, all looks together
LOOKS = (3, 5, 8)  # pairs of seeds at which the rule looks
# The per-look level that keeps three looks at n = 3, 5, 8 within ALPHA: a seeded simulation of 200,000 null
# sequences of paired t-tests gives 0.0505 at 0.020 and 0.0493 at 0.0195 (Pocock's normal-theory figure for
# three equal looks is 0.0221; the t-test's small samples and unequal looks move it).
NOMINAL_ALPHA = 0.0195
# The smallest spread of per-seed differences the rule believes, in the metric's units: a tenth of a point of
# accuracy is finer than any test set here resolves (the smallest, 300 examples, moves in steps of 0.0033)
RESOLUTION = 0.005


@dataclass(frozen=True)
class ClaimTest:
    """How a claim is decided, fixed before any seed runs."""

    kind: str = DIFFERENCE
    direction: int = 1  # difference: +1 claims a > b, -1 claims a < b
    margin: float = 0.0  # equivalence: the claim is |a - b| < margin (stated with its reason in the claim)
    resolution: float = RESOLUTION  # the spread of differences is taken as at least this (zero-spread guard)
    # the smallest effect of interest, in the metric's units: the height above the task's floor the learnt gate
    # asks of a claim on test scores (labcore.recipes.gate), and the effect the report's projections size seeds for
    effect: float = EFFECT

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown test kind {self.kind!r}; valid kinds: {', '.join(KINDS)}")
        if self.direction not in (1, -1):
            raise ValueError(f"direction must be +1 or -1, got {self.direction}")
        if self.kind == EQUIVALENCE and not self.margin > 0:
            raise ValueError("an equivalence test needs a margin above 0, stated before running")
        if not self.resolution > 0:
            raise ValueError("the resolution (the smallest spread believed) must be above 0")
        if not self.effect > 0:
            raise ValueError("the smallest effect of interest must be above 0")


@dataclass(frozen=True)
class Look:
    """The test of a claim on its first ``n`` pairs."""

    n: int
    difference: float  # mean of a - b over the pairs
    sd: float  # the spread used: the pairs' standard deviation, at least the test's resolution
    low: float  # the interval at the look's level: 1 - NOMINAL_ALPHA (difference), 1 - 2 x NOMINAL_ALPHA (TOST)
    high: float
    p: float  # the nominal p-value of the look's test
    outcome: str  # the word if this look decides: HOLDS or DOES_NOT_HOLD
    mean_a: float = math.nan  # each side's mean over the look's pairs
    mean_b: float = math.nan
    gate: str = ""  # why this look's runs cannot test the claim (labcore.recipes.gate); "": they can


def p_values(diffs: np.ndarray, test: ClaimTest, nominal: float = NOMINAL_ALPHA
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised over rows of ``diffs`` (sequences x pairs): (mean, sd, low, high, p, holds?) of each row.

    ``holds?`` is True where the outcome, if the look decides, is HOLDS (else DOES_NOT_HOLD)."""
    from scipy import stats

    diffs = np.atleast_2d(np.asarray(diffs, dtype=float))
    n = diffs.shape[1]
    mean = diffs.mean(axis=1)
    sd = np.maximum(diffs.std(axis=1, ddof=1) if n > 1 else np.zeros(len(diffs)), test.resolution)
    se = sd / math.sqrt(n)
    df = max(n - 1, 1)
    if test.kind == DIFFERENCE:
        half = stats.t.ppf(1 - nominal / 2, df) * se
        p = 2 * stats.t.sf(np.abs(mean) / se, df)
        holds = np.sign(mean) == test.direction
    else:
        half = stats.t.ppf(1 - nominal, df) * se
        # TOST: both one-sided tests reject |a - b| >= margin -> equivalent (the claim holds); the mirror test
        # (the difference lies beyond the margin, either side) decides that it does not hold
        p_equivalent = np.maximum(stats.t.sf((mean + test.margin) / se, df), stats.t.cdf((mean - test.margin) / se, df))
        p_beyond = np.minimum(1.0, 2 * np.minimum(stats.t.sf((mean - test.margin) / se, df),
                                                  stats.t.cdf((mean + test.margin) / se, df)))
        holds = p_equivalent <= p_beyond
        p = np.where(holds, p_equivalent, p_beyond)
    return mean, sd, mean - half, mean + half, p, holds


def pairs(values_a: Mapping[int, float], values_b: Mapping[int, float]) -> tuple[list[int], list[int], list[int]]:
    """(seeds finished on both sides in seed order, seeds of a without b, seeds of b without a)."""
    a, b = set(values_a), set(values_b)
    return sorted(a & b), sorted(a - b), sorted(b - a)


def looks_of(values_a: Mapping[int, float], values_b: Mapping[int, float], test: ClaimTest,
             looks: Sequence[int] = LOOKS, gate: Gate | None = None) -> list[Look]:
    """The claim's test at every look its finished pairs reach (the first n pairs in seed order), each with
    the learnt gate's reading of those pairs."""
    both, _, _ = pairs(values_a, values_b)
    diffs = np.array([values_a[s] - values_b[s] for s in both])
    out = []
    for n in looks:
        if len(diffs) < n:
            break
        mean, sd, low, high, p, holds = p_values(diffs[:n][None, :], test)
        out.append(Look(n, float(mean[0]), float(sd[0]), float(low[0]), float(high[0]), float(p[0]),
                        HOLDS if holds[0] else DOES_NOT_HOLD, _means(values_a, both[:n]),
                        _means(values_b, both[:n]),
                        gates.reason(gate, test.effect, test.kind == EQUIVALENCE, values_a, values_b, both[:n])))
    return out


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict with the numbers that decided it."""

    claim: str  # the claim's id in its recipe (with "/facet" where it is tested per facet)
    word: str  # one of WORDS
    a: str  # the condition claimed to be higher (direction +1), lower (-1) or equivalent
    b: str
    direction: int
    n_a: int  # finished seeds of each side
    n_b: int
    mean_a: float  # over the pairs the verdict used (all finished seeds where no pair exists)
    mean_b: float
    difference: float  # mean of the per-seed differences a - b at the deciding (or latest) look
    ci_low: float  # that look's interval
    ci_high: float
    paired: bool = True  # always: unpaired seeds are named in ``unpaired``, never tested
    metric: str = ""
    kind: str = DIFFERENCE
    margin: float = 0.0
    n: int = 0  # pairs at the deciding (or latest) look
    p_value: float = math.nan  # that look's nominal p
    decided_at: int = 0  # the look's n where the rule decided (0: not decided)
    headline: bool = True  # one of the paper's claims (False: a question the lab adds)
    holm: str = ""  # why Holm's correction kept a look from deciding, where it did
    # seeds finished on one side only; where a run failed, the sequential driver replaces its pair by a further seed
    unpaired: tuple[int, ...] = ()
    looks: tuple[Look, ...] = field(default=(), repr=False)
    test: ClaimTest = field(default=ClaimTest(), repr=False)
    can_grow: bool = True  # whether the plan may still add seeds (False: undecided means inconclusive)
    # the report's (condition, facet, part) of the steps the values came from, and their summed run time
    reads: tuple[tuple[str, Any, Any], ...] = ()
    cpu_s: float = 0.0
    pooled: str = ""  # a secondary pooled per-example test, in words (labcore.recipes.pooled); never the verdict
    # where the latest look's runs did not learn their task (the learnt gate, labcore.recipes.gate): why the claim
    # is not tested at this budget. An "equivalence" of two runs that learnt nothing says nothing of the claim, and
    # more seeds of the same budget would not change that: the verdict reads NOT_TESTED and leaves Holm's family.
    floor: str = ""
    # the claim's one counted verdict (its primary task, fixed in the recipe); False: a per-task row shown beside
    # it, settled in a family of its own and never counted or given seeds of its own
    primary: bool = True

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("test")
        return out

    @property
    def decided(self) -> bool:
        return self.word in DECIDED

    def claimed(self) -> str:
        if self.kind == EQUIVALENCE:
            return f"claimed |{self.a} - {self.b}| < {self.margin:g}"
        return f"claimed {self.a} {'>' if self.direction > 0 else '<'} {self.b}"

    def why(self) -> str:
        """The rule's reason for the word, in a few words ("stopped at n = 5: holds")."""
        if self.word == NOT_MEASURED:
            return "nothing to compare yet"
        if self.word == NOT_TESTED:
            return f"not tested at this budget: {self.floor}"
        if self.decided:
            return f"stopped at n = {self.decided_at}: {self.word}"
        nxt = next((n for n in LOOKS if n > self.n), None)
        if self.word == OPEN:
            return (f"open at n = {self.n}: more seeds (next look at n = {nxt})" if self.n
                    else f"waiting for {LOOKS[0]} pairs")
        if self.n >= LOOKS[-1]:
            return f"undecided at the last look (n = {self.n})"
        return f"undecided at n = {self.n}, and the plan adds no seeds" if self.n else "too few pairs for a look"

    def sentence(self) -> str:
        """The numbers behind the word, for the report (the word itself is :attr:`word`)."""
        if self.word == NOT_MEASURED:
            return f"{self.a}: {self.n_a} finished, {self.b}: {self.n_b} finished; nothing to compare yet"
        diff = f"{self.a} - {self.b} = {self.difference:+.3f}"
        parts = [self.claimed(), f"here {self.mean_a:.3f} vs {self.mean_b:.3f}"]
        if self.n:
            level = (1 - NOMINAL_ALPHA) if self.kind == DIFFERENCE else (1 - 2 * NOMINAL_ALPHA)
            parts.append(f"{diff}, {level:.1%} interval [{self.ci_low:+.3f}, {self.ci_high:+.3f}], "
                         f"p = {self.p_value:.3g} (paired, n = {self.n})")
        else:
            parts.append(f"{diff} ({min(self.n_a, self.n_b)} pairs: no look before {LOOKS[0]})")
        if self.unpaired:
            parts.append(f"seeds {', '.join(map(str, self.unpaired))} have no partner on the other side: left out "
                         f"of the paired test, never tested unpaired")
        if self.holm:
            parts.append(self.holm)
        return "; ".join(parts) + f" — {self.why()}"


def _means(values: Mapping[int, float], seeds: Sequence[int]) -> float:
    chosen = [values[s] for s in seeds] if seeds else list(values.values())
    return float(np.mean(chosen)) if chosen else math.nan


def _finite(values: Mapping[int, float]) -> dict[int, float]:
    return {int(k): float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))}


def measure(claim: str, a: str, b: str, values_a: Mapping[int, float], values_b: Mapping[int, float], *,
            test: ClaimTest = ClaimTest(), metric: str = "", headline: bool = True, can_grow: bool = True,
            gate: Gate | None = None, primary: bool = True) -> Verdict:
    """The claim's looks, not yet decided: :func:`settle` decides a family of them together. ``gate``: what the
    runs must reach before a look tests anything (None: no floor is known)."""
    va, vb = _finite(values_a), _finite(values_b)
    both, only_a, only_b = pairs(va, vb)
    looks = tuple(looks_of(va, vb, test, gate=gate))
    last = looks[-1] if looks else None
    used = both[:last.n] if last else both
    word = NOT_MEASURED if not va or not vb else (OPEN if can_grow else INCONCLUSIVE)
    diff = last.difference if last else (float(np.mean([va[s] - vb[s] for s in both])) if both else math.nan)
    return Verdict(claim, word, a, b, test.direction, len(va), len(vb), _means(va, used), _means(vb, used), diff,
                   last.low if last else math.nan, last.high if last else math.nan, True, metric, test.kind,
                   test.margin, last.n if last else 0, last.p if last else math.nan, 0, headline, "",
                   tuple(only_a + only_b), looks, test, can_grow, floor=last.gate if last else "",
                   primary=primary)


def _holm_pass(candidates: dict[int, float], m: int, alpha: float) -> set[int]:
    """Indices rejected by Holm's step-down procedure among ``m`` hypotheses (absent ones count as p = 1)."""
    rejected: set[int] = set()
    for rank, (index, p) in enumerate(sorted(candidates.items(), key=lambda kv: kv[1])):
        if p > alpha / (m - rank):
            break
        rejected.add(index)
    return rejected


def settle(verdicts: Sequence[Verdict], alpha: float = ALPHA, nominal: float = NOMINAL_ALPHA) -> list[Verdict]:
    """Decide a family of claims together, look by look, with Holm's correction over the family.

    At each look a claim's nominal p is put on the rule's overall scale (p x alpha / nominal: a look decides
    alone exactly where that is at most ``alpha``); Holm's step-down then runs over the family's claims, those
    decided at earlier looks keeping the p that decided them. A claim rejected at a look is decided there with
    that look's outcome; the others stay open (or inconclusive where the plan cannot grow or the last look
    has passed). A claim whose latest look fails the learnt gate (its ``floor``) is not tested: it leaves the
    family (Holm's m counts the others) and reads NOT_TESTED; a look that fails the gate tests nothing.
    Verdicts of several families: call once per family."""
    out = list(verdicts)
    m = sum(1 for v in out if not v.floor)
    decided: dict[int, float] = {}
    for round_, n in enumerate(LOOKS):
        ps = dict(decided)
        for i, v in enumerate(out):
            if i not in decided and len(v.looks) > round_ and not v.floor and not v.looks[round_].gate:
                ps[i] = min(1.0, v.looks[round_].p * alpha / nominal)
        for i in sorted(_holm_pass(ps, max(m, len(ps)), alpha) - set(decided)):
            look = out[i].looks[round_]
            decided[i] = ps[i]
            out[i] = replace(out[i], word=look.outcome, decided_at=n, n=n, difference=look.difference,
                             ci_low=look.low, ci_high=look.high, p_value=look.p, holm="", mean_a=look.mean_a,
                             mean_b=look.mean_b)
    for i, v in enumerate(out):
        if i in decided or v.word == NOT_MEASURED:
            continue
        if v.floor:
            out[i] = replace(v, word=NOT_TESTED, holm="")
            continue
        alone = next((look for look in v.looks if look.p <= nominal and not look.gate), None)
        note = (f"alone it would stop at n = {alone.n}; Holm's correction over the {m} tested claims of its family "
                f"keeps it open" if alone and m > 1 else "")
        final = not v.can_grow or v.n >= LOOKS[-1]
        out[i] = replace(v, word=INCONCLUSIVE if final else OPEN, holm=note)
    return out


def decide(claim: str, a: str, b: str, values_a: Mapping[int, float], values_b: Mapping[int, float], *,
           direction: int = 1, metric: str = "", test: ClaimTest | None = None, can_grow: bool = True) -> Verdict:
    """The verdict on one claim alone (a family of one): "``a`` scores above ``b``" (``direction=-1``: below),
    or the ``test`` given; values keyed by seed."""
    chosen = test or ClaimTest(direction=direction)
    return settle([measure(claim, a, b, values_a, values_b, test=chosen, metric=metric, can_grow=can_grow)])[0]


def difference_interval(a: Mapping[int, float], b: Mapping[int, float],
                        confidence: float = 0.95) -> tuple[float, float, float, bool]:
    """(mean difference, low, high, paired) of a - b; values keyed by seed: a descriptive interval for tables
    (the atlas's cells), not a verdict. Paired where both sides have the same seeds, Welch otherwise; NaN
    bounds below two values."""
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


__all__ = ["ALPHA", "ClaimTest", "DECIDED", "DIFFERENCE", "DOES_NOT_HOLD", "EQUIVALENCE", "HOLDS", "INCONCLUSIVE",
           "KINDS", "LOOKS", "Look", "NOMINAL_ALPHA", "NOT_MEASURED", "NOT_TESTED", "OPEN", "RESOLUTION", "Verdict",
           "WORDS", "decide", "difference_interval", "looks_of", "measure", "p_values", "pairs", "settle"]
