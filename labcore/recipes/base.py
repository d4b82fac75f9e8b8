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
from labcore.recipes.verdict import ClaimTest, settle

BUDGETS = ("quick", "standard", "paper")
BUDGET_NOTES = {
    "quick": "a few CPU minutes per run on this 2-core machine: short runs, few seeds, the paper's shape cut down",
    "standard": "the runs of the lab's standard budget: longer, with early stopping; an hour or more on a CPU",
    "paper": "the papers' own hyper-parameters and sizes: for a GPU",
}


@dataclass(frozen=True)
class Convergence:
    """How a recipe's run ends: never before ``floor`` optimiser steps (a run must first leave the majority
    class), then at a validation plateau of ``patience`` validations, at the latest at ``cap`` steps.
    Claims about speed read a common window of the first ``floor`` steps, which every run trains."""

    floor: int
    cap: int
    patience: int = 3
    every: int = 15  # steps between validations: floor // every validations before any plateau may stop

    def spec_values(self) -> dict[str, int]:
        return dict(min_steps=self.floor, max_steps=self.cap, patience=self.patience, eval_every=self.every)


# the quick budget's: its own floor of 150 steps (10 validations), twice that at most
QUICK_CONVERGENCE = Convergence(floor=150, cap=300)


@dataclass(frozen=True)
class Claim:
    """One claim, tested by comparing condition ``a`` with ``b`` as its :class:`ClaimTest` says, fixed before anything
    runs: a difference (``a`` above ``b``: direction +1) or an equivalence within a stated margin.

    A claim the paper makes is a *headline* claim: it carries where the paper makes it and the paper's own
    numbers for it. A question the lab adds (a task the paper did not run, a comparison it did not make) is
    kept apart (``headline=False``): labelled as the lab's, corrected for multiplicity in its own family,
    and left out of the paper's headline count."""

    id: str
    text: str  # the claim in one sentence, as the paper makes it (or the lab asks it)
    section: str  # where the paper makes it ("§3.2, fig. 2"); a lab question names what it extends
    test: ClaimTest = ClaimTest()
    paper: str = ""  # the paper's own numbers behind the claim, transcribed ("BERT 85.8 vs scratch 77.7")
    headline: bool = True  # False: the lab's own question, not the paper's
    why: str = ""  # the reason for an equivalence margin, or why the lab asks a question the paper did not
    # The task (facet) of the claim's one counted verdict where the recipe tests it on several, fixed here
    # before any drive reads it ("": tested once); its rows on other tasks are shown as secondary.
    primary: str = ""
    primary_why: str = ""  # the rule that chose it, from the paper's numbers (never from the lab's)
    # why a claim the recipe once counted among the paper's headline claims no longer is (the report names it);
    # such a claim is a lab question (headline=False) where it is still tested, and has no verdict where not
    dropped: str = ""


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
    # seeds chosen by the sequential rule (labcore.recipes.drive.grown_plan) rather than fixed by the user
    sequential: bool = False
    # whether the rule may still add seeds: an undecided claim reads "open" while it can, "inconclusive" after
    can_grow: bool = False
    stopped: str = ""  # why the rule added no more seeds where claims are open (the user's budget cap)

    @property
    def steps(self) -> list[Step]:
        return [step for stage in self.stages for step in stage]

    @property
    def group(self) -> str:
        """The store group its jobs join (stable: running a recipe twice serves the finished jobs)."""
        seeds = "sequential" if self.sequential else "seeds=" + ",".join(map(str, self.seeds))
        return f"recipe:{self.recipe}:{self.budget}:{seeds}" + (f":{self.adjusted}" if self.adjusted else "")


def family(claim: Claim, verdict: Any) -> str:
    """Which Holm family a verdict is settled in: the paper's headline claims, the lab's own questions, or the
    per-task rows shown beside a claim's one counted verdict (never counted, never given seeds of their own)."""
    if not verdict.primary:
        return "secondary"
    return "headline" if claim.headline else "lab"


FAMILIES = ("headline", "lab", "secondary")


def settle_claims(report: Any) -> Any:
    """Decide a report's claims (its ``claims``: (Claim, Verdict) pairs) look by look, each family together
    (:func:`labcore.recipes.verdict.settle`, Holm's correction): the paper's headline claims (one verdict each),
    apart from them the lab's own questions, and apart again the per-task rows shown as secondary."""
    claims = list(report.claims)
    for name in FAMILIES:
        index = [i for i, (claim, verdict) in enumerate(claims) if family(claim, verdict) == name]
        for i, verdict in zip(index, settle([claims[i][1] for i in index])):
            claims[i] = (claims[i][0], verdict)
    report.claims = claims
    return report


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    paper: str  # key of labcore.recipes.demos.PAPERS
    claims: tuple[Claim, ...]
    # (budget, seeds, adjust) -> plan. The planner passes every spec it builds through ``adjust`` before any
    # other spec refers to it (a ``run:`` body, a ``lab:`` name), so a test can shrink a whole plan.
    planner: Callable[[str, tuple[int, ...], Callable[[Any], Any]], Plan]
    reporter: Callable[[Plan, Mapping[Step, Any]], Any]  # (plan, step -> result or None) -> Report
    # budget -> the learning rates every tunable arm tries on validation before its seeds run (equal effort for
    # every arm: labcore.recipes.tuning); a budget not named here gives every arm the budget's own rate
    lr_grids: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
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
        """The reporter's report with its claims decided together (:func:`settle_claims`)."""
        return settle_claims(self.reporter(plan, results))


__all__ = ["BUDGETS", "BUDGET_NOTES", "Claim", "Convergence", "FAMILIES", "Plan", "QUICK_CONVERGENCE", "Recipe",
           "Step", "family", "settle_claims"]
