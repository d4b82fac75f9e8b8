"""The learnt gate: whether a comparison's runs learnt their task well enough for the claim to be tested at all.

A run that scores at its task's floor (the majority class, chance, bit memory's 0.75 from copying the visible
bits) has learnt nothing, and a comparison of two such runs says nothing about transfer, whichever way it
goes. So before a claim's look is tested, its runs must clear the floor by the claim's smallest effect of
interest (:attr:`labcore.recipes.verdict.ClaimTest.effect`, 0.05 of accuracy unless the claim says otherwise):

* a **difference** (the compared values are test scores): its better side's mean over the look's pairs;
* an **equivalence**: both sides' means (two runs at the floor are "equivalent" whatever the claim);
* a claim on **another measure** (steps to converge, a training loss, a similarity, a correlation): every
  condition it reads, by the mean test score of its runs over the look's seeds (``rule=EVERY``); a claim on
  gains in test score (FPT's parameter ablation) needs its best-scoring condition above the floor (``BEST``).

A claim that fails the gate reads **not tested**: it is counted apart and leaves Holm's family. The gate reads
the levels of the sides, never which way they differ, and it is fixed by rule before any run: the floor comes
from the task (:func:`labcore.recipes.report.step_floor`), the height from the claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

# The smallest effect of interest in accuracy, and so the height above its floor a run must reach to have
# learnt its task: five points, about the gaps the papers report (FPT's ListOps 38.4 vs 34.3, Kao's splice
# 96.4 vs 95.3 is below it) and 15 test examples of the smallest test set here (300)
EFFECT = 0.05

SIDES, EVERY, BEST = "sides", "every", "best"
RULES = (SIDES, EVERY, BEST)


@dataclass(frozen=True)
class Level:
    """One condition a claim reads, with its task's floor: its runs' test scores by seed."""

    name: str
    floor: float
    how: str  # what the floor is ("the majority class of dna-splice", "chance, for bit accuracy")
    scores: Mapping[int, float]


@dataclass(frozen=True)
class Gate:
    """What a claim's runs must reach before it is tested (see the module's text).

    ``rule=SIDES``: the compared values are themselves scores over ``floor`` (``how`` says what it is);
    ``EVERY`` / ``BEST``: the ``levels`` of the conditions read, each over its own floor."""

    rule: str = SIDES
    floor: float = float("nan")
    how: str = ""
    levels: tuple[Level, ...] = ()

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown gate rule {self.rule!r}; valid rules: {', '.join(RULES)}")


def passes(mean_a: np.ndarray, mean_b: np.ndarray, floor: float, effect: float, both: bool) -> np.ndarray:
    """Vectorised gate of the SIDES rule: True where the better side (``both``: each side) clears the floor by
    ``effect``. What the Monte-Carlo check of the rule runs, as :func:`reason` does."""
    level = np.minimum(mean_a, mean_b) if both else np.maximum(mean_a, mean_b)
    return level >= floor + effect - 1e-12


def _mean(scores: Mapping[int, float], seeds: Sequence[int]) -> float:
    chosen = [scores[s] for s in seeds if s in scores] or list(scores.values())
    return float(np.mean(chosen)) if chosen else float("nan")


def reason(gate: Gate | None, effect: float, both: bool, values_a: Mapping[int, float],
           values_b: Mapping[int, float], seeds: Sequence[int]) -> str:
    """Why the look on ``seeds`` cannot test its claim ("" where it can, or where no floor is known)."""
    if gate is None:
        return ""
    if gate.rule == SIDES:
        if gate.floor != gate.floor:  # no floor known: nothing to hold the sides against
            return ""
        means = (_mean(values_a, seeds), _mean(values_b, seeds))
        if bool(passes(np.array(means[0]), np.array(means[1]), gate.floor, effect, both)):
            return ""
        which = "a side did not learn the task" if both else "neither side learnt the task"
        level = min(means) if both else max(means)
        return (f"{which}: means {means[0]:.3f} and {means[1]:.3f}, {'the lower' if both else 'the better'} "
                f"{level:.3f} below {gate.floor + effect:.3f}, the floor of {gate.floor:.3f} ({gate.how}) + {effect:g}")
    levels = [(level, _mean(level.scores, seeds)) for level in gate.levels if level.scores]
    if not levels:
        return ""
    short = [(level, m) for level, m in levels if not m >= level.floor + effect]
    if gate.rule == BEST and len(short) < len(levels):
        return ""
    if not short:
        return ""
    named = "; ".join(f"{level.name} {m:.3f} against {level.floor:.3f} ({level.how})" for level, m in short)
    lead = "no run it reads learnt its task" if gate.rule == BEST else "not every run it reads learnt its task"
    return f"{lead} (the floor + {effect:g} by test score): {named}"


__all__ = ["BEST", "EFFECT", "EVERY", "Gate", "Level", "RULES", "SIDES", "passes", "reason"]
