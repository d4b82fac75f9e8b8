"""A recipe of a few tiny runs (seconds each) and a command line that drives it with ``recipe run --all``, as the
only recipe registered: run as a script, in a process of its own, so a test can kill the drive and start it again.

    python recipe_tiny_drive.py STORE_FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from labcore.recipes.base import Claim, Plan, Recipe, Step
from labcore.recipes.report import judge, new_report
from labcore.runspec import make_spec

NAME = "tiny-drive"
SEEDS = (0, 1, 2)
CLAIM = Claim("pretrained-like-random", "A tiny model's two inits score apart on bit XOR.", "the lab's own check",
              headline=True, paper="none: a check of the drive")


def plan(budget: str, seeds: tuple[int, ...], adjust: Callable[[Any], Any]) -> Plan:
    def run(seed: int, lr: float):
        # many steps of a tiny model: long enough for the test to kill the drive between two jobs
        return adjust(make_spec(model="tiny:bert", init="random", discipline="bits-xor", protocol="full",
                                budget="quick", max_steps=30, eval_every=10, seed=seed, lr=lr, precision="fp32",
                                train_size="256"))

    steps = tuple(Step(run(seed, lr), name, seed, "table", "bits-xor") for seed in seeds
                  for name, lr in (("a", 1e-3), ("b", 1e-4)))
    return Plan(NAME, budget, seeds, (steps,))


def report(plan_: Plan, results):
    out = new_report(RECIPE, plan_, results)
    out.claims.append(judge(CLAIM, plan_, results, "a", "b", facet="bits-xor"))
    return out


RECIPE = Recipe(name=NAME, title="A tiny drive", paper="fpt", claims=(CLAIM,), planner=plan, reporter=report,
                prior_step_s=5.0)


def main(store: str) -> int:
    from labcore.cli.main import main as cli
    from labcore.recipes import RECIPES

    for name in list(RECIPES):
        RECIPES.unregister(name)
    RECIPES.register(NAME, RECIPE)
    return cli(["recipe", "run", "--all", "--seeds", ",".join(map(str, SEEDS)), "--store", store, "--workers", "1",
                "--poll", "0.3"])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1]))
