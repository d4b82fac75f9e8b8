"""Queue commands of ``python -m labcore``: worker, submit, status, cancel, resume, tail (and sweep --queue);
the store's upkeep (check, repair, delete, du, export, import) is :mod:`labcore.cli.store`.

``labcore.cli.main`` registers them with :func:`add_commands`; ``submit`` takes the same spec flags as ``run``.
Every command takes ``--store DIR`` (default ``<TRANSFERLAB_CACHE>/store``) so scripts and tests can
use a store of their own. Nothing here imports torch: only the worker process does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from labcore.cli.args import add_spec_arguments, add_store_argument, spec_from_args
from labcore.errors import LabError
from labcore.events import describe
from labcore.execution.executor import Executor, executor_for
from labcore.fmt import fmt_age
from labcore.execution.pool import add_worker_arguments
from labcore.results.record import RunRecord
from labcore.store import Store, Submission, open_store


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register worker, submit, status, cancel, resume and tail on ``python -m labcore``'s subparsers."""
    p = subparsers.add_parser("worker", help="run queued specs in this process (or --stop the workers)")
    add_worker_arguments(p)
    p.set_defaults(func=_run_worker)

    # Its options live with the process (labcore.execution.ray_pump), which imports Ray: they are passed through.
    p = subparsers.add_parser("ray-executor", add_help=False,
                              help="run queued jobs on a Ray cluster (RAY_ADDRESS, or a local one); --help for options")
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=_run_ray_executor)

    p = subparsers.add_parser("submit", help="queue one spec for the workers (same flags as run)")
    add_spec_arguments(p)
    add_store_argument(p)
    p.add_argument("--priority", choices=("interactive", "sweep"), default="interactive",
                   help="interactive runs are claimed before queued sweeps (default interactive)")
    p.add_argument("--group", default=None, help="also add the run to this named group (sweep)")
    p.add_argument("--start", action="store_true", help="start a background worker if none is alive")
    p.add_argument("--follow", action="store_true", help="then print its live events until it ends")
    p.add_argument("--json", action="store_true", help="print the submission as JSON")
    p.set_defaults(func=cmd_submit)

    p = subparsers.add_parser("status", help="the runs in the store, or one run in detail")
    p.add_argument("key", nargs="?", help="a run key (its first characters are enough)")
    add_store_argument(p)
    p.add_argument("--group", default=None, help="only the runs of this sweep")
    p.add_argument("--json", action="store_true", help="print records as JSON")
    p.set_defaults(func=cmd_status)

    p = subparsers.add_parser("cancel", help="cancel a run (it stops after its current step)")
    p.add_argument("key")
    add_store_argument(p)
    p.set_defaults(func=cmd_cancel)

    p = subparsers.add_parser("resume", help="continue a dead, interrupted, cancelled or failed run")
    p.add_argument("key")
    add_store_argument(p)
    p.add_argument("--start", action="store_true", help="start a background worker if none is alive")
    p.set_defaults(func=cmd_resume)

    p = subparsers.add_parser("tail", help="print a run's metric stream, following it while it runs")
    p.add_argument("key")
    add_store_argument(p)
    p.add_argument("--no-follow", action="store_true", help="print what is there and exit")
    p.add_argument("--json", action="store_true", help="one JSON event per line")
    p.set_defaults(func=cmd_tail)


def add_queue_arguments(parser: argparse.ArgumentParser) -> None:
    """``--store`` and ``--start`` for a command that queues (``sweep … --queue``); see :func:`queue_sweep`."""
    add_store_argument(parser)
    parser.add_argument("--start", action="store_true", help="with --queue: start a background worker if none is alive")


def _executor(args: argparse.Namespace) -> Executor:
    """The executor TRANSFERLAB_EXECUTOR names (local by default), on ``--store``; it starts its claiming
    process only with ``--start``."""
    return executor_for(open_store(getattr(args, "store", None)), autostart=bool(getattr(args, "start", False)))


def _worker_hint(store: Store, submissions: list[Submission]) -> None:
    if any(s.status == "queued" for s in submissions) and not store.workers():
        print("no worker is running: start one with `python -m labcore worker` (or pass --start)",
              file=sys.stderr)


# --------------------------------------------------------------------------------------------- commands
def _run_worker(args: argparse.Namespace) -> int:
    from labcore.execution.worker import run_worker_command  # the claim loop loads the job kinds: only workers need it

    return run_worker_command(args)


def _run_ray_executor(args: argparse.Namespace) -> int:
    try:
        from labcore.execution.ray_pump import main
    except ImportError as exc:
        raise LabError(f"the Ray executor needs Ray ({exc}); install the extra: "
                       f"pip install -r requirements-ray.txt") from None
    return main(args.options)


