"""Where jobs execute, behind one small interface: submit, submit_group, cancel, resume, status, stream,
result.

The pages and the CLI talk to an :class:`Executor`, never to the store's queue or to worker processes.
A job is any registered kind's spec (:mod:`labcore.jobs`): a ``RunSpec`` trains, an ``AttentionSpec``
computes maps; the executor resolves and keys it once, here, torch-free. :class:`LocalExecutor` runs
jobs in local worker processes that share the on-disk store (:mod:`labcore.execution.pool` starts them). A cluster
backend implements the same methods, writes the same events and records into the same store, and
registers itself in :data:`EXECUTORS`; neither the pages nor the job kinds change.

Choose the backend with ``TRANSFERLAB_EXECUTOR`` (default ``local``; ``ray`` runs jobs on a Ray cluster,
:class:`RayExecutor`, with ``RAY_ADDRESS``) and the number of local workers with ``TRANSFERLAB_WORKERS``
(default 1); :func:`executor_for` reads them, for the app and for every command that queues. This module
imports neither torch nor Ray.
"""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Any, Callable, Iterable, Protocol

from labcore import jobs
from labcore.errors import LabError
from labcore.execution.lifetime import FOR_SOMEONE, Lifetime
from labcore.paths import env_number
from labcore.registry import Registry
from labcore.store import JobStatus, NewJob, Store, Submission, Withdrawal, open_store


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

    def slots(self, resources: dict[str, float]) -> int:
        """How many jobs asking for ``resources`` (``Resources.to_dict()``) run at the same time."""


class _StoreExecutor:
    """What every executor does the same way, because it only reads and writes the store."""

    store: Store

    def _wake_workers(self) -> None:
        raise NotImplementedError

    def ensure_workers(self) -> list[int]:
        """Start what runs queued jobs unless it is alive; returns the pids started (often none).

        None starts while the workers are held (the teacher stopped them): queued jobs wait for a start.
        """
        from labcore.execution.pool import reap_children

        reap_children()
        if self.store.workers_held():
            return []
        return self._start_missing_workers()

    def _start_missing_workers(self) -> list[int]:
        """Start the claiming processes that are not alive (the workers are not held)."""
        raise NotImplementedError

    def _admit(self, new: list[NewJob]) -> None:
        """Refuse jobs this executor could never run, before any is queued (the local pool runs any)."""

    def submit(self, spec: Any, *, priority: str = "interactive", group: str | None = None,
               who: str | None = None) -> Submission:
        job = jobs.new_job(spec)
        self._admit([job])
        submission = self.store.submit(job, priority=priority, group=group, who=who)
        if submission.status == "queued":
            self._wake_workers()
        return submission

    def submit_group(self, name: str, specs: Iterable[Any], *, priority: str = "sweep",
                     who: str | None = None) -> list[Submission]:
        new = [jobs.new_job(s) for s in specs]
        self._admit(new)
        submissions = self.store.submit_group(name, new, priority=priority, who=who)
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
        return record.result if record is not None and record.finished else None


