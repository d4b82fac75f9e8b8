"""Equal tuning effort for every arm of a recipe: the same small grid of learning rates, chosen on validation.

An arm that is handed a rate chosen for the other arm is handicapped: the lab's quick rate was tuned on
pretrained splice, while a model trained from scratch often wants another (Kao & Lee grid-searched the rate
for their scratch model). Where a recipe's budget names a grid (:attr:`labcore.recipes.base.Recipe.lr_grids`),
each arm (a condition on a facet and part of the paper) first runs once per rate on a seed of its own,
:data:`TUNE_SEED`, never one of the verdicts' seeds; the rate with the best validation metric (the smaller
rate on a tie) is then every seed's rate for that arm. The tuning runs are a stage of the plan like any other,
so the report shows them and the rates chosen, and every choice can be recomputed from the records.

Only arms that nothing else builds on are tuned (a ``run:`` body another step freezes keeps its rate: its key
is already part of the later steps' specs).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Mapping, Sequence

import pandas as pd

from labcore.recipes.base import Plan, Step
from labcore.recipes.keys import mentions
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec

TUNE_SEED = 1000  # the tuning runs' seed: apart from the verdicts' seeds (0, 1, 2, ...)
GRID_PART = "learning-rate grid"
Arm = tuple[str, str, str]  # (condition, facet, part)


def _arm(step: Step) -> Arm:
    return step.condition, step.facet, step.part


@functools.lru_cache(maxsize=64)  # a page asks at every refresh, and the test of what builds on what is quadratic
def tunable(plan: Plan) -> tuple[Arm, ...]:
    """The arms whose runs may take a tuned rate: run steps of the last stage that no step builds on."""
    steps = plan.steps
    out: list[Arm] = []
    for step in plan.stages[-1] if plan.stages else ():
        if isinstance(step.spec, RunSpec) and _arm(step) not in out \
                and not any(mentions(other.spec, step) for other in steps if other is not step):
            out.append(_arm(step))
    return tuple(out)


def grid_condition(condition: str, rate: float) -> str:
    return f"{condition} @ lr {rate:g}"


def grid_stage(plan: Plan, rates: Sequence[float]) -> tuple[Step, ...]:
    """One run per arm and rate, on :data:`TUNE_SEED` (the arm's first step with its seed and rate changed)."""
    first: dict[Arm, Step] = {}
    for step in plan.stages[-1]:
        first.setdefault(_arm(step), step)
    out = []
    for arm in tunable(plan):
        step = first[arm]
        for rate in rates:
            spec = step.spec.replace(lr=float(rate), seed=TUNE_SEED,
                                     **({"mapping_seed": TUNE_SEED} if step.spec.mapping == "random" else {}))
            out.append(Step(spec, grid_condition(step.condition, rate), TUNE_SEED, GRID_PART,
                            f"{step.facet}|{step.part}"))
    return tuple(out)


def _validation(result: Any) -> float | None:
    if isinstance(result, RunRecord) and result.status == "done" and not result.untrained:
        value = result.validation.get(result.metric)
        return float(value) if value is not None and math.isfinite(float(value)) else None
    return None


def chosen_rates(plan: Plan, rates: Sequence[float], results: Mapping[Step, Any]) -> dict[Arm, float]:
    """Arm -> the rate whose tuning run scored best on validation (the smaller on a tie); arms whose tuning runs
    all failed keep no choice (their steps keep the budget's rate)."""
    grid = grid_stage(plan, rates)
    out: dict[Arm, float] = {}
    for arm in tunable(plan):
        scored = [(v, -rate, rate) for rate in rates
                  if (v := _validation(results.get(_grid_step(grid, arm, rate)))) is not None]
        if scored:
            out[arm] = max(scored)[2]
    return out


def _grid_step(grid: Sequence[Step], arm: Arm, rate: float) -> Step | None:
    name, facet = grid_condition(arm[0], rate), f"{arm[1]}|{arm[2]}"
    return next((s for s in grid if s.condition == name and s.facet == facet), None)


def with_rates(plan: Plan, rates: Sequence[float], choices: Mapping[Arm, float]) -> Plan:
    """The plan with the grid as its first stage and each tuned arm's steps at the rate chosen for it."""
    def tuned(step: Step) -> Step:
        rate = choices.get(_arm(step))
        return dataclasses.replace(step, spec=step.spec.replace(lr=rate)) if rate is not None else step

    last = tuple(tuned(step) for step in plan.stages[-1])
    return dataclasses.replace(plan, stages=(grid_stage(plan, rates),) + plan.stages[:-1] + (last,))


def rate_table(plan: Plan, rates: Sequence[float], results: Mapping[Step, Any]) -> pd.DataFrame:
    """Arms as rows, rates as columns: each tuning run's validation metric, and the rate chosen."""
    grid = grid_stage(plan, rates)
    choices = chosen_rates(plan, rates, results)
    rows = {}
    for arm in tunable(plan):
        row = {f"lr {rate:g}": _validation(results.get(_grid_step(grid, arm, rate))) for rate in rates}
        row["chosen"] = f"{choices[arm]:g}" if arm in choices else "–"
        rows[" / ".join(a for a in arm if a)] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "arm"
    return frame


__all__ = ["GRID_PART", "TUNE_SEED", "chosen_rates", "grid_condition", "grid_stage", "rate_table", "tunable",
           "with_rates"]
