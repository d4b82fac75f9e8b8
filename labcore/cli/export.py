"""``python -m labcore export``: runs leaving the lab.

``export tensorboard [KEY ...] [--group NAME] --logdir DIR`` writes the runs' curves, hyper-parameters and
final metrics as TensorBoard event files (``tensorboard --logdir DIR`` shows them by condition);
``export model KEY DIR`` writes a finished run's fine-tuned model as a folder that ``transformers`` loads
(``pipeline("text-classification", model=DIR)``) with a tokenizer for the discipline's raw symbols.
"""

from __future__ import annotations

import argparse

from labcore.store import open_store


def add_arguments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="runs out of the lab: curves to TensorBoard, a fine-tuned model to transformers")
    actions = p.add_subparsers(dest="action", required=True)

    q = actions.add_parser("tensorboard", help="curves, hyper-parameters (HParams) and final metrics as event files")
    q.add_argument("keys", nargs="*", help="run keys or key prefixes")
    q.add_argument("--group", default=None, help="every run of this stored group (a sweep, a demo, a recipe)")
    q.add_argument("--logdir", default="runs", help="folder for the event files (default: runs)")
    q.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    q.set_defaults(func=cmd_tensorboard)

    q = actions.add_parser("model", help="a fine-tuned run as a transformers folder (weights, head, config with the "
                                         "label names, tokenizer for raw symbols, model card)")
    q.add_argument("key", help="a finished run's key or key prefix")
    q.add_argument("folder", help="the folder to write (created; files in it are replaced)")
    q.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    q.set_defaults(func=cmd_model)


def cmd_tensorboard(args: argparse.Namespace) -> int:
    from labcore.export.runs import finished_records
    from labcore.export.tensorboard import write_runs

    store = open_store(args.store)
    folders = write_runs(store, finished_records(store, args.keys, args.group), args.logdir)
    print(f"wrote {len(folders)} run(s) under {args.logdir}: tensorboard --logdir {args.logdir}")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from labcore.export.model import export_stored

    folder = export_stored(open_store(args.store), args.key, args.folder)
    print(f"wrote {folder}: transformers.pipeline('text-classification', model={str(folder)!r})")
    return 0
