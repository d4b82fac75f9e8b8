"""The sequential rule's operating characteristics by simulation: how often it decides, and which way.

The rule (:mod:`labcore.recipes.verdict`) is only trusted after checking it here: under a true null its
chance of any directional verdict over all looks must stay at or below 5 %, and it must find a real effect
of a size the papers report. The simulation draws per-seed differences from a normal distribution with a
given true difference and spread and runs exactly the rule's looks on them (one claim: Holm's correction over
a family of one is the nominal level itself), vectorised over many draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labcore.recipes.gate import passes
from labcore.recipes.verdict import EQUIVALENCE, LOOKS, NOMINAL_ALPHA, ClaimTest, p_values


@dataclass(frozen=True)
class Characteristics:
    draws: int
    holds: float  # share of sequences whose verdict was "holds"
    does_not_hold: float
    by_look: tuple[tuple[int, float], ...]  # (n, share decided by then, either way)
    mean_pairs: float  # the expected number of pairs run before the rule stops (the last look if undecided)

    @property
    def decided(self) -> float:
        return self.holds + self.does_not_hold

    def monte_carlo_error(self, rate: float) -> float:
        """The standard error of a simulated rate near ``rate``."""
        return math.sqrt(rate * (1 - rate) / self.draws)


def simulate(test: ClaimTest, true_difference: float, sd: float, *, draws: int = 20_000, seed: int = 0,
             nominal: float = NOMINAL_ALPHA) -> Characteristics:
    """Run the rule on ``draws`` simulated claims whose per-seed differences are N(true_difference, sd)."""
    rng = np.random.default_rng(seed)
    diffs = rng.normal(true_difference, sd, size=(draws, LOOKS[-1]))
    outcome = np.zeros(draws, dtype=np.int8)  # 0 open, 1 holds, -1 does not hold
    stopped = np.full(draws, LOOKS[-1])
    by_look = []
    for n in LOOKS:
        *_, p, holds = p_values(diffs[:, :n], test, nominal)
        newly = (outcome == 0) & (p <= nominal)
        outcome[newly] = np.where(holds[newly], 1, -1)
        stopped[newly] = n
        by_look.append((n, float(np.mean(outcome != 0))))
    return Characteristics(draws, float(np.mean(outcome == 1)), float(np.mean(outcome == -1)), tuple(by_look),
                           float(stopped.mean()))


@dataclass(frozen=True)
class Gated:
    """The rule with the learnt gate in front, by simulation: what share of claims is decided either way, and
    what share is not tested (the gate stopped it at a look before any decision)."""

    draws: int
    holds: float
    does_not_hold: float
    not_tested: float

    @property
    def decided(self) -> float:
        return self.holds + self.does_not_hold

    def monte_carlo_error(self, rate: float) -> float:
        return math.sqrt(rate * (1 - rate) / self.draws)


def simulate_gated(test: ClaimTest, true_difference: float, sd: float, *, floor: float, level: float,
                   level_sd: float, seed_sd: float = 0.02, draws: int = 20_000, seed: int = 0,
                   nominal: float = NOMINAL_ALPHA) -> Gated:
    """The rule on ``draws`` claims whose arms' score levels are drawn around a floor, so the gate acts: side b's
    level is N(``level``, ``level_sd``) per claim, side a's that plus ``true_difference``; each seed adds a shared
    N(0, ``seed_sd``) to both sides and the sides' own noise makes the per-seed differences N(true_difference,
    ``sd``). At each look the gate reads the sides' means over the look's pairs: a claim failing it is not
    tested and stops there (the driver gives it no more seeds); one passing it is tested at the look's level."""
    rng = np.random.default_rng(seed)
    base = rng.normal(level, level_sd, size=(draws, 1)) + rng.normal(0.0, seed_sd, size=(draws, LOOKS[-1]))
    noise = rng.normal(0.0, sd / math.sqrt(2), size=(2, draws, LOOKS[-1]))
    a, b = base + true_difference + noise[0], base + noise[1]
    outcome = np.zeros(draws, dtype=np.int8)  # 0 open, 1 holds, -1 does not hold, 2 not tested
    for n in LOOKS:
        *_, p, holds = p_values(a[:, :n] - b[:, :n], test, nominal)
        open_ = outcome == 0
        learnt = passes(a[:, :n].mean(axis=1), b[:, :n].mean(axis=1), floor, test.effect, test.kind == EQUIVALENCE)
        outcome[open_ & ~learnt] = 2
        newly = open_ & learnt & (p <= nominal)
        outcome[newly] = np.where(holds[newly], 1, -1)
    return Gated(draws, float(np.mean(outcome == 1)), float(np.mean(outcome == -1)), float(np.mean(outcome == 2)))


__all__ = ["Characteristics", "Gated", "simulate", "simulate_gated"]
