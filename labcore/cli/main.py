"""`python -m labcore ...`: assets, data, run, sweep, recipe, and the worker commands.

Every RunSpec field is a flag (``--model``, ``--init``, ``--protocol``, ``--lr`` ...); ``--dparam k=v``
and ``--pparam k=v`` set discipline and protocol parameters. In ``sweep`` any flag takes a comma list
(``--init pretrained,random --seeds 0,1,2``) and the sweep is their product.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from labcore.cli import analyze as cli_analyze
from labcore.cli import export as cli_export
from labcore.cli import recipe as cli_recipe
from labcore.cli import store as cli_store
from labcore.cli import tune as cli_tune
from labcore.cli import worker as cli_worker
from labcore.cli.args import add_spec_arguments, key_values, listed, spec_from_args, specs_from_sweep_args
from labcore.errors import LabError
from labcore.events import LOG, RESULT, STEP, ResultEvent, describe

# ------------------------------------------------------------------------------------------ commands


def cmd_assets(args: argparse.Namespace) -> int:
    from labcore import assets

    if args.action == "list":
        for name, asset in assets.ASSETS.items():
            state = "available" if assets.is_available(name) else "missing"
            print(f"{name:16} {asset.kind:8} {state:9} {asset.size / 2**20:7.1f} MB  "
                  f"{asset.source}:{asset.requirement}  licence: {asset.licence}")
        return 0
    if args.action == "add":
        if len(args.names) != 2:
            raise LabError("usage: python -m labcore assets add NAME FILE")
        assets.add(args.names[0], args.names[1])
        return 0
    from tqdm import tqdm

    names = args.names or None
    if args.all:
        names = list(assets.ASSETS)
    chosen = names or [n for n, a in assets.ASSETS.items() if a.default]
    bar = tqdm(total=len(chosen), unit="asset", file=sys.stderr)
    failures = {}
    for name in chosen:
        bar.set_description(name)
        try:
            assets.fetch(name, progress=lambda m: tqdm.write(m, file=sys.stderr))
        except LabError as error:
            failures[name] = str(error)
        bar.update(1)
    bar.close()
    for name, message in failures.items():
        print(f"error: {name}: {message}", file=sys.stderr)
    return 1 if failures else 0


def cmd_data(args: argparse.Namespace) -> int:
    from labcore import data

    if args.action == "list":
        for name in data.names():
            discipline = data.get(name)
            ok, why = discipline.available()
            params = data.parse_params(discipline, {})
            info = discipline.info(params)
            # Sizes only of data sets already built: a listing must not start builds (the music corpus
            # alone parses for minutes on a fresh machine).
            if ok and data.is_built(discipline, params):
                summary = data.summarize(name, progress=lambda m: print(f"  ({m})", file=sys.stderr),
                                         n_examples=0)
                sizes = "/".join(f"{summary.split_sizes[s]:,}" for s in ("train", "validation", "test"))
                state = f"available  train/val/test {sizes}"
            elif ok:
                state = f"available  not built yet: `python -m labcore data show {name}` builds it"
            else:
                state = f"unavailable: {why}"
            classes = (", ".join(info.class_names) if info.output_kind == "class"
                       else f"{info.output_kind} ({info.num_outputs} outputs)")
            print(f"{name:22} {state}\n{'':22} {info.input_kind}; classes: {classes}\n"
                  f"{'':22} licence: {info.licence}")
        from labcore.data import glue

        print(f"{'glue-<task>':22} needs the hub or a local copy (data_dir=...): "
              + ", ".join(glue.names()))
        return 0
    if not args.name:
        raise LabError("usage: python -m labcore data show NAME")
    params = key_values(args.dparam, "--dparam")
    summary = data.summarize(args.name, params, preset=args.preset or "",
                             progress=lambda m: print(f"({m})", file=sys.stderr))
    _, info = data.load(args.name, params, preset=args.preset or "", progress=lambda _m: None)
    total = sum(summary.split_sizes.values())
    print(f"{args.name}: {info.title}")
    print(f"  {total:,} sequences: " + ", ".join(f"{k} {v:,}" for k, v in summary.split_sizes.items()))
    if summary.class_counts:
        print("  classes: " + " / ".join(f"{c} {summary.class_counts.get(c, 0):,}" for c in info.class_names))
    unit = "words" if info.input_kind == "text" else "tokens"
    print(f"  length ({unit}): min {summary.length_min}, mean {summary.length_mean:.1f}, max {summary.length_max}")
    print(f"  input: {info.input_kind}" + (f", alphabet of {len(info.alphabet)}" if info.alphabet else "")
          + (f", vectors of dimension {info.vector_dim}" if info.vector_dim else ""))
    print(f"  metric: {info.metric}; citation: {info.citation}")
    print(f"  source: {info.source}; licence: {info.licence}")
    if info.notes:
        print(f"  notes: {info.notes}")
    for example in summary.examples:
        print(f"  e.g. {example}")
    return 0


def _print_event(event: dict[str, Any]) -> None:
    """Progress on stderr while a run goes in this process: every event but the many steps (one in 20: the
    event whose interval crosses a multiple of 20, since on a GPU an event covers 25 steps) and preparation
    messages (preparing already wrote them)."""
    kind = event["type"]
    if kind == STEP and event["step"] // 20 == (event["step"] - event.get("steps", 1)) // 20:
        return
    if kind == LOG and event.get("phase") == "prepare":
        return
    line = describe(event)
    if line is not None:
        print(line, file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    from labcore.jobs.run import resolve_run
    from labcore.results.record import RunRecord
    from labcore.engine.run import iter_run

    # Resolved once, here: every check that needs no data or model runs before either loads, and iter_run
    # trains this resolution as it is.
    resolved = resolve_run(spec_from_args(args))
    record = None
    for event in iter_run(resolved):
        _print_event(event)
        if event["type"] == RESULT:
            record = RunRecord.from_dict(event["record"])
    assert record is not None
    if args.json:
        print(record.to_json())
    else:
        if record.test_value is None:
            outcome = f"no test {record.metric}: it stopped before its first validation (untrained weights)"
        else:
            outcome = (f"test {record.metric} {record.test_value:.4f} "
                       f"(majority {record.baseline.get('majority', float('nan')):.4f})")
        print(f"{record.status}: {outcome} in {record.wall_time_s:.1f} s")
        if record.error:
            print(f"  {record.error}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from labcore.results.compare import sweep_table

    specs = specs_from_sweep_args(args)
    if getattr(args, "queue", False):
        return cli_worker.queue_sweep(specs, args)
    from labcore.jobs.run import resolve_run
    from labcore.engine.sweep import run_sweep

    # Each spec resolved once, here, before the first run loads data or a model; run_sweep trains them as they are.
    resolved = [resolve_run(spec) for spec in specs]
    records = run_sweep(resolved, progress=lambda m: print(m, file=sys.stderr), on_event=_print_event)
    table = sweep_table(records)
    if args.csv:
        print(table.to_csv(index=False), end="")
    else:
        print(table.to_string(index=False))
    return 0


def cmd_pretrain(args: argparse.Namespace) -> int:
    """``pretrain``: MLM-pretrain a small model on an L1 corpus, in this process or (``--queue``) by a worker."""
    from labcore.pretrain.spec import PretrainSpec, resolve_pretrain

    spec = resolve_pretrain(PretrainSpec(
        corpus=args.corpus, size=args.size, steps=args.steps, tokens=args.tokens, batch_size=args.batch_size,
        lr=args.lr, sequences=args.sequences, seed=args.seed, precision=args.precision,
        substitute=args.substitute, name=args.name, start=args.start_from, train=args.train))
    if args.queue:
        return cli_worker.queue_sweep([spec], argparse.Namespace(**{**vars(args), "group": f"pretrain-{spec.name}"}))
    from labcore import jobs
    from labcore.pretrain.engine import iter_pretrain

    result: ResultEvent | None = None
    for event in iter_pretrain(spec, key=jobs.key_of(spec)):
        _print_event(event)
        if event["type"] == RESULT:
            result = ResultEvent.from_dict(event)
    if result is None or result.status != "done":
        error = result.record.get("error") if result else None
        print(f"{result.status if result else 'stopped'}: {error or 'no model written'}")
        return 1
    record = result.record
    print(f"done: {record['name']} ({record['folder']}): final MLM loss {record['final_loss']:.3f}, held-out "
          f"masked accuracy {record['eval_accuracy']:.3f} (unigram baseline "
          f"{record['unigram_baseline_accuracy']:.3f}), {record['tokens_per_s']:,.0f} tokens/s, "
          f"{record['wall_s']:.0f} s; use it as --model {record['name']}")
    return 0


def cmd_body(args: argparse.Namespace) -> int:
    """``body KEY``: write a finished run's body out as the backbone ``run:KEY``."""
    from labcore.pretrain.bodies import ensure_run_body
    from labcore.store import open_store

    store = open_store(args.store)
    key = store.resolve_key(args.key)
    record = store.get(key)
    if record is None or record.kind != "run":
        raise LabError(f"{args.key} is not a run in {store.root}")
    print(f"run:{key} -> {ensure_run_body(record, store.workdir(key))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from labcore.pretrain import corpora

    parser = argparse.ArgumentParser(prog="python -m labcore", description="Transfer Lab command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("assets", help="list, fetch or add real weights and data")
    p.add_argument("action", choices=["list", "fetch", "add"])
    p.add_argument("names", nargs="*")
    p.add_argument("--default", action="store_true", help="the default set (what make run fetches)")
    p.add_argument("--all", action="store_true")
    p.set_defaults(func=cmd_assets)

    p = sub.add_parser("data", help="list disciplines or show one")
    p.add_argument("action", choices=["list", "show"])
    p.add_argument("name", nargs="?")
    p.add_argument("--dparam", action="append", metavar="KEY=VALUE")
    p.add_argument("--preset", default="")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("run", help="run one spec in this process")
    add_spec_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result record as JSON on the last line")
    p.set_defaults(func=cmd_run)

    cli_analyze.add_arguments(sub)
    cli_tune.add_arguments(sub)

    p = sub.add_parser("sweep", help="run the product of comma-separated values; print a comparison table")
    add_spec_arguments(p)
    p.add_argument("--seeds", default=None, help="comma-separated seeds (same as --seed)")
    p.add_argument("--csv", action="store_true")
    p.add_argument("--queue", action="store_true", help="put the sweep in the worker queue instead")
    p.add_argument("--group", default="", help="name of the sweep group (queued sweeps)")
    p.set_defaults(func=cmd_sweep)
    cli_worker.add_queue_arguments(p)

    p = sub.add_parser("pretrain", help="MLM-pretrain a small model on an L1 corpus; it becomes lab:<name>")
    p.add_argument("--corpus", default="nested", help="an L1 corpus: " + listed(corpora.CORPORA.__getitem__))
    p.add_argument("--size", default="cpu", help="tiny, cpu (4 x 256, the default) or paper (RoBERTa-base shape)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--tokens", type=int, default=0, help="train on about this many tokens instead of --steps")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--sequences", type=int, default=20_000, help="corpus size in sequences")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    p.add_argument("--substitute", action="store_true", help="50-substitute after pretraining (nested-N corpora)")
    p.add_argument("--name", default="", help="the model's name: lab:<name> (default: derived from the spec)")
    p.add_argument("--from", dest="start_from", default="", help="go on from a model pretrained here, lab:<name>")
    p.add_argument("--train", default="all", choices=["all", "embeddings"],
                   help="embeddings: word embeddings and LM head only, the body frozen (Chiang §4.4)")
    p.add_argument("--queue", action="store_true", help="put it in the worker queue instead")
    p.set_defaults(func=cmd_pretrain)
    cli_worker.add_queue_arguments(p)

    p = sub.add_parser("body", help="write a finished run's body out as the backbone run:<key>")
    p.add_argument("key")
    p.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    p.set_defaults(func=cmd_body)

    cli_recipe.add_arguments(sub)
    cli_export.add_arguments(sub)
    cli_worker.add_commands(sub)
    cli_store.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except LabError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
