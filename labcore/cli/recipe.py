"""``python -m labcore recipe``: list the papers' recipes, run one through the executor, report on it.

``recipe run`` drives the plan with :func:`labcore.recipes.drive.advance`, the same driver the Recipes page
uses: it queues the first stage and every later step that builds on nothing unfinished, and while it waits
it queues each later stage once the earlier ones ended, printing the progress; Ctrl-C stops the waiting
only (the queued jobs stay with the workers, and ``recipe run`` again picks the recipe up where it is).
``recipe report`` reads the store only, so it works at any time, on a recipe half finished too. Nothing here
imports torch.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from labcore.recipes.demos import PAPERS
from labcore.errors import LabError
from labcore.execution.executor import executor_for
from labcore.fmt import fmt_duration
from labcore.recipes import BUDGETS, RECIPES, Recipe
from labcore.recipes.drive import (Progress, advance, expected_of, expected_sentence, plan_for, plan_of, results_of,
                                   seeds_flag, seeds_words)
from labcore.recipes.export import to_csv, to_html, to_text
from labcore.store import Store, open_store

POLL_S = 5.0  # how often a waiting `recipe run` looks at the store (a quick job takes tens of seconds)


def add_arguments(subparsers: argparse._SubParsersAction) -> None:
    """Register ``recipe list|run|report`` on ``python -m labcore``'s subparsers."""
    p = subparsers.add_parser("recipe", help="each paper's headline experiment as one plan of jobs: list, run, "
                                             "report")
    actions = p.add_subparsers(dest="action", required=True)

    q = actions.add_parser("list", help="the recipes: paper, claims, jobs and expected CPU time per budget")
    _add_store_argument(q)
    q.set_defaults(func=cmd_list)

    q = actions.add_parser("run", help="queue a recipe's jobs, stage by stage, and wait for its report; --all: "
                                       "drive every recipe into one store, resumable")
    _add_plan_arguments(q, several=True)
    q.add_argument("--all", action="store_true",
                   help="drive every recipe (or the NAMEs given) into one store until each has ended, printing per "
                        "recipe the claims decided so far and an ETA; run it again after a restart to go on")
    q.add_argument("--workers", type=int, default=0,
                   help="with --all or several NAMEs: local workers, which leave when the drive ends (default: one "
                        "per core)")
    q.add_argument("--no-wait", action="store_true",
                   help="queue what can be queued now and return (later stages wait for `recipe run` again or "
                        "the Recipes page)")
    q.add_argument("--no-start", action="store_true",
                   help="start no background worker (leave the jobs to workers you run yourself)")
    q.add_argument("--poll", type=float, default=POLL_S, help=f"seconds between looks at the store (default "
                                                              f"{POLL_S:g})")
    q.set_defaults(func=cmd_run)

    q = actions.add_parser("report", help="a recipe's report from the store (finished jobs only; any time)")
    _add_plan_arguments(q)
    q.add_argument("--html", metavar="FILE", help="also write the self-contained HTML report (figures included)")
    q.add_argument("--csv", metavar="FILE", help="also write every job's number and every verdict as CSV")
    q.set_defaults(func=cmd_report)


def _add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")


def _add_plan_arguments(parser: argparse.ArgumentParser, several: bool = False) -> None:
    if several:
        parser.add_argument("name", nargs="*", help="the recipe (see `python -m labcore recipe list`); several, or "
                                                    "none with --all, drive them together")
    else:
        parser.add_argument("name", help="the recipe (see `python -m labcore recipe list`)")
    parser.add_argument("--budget", default="quick", choices=BUDGETS,
                        help="quick (a 2-core CPU), standard, or paper (a GPU); default quick")
    parser.add_argument("--seeds", default="", help="comma-separated seeds, fixed; default: the sequential rule's "
                                                     "(3 seeds, then 5 and 8 for the claims still open)")
    parser.add_argument("--cap-minutes", type=float, default=math.inf, metavar="M",
                        help="the sequential rule adds no look that would take the recipe past M minutes of run time")
    _add_store_argument(parser)