def cmd_submit(args: argparse.Namespace) -> int:
    executor = _executor(args)
    submission = executor.submit(spec_from_args(args), priority=args.priority, group=args.group)
    if args.json:
        print(json.dumps({"key": submission.key, "status": submission.status, "outcome": submission.outcome}))
    else:
        print(f"{submission.key} {submission.status} ({submission.outcome}) {submission.record.label}")
    _worker_hint(executor.store, [submission])
    if args.follow:
        return _tail(executor.store, submission.key, follow=True, as_json=False)
    return 0


def queue_sweep(specs: list, args: argparse.Namespace) -> int:
    """``sweep … --queue``: queue every spec of the sweep as group ``--group`` (default sweep-<time>)."""
    name = getattr(args, "group", "") or f"sweep-{dt.datetime.now():%Y%m%d-%H%M%S}"
    executor = _executor(args)
    submissions = executor.submit_group(name, specs)
    for s in submissions:
        print(f"{s.key} {s.status:10} {s.outcome:8} {s.record.label}")
    counts = {o: sum(s.outcome == o for s in submissions) for o in ("queued", "cached", "existing", "resumed",
                                                                      "requeued")}
    print(f"sweep {name!r}: {len(submissions)} specs, " + ", ".join(f"{n} {o}" for o, n in counts.items() if n)
          + f"; follow it with `python -m labcore status --group {name}`")
    _worker_hint(executor.store, submissions)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    if args.key:
        key = store.resolve_key(args.key)
        status = store.status(key)
        if args.json:
            print(json.dumps(status.record.to_dict(), default=str))
            return 0
        record = status.record
        print(f"{key}  {status.status}  {status.label}")
        progress = f"step {status.step}" + (f"/{status.total_steps}" if status.total_steps else "")
        if status.loss is not None:
            progress += f", loss {status.loss:.4f}"
        print(f"  {progress}; attempt {record.attempt}, pid {record.pid or '-'}, "
              f"submitted {fmt_age(record.submitted_at)}, started {fmt_age(record.started_at)}"
              + (f", heartbeat {status.heartbeat_age_s:.1f}s ago" if status.heartbeat_age_s is not None else ""))
        result = record.result or {}
        if result.get("test") and RunRecord.from_dict(result).untrained:
            print("  test: none (it stopped before its first validation: untrained weights)")
        elif result.get("test"):
            print("  test: " + ", ".join(f"{k} {v:.4f}" for k, v in result["test"].items()))
        if status.error or result.get("error"):
            print(f"  error: {status.error or result['error']}")
        log = store.log(key).splitlines()
        if log:
            print("  log (last lines):")
            for line in log[-10:]:
                print(f"    {line}")
        print(f"  files: {store.workdir(key)}")
        return 0
    records = store.jobs(group=args.group)
    if args.json:
        print(json.dumps([r.to_dict() for r in records], default=str))
        return 0
    workers = store.workers()
    print(f"{len(workers)} worker(s) alive" + (": " + ", ".join(f"{w['pid']} ({w['state']})" for w in workers)
                                                if workers else ""))
    for record in records:
        kind = record.kind
        line = f"{record.key[:12]}  {record.status:11}  " + ("" if kind == "run" else f"[{kind}] ") \
            + record.label
        if record.status == "running":
            beat = store.heartbeat_of(record.key) or {}
            line += f"  step {beat.get('step', 0)}/{beat.get('total_steps', 0) or '?'}"
        elif record.error:
            line += f"  ({record.error[:80]})"
        print(line)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    executor = _executor(args)
    key = executor.store.resolve_key(args.key)
    status = executor.cancel(key)
    note = "cancel requested: it stops after its current step" if status.status == "running" else status.status
    print(f"{key} {note}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    executor = _executor(args)
    key = executor.store.resolve_key(args.key)
    submission = executor.resume(key)
    print(f"{key} {submission.status} ({submission.outcome})")
    _worker_hint(executor.store, [submission])
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    return _tail(store, store.resolve_key(args.key), follow=not args.no_follow, as_json=args.json)


def _tail(store: Store, key: str, *, follow: bool, as_json: bool) -> int:
    events = store.follow(key) if follow else iter(store.events(key))
    try:
        for event in events:
            line = json.dumps(event) if as_json else describe(event)
            if line is not None:
                print(line, flush=True)
    except KeyboardInterrupt:
        return 130
    record = store.record(key)
    if not as_json:
        print(f"{key} {record.status}" + (f": {record.error}" if record.error else ""))
    return 0 if record.finished or record.active else 1


__all__ = ["add_commands", "add_queue_arguments", "queue_sweep"]
