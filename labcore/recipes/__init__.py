"""Recipes: each paper's headline experiment as one plan of jobs and one report (see :mod:`.base`).

One module per paper registers its recipe here; the Recipes page, the CLI (``python -m labcore recipe``)
and the tests read them from :data:`RECIPES`.
"""

from __future__ import annotations

from labcore.recipes.base import BUDGETS, Claim, Plan, Recipe, Step
from labcore.registry import Registry

RECIPES: Registry[Recipe] = Registry("recipe")


def _register() -> None:
    from labcore.recipes import chiang, fpt, kao, orca, tamkin

    for module in (kao, fpt, chiang, tamkin, orca):
        RECIPES.register(module.RECIPE.name, module.RECIPE)


_register()

__all__ = ["BUDGETS", "Claim", "Plan", "RECIPES", "Recipe", "Step"]
