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

from labcore.recipes.verdict import LOOKS, NOMINAL_ALPHA, ClaimTest, p_values


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


__all__ = ["Characteristics", "simulate"]
