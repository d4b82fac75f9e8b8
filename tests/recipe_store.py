"""A cache whose store holds a finished tiny recipe, for the tests of what shows recipes (the CLI, the Recipes
page, the browser). Built once per test process and shared: a whole recipe, even shrunk, takes minutes on
two cores.

The app and the CLI build their plans through ``TRANSFERLAB_RECIPE_ADJUST``; with :data:`ADJUST` set there
they build the same tiny plan whose jobs this store holds.
"""

from __future__ import annotations

from types import SimpleNamespace

from helpers import share_assets
from recipe_helpers import run_tiny

ADJUST = "recipe_helpers:tiny"
SEEDS = (0, 1)
_BUILT: dict[str, SimpleNamespace] = {}


def finished_recipe(name: str, tmp_path_factory) -> SimpleNamespace:
    """(cache, store, plan, results) of recipe ``name`` run tiny to the end with :data:`SEEDS`."""
    if name not in _BUILT:
        from labcore.recipes import RECIPES
        from labcore.store import Store

        cache = tmp_path_factory.mktemp(f"recipe-{name}-cache")
        share_assets(cache)
        store = Store(cache / "store")
        plan, results = run_tiny(RECIPES[name], store, SEEDS)
        _BUILT[name] = SimpleNamespace(cache=cache, store=store, plan=plan, results=results)
    return _BUILT[name]
