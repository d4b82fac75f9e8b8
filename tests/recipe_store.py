"""Caches whose stores hold a finished tiny recipe, for the tests of what shows recipes (the CLI, the Recipes
page, the browser) and of each recipe's report. A whole recipe, even shrunk, takes minutes on two cores, so
each (recipe, seeds) is trained once and shared: within a test process every caller gets the same cache and
store, and across test processes the finished store is kept (:mod:`kept`) until the library changes.

The app and the CLI build their plans through ``TRANSFERLAB_RECIPE_ADJUST``; with :data:`ADJUST` set there
they build the same tiny plan whose jobs this store holds.
"""

from __future__ import annotations

from types import SimpleNamespace

from helpers import share_assets
from kept import kept_store
from recipe_helpers import run_tiny, tiny

ADJUST = "recipe_helpers:tiny"
SEEDS = (0, 1)
BUDGET = "quick"
_BUILT: dict[tuple[str, tuple[int, ...]], SimpleNamespace] = {}


def finished_recipe(name: str, tmp_path_factory, seeds: tuple[int, ...] = SEEDS) -> SimpleNamespace:
    """(cache, store, plan, results) of recipe ``name`` run tiny to the end with ``seeds``: the store is a copy
    of the test process's own, trained here or copied from a kept one."""
    seeds = tuple(seeds)
    if (name, seeds) in _BUILT:
        return _BUILT[name, seeds]
    from labcore.recipes import RECIPES
    from labcore.recipes.drive import results_of
    from labcore.store import Store

    recipe = RECIPES[name]
    cache = tmp_path_factory.mktemp(f"recipe-{name}-cache")
    share_assets(cache)

    def build(root) -> None:
        store = Store(root)
        try:
            run_tiny(recipe, store, seeds, BUDGET)
            store.reap()
            assert not [r.key for r in store.jobs(status="running")]
        finally:
            store.close()

    kept_store(f"recipe-{name}-{BUDGET}-seeds{'_'.join(map(str, seeds))}", cache / "store", build,
               depends=("recipe_helpers.py", "recipe_store.py"))
    store = Store(cache / "store")
    plan = recipe.plan(BUDGET, seeds, adjust=tiny)
    _BUILT[name, seeds] = SimpleNamespace(cache=cache, store=store, plan=plan, results=results_of(plan, store))
    return _BUILT[name, seeds]
