"""Drive one recipe to its end through the local executor and print its progress and wall time.

    python bench/recipe_drive.py NAME [BUDGET] [WORKERS]

The figures it prints (wall time, run time of the finished jobs) are the ones the recipe notes report.
"""

from __future__ import annotations

import sys
import time

from labcore.executor import LocalExecutor
from labcore.recipes import RECIPES
from labcore.recipes.drive import advance, results_of


def main() -> None:
    name = sys.argv[1]
    budget = sys.argv[2] if len(sys.argv) > 2 else "quick"
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    recipe = RECIPES[name]
    plan = recipe.plan(budget)
    executor = LocalExecutor(workers=workers)
    start = time.time()
    last = None
    while True:
        progress = advance(plan, executor)
        state = (progress.done, progress.failed, progress.running, progress.queued)
        if state != last:
            print(f"{time.time() - start:7.0f} s  done {progress.done}/{progress.total}  failed {progress.failed}  "
                  f"running {progress.running}  queued {progress.queued}  {'; '.join(progress.errors)}", flush=True)
            last = state
        if progress.ended:
            break
        executor.ensure_workers()
        time.sleep(5)
    wall = time.time() - start
    report = recipe.report(plan, results_of(plan, executor.store))
    print(f"recipe {name} ({budget}): wall {wall:.0f} s, run time of its jobs {report.wall_s:.0f} s")
    for claim, verdict in report.claims:
        print(f"  {verdict.word:14s} {claim.id}: {verdict.sentence()}")
    for title, table in report.tables:
        print(f"\n{title}\n{table.to_string()}")


if __name__ == "__main__":
    main()
