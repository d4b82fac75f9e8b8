"""``python -m labcore tune``: a hyper-parameter sweep of one spec with Ray Tune's ASHA scheduler, each trial
a run in the store (:mod:`labcore.execution.tune`).

The spec flags are ``run``'s; on a number flag a range samples it (``--lr 1e-5:1e-3:log`` log-uniformly,
``--warmup-ratio 0:0.1`` uniformly), and on any flag a comma list tries each value, as in ``sweep``. Ray Tune
is imported only when the command runs: the flags are checked without it.
"""

from __future__ import annotations

import argparse
import sys

from labcore.cli.args import RANGE_FORM, add_spec_arguments, search_from_args
from labcore.errors import LabError
from labcore.fmt import fmt_duration
from labcore.store import open_store


def add_arguments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="tune one spec's hyper-parameters with Ray Tune and ASHA (each trial a run in "
                                    "the store; needs requirements-ray.txt)")
    add_spec_arguments(p)
    p.add_argument("--samples", type=int, default=1,
                   help=f"draws of the ranges ({RANGE_FORM}), each over every combination of the lists (default 1)")
    p.add_argument("--concurrent", type=int, default=0,
                   help="trials at once (default: as many runs as the executor runs at once)")
    p.add_argument("--grace-steps", type=int, default=0,
                   help="ASHA's first rung in training steps (default: max-steps / reduction-factor squared)")
    p.add_argument("--reduction-factor", type=float, default=3.0,
                   help="at each rung ASHA lets the best 1/reduction-factor of the trials go on (default 3)")
    p.add_argument("--search-seed", type=int, default=0,
                   help="seeds the draws: the same command draws the same specs and finds their runs (default 0)")
    p.add_argument("--name", default="", help="the sweep's name: its runs' group and Tune's folder (default "
                                              "tune-<time>)")
    p.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    from labcore.jobs.run import resolve_run

    base, searched = search_from_args(args)
    resolve_run(base)  # every check that needs no data, model or Ray, before Ray Tune loads
    try:
        from labcore.execution import tune
    except ImportError as exc:
        raise LabError(f"tune needs Ray Tune ({exc}); install the extra: pip install -r requirements-ray.txt") from None
    settings = tune.AshaSettings(samples=args.samples, reduction_factor=args.reduction_factor,
                                 grace_steps=args.grace_steps, concurrent=args.concurrent, seed=args.search_seed)
    import pandas as pd

    outcome = tune.tune_runs(base, searched, store=open_store(args.store), settings=settings, name=args.name)
    print(pd.DataFrame(tune.trial_rows(outcome)).to_string(index=False))
    saved = tune.savings(outcome.records)
    print(f"{saved.trials} trials in {fmt_duration(outcome.wall_s)}: {saved.done} trained to their last step, "
          f"{saved.stopped} stopped early by ASHA; {saved.steps_trained:,} of {saved.steps_planned:,} planned steps "
          f"trained ({saved.steps_saved:,} spared, about {fmt_duration(saved.saved_s)} of training at the stopped "
          f"runs' own speeds)")
    best = outcome.best
    if best:
        values = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["config"].items())
        print(f"best: {values}: validation {best['metric']} {best['validation']:.4f} (run {best['key'][:12]})")
    else:
        print("best: none (no trial's run trained to its last step)", file=sys.stderr)
    print(f"runs: python -m labcore status --group {outcome.name}; Tune's files: {outcome.experiment}")
    return 0
