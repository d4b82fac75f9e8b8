"""The worker: a separate OS process that claims queued jobs of any registered kind and runs them.

``python -m labcore worker`` loops: claim one job atomically, look its kind up in :mod:`labcore.jobs`,
run the kind's handler, stream its events into the store, record the result, repeat. The loop itself
(registration, reaping, the queue gate, heartbeats, a full disk) is :class:`labcore.execution.claim_loop.ClaimLoop`'s,
shared with the Ray driver; this module runs a claimed job in-process. Starting, stopping and supervising
worker processes is :mod:`labcore.execution.pool`'s job, not this module's.

Why a process and not a thread: Streamlit reruns interrupt the script thread, a page reload must not
stop training, and torch should live in one process that the pages never import.

While a job is going the worker

* rewrites the job's heartbeat (and its own) every ``heartbeat_every_s`` from a side thread, so a long
  model load or a slow step never looks like a crash;
* buffers step events and writes them every ``flush_every_s`` (other events at once), so the SQLite
  lock is not taken once per step;
* tees its own stdout and stderr (file-descriptor level, so C extensions and warnings are caught too)
  into the job's log in the store, so a failure is explained on the page;
* passes the handler a ``should_stop`` that reads the store's cancel flag and turns SIGTERM/SIGINT into
  ``interrupted``. A kind that stops itself (training: finish the step, checkpoint, yield its result)
  polls it; for any other kind the worker closes the handler at its next event.

A SIGKILL leaves the job ``running`` with a heartbeat that stops; readers then see it ``dead`` (stale
heartbeat, or pid gone or a zombie) and ``resume`` continues it from its kind's checkpoint.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import threading
import time
import traceback
from typing import Any

from labcore import jobs
from labcore.execution.attempt import EventSink, Outcome, OutputCapture, failure, run_attempt
from labcore.execution.claim_loop import ClaimLoop, Identity, Launched
from labcore.execution.lifetime import Lifetime
from labcore.errors import LabError
from labcore.jobs import JobContext, JobInput
from labcore.execution.pool import add_worker_arguments, start_worker, stop_workers, supervise
from labcore.store import HOST, Claim, Store, health, open_store

class Worker(ClaimLoop):
    """Claims and runs jobs until stopped (SIGTERM/SIGINT), or until idle when ``exit_when_idle``."""

    beat_from_thread = True  # launch() runs the job in this thread: the heartbeat has a thread of its own

    def __init__(self, store: Store, *, checkpoint_every: int | None = None, exit_when_idle: bool = False,
                 max_runs: int = 0, threads: int = 0, lifetime: Lifetime = Lifetime()) -> None:
        pid = os.getpid()
        # The GPU its supervisor gave it (labcore.execution.pool), for the Runs page; "" where it sees the machine's.
        super().__init__(store, Identity(pid, f"worker {pid}", gpu=os.environ.get("CUDA_VISIBLE_DEVICES", "")),
                         lifetime)
        self.threads = threads  # torch threads per job; 0: the cores divided among this host's workers
        self.settings = store.settings
        self.checkpoint_every = self.settings.checkpoint_every if checkpoint_every is None else checkpoint_every
        self.exit_when_idle = exit_when_idle
        self.max_runs = max_runs
        self._ran = False  # a job ran this tick: the queue is looked at again (and reaped when due) first
        self._current: tuple[Claim, EventSink] | None = None
        self._lost = False  # the job was taken from us (resumed elsewhere after a false "dead")
        # Held while the current claim changes, and by a heartbeat that found its claim taken: a beat that
        # read the claim just before it ended must not mark the next claim lost (it stopped after one step).
        self._claim_lock = threading.Lock()
        self.load_error = ""  # the traceback of a kind module that could not be imported

    # ------------------------------------------------------------------------------------ signals
    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Finish the current step, checkpoint and record `interrupted` (a kind that stops itself does
        # that when should_stop says so); an idle worker just leaves its loop.
        self.stop()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    # ------------------------------------------------------------------------- the claim loop's hooks
    def start(self) -> str:
        self._load_kinds()
        return f"ready (store {self.store.root})"

    def capacity(self) -> float:
        return 0 if self._ran else 1

    def launch(self, claim: Claim) -> None:
        self.run_claim(claim)
        self._ran = True

    def poll(self) -> None:
        ran, self._ran = self._ran, False
        if ran:
            if self.max_runs and self.handled >= self.max_runs:
                self.leave()
            return
        if self.exit_when_idle:
            self.leave()
            return
        self.wake.wait(self.settings.poll_every_s)

    def launched(self) -> list[Launched]:
        current = self._current
        return [] if current is None else [Launched(*current, handle=current)]

    def lost(self, run: Launched) -> None:
        with self._claim_lock:
            if self._current is run.handle:
                self._lost = True

    def _load_kinds(self) -> None:
        """Import the job kinds (those named in TRANSFERLAB_JOB_MODULES too) and warm each one up (torch,
        transformers), before the first claim: a warm worker starts a job at once."""
        try:
            jobs.load_modules()
        except Exception:
            # Keep serving: each claimed job then fails with this traceback in its log, which the page
            # shows, instead of jobs waiting forever for a worker that keeps dying.
            self.load_error = traceback.format_exc()
            print(f"worker {self.pid}: cannot import the job kinds:\n{self.load_error}", file=sys.stderr, flush=True)
        for name, kind in jobs.KINDS.items():
            if kind.warm_up is None:
                continue
            try:
                kind.warm_up()
            except Exception:
                # Not fatal here: the first job of the kind meets the same error and records it in its log.
                print(f"worker {self.pid}: warm-up of {name} failed:\n{traceback.format_exc()}", file=sys.stderr,
                      flush=True)

    def _threads(self) -> int:
        """Threads for a job: the machine's cores shared by the workers alive on it.

        torch uses every core by default; two workers doing so on two cores run far slower than two
        workers with one thread each (oversubscription), so the cores are divided.
        """
        if self.threads:
            return self.threads
        local = sum(1 for w in self.store.workers(role="worker") if w.get("host") == HOST) or 1
        return max(1, (os.cpu_count() or 1) // local)

    def _should_stop(self, claim: Claim) -> str | None:
        if self.store.cancel_requested(claim.key, claim.attempt):
            return "cancelled"
        if claim.deadline and time.time() > claim.deadline:
            # Its requester's time limit (a student's job, the teacher's max job time): a cancel that says who.
            self.store.cancel(claim.key, claim.deadline_note)
            return "cancelled"
        current = self._current
        if self.stop_reason or self._lost or (current is not None and (current[1].fenced or current[1].write_error)):
            return "interrupted"
        return None

    def _context(self, claim: Claim) -> JobContext:
        inputs = {key: JobInput(record=self.store.record(key), workdir=self.store.workdir(key))
                  for key in claim.requires}
        return JobContext(workdir=claim.workdir, should_stop=lambda: self._should_stop(claim), resume=claim.resume,
                          checkpoint_every=self.checkpoint_every, threads=self._threads(), inputs=inputs,
                          commit_file=lambda tmp, final: self.store.commit_file(claim.key, claim.attempt, tmp, final))

    def run_claim(self, claim: Claim) -> str:
        """Run one claimed job to its end; returns the status recorded."""
        sink = EventSink(self.store, claim.key, self.settings, attempt=claim.attempt)
        with self._claim_lock:
            self._current = (claim, sink)
            self._lost = False
        outcome = Outcome("failed")
        try:
            with OutputCapture(sink, self.settings.capture_join_s):
                attempt = run_attempt(claim.kind, claim.spec, self._context(claim), store_root=self.store.root,
                                      min_free_mb=self.settings.min_free_mb, load_error=self.load_error)
                try:
                    for item in attempt:
                        if isinstance(item, Outcome):
                            outcome = item
                        else:
                            sink.add(item)
                except Exception as exc:  # the store refused an event: the handler is closed, the job failed
                    attempt.close()
                    outcome, explained = failure(exc, self.store.root)
                    sink.add(explained)
                self._lost = self._lost or outcome.lost
                if sink.write_error:
                    outcome.status, outcome.error = "failed", sink.write_error
        finally:
            if outcome.error.startswith(health.DISK_FULL):
                health.release_reserve(self.store.root)  # room for SQLite to record why
            sink.add(outcome.event())
            sink.flush()
            lost = self._lost or sink.fenced
            if not lost:
                self._finish(claim, outcome.status, result=outcome.result, error=outcome.error,
                             traceback=outcome.traceback)
            with self._claim_lock:
                self._current = None
            health.keep_reserve(self.store.root)  # back once there is room again
        if lost:
            # Quietly: the job's stream and record belong to the attempt that superseded this one.
            print(f"worker {self.pid}: {claim.kind} {claim.key} attempt {claim.attempt} was resumed elsewhere; "
                  f"stopped without writing anything more", flush=True)
            return "fenced"
        status, error = outcome.status, outcome.error
        print(f"worker {self.pid}: {claim.kind} {claim.key} {status}" + (f" ({error})" if error else ""), flush=True)
        return status

    def _finish(self, claim: Claim, status: str, **outcome: Any) -> None:
        """Record how the job ended; a full disk must not take the worker down with it."""
        try:
            self.store.finish(claim.key, claim.attempt, status, **outcome)
        except (OSError, sqlite3.OperationalError) as exc:
            if not health.is_disk_full(exc):
                raise
            print(f"worker {self.pid}: could not record {claim.key} {status}: "
                  f"{health.disk_full_message(self.store.root)}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ command line
def run_worker_command(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    if args.stop:
        pids = stop_workers(store, timeout_s=args.timeout)
        print(f"stopped {len(pids)} worker(s)" + (f": {', '.join(map(str, pids))}" if pids else ""))
        return 0
    extra: list[str] = []
    if args.checkpoint_every is not None:
        extra += ["--checkpoint-every", str(args.checkpoint_every)]
    if args.exit_when_idle:
        extra.append("--exit-when-idle")
    if args.max_runs:
        extra += ["--max-runs", str(args.max_runs)]
    if args.threads:
        extra += ["--threads", str(args.threads)]
    lifetime = Lifetime.from_arguments(args)  # a person's worker serves until stopped unless they say otherwise
    if args.workers < 1:
        raise LabError(f"--workers must be at least 1, got {args.workers}")
    if args.detach:
        started = [start_worker(store, extra_args=tuple(extra), lifetime=lifetime).pid for _ in range(args.workers)]
        print(f"started {len(started)} worker(s): {', '.join(map(str, started))}; "
              f"stop them with `python -m labcore worker --stop`")
        return 0
    if args.workers > 1:
        return supervise(store, args.workers, tuple(extra) + lifetime.arguments())
    worker = Worker(store, checkpoint_every=args.checkpoint_every, exit_when_idle=args.exit_when_idle,
                    max_runs=args.max_runs, threads=args.threads, lifetime=lifetime)
    worker.install_signal_handlers()
    worker.serve()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labcore.execution.worker", description="Run queued jobs")
    add_worker_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_worker_command(args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
