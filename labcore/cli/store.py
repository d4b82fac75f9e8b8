"""Keeping a lab running from the command line: ``store check|repair|du|export|import`` and ``delete``.

``delete`` shows what would go (and what depends on it) and deletes only with ``--yes``, so a command typed
by mistake loses nothing. Nothing here imports torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from labcore import paths
from labcore.cli.args import add_store_argument
from labcore.errors import LabError
from labcore.store import open_store
from labcore.store.delete import delete, plan_delete
from labcore.store.selection import Selection


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``store`` and ``delete`` on ``python -m labcore``'s subparsers."""
    p = subparsers.add_parser("store", help="check or repair the store's database; du: what the lab holds on disk; "
                                            "export/import ARCHIVE: finished jobs into one file and into a lab")
    p.add_argument("action", choices=["check", "repair", "du", "export", "import"])
    p.add_argument("archive", nargs="?", help="export/import: the archive file (.tar, or .tar.gz compressed)")
    p.add_argument("--drop-stale", action="store_true",
                   help="du: also delete the resume checkpoints finished jobs still hold (never resumed again)")
    p.add_argument("--keys", nargs="+", default=[], help="export: these jobs (first characters are enough)")
    p.add_argument("--group", default="", help="export: the jobs of this group")
    p.add_argument("--recipe", default="", help="export: the jobs of this recipe's groups")
    p.add_argument("--weights", action="store_true", help="export: the runs' weights too (large; rebuilt by rerunning)")
    add_store_argument(p)
    p.set_defaults(func=cmd_store)

    p = subparsers.add_parser("delete", help="delete runs, a group or a recipe's jobs (shows what goes; --yes deletes)")
    p.add_argument("keys", nargs="*", help="job keys (their first characters are enough)")
    p.add_argument("--group", default="", help="every job of this group that no other group lists")
    p.add_argument("--recipe", default="", help="every job of this recipe's groups (any budget and seeds)")
    p.add_argument("--all", action="store_true", help="every job of the lab (reset a class: export it first)")
    p.add_argument("--yes", action="store_true", help="delete; without it the command only shows what would go")
    add_store_argument(p)
    p.set_defaults(func=cmd_delete)


def _root(args: argparse.Namespace) -> Path:
    return Path(args.store) if args.store else paths.cache_dir() / "store"


def cmd_store(args: argparse.Namespace) -> int:
    from labcore.store import repair
    from labcore.store.errors import REPAIR_HINT

    if args.action == "du":
        return _du(args)
    if args.action in ("export", "import"):
        return _archive(args)
    root = _root(args)
    if not repair.exists(root):
        print(f"no store at {root} yet (the lab makes it with its first job): nothing to {args.action}")
        return 0
    report = repair.check(root) if args.action == "check" else repair.repair(root)
    for problem in report.problems:
        print(f"problem: {problem}")
    for action in report.actions:
        print(f"done: {action}")
    if args.action == "check":
        print("the store is sound" if report.ok else f"{len(report.problems)} problem(s); run `{REPAIR_HINT}` "
                                                     f"to fix what is safe to fix")
        return 0 if report.ok else 1
    left = repair.check(root).problems
    for problem in left:
        print(f"still: {problem}")
    print("the store is sound" if not left else f"{len(left)} problem(s) left: each says what would fix it")
    return 0 if not left else 1


def _du(args: argparse.Namespace) -> int:
    from labcore.store.usage import disk_usage, drop_stale_checkpoints

    store = open_store(args.store)
    if args.drop_stale:
        print(f"freed {drop_stale_checkpoints(store) / 2**20:,.1f} MiB of stale resume checkpoints")
    for line in disk_usage(store).lines():
        print(line)
    return 0


def _archive(args: argparse.Namespace) -> int:
    from labcore import archive

    if not args.archive:
        raise LabError(f"usage: python -m labcore store {args.action} ARCHIVE (a .tar or .tar.gz file)")
    store = open_store(args.store)
    if args.action == "export":
        done = archive.export(store, args.archive, Selection(tuple(args.keys), args.group, args.recipe),
                              weights=args.weights)
        print(f"wrote {done.path}: {len(done.keys)} finished job(s), {len(done.uploads)} upload(s), "
              f"{done.bytes / 2**20:,.1f} MiB" + ("" if args.weights else " (without weights: add --weights)"))
        if done.skipped:
            print(f"left out {len(done.skipped)} job(s) that are not finished: {', '.join(k[:12] for k in done.skipped)}")
        if done.models:
            print(f"with the lab's model(s) the jobs name: {', '.join(done.models)}")
        if done.absent_models:
            print(f"not on this machine, so not in the archive: {', '.join(done.absent_models)} (the jobs that "
                  f"name them cannot run again in the other lab until it has them; a run: body is written "
                  f"again there from its run when the run's weights travel: --weights)")
        return 0
    done = archive.import_archive(store, args.archive)
    print(f"imported {len(done.keys)} job(s) and {len(done.uploads)} upload(s) from {args.archive}")
    if done.existing:
        print(f"skipped {len(done.existing)} job(s) this lab already holds (same key, same result): "
              + ", ".join(k[:12] for k in done.existing))
    if done.existing_uploads:
        print(f"kept the upload(s) already here: {', '.join(done.existing_uploads)}")
    if done.models or done.existing_models:
        print(f"model(s) brought in: {', '.join(done.models) or 'none'}; kept (already here, same files): "
              f"{', '.join(done.existing_models) or 'none'}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    plan = plan_delete(store, Selection(tuple(args.keys), args.group, args.recipe, everything=args.all))
    for line in plan.lines():
        print(line)
    if plan.blocking:
        raise LabError("; ".join(d.describe() for d in plan.blocking) + " and would fail without it: cancel or "
                       "delete those first (or include them), then ask again")
    if not args.yes:
        print("nothing was deleted: add --yes to delete this")
        return 1
    done = delete(store, plan)
    print(f"deleted {len(done.keys)} job(s); their keys can run again")
    return 0


__all__ = ["add_commands"]
