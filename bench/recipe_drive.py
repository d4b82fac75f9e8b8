"""Drive recipes to their end through the local executor, as the sequential rule grows them, and print what
each decided, with the seeds, run time and wall time it took.

    python bench/recipe_drive.py NAME [NAME ...] [--budget quick] [--workers CORES] [--cap-minutes M]
                                 [--seeds 0,1,2] [--store DIR] [--out FILE.csv] [--read-only]

Each recipe goes into the same store (``--store``, default the lab's), one after the other, so a second
invocation with another precision (``TRANSFERLAB_PRECISION``) or on another machine can be compared claim by
claim with ``--out`` files. Per recipe it prints the paper's headline claims decided / undecided, every
verdict with the look that decided it, the seeds used, the summed run time of its jobs (CPU minutes of the
worker) and the wall time, and the CPU the figures come from.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labcore.execution.executor import LocalExecutor
from labcore.execution.lifetime import FOR_SOMEONE, Lifetime
from labcore.recipes import RECIPES
from labcore.recipes.drive import advance, plan_for, results_of, seeds_words
from labcore.recipes.drive_all import AT_START, LOST, resume_lost
from labcore.recipes.export import headline_count, verdict_table
from labcore.recipes.keys import step_key
from labcore.store import open_store


def cpu_words() -> str:
    model, flags = platform.processor() or "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model.strip():
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    native = sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16", "amx_tile", "avx512f", "avx2"))
    return f"{model.strip()} ({', '.join(native) or 'no AVX-512/AMX flags'})"


def drive(name: str, args: argparse.Namespace, executor: LocalExecutor) -> pd.DataFrame:
    recipe = RECIPES[name]
    seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else None
    cap_s = args.cap_minutes * 60 if args.cap_minutes else math.inf
    start, last = time.time(), None
    resumed: dict[str, int] = {}
    take_up = AT_START  # a drive that starts takes up what a stopped machine left; later, only lost workers' jobs
    while True:
        plan = plan_for(recipe, args.budget, seeds, executor.store, cap_s=cap_s)
        if args.read_only:  # the verdicts of what the store holds now: nothing queued, no worker started
            break
        resume_lost(plan, executor, resumed, take_up)
        take_up = LOST
        progress = advance(plan, executor)
        state = (len(plan.steps), progress.done, progress.failed, progress.running, progress.queued)
        if last is None or state[0] != last[0]:
            print(f"{time.time() - start:7.0f} s  {name}: {seeds_words(plan)}, {len(plan.steps)} jobs", flush=True)
        if state != last:
            print(f"{time.time() - start:7.0f} s  {name}: done {progress.done}/{progress.total}  failed "
                  f"{progress.failed}  running {progress.running}  queued {progress.queued}  "
                  f"{'; '.join(progress.errors)}", flush=True)
            last = state
        if progress.ended and plan_for(recipe, args.budget, seeds, executor.store, cap_s=cap_s).steps == plan.steps:
            break
        executor.ensure_workers()
        time.sleep(5)
    wall = time.time() - start
    report = recipe.report(plan, results_of(plan, executor.store))
    counts = headline_count(report)
    decided = counts.get("holds", 0) + counts.get("does not hold", 0)
    total = sum(counts.values())
    tested = total - counts.get("not tested", 0)
    print(f"\n{name} ({args.budget}): {seeds_words(plan)}")
    print(f"  the paper's claims: {tested} of {total} tested ({tested / max(total, 1):.0%}), {decided} decided "
          f"({decided / max(total, 1):.0%}): {counts}")
    print(f"  run time of its jobs {report.wall_s / 60:.1f} CPU minutes, wall {wall / 60:.1f} min here, "
          f"{store_wall(plan, executor.store) / 60:.1f} min from its first job's submission to its last job's end "
          f"(a drive resumed or driven by another command), on {cpu_words()}")
    for claim, verdict in report.claims:
        who = "" if claim.headline else " [the lab's question]"
        print(f"  {verdict.word:14s} {verdict.claim}{who}: {verdict.why()}")
    table = verdict_table(report)
    table.insert(0, "recipe", name)
    table["wall_s_recipe"] = round(wall)
    return table


def store_wall(plan, store) -> float:
    """Seconds from the first submission of the plan's jobs to the end of the last, as the store recorded them."""
    records = [r for r in (store.get(step_key(step)) for step in plan.steps) if r is not None]
    starts = [r.submitted_at for r in records if r.submitted_at]
    ends = [r.finished_at for r in records if r.finished_at]
    return max(ends) - min(starts) if starts and ends else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+", choices=RECIPES.names())
    parser.add_argument("--budget", default="quick")
    # A recipe is a queue of dozens of runs: one single-threaded worker per core trains it faster than one
    # worker on every core (bench/workers.py: 1.12x on dna-splice, 1.18x on text-sentiment on 2 cores).
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="local workers (default: one per core, each on one thread)")
    parser.add_argument("--cap-minutes", type=float, default=0.0)
    parser.add_argument("--seeds", default="", help="fixed seeds instead of the sequential rule's")
    parser.add_argument("--store", default=None)
    parser.add_argument("--out", default="", help="write every verdict of every recipe as CSV")
    parser.add_argument("--read-only", action="store_true",
                        help="queue nothing: the verdicts of the jobs the store already holds (another machine's "
                             "drive, say), for bench/verdicts_agree.py")
    args = parser.parse_args()
    # Its workers leave once this process ends: a drive that printed its verdicts leaves nothing polling.
    executor = LocalExecutor(open_store(args.store), workers=args.workers,
                             lifetime=Lifetime(idle_exit_s=FOR_SOMEONE.idle_exit_s, parent_pid=os.getpid()))
    tables = [drive(name, args, executor) for name in args.names]
    if args.out:
        pd.concat(tables).to_csv(args.out, index=False)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
