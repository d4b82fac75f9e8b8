"""Where runs execute, behind one small interface: submit, cancel, resume, status, stream.

The pages and the CLI talk to an :class:`Executor`, never to worker processes. :class:`LocalExecutor`
runs specs in local worker processes that share the on-disk store. A cluster backend (Ray is the
likely one) implements the same few methods — submit a Ray task per spec that calls
``labcore.run.iter_run`` and writes its events to the same store, for instance — and registers itself
in :data:`EXECUTORS`; neither the pages nor the engine change.

Choose the backend with ``TRANSFERLAB_EXECUTOR`` (default ``local``) and the number of local workers
with ``TRANSFERLAB_WORKERS`` (default 1). This module imports no torch.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Protocol

from labcore.errors import LabError
from labcore.registry import Registry
from labcore.spec import RunSpec
from labcore.store import RunStatus, Store, Submission, open_store


class Executor(Protocol):
    """What the pages need from whatever runs the specs."""

    def submit(self, spec: RunSpec, *, priority: str = "interactive", group: str | None = None) -> Submission:
        """Queue a spec (a finished key returns its result at once; a live one returns itself)."""

    def submit_group(self, name: str, specs: list[RunSpec], *, priority: str = "sweep") -> list[Submission]:
        """Queue a sweep: the specs become the named group ``name``."""

    def cancel(self, key: str) -> RunStatus:
        """Stop a run at its next training step (a queued run at once); it keeps its curves."""

    def resume(self, key: str) -> Submission:
        """Continue a stopped run (dead, interrupted, cancelled, failed) from its last checkpoint."""

    def status(self, key: str) -> RunStatus:
        """The run now: status, progress, heartbeat age, error."""

    def stream(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Metric events since ``cursor`` and the next cursor (start with 0)."""

    def ensure_workers(self) -> list[int]:
        """Make sure something will run queued specs (local: start worker processes; a cluster: no-op)."""


class LocalExecutor:
    """Runs specs in worker processes on this machine; starts them when none is alive."""

    def __init__(self, store: Store | None = None, *, workers: int = 1, autostart: bool = True) -> None:
        if workers < 1:
            raise LabError(f"the local executor needs at least 1 worker, got {workers}; "
                           f"set TRANSFERLAB_WORKERS to 1 or more")
        self.store = store or open_store()
        self.workers = workers
        self.autostart = autostart

    def submit(self, spec: RunSpec, *, priority: str = "interactive", group: str | None = None) -> Submission:
        submission = self.store.submit(spec, priority=priority, group=group)
        if submission.status == "queued":
            self._wake_workers()
        return submission

    def submit_group(self, name: str, specs: list[RunSpec], *, priority: str = "sweep") -> list[Submission]:
        submissions = self.store.submit_group(name, specs, priority=priority)
        if any(s.status == "queued" for s in submissions):
            self._wake_workers()
        return submissions

    def cancel(self, key: str) -> RunStatus:
        self.store.cancel(key)
        return self.store.status(key)

    def resume(self, key: str) -> Submission:
        submission = self.store.resume(key)
        self._wake_workers()
        return submission

    def status(self, key: str) -> RunStatus:
        return self.store.status(key)

    def stream(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        return self.store.read_events(key, cursor)

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
        from labcore.worker import reap_children, start_worker  # no torch: the worker imports it later

        reap_children()
        started: list[int] = []
        with self.store.cache.transact(retry=True):
            alive = self.store.workers(alive_only=True)
            for _ in range(self.workers - len(alive)):
                started.append(start_worker(self.store, new_session=True).pid)
        return started

    def stop_workers(self, timeout_s: float = 30.0) -> list[int]:
        from labcore.worker import stop_workers

        return stop_workers(self.store, timeout_s=timeout_s)

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