class LocalExecutor(_StoreExecutor):
    """Runs jobs in worker processes on this machine; starts them when none is alive."""

    def __init__(self, store: Store | None = None, *, workers: int = 1, autostart: bool = True,
                 lifetime: Lifetime = FOR_SOMEONE) -> None:
        if workers < 1:
            raise LabError(f"the local executor needs at least 1 worker, got {workers}; "
                           f"set TRANSFERLAB_WORKERS to 1 or more")
        self.store = store or open_store()
        self.workers = workers
        self.autostart = autostart
        self.lifetime = lifetime  # of the workers it starts: they leave when idle, or with their starter

    def on_store(self, store: Store) -> "LocalExecutor":
        """The same executor on another store (the pages follow the current cache)."""
        return LocalExecutor(store, workers=self.workers, autostart=self.autostart, lifetime=self.lifetime)

    # -------------------------------------------------------------------------------- local workers
    def _wake_workers(self) -> None:
        if self.autostart:
            self.ensure_workers()

    def _start_missing_workers(self) -> list[int]:
        """Start workers until ``self.workers`` are alive.

        The count and the start happen under the store's lock, so two pages pressing run at the same
        moment start one worker, not two. Workers run in their own session: they outlive page reloads
        and the server; ``python -m labcore worker --stop`` stops them.
        """
        from labcore.execution.pool import start_worker

        started: list[int] = []
        with self.store.transaction():
            alive = self.store.workers(alive_only=True, role="worker")
            for _ in range(self.workers - len(alive)):
                started.append(start_worker(self.store, new_session=True, lifetime=self.lifetime).pid)
        return started

    def stop_workers(self, timeout_s: float | None = None, *, hold: bool = False,
                     who: str | None = None) -> list[int]:
        """Stop the alive workers (their runs checkpoint and become interrupted). With ``hold`` none is
        started again, by a submission or a page, until :meth:`start_workers`."""
        from labcore.execution.pool import stop_workers

        if hold:
            self.store.hold_workers(who)
        return stop_workers(self.store, timeout_s=timeout_s or self.store.settings.stop_timeout_s)

    def start_workers(self) -> list[int]:
        """Lift a hold and start workers as :meth:`ensure_workers` does."""
        self.store.release_workers()
        return self.ensure_workers()

    def alive_workers(self) -> list[dict[str, Any]]:
        return self.store.workers(alive_only=True, role="worker")

    def slots(self, resources: dict[str, float]) -> int:
        return self.workers  # a local worker runs one job at a time, whatever it asks for



class RayExecutor(LocalExecutor):
    """Runs jobs as Ray generator tasks on a cluster, through the same store as the local pool.

    Jobs are queued in the store exactly as locally; one executor process (``python -m labcore
    ray-executor``, :mod:`labcore.execution.ray_pump`, started here when none is alive) is the cluster's only Ray
    driver: it claims them, runs each as a Ray task and writes its events, heartbeats and result back.
    This class imports no Ray: it reads what that process publishes (the cluster's nodes) to refuse, at
    submit, a job that no node could ever run. ``address`` is ``RAY_ADDRESS`` (empty: a Ray cluster of
    this machine's own, started by the executor process and stopped with it).
    """

    ROLE = "ray-executor"

    def __init__(self, store: Store | None = None, *, address: str | None = None, autostart: bool = True,
                 start_timeout_s: float = 120.0, lifetime: Lifetime = FOR_SOMEONE) -> None:
        super().__init__(store, workers=1, autostart=autostart, lifetime=lifetime)
        self.address = os.environ.get("RAY_ADDRESS", "") if address is None else address
        self.start_timeout_s = start_timeout_s  # how long a submit waits for a starting executor process
        # Only the executor process imports Ray; say here, at once, when the extra is missing.
        if importlib.util.find_spec("ray") is None:
            raise LabError("TRANSFERLAB_EXECUTOR=ray needs Ray: pip install -r requirements-ray.txt "
                           "(or unset TRANSFERLAB_EXECUTOR to run jobs on this machine)")

    def on_store(self, store: Store) -> "RayExecutor":
        return RayExecutor(store, address=self.address, autostart=self.autostart,
                           start_timeout_s=self.start_timeout_s, lifetime=self.lifetime)

    def _admit(self, new: list[NewJob]) -> None:
        self.check_fits(new)

    # ------------------------------------------------------------------------------ the cluster
    def cluster(self) -> dict[str, Any]:
        """The cluster as its executor process last saw it: address, nodes with their resources.

        Starts that process when none is alive (unless ``autostart`` is off) and waits for its first
        report; a process that could not connect or found the store unreachable from a node says why.
        While the workers are held none starts, and with none alive there is nothing to wait for.
        """
        if self.autostart:
            self.ensure_workers()
        deadline = time.time() + self.start_timeout_s
        while True:
            pumps = self.store.workers(alive_only=True, role=self.ROLE)
            info = self.store.executor_info("ray")
            if info and pumps and info.get("pid") in {w["pid"] for w in pumps}:
                if info.get("error"):
                    raise LabError(f"the Ray executor cannot run jobs: {info['error']}")
                return info
            held = self.store.workers_held() if self.autostart and not pumps else None
            if held:
                raise LabError(f"the workers were stopped (by {held.get('who') or 'someone'}), so no Ray executor "
                               f"runs to check this job against the cluster's nodes; start the workers again "
                               f"(the teacher's controls on the Runs page), then submit it")
            if time.time() >= deadline:
                log = f" (its log is in {self.store.logs_dir})" if self.autostart else ""
                raise LabError(f"no Ray executor reported within {self.start_timeout_s:g} s{log}; start one with "
                               f"`python -m labcore ray-executor` (RAY_ADDRESS=… for an existing cluster)")
            time.sleep(0.1)

    def check_fits(self, new: Iterable[NewJob]) -> None:
        """Refuse jobs that ask for more than any node of the cluster has (Ray would queue them forever).

        A finished key is a result, not work: it is neither checked nor waited for."""
        new = [job for job in new if not ((record := self.store.get(job.key)) is not None and record.finished)]
        if not new:
            return
        nodes = self.cluster()["nodes"]
        for job in new:
            need = jobs.Resources.from_dict(job.resources)
            if not any(need.fits(node["resources"]) for node in nodes):
                have = "; ".join(f"{n['host']} ({n['ip']}): {jobs.describe_node(n['resources'])}" for n in nodes)
                raise LabError(f"this {job.kind} job ({job.label or job.key}) asks for {need.describe()} and no node "
                               f"of the Ray cluster has that — nodes: {have or 'none alive'}. Ask for less "
                               f"(TRANSFERLAB_RUN_GPUS for runs) or add a node that has it")

    def slots(self, resources: dict[str, float]) -> int:
        need = jobs.Resources.from_dict(resources)
        return sum(need.copies(node["resources"]) for node in self.cluster()["nodes"])

    def _start_missing_workers(self) -> list[int]:
        """Start the Ray executor process unless one is alive on this store."""
        from labcore.execution.pool import start_worker

        with self.store.transaction():
            if self.store.workers(alive_only=True, role=self.ROLE):
                return []
            extra = ("--address", self.address) if self.address else ()
            return [start_worker(self.store, new_session=True, extra_args=extra, module="labcore.execution.ray_pump",
                                 role=self.ROLE, lifetime=self.lifetime).pid]

    def alive_workers(self) -> list[dict[str, Any]]:
        return self.store.workers(alive_only=True, role=self.ROLE)


