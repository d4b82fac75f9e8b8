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
import time

from labcore import jobs
from labcore.cli_args import disciplines_help, key_values, models_help
from labcore.errors import LabError
from labcore.events import LOG, RESULT
from labcore.jobs.analyses import ANALYSES, SPEC_TYPES, ModelRef


def parse_model(text: str) -> ModelRef:
    """``NAME[@INIT[@SEED[@MAPPING]]]`` or ``run=KEY``."""
    if text.startswith("run="):
        return ModelRef(run=text[len("run="):])
    name, *rest = text.split("@")
    if len(rest) > 3 or not name:
        raise LabError(f"--model {text!r}: give NAME, NAME@INIT, NAME@INIT@SEED, NAME@INIT@SEED@MAPPING or run=KEY")
    try:
        seed = int(rest[1]) if len(rest) >= 2 else 0
    except ValueError:
        raise LabError(f"--model {text!r}: the seed after the second @ must be a whole number") from None
    return ModelRef(model=name, init=rest[0] if rest else "pretrained", seed=seed,
                    mapping=rest[2] if len(rest) == 3 else "auto")


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
        from labcore.executor import executor_for

        submission = executor_for(store, autostart=False).submit(spec)
        print(json.dumps({"key": submission.key, "status": submission.status, "outcome": submission.outcome}))
        return 0
    result = analyze_here(spec, store, log=lambda m: print(m, file=sys.stderr))
    print(json.dumps(result))
    return 0


def analyze_here(spec, store, log=lambda _m: None) -> dict:
    """Run one analysis spec in this process (a finished one comes from the store) and return its result."""
    job = jobs.new_job(spec)
    cached = store.get(job.key)
    if cached is not None and cached.status == "done":
        log(f"{job.label}: from the store")
        return cached.result
    kind = jobs.get_kind(job.kind)
    inputs = {}
    for key in job.requires:
        record = store.record(key)
        if not record.finished:
            raise LabError(f"run {key} is {record.status}: analyses of fine-tuned weights need a finished run")
        inputs[key] = jobs.JobInput(record=record, workdir=store.workdir(key))
    started = time.perf_counter()
    result = None
    for event in kind.handler(kind.from_dict(job.spec), jobs.JobContext(workdir=store.workdir(job.key),
                                                                       inputs=inputs)):
        if event["type"] == LOG:
            log(event["message"])
        elif event["type"] == RESULT:
            result = event["record"]
    log(f"{job.label}: {time.perf_counter() - started:.1f} s")
    return result
