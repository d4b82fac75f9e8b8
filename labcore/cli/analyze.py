"""``python -m labcore analyze KIND``: one analysis of models, run here (or queued with ``--queue``);
its numbers as JSON on the last line.

Models are ``--model NAME[@INIT[@SEED[@MAPPING]]]`` (``minilm``, ``minilm@random@1``, ``tiny:bert@random``,
``antiberty@pretrained@0@letters``: residues as AntiBERTy's own tokens) or ``--model run=KEY`` for a
finished run's fine-tuned weights; give ``--model`` once per model.
"""

from __future__ import annotations

import argparse
import json
import sys

from labcore import jobs
from labcore.cli.args import disciplines_help, key_values, models_help
from labcore.errors import LabError
from labcore.jobs.analyses import ANALYSES, SPEC_TYPES, parse_model
from labcore.jobs.inline import analyze_here


def add_arguments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="why transfer works: one analysis of models (JSON on the last line)")
    p.add_argument("kind", choices=ANALYSES)
    p.add_argument("--model", action="append", default=None, metavar="NAME[@INIT[@SEED[@MAPPING]]]|run=KEY",
                   help="a model to analyse (repeat; default: minilm and minilm@random); NAME is "
                        + models_help().removeprefix("the body: "))
    p.add_argument("--discipline", default=None, help=disciplines_help())
    p.add_argument("--dparam", action="append", metavar="KEY=VALUE", help="discipline parameter")
    p.add_argument("--split", default=None)
    p.add_argument("--examples", type=int, default=None)
    p.add_argument("--seed", type=int, default=None, help="which examples (seeded)")
    p.add_argument("--max-length", dest="max_length", type=int, default=None)
    p.add_argument("--measure", default=None, help="similarity: pwcca or cka")
    p.add_argument("--pooled", action="store_true", help="similarity: one mean vector per example, not every position")
    p.add_argument("--last-only", action="store_true", help="similarity: the last layers only")
    p.add_argument("--queue", action="store_true", help="queue it for the workers instead of running it here")
    p.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    p.set_defaults(func=cmd_analyze)


def spec_from_args(args: argparse.Namespace):
    values = {name: getattr(args, name) for name in ("discipline", "split", "examples", "seed", "max_length", "measure")
              if getattr(args, name, None) is not None}
    if args.model:
        values["models"] = tuple(parse_model(m) for m in args.model)
    if args.dparam:
        values["discipline_params"] = tuple(sorted(key_values(args.dparam, "--dparam").items()))
    if args.pooled:
        values["pooled"] = True
    if args.last_only:
        values["last_only"] = True
    spec_type = SPEC_TYPES[args.kind]
    unknown = [name for name in values if name not in spec_type.__dataclass_fields__]
    if unknown:
        raise LabError(f"{args.kind} takes no {', '.join('--' + u.replace('_', '-') for u in unknown)}")
    return spec_type(**values)


def cmd_analyze(args: argparse.Namespace) -> int:
    from labcore.store import open_store

    spec = spec_from_args(args)
    job = jobs.new_job(spec)  # resolves and checks: nothing loads before this passes
    store = open_store(args.store)
    if args.queue:
        from labcore.execution.executor import executor_for

        submission = executor_for(store, autostart=False).submit(spec)
        print(json.dumps({"key": submission.key, "status": submission.status, "outcome": submission.outcome}))
        return 0
    result = analyze_here(spec, store, log=lambda m: print(m, file=sys.stderr))
    print(json.dumps(result))
    return 0