# Each backend's factory takes the store (None: the current cache's) and whether the executor may start its
# claiming processes; it reads the rest of its settings from the environment.
EXECUTORS: Registry[Callable[..., Executor]] = Registry("executor")


def _local_from_environment(store: Store | None = None, *, autostart: bool = True) -> LocalExecutor:
    return LocalExecutor(store, autostart=autostart,
                         workers=int(env_number("TRANSFERLAB_WORKERS", 1, "how many local workers to run (default 1)")))


EXECUTORS.register("local", _local_from_environment)
EXECUTORS.register("ray", RayExecutor)

_EXECUTOR: dict[str, Executor] = {}


def executor_kind(kind: str | None = None) -> str:
    """``kind``, else the backend ``TRANSFERLAB_EXECUTOR`` names (unset or empty: ``local``)."""
    return kind or os.environ.get("TRANSFERLAB_EXECUTOR") or "local"


def executor_for(store: Store | None = None, *, autostart: bool = True, kind: str | None = None) -> Executor:
    """A new executor of the backend ``kind`` or ``TRANSFERLAB_EXECUTOR`` names, on ``store``; with
    ``autostart`` off it starts no claiming process of its own (a CLI without ``--start``)."""
    kind = executor_kind(kind)
    if kind not in EXECUTORS:
        raise LabError(f"unknown executor {kind!r} (TRANSFERLAB_EXECUTOR chooses one); valid names: "
                       f"{', '.join(EXECUTORS)}")
    return EXECUTORS[kind](store, autostart=autostart)


def get_executor(kind: str | None = None) -> Executor:
    """The process's executor: ``kind`` or ``TRANSFERLAB_EXECUTOR`` (default ``local``)."""
    kind = executor_kind(kind)
    if kind not in _EXECUTOR:
        _EXECUTOR[kind] = executor_for(kind=kind)
    return _EXECUTOR[kind]