def _seeds(text: str) -> tuple[int, ...] | None:
    if not text.strip() or text.strip() == "sequential":
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise LabError(f"--seeds takes whole numbers separated by commas, like 0,1,2; got {text!r}") from None


def _recipe(name: str) -> Recipe:
    return RECIPES[name]  # an unknown name raises an error that lists the recipes


# --------------------------------------------------------------------------------------------- commands
def cmd_list(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    for name in RECIPES.names():
        recipe = RECIPES[name]
        print(f"{name}: {recipe.title}")
        print(f"  paper: {PAPERS.get(recipe.paper, recipe.paper)}")
        print("  claims:")
        for claim in recipe.claims:
            print(f"    {claim.id} ({claim.section}): {claim.text}")
        for budget in BUDGETS:
            plan = plan_of(recipe, budget)
            stages = f"{len(plan.stages)} stage{'s' if len(plan.stages) != 1 else ''}"
            print(f"  {budget:8} seeds {','.join(map(str, plan.seeds)):10} {len(plan.steps):4} jobs, {stages}: "
                  f"{expected_sentence(recipe, plan, results_of(plan, store))}")
        print()
    print("Run one with `python -m labcore recipe run NAME [--budget quick] [--cap-minutes 45]` (seeds as the "
          "sequential rule needs them) or fix the seeds with `--seeds 0,1,2`.")
    return 0


def progress_line(progress: Progress, left_s: float) -> str:
    """One line of a recipe's progress, for a terminal."""
    parts = [f"{progress.done} of {progress.total} done"]
    parts += [f"{n} {what}" for n, what in ((progress.failed, "failed"), (progress.running, "running"),
                                            (progress.queued, "queued"),
                                            (progress.unsubmitted, "waiting for an earlier stage")) if n]
    line = ", ".join(parts)
    if not progress.ended and not math.isnan(left_s):  # NaN: this budget's times are unknown here
        line += f" · about {fmt_duration(left_s)} of CPU time to go"
    return line


def _print_progress(store: Store, recipe: Recipe, plan, progress: Progress, seen: dict[str, str]) -> None:
    """Print the progress line, the job that started running and each new error, each once."""
    _, left = expected_of(recipe, plan, results_of(plan, store))
    line = progress_line(progress, left)
    if line != seen.get("line"):
        print(line, flush=True)
        seen["line"] = line
    for key in progress.running_keys:
        if key not in seen:
            seen[key] = "running"
            print(f"  running: {record.label if (record := store.get(key)) is not None else key}", flush=True)
    for error in progress.errors:
        if error not in seen:
            seen[error] = "error"
            print(f"  not queued: {error}", file=sys.stderr, flush=True)


def _plan(args: argparse.Namespace, recipe: Recipe, store: Store):
    if not args.cap_minutes > 0:
        raise LabError(f"--cap-minutes must be above 0, got {args.cap_minutes:g}")
    return plan_for(recipe, args.budget, _seeds(args.seeds), store, cap_s=args.cap_minutes * 60)


def cmd_run(args: argparse.Namespace) -> int:
    names = list(args.name)
    if args.all or len(names) > 1:
        return cmd_run_all(args, names or RECIPES.names())
    if not names:
        raise LabError("recipe run needs a recipe's name, several names, or --all; see `python -m labcore recipe "
                       "list`")
    args.name = names[0]
    recipe = _recipe(args.name)
    executor = executor_for(open_store(args.store), autostart=not args.no_start)
    store = executor.store
    plan = _plan(args, recipe, store)
    again = f"{recipe.name} --budget {plan.budget}{seeds_flag(plan)}"
    print(f"{recipe.title}: {plan.budget} budget, {seeds_words(plan)}, {len(plan.steps)} jobs (group {plan.group}): "
          f"{expected_sentence(recipe, plan, results_of(plan, store))}", flush=True)
    seen: dict[str, str] = {}
    # The explicit run retries the steps that ended without success; the polls below never do.
    progress = advance(plan, executor, retry=True)
    _print_progress(store, recipe, plan, progress, seen)
    if (progress.queued or progress.running) and not store.workers():
        print("no worker is running: start one with `python -m labcore worker` (or leave out --no-start)",
              file=sys.stderr)
    if args.no_wait:
        if not progress.ended:
            later = (" The steps that build on earlier ones (and the sequential rule's further seeds) are queued "
                     "once those end, by `recipe run` again or the Recipes page."
                     if len(plan.stages) > 1 or plan.sequential else "")
            print(f"Queued.{later} Follow it with `python -m labcore recipe report {again}`.")
            return 0
    else:
        try:
            while True:
                if progress.ended:
                    grown = _plan(args, recipe, store)  # the rule looks at the finished seeds
                    if grown.steps == plan.steps:
                        plan = grown
                        break
                    plan = grown
                    print(f"the rule looks again: {seeds_words(plan)}, {len(plan.steps)} jobs", flush=True)
                else:
                    time.sleep(max(0.1, args.poll))
                progress = advance(plan, executor)
                _print_progress(store, recipe, plan, progress, seen)
        except KeyboardInterrupt:
            print(f"\nStopped waiting; the recipe's jobs stay queued for the workers. `python -m labcore recipe run "
                  f"{again}` follows it again (and queues its later stages); `recipe report` shows what has "
                  f"finished.", file=sys.stderr)
            return 130
    report = recipe.report(plan, results_of(plan, store))
    print()
    print(to_text(report, all_tables=False), end="")
    print(f"\nThe whole report: `python -m labcore recipe report {again} --html report.html`.")
    return 0 if progress.failed == 0 else 1


def cmd_run_all(args: argparse.Namespace, names: list[str]) -> int:
    """Drive several recipes into one store (:func:`labcore.recipes.drive_all.drive_all`); resumable: run again
    after a restart, and every finished job comes from the store."""
    import os

    from labcore.execution.executor import LocalExecutor
    from labcore.execution.lifetime import FOR_SOMEONE, Lifetime
    from labcore.recipes.drive_all import drive_all

    recipes = [_recipe(name) for name in names]
    if not args.cap_minutes > 0:
        raise LabError(f"--cap-minutes must be above 0, got {args.cap_minutes:g}")
    workers = args.workers or os.cpu_count() or 1
    # The workers leave once this process has ended (their running jobs checkpoint first), or after the usual
    # idle time: a drive that ended, or was killed, leaves nothing polling the store.
    executor = LocalExecutor(open_store(args.store), workers=workers, autostart=not args.no_start,
                             lifetime=Lifetime(idle_exit_s=FOR_SOMEONE.idle_exit_s, parent_pid=os.getpid()))
    print(f"driving {', '.join(names)} ({args.budget} budget) into {executor.store.root} with {workers} "
          f"worker{'s' if workers != 1 else ''}; a finished job is never run again, so this command goes on after "
          f"a restart", flush=True)
    try:
        standings = drive_all(recipes, args.budget, _seeds(args.seeds), executor, cap_s=args.cap_minutes * 60,
                              poll_s=args.poll, say=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("\nStopped: the jobs queued stay in the store; the same command goes on from there.", file=sys.stderr)
        return 130
    print("\nEvery recipe has ended:")
    for row in standings:
        print(f"  {row.line(workers)}")
    return 0 if not any(row.failed for row in standings) else 1


def cmd_report(args: argparse.Namespace) -> int:
    recipe = _recipe(args.name)
    store = open_store(args.store)
    plan = _plan(args, recipe, store)
    results = results_of(plan, store)
    report = recipe.report(plan, results)
    print(to_text(report), end="")
    for path, text in ((args.html, lambda: to_html(report)), (args.csv, lambda: to_csv(report, plan, results))):
        if path:
            Path(path).write_text(text(), encoding="utf-8")
            print(f"wrote {path}")
    return 0


__all__ = ["add_arguments", "cmd_list", "cmd_report", "cmd_run", "cmd_run_all", "progress_line"]
