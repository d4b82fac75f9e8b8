"""What a recipe is: a paper's headline experiment as a plan of job specs and a pure report builder.

A recipe's :meth:`Recipe.plan` turns a budget (``quick`` on a 2-core CPU, ``standard``, ``paper`` on a GPU)
and the seeds into a :class:`Plan`: stages of :class:`Step` s, each a job spec of any registered kind
(runs, pretrainings, analyses) with the coordinates the report reads it by. A stage is submitted once
every earlier stage has finished: a fine-tune of a ``lab:`` model needs its pretraining done, a frozen run
on a ``run:`` body needs that run. Budgets change sizes and counts, never the plan's shape; what a budget
leaves out of the paper's experiment is listed in :attr:`Plan.cuts`.

:meth:`Recipe.report` is a pure function of the steps and their finished results (see
:mod:`labcore.recipes.report`): tables, Plotly figures and one verdict per claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from labcore.errors import LabError

BUDGETS = ("quick", "standard", "paper")
BUDGET_NOTES = {
    "quick": "a few CPU minutes per run on this 2-core machine: short runs, few seeds, the paper's shape cut down",
    "standard": "the runs of the lab's standard budget: longer, with early stopping; an hour or more on a CPU",
    "paper": "the papers' own hyper-parameters and sizes: for a GPU",
}


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, tested by comparing condition ``a`` with ``b`` (``a`` higher: direction +1)."""

    id: str
    text: str  # the claim in one sentence, as the paper makes it
    section: str  # where the paper makes it ("§3.2, fig. 2")


@dataclass(frozen=True)
class Step:
    """One job of a recipe and where its result goes in the report."""

    spec: Any  # a job spec of a registered kind (RunSpec, PretrainSpec, an analysis spec)
    condition: str  # the report's name for what this job measures ("pretrained", "random", "reemb")
    seed: int = 0  # which repeat it is: the verdicts pair conditions by this
    part: str = ""  # which table or figure of the paper it belongs to ("table 6", "fig. 3")
    facet: str = ""  # the column it sits in (a discipline, a training-set size, a task)


@dataclass(frozen=True)
class Plan:
    recipe: str
    budget: str
    seeds: tuple[int, ...]
    stages: tuple[tuple[Step, ...], ...]
    cuts: tuple[str, ...] = ()  # what this budget leaves out of the paper's experiment, in words
    # the name of an ``adjust`` every spec went through beyond the budget's (TRANSFERLAB_RECIPE_ADJUST):
    # its jobs are other jobs, so they join a group of their own
    adjusted: str = ""

    @property
    def steps(self) -> list[Step]:
        return [step for stage in self.stages for step in stage]

    @property
    def group(self) -> str:
        """The store group its jobs join (stable: running a recipe twice serves the finished jobs)."""
        return (f"recipe:{self.recipe}:{self.budget}:seeds=" + ",".join(map(str, self.seeds))
                + (f":{self.adjusted}" if self.adjusted else ""))


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    paper: str  # key of labcore.demos.PAPERS
    claims: tuple[Claim, ...]
    # (budget, seeds, adjust) -> plan. The planner passes every spec it builds through ``adjust`` before any
    # other spec refers to it (a ``run:`` body, a ``lab:`` name), so a test can shrink a whole plan.
    planner: Callable[[str, tuple[int, ...], Callable[[Any], Any]], Plan]
    reporter: Callable[[Plan, Mapping[Step, Any]], Any]  # (plan, step -> result or None) -> Report
    default_seeds: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: {"quick": (0, 1, 2),
                                                                                   "standard": (0, 1, 2),
                                                                                   "paper": (0, 1, 2, 3, 4)})

    def claim(self, claim_id: str) -> Claim:
        for claim in self.claims:
            if claim.id == claim_id:
                return claim
        raise LabError(f"recipe {self.name} has no claim {claim_id!r}; its claims: "
                       f"{', '.join(c.id for c in self.claims)}")

    # run time of one step on this machine before any has been measured (the quick budget's typical run)
    prior_step_s: float = 60.0

    def prior_s(self, budget: str) -> float:
        """Seconds one step of ``budget`` is expected to take before any is measured here: the recipe's
        measured quick-budget figure for ``quick``; NaN for the longer budgets, whose steps take an unknown
        multiple of it until one of them has run on this machine (a guess would pass for a measurement)."""
        return self.prior_step_s if budget == "quick" else math.nan

    def plan(self, budget: str = "quick", seeds: Sequence[int] | None = None,
             adjust: Callable[[Any], Any] | None = None) -> Plan:
        if budget not in BUDGETS:
            raise LabError(f"unknown recipe budget {budget!r}; valid budgets: {', '.join(BUDGETS)}")
        chosen = tuple(int(s) for s in (seeds if seeds else self.default_seeds[budget]))
        if len(set(chosen)) != len(chosen) or any(s < 0 for s in chosen):
            raise LabError(f"seeds must be distinct whole numbers from 0, got {list(chosen)}")
        return self.planner(budget, chosen, adjust or (lambda spec: spec))

    def report(self, plan: Plan, results: Mapping[Step, Any]):
        return self.reporter(plan, results)


__all__ = ["BUDGETS", "BUDGET_NOTES", "Claim", "Plan", "Recipe", "Step"]
