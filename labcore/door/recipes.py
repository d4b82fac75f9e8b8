"""The papers' experiments, as the pages run and report them: the one-click demos and the recipes (a plan of
real jobs, its driver, its verdicts and its exports)."""

from __future__ import annotations

from labcore.door.desk import Desk, executor_of
from labcore.recipes.demos import DEMOS, PAPERS, TRAIN_SIZE_NOTES, Demo, demo_records, summarize_demo
from labcore.recipes.demos import BUDGET_NOTES as DEMO_BUDGET_NOTES  # the spec budgets' notes, not the recipes'
from labcore.recipes import BUDGETS, RECIPES
from labcore.recipes.base import BUDGET_NOTES, Plan, Recipe
from labcore.recipes.drive import (advance, expected_of, expected_sentence, plan_for, plan_keys, progress, results_of,
                                   seeds_words)
from labcore.recipes.export import (RULE, TUNING_TITLE, headline_line, secondary_line, summary_line, to_csv,
                                    to_html)
from labcore.recipes.verdict import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_MEASURED, OPEN

__all__ = ["BUDGETS", "BUDGET_NOTES", "DEMO_BUDGET_NOTES", "DOES_NOT_HOLD", "HOLDS", "INCONCLUSIVE", "NOT_MEASURED",
           "OPEN", "PAPERS", "RECIPES", "RULE", "TRAIN_SIZE_NOTES", "TUNING_TITLE", "Demo", "Plan", "Recipe", "advance",
           "demo_names", "demo_records", "expected_of", "expected_sentence", "get_demo", "headline_line", "plan_for",
           "plan_keys", "progress", "results_of", "secondary_line", "seeds_words", "step", "summarize_demo",
           "summary_line", "to_csv", "to_html"]


def demo_names() -> list[str]:
    """The one-click demos of Home, in their order."""
    return DEMOS.names()


def get_demo(name: str) -> Demo:
    """The demo called ``name`` (a LabError lists the demos where there is none)."""
    return DEMOS[name]


def step(desk: Desk, plan: Plan, *, retry: bool = False):
    """One step of the recipe's driver (:func:`advance`), in the name of the desk's requester, so a student's
    queue cap counts the recipe's jobs like any."""
    return advance(plan, executor_of(desk), who=desk.who, retry=retry)
