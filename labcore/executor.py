"""Where jobs execute, behind one small interface: submit, submit_group, cancel, resume, status, stream,
result.

The pages and the CLI talk to an :class:`Executor`, never to the store's queue or to worker processes.
A job is any registered kind's spec (:mod:`labcore.jobs`): a ``RunSpec`` trains, an ``AttentionSpec``
computes maps; the executor resolves and keys it once, here, torch-free. :class:`LocalExecutor` runs
jobs in local worker processes that share the on-disk store (:mod:`labcore.pool` starts them). A cluster
backend implements the same methods, writes the same events and records into the same store, and
registers itself in :data:`EXECUTORS`; neither the pages nor the job kinds change.

Choose the backend with ``TRANSFERLAB_EXECUTOR`` (default ``local``) and the number of local workers
with ``TRANSFERLAB_WORKERS`` (default 1). This module imports no torch.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Protocol

from labcore import jobs
from labcore.errors import LabError
from labcore.registry import Registry
from labcore.store import FINISHED, JobStatus, Store, Submission, Withdrawal, open_store


class Executor(Protocol):
    """What the pages need from whatever runs the jobs."""

    store: Store

    def submit(self, spec: Any, *, priority: str = "interactive", group: str | None = None,
               who: str | None = None) -> Submission:
        """Queue a job of any kind (a finished key returns its result at once; a live one returns itself,
        with ``who`` added to the people waiting for it)."""

    def submit_group(self, name: str, specs: Iterable[Any], *, priority: str = "sweep",
                     who: str | None = None) -> list[Submission]:
        """Queue several jobs as the named group ``name`` (a sweep, a demo)."""

    def cancel(self, key: str, who: str | None = None) -> JobStatus:
        """Stop a job for everyone at its next step (a queued one at once); it keeps its events."""

    def withdraw(self, key: str, who: str | None) -> Withdrawal:
        """Take back ``who``'s request: the job stops only if nobody else still waits for it."""

    def resume(self, key: str, who: str | None = None) -> Submission:
        """Continue a stopped job (dead, interrupted, cancelled, failed) from its last checkpoint."""

    def status(self, key: str) -> JobStatus:
        """The job now: status, progress, heartbeat age, error."""

    def stream(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Events since ``cursor`` and the next cursor (start with 0)."""

    def result(self, key: str) -> dict[str, Any] | None:
        """A finished job's result record, else None."""

    def ensure_workers(self) -> list[int]:
        """Make sure something will run queued jobs (local: start worker processes; a cluster: no-op)."""


class LocalExecutor:
    """Runs jobs in worker processes on this machine; starts them when none is alive."""

    def __init__(self, store: Store | None = None, *, workers: int = 1, autostart: bool = True) -> None:
        if workers < 1:
            raise LabError(f"the local executor needs at least 1 worker, got {workers}; "
                           f"set TRANSFERLAB_WORKERS to 1 or more")
        self.store = store or open_store()
        self.workers = workers
        self.autostart = autostart

    def submit(self, spec: Any, *, priority: str = "interactive", group: str | None = None,
               who: str | None = None) -> Submission:
        submission = self.store.submit(jobs.new_job(spec), priority=priority, group=group, who=who)
        if submission.status == "queued":
            self._wake_workers()
        return submission

    def submit_group(self, name: str, specs: Iterable[Any], *, priority: str = "sweep",
                     who: str | None = None) -> list[Submission]:
        submissions = self.store.submit_group(name, [jobs.new_job(s) for s in specs], priority=priority, who=who)
        if any(s.status == "queued" for s in submissions):
            self._wake_workers()
        return submissions

    def cancel(self, key: str, who: str | None = None) -> JobStatus:
        self.store.cancel(key, who)
        return self.store.status(key)

    def withdraw(self, key: str, who: str | None) -> Withdrawal:
        return self.store.withdraw(key, who)

    def clear_queue(self, who: str | None = None) -> list[str]:
        """Cancel every queued job (running ones go on); returns their keys."""
        return self.store.clear_queue(who)

    def resume(self, key: str, who: str | None = None) -> Submission:
        submission = self.store.resume(key, who)
        self._wake_workers()
        return submission

    def status(self, key: str) -> JobStatus:
        return self.store.status(key)

    def stream(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        return self.store.read_events(key, cursor)

    def result(self, key: str) -> dict[str, Any] | None:
        record = self.store.get(key)
        return record.get("result") if record is not None and record["status"] in FINISHED else None

    # -------------------------------------------------------------------------------- local workers
    def _wake_workers(self) -> None:
        if self.autostart:
            self.ensure_workers()

    def ensure_workers(self) -> list[int]:
        """Start workers until ``self.workers`` are alive; returns the pids started (often none).

        The count and the start happen under the store's lock, so two pages pressing run at the same
        moment start one worker, not two. Workers run in their own session: they outlive page reloads
        and the server; ``python -m labcore worker --stop`` stops them.
        """
        from labcore.pool import reap_children, start_worker

        reap_children()
        started: list[int] = []
        if self.store.workers_held():  # the teacher stopped the workers: queued jobs wait for a start
            return started
        with self.store.cache.transact(retry=True):
            alive = self.store.workers(alive_only=True)
            for _ in range(self.workers - len(alive)):
                started.append(start_worker(self.store, new_session=True).pid)
        return started

    def stop_workers(self, timeout_s: float | None = None, *, hold: bool = False,
                     who: str | None = None) -> list[int]:
        """Stop the alive workers (their runs checkpoint and become interrupted). With ``hold`` none is
        started again, by a submission or a page, until :meth:`start_workers`."""
        from labcore.pool import stop_workers

        if hold:
            self.store.hold_workers(who)
        return stop_workers(self.store, timeout_s=timeout_s or self.store.settings.stop_timeout_s)

    def start_workers(self) -> list[int]:
        """Lift a hold and start workers as :meth:`ensure_workers` does."""
        self.store.release_workers()
        return self.ensure_workers()

    def alive_workers(self) -> list[dict[str, Any]]:
        return self.store.workers(alive_only=True)


EXECUTORS: Registry[Callable[[], Executor]] = Registry("executor")


def _local_from_environment() -> LocalExecutor:
    text = os.environ.get("TRANSFERLAB_WORKERS", "1")
    try:
        count = int(text)
    except ValueError:
        raise LabError(f"TRANSFERLAB_WORKERS={text!r} is not a number; set it to how many local workers "
                       f"to run (default 1)") from None
    return LocalExecutor(workers=count)


EXECUTORS.register("local", _local_from_environment)

_EXECUTOR: dict[str, Executor] = {}


def get_executor(kind: str | None = None) -> Executor:
    """The process's executor: ``kind`` or ``TRANSFERLAB_EXECUTOR`` (default ``local``)."""
    kind = kind or os.environ.get("TRANSFERLAB_EXECUTOR", "local")
    if kind not in _EXECUTOR:
        _EXECUTOR[kind] = EXECUTORS[kind]()
    return _EXECUTOR[kind]
