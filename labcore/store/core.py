"""The store: the job table, one queue, event streams, the worker registry and job folders, on one
diskcache ``Cache`` that every page, CLI, executor and worker process opens on the same directory
(SQLite in WAL mode, so readers never block and writers serialise on a short lock).

It knows jobs, not engines: a job is a kind name, a key, a JSON spec, a label and the keys of the jobs
whose results it needs (:class:`NewJob`, built by :mod:`labcore.jobs`). Rules that keep it honest:

* Every read-modify-write happens inside :meth:`Store.transaction` (SQLite ``BEGIN IMMEDIATE``), so a claim,
  a submission or a status change is atomic across processes: each queued job is claimed once.
* ``running`` is only believed while its heartbeat is fresh and its pid is a live, non-zombie process.
  Reads decide ``dead`` lazily and write it back, so no job stays ``running`` once nobody runs it.
* A finished key is a result: submitting it again returns the record at once, without the queue.

The requester's side (submit, resume, withdraw, cancel) is :mod:`.requests`, the runner's side (claim,
heartbeat, finish, fencing, ``dead``) is :mod:`.attempts`, the value types are :mod:`.records`; this
module composes them with reading, event streams, jobs finished in-process, job folders and the worker
registry. The table
keeps plain dicts; what the reading API gives back is a :class:`~.job_record.JobRecord` of each.

This package imports no torch, nothing of the engine and nothing of the job kinds (what a job computes, and
how its result reads, is its kind's: :mod:`labcore.engine.run_results` for training runs): the pages import it.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from labcore import paths
from labcore.errors import LabError
from labcore.store import health, migrate
from labcore.store.artifacts import Artifacts
from labcore.store.attempts import Attempts
from labcore.store.batch import QueueCapReached
from labcore.store.errors import Fenced, UnsafeValue
from labcore.store.job_record import JobRecord, stored_kind
from labcore.store.lock import write_lock
from labcore.store.queue import JobQueue
# The value types live in .records; they are named here too, where the package and callers import them.
from labcore.store.records import Claim, JobStatus, NewJob, RunStatus, Submission, Withdrawal, wall_clock
from labcore.store.requests import Requests
from labcore.store.settings import ACTIVE, DISKCACHE_SETTINGS, STATUSES, StoreSettings
from labcore.store.streams import EventStreams
from labcore.store.table import JobTable
from labcore.store.workers import WorkerRegistry

__all__ = ["Claim", "JobRecord", "JobStatus", "NewJob", "QueueCapReached", "RunStatus", "Store", "Submission",
           "Withdrawal", "open_store"]


class Store(Requests, Attempts):
    """Process-safe store of jobs: records, one queue, event streams, workers and job folders.

    ``root`` defaults to ``<TRANSFERLAB_CACHE>/store``. Open it once per process with :func:`open_store`
    (several ``Store`` objects on one root in a process also work, they just cost a connection each).
    """

    def __init__(self, root: Path | str | None = None, settings: StoreSettings = StoreSettings()) -> None:
        self.root = Path(root) if root is not None else paths.cache_dir() / "store"
        self.settings = settings
        self.runs_dir = self.root / "runs"
        self.logs_dir = self.root / "logs"
        self.cache = health.open_cache(self.root, settings.sqlite_timeout_s, DISKCACHE_SETTINGS)
        self.table = JobTable(self.cache)
        self.queue = JobQueue(self.cache)
        self.streams = EventStreams(self.cache)
        self.worker_registry = WorkerRegistry(self.cache, settings, self.transaction)
        self.files = Artifacts(self.runs_dir)
        try:
            blank = health.is_blank(self.cache)
            migrate.upgrade(self.cache, self.transaction)
            if blank:
                # A new database beside job folders (a lost or 0-byte cache.db): the folders hold every
                # finished record, so the lab comes back instead of looking empty.
                health.rebuild(self)
        except (sqlite3.DatabaseError, UnsafeValue) as exc:
            self.cache.close()
            raise health.damaged(self.root, exc) from None
        health.keep_reserve(self.root)

    def close(self) -> None:
        self.cache.close()

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def transaction(self, wait_s: float | None = None):
        """The store's write lock (SQLite ``BEGIN IMMEDIATE``), held by every read-modify-write. A writer
        that loses the race waits, at most ``wait_s`` (default: the settings' ``write_wait_s``), then gets
        :class:`StoreLocked`; nested calls in one thread share the outer transaction."""
        return write_lock(self.cache, wait_s=self.settings.write_wait_s if wait_s is None else wait_s,
                          root=self.root)

    # ----------------------------------------------------------------------------------------- reading
    def group(self, name: str) -> dict[str, Any]:
        return self.table.group(name)

    def groups(self) -> list[str]:
        return self.table.groups()

    def resolve_key(self, prefix: str) -> str:
        return self.table.resolve_key(prefix)

    def get(self, key: str) -> JobRecord | None:
        """The job's record, with ``dead`` decided now for a running job nobody runs any more."""
        record = self._current(key)
        return None if record is None else JobRecord.from_dict(record)

    def _current(self, key: str) -> dict[str, Any] | None:
        """The stored dict of :meth:`get` (the store's own code reads and rewrites dicts)."""
        record = self.table.get(key)
        if record is not None and record["status"] == "running" and self._why_dead(record):
            record = self._mark_dead(key)
        return record

    def record(self, key: str) -> JobRecord:
        return JobRecord.from_dict(self._current_or_raise(key))

    def _current_or_raise(self, key: str) -> dict[str, Any]:
        record = self._current(key)
        if record is None:
            raise LabError(f"no run with key {key!r}; `python -m labcore status` lists the runs")
        return record

    def keys(self, kind: str | None = None) -> list[str]:
        """Keys in submission order (``kind``: of that kind only)."""
        return self.table.keys(kind)

    def jobs(self, *, kind: str | None = None, status: str | None = None, group: str | None = None,
             newest: int = 0) -> list[JobRecord]:
        """Records in submission order, optionally of one kind, one status or one group; with ``newest`` only
        the last that many of them, read newest first and no further (a page of a 10,000-job lab)."""
        keys = self.group(group)["keys"] if group else self.table.keys()
        # every record at once, unless only the newest few are wanted (then read newest first, no further)
        stored = {} if newest else self.table.get_many(keys)
        found: list[JobRecord] = []
        for key in reversed(keys) if newest else keys:
            record = stored.get(key) if not newest else self.table.get(key)
            if record is not None and record["status"] == "running":
                record = self._current(key)  # decides whether a running job is dead
            if record is not None and (kind is None or stored_kind(record) == kind) and (
                    status is None or record["status"] == status):
                found.append(JobRecord.from_dict(record))
                if len(found) == newest:
                    break
        return found[::-1] if newest else found

    def heartbeat_of(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(f"hb/{key}")

    def status(self, key: str) -> JobStatus:
        record = self._current_or_raise(key)
        beat = self.cache.get(f"hb/{key}") if record["status"] == "running" else None
        if beat and beat.get("attempt", record.get("attempt")) != record.get("attempt"):
            beat = None  # a superseded attempt's last beat: not this attempt's progress
        result = record.get("result") or {}
        step = total = 0
        loss = None
        if beat:
            step, total, loss = beat.get("step", 0), beat.get("total_steps", 0), beat.get("loss")
        elif result:
            step, total = result.get("steps_done", 0), result.get("total_steps", 0)
            losses = result.get("train_loss") or []
            loss = losses[-1][1] if losses else None
        return JobStatus(
            key=key, status=record["status"], label=record.get("label", ""), step=int(step or 0),
            total_steps=int(total or 0), loss=loss, heartbeat_age_s=(wall_clock() - beat["t"]) if beat else None,
            pid=record.get("pid"), error=record.get("error", ""), record=JobRecord.from_dict(record),
        )

    def queue_seq(self) -> int:
        """A counter every push increments: an idle worker claims only when it moved (no lock taken)."""
        return self.queue.seq()

    def status_counts(self, kind: str | None = None) -> Counter[str]:
        """How many jobs (of ``kind``) stand at each status, as :meth:`jobs` would list them (a running job whose
        worker is gone counts as dead), without keeping their records: the status line polls this."""
        listed = set(self.table.all.items())
        counts: Counter[str] = Counter()
        for key, (job_kind, status) in self.table.kinds_and_statuses().items():
            if key not in listed or (kind is not None and job_kind != kind):
                continue
            if status == "running":
                record = self._current(key)  # decides whether a running job is dead
                if record is None:
                    continue
                status = record["status"]
            counts[status] += 1
        return counts

    def queued(self) -> list[str]:
        return [r.key for r in self.jobs(status="queued")]

    # ------------------------------------------------------------------------------------ streams
    def append_events(self, key: str, events: list[dict[str, Any]], *, attempt: int | None = None) -> None:
        """Append events to a job's stream as one chunk (the worker batches them). With ``attempt`` (a
        worker's writes) the chunk is refused with :class:`Fenced` once that attempt was superseded."""
        if events:
            with self.transaction():
                if attempt is not None and not self._holds(key, attempt):
                    raise Fenced(f"attempt {attempt} of {key} no longer holds it; its events are dropped")
                self.streams.append(key, list(events))

    def read_events(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Events appended since ``cursor`` and the cursor to pass next time (start with 0)."""
        return self.streams.read(key, cursor)

    def events(self, key: str) -> list[dict[str, Any]]:
        return self.streams.read(key, 0)[0]

    def stream_length(self, key: str) -> int:
        """The cursor after a job's last event chunk (one read, no lock): a view whose cursor equals it is
        up to date and need not read or redraw anything."""
        return self.streams.length(key)

    def follow(self, key: str, *, poll_s: float = 0.5, cursor: int = 0) -> Iterator[dict[str, Any]]:
        """Yield a job's events as they arrive, until it is no longer queued or running."""
        while True:
            events, cursor = self.read_events(key, cursor)
            yield from events
            record = self.get(key)
            if record is None or not record.active:
                events, cursor = self.read_events(key, cursor)  # what was flushed with the final status
                yield from events
                return
            time.sleep(poll_s)

    def log(self, key: str) -> str:
        """The job's log: engine messages, the worker's stdout/stderr, tracebacks, store notes."""
        from labcore.events import log_line

        lines = [line for line in (log_line(e) for e in self.events(key)) if line is not None]
        record = self.table.get(key) or {}
        if record.get("traceback") and record["traceback"] not in "\n".join(lines):
            lines.append(record["traceback"].rstrip("\n"))
        return "\n".join(lines)

    # ---------------------------------------------------------------------------- jobs finished here
    def put_finished(self, job: NewJob, *, status: str, result: dict[str, Any], error: str = "") -> None:
        """Record ``job`` as computed in this process, without queue or worker (``python -m labcore sweep``
        without --queue): its record, new or existing, ends ``status`` with ``result`` and ``error``.

        What the job is (kind, spec, label, inputs, checkpoint) is the caller's, as for :meth:`submit`; its
        resources are not kept (no node is chosen for a job that already ran). Nothing is written while a
        live worker runs the key: that attempt's own result will land.
        """
        if status in ACTIVE or status not in STATUSES:
            # a queued or running record with no queue entry or owner would wait, or be found dead, forever
            raise LabError(f"a job that ran here has ended; {status!r} is no status it can end with")
        with self.transaction():
            record = self.table.get(job.key)
            if record is not None and record["status"] == "running" and not self._why_dead(record):
                return
            now = wall_clock()
            base = record or {"key": job.key, "kind": job.kind, "spec": job.spec, "label": job.label,
                              "requires": list(job.requires), "checkpoint": job.checkpoint,
                              "priority": "interactive", "attempt": 0, "pid": None, "host": None,
                              "submitted_at": now, "started_at": now, "groups": []}
            if record is None:
                self.table.all.add(job.key)
            record = dict(base, status=status, result=result, error=error, finished_at=now, resume=False)
            self.table.put(record)
        self._keep_record(record)

    # ---------------------------------------------------------------------------------- job folders
    def workdir(self, key: str) -> Path:
        """The folder the job writes its artifacts and checkpoints into."""
        return self.files.folder(key)

    run_dir = workdir  # the name the in-process sweep uses

    def artifacts(self, key: str) -> dict[str, Path]:
        """Files the job wrote (``best.safetensors``, attention maps, cached features …)."""
        return self.files.files(key)

    # ------------------------------------------------------------------------------------ workers
    def hold_workers(self, who: str | None = None) -> None:
        """Ask that no worker be started (the teacher stopped them): pages and submissions respect it."""
        self.cache.set("meta/workers-held", {"who": who or "", "t": wall_clock()})

    def release_workers(self) -> None:
        self.cache.delete("meta/workers-held")

    def workers_held(self) -> dict[str, Any] | None:
        """Who held the workers and when, or None."""
        return self.cache.get("meta/workers-held")

    def register_worker(self, pid: int, *, state: str = "starting", command: str = "", role: str = "worker",
                        gpu: str = "") -> None:
        self.worker_registry.register(pid, state=state, command=command, role=role, gpu=gpu)

    def worker_heartbeat(self, pid: int, *, state: str, run: str | None = None, gpu: str | None = None) -> None:
        self.worker_registry.heartbeat(pid, state=state, job=run, gpu=gpu)

    def unregister_worker(self, pid: int) -> None:
        self.worker_registry.unregister(pid)

    def worker_alive(self, info: dict[str, Any]) -> bool:
        return self.worker_registry.alive(info)

    def workers(self, *, alive_only: bool = True, role: str | None = None) -> list[dict[str, Any]]:
        """Registered processes that claim jobs; ``role`` keeps only local workers (``worker``) or cluster
        executors (``ray-executor``)."""
        found = self.worker_registry.list(alive_only=alive_only)
        return found if role is None else [w for w in found if w.get("role", "worker") == role]

    # ---------------------------------------------------------------------------- executor notes
    def put_executor_info(self, name: str, info: dict[str, Any]) -> None:
        """What an executor process tells the others (a cluster's nodes and their resources)."""
        self.cache.set(f"executor/{name}", dict(info, t=wall_clock()))

    def executor_info(self, name: str) -> dict[str, Any] | None:
        return self.cache.get(f"executor/{name}")


# ------------------------------------------------------------------------------------- one per process
_STORES: dict[str, Store] = {}


def open_store(root: Path | str | None = None) -> Store:
    """The process's Store for ``root`` (default ``<cache>/store``), opened on first use.

    diskcache reconnects by itself after a fork, so a cached Store stays valid in child processes.
    """
    path = str(Path(root) if root is not None else paths.cache_dir() / "store")
    store = _STORES.get(path)
    if store is None:
        store = _STORES[path] = Store(path)
    return store
