"""The store: the job table, one queue, event streams, the worker registry and job folders, on one
diskcache ``Cache`` that every page, CLI, executor and worker process opens on the same directory
(SQLite in WAL mode, so readers never block and writers serialise on a short lock).

It knows jobs, not engines: a job is a kind name, a key, a JSON spec, a label and the keys of the jobs
whose results it needs (:class:`NewJob`, built by :mod:`labcore.jobs`). Rules that keep it honest:

* Every read-modify-write happens inside ``cache.transact()`` (SQLite ``BEGIN IMMEDIATE``), so a claim,
  a submission or a status change is atomic across processes: each queued job is claimed once.
* ``running`` is only believed while its heartbeat is fresh and its pid is a live, non-zombie process.
  Reads decide ``dead`` lazily and write it back, so no job stays ``running`` once nobody runs it.
* A finished key is a result: submitting it again returns the record at once, without the queue.

This package imports no torch and nothing of the engine: the pages import it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from labcore import paths
from labcore.errors import LabError
from labcore.store import health, migrate
from labcore.store.artifacts import Artifacts
from labcore.store.batch import Batch, QueueCapReached
from labcore.store.errors import Fenced, UnsafeValue
from labcore.store.liveness import HOST, why_dead
from labcore.store.queue import JobQueue, requester_id
from labcore.store.settings import (ACTIVE, DISKCACHE_SETTINGS, FINISHED, PRIORITIES, STOPPED, TERMINAL,
                                    StoreSettings)
from labcore.store.streams import EventStreams
from labcore.store.table import IndexList, JobTable
from labcore.store.workers import WorkerRegistry

if TYPE_CHECKING:
    from labcore.record import RunRecord


@dataclass(frozen=True)
class NewJob:
    """What the store needs to queue a job: everything else (resolving, keying) happened before."""

    kind: str
    key: str
    spec: dict[str, Any]  # the resolved spec as JSON-able values
    label: str
    requires: tuple[str, ...] = ()  # keys of jobs that must be finished first (their results are inputs)
    checkpoint: str = ""  # the file in the job's folder a resumed attempt continues from ("" : none)
    resources: dict[str, float] = field(default_factory=dict)  # what a cluster node must offer (jobs.Resources)


@dataclass(frozen=True)
class Submission:
    """What a submit did: ``outcome`` is cached | queued | existing | resumed | requeued."""

    key: str
    status: str
    outcome: str
    record: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.record.get("kind", "run")


@dataclass(frozen=True)
class Withdrawal:
    """What a viewer's cancel did: ``outcome`` is withdrawn (others still wait: ``others`` of them) |
    cancelled (theirs was the last request: the job stops) | not-requested (they had not asked; ``others``
    did, so nothing changed) | inactive (the job had already ended)."""

    key: str
    outcome: str
    others: int
    record: dict[str, Any]


@dataclass(frozen=True)
class Claim:
    """A job a worker now owns: it must heartbeat ``(key, attempt)`` and finish it."""

    key: str
    attempt: int
    spec: dict[str, Any]
    resume: bool
    workdir: Path
    kind: str = "run"
    requires: tuple[str, ...] = field(default_factory=tuple)
    resources: dict[str, float] = field(default_factory=dict)
    deadline: float = 0.0  # time.time() after which the attempt must stop (its requester's limit); 0: none
    deadline_note: str = ""  # who stops it then, as its record will say (``cancelled_by``)


@dataclass(frozen=True)
class JobStatus:
    """A job at a glance, for tables and progress bars (the full record stays in ``record``)."""

    key: str
    status: str
    label: str
    step: int
    total_steps: int
    loss: float | None
    heartbeat_age_s: float | None
    pid: int | None
    error: str
    record: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.record.get("kind", "run")

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


RunStatus = JobStatus  # the name the pages and the CLI grew up with




def _now() -> float:
    return time.time()


HISTORY_LIMIT = 50  # entries of who-did-what a record keeps (the oldest go first)


def _noted(record: dict[str, Any], did: str, who: str | None) -> dict[str, Any]:
    """The record with ``{t, who, did}`` appended to its history (start, join, withdraw, cancel, resume)."""
    history = list(record.get("history") or []) + [{"t": _now(), "who": who or "", "did": did}]
    return dict(record, history=history[-HISTORY_LIMIT:])


def _asking(record: dict[str, Any], who: str | None) -> dict[str, Any]:
    """The record with ``who`` among its requesters (a join, noted once)."""
    requesters = list(record.get("requesters") or [])
    if not who or who in requesters:
        return record
    return _noted(dict(record, requesters=requesters + [who]), "join", who)


class Store:
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
        self.worker_registry = WorkerRegistry(self.cache, settings)
        self.files = Artifacts(self.runs_dir)
        try:
            blank = health.is_blank(self.cache)
            migrate.upgrade(self.cache)
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

    def _txn(self):
        # retry=True: a writer that loses the race for the SQLite lock tries again instead of raising.
        return self.cache.transact(retry=True)

    # ---------------------------------------------------------------------------------- submitting
    def submit(self, job: NewJob, *, priority: str = "interactive", group: str | None = None,
               who: str | None = None) -> Submission:
        """Queue a job unless its result or its live attempt already exists.

        ``who`` names the requester (a browser session, a user name; None: the command line). A live job
        asked for again gains that requester, so it stops only when every one of them withdrew
        (:meth:`withdraw`) or someone cancels it outright (:meth:`cancel`). A requester with
        :attr:`StoreSettings.max_queued_per_requester` jobs already waiting is refused a new queue entry
        (:class:`QueueCapReached`); joining a job that is already queued or running is always allowed.

        * a ``done``/``diverged`` record is returned at once, without touching the queue;
        * a queued or running job is returned as it is (a higher priority moves it forward);
        * a cancelled, interrupted or dead job is queued again and continues from its checkpoint;
        * a failed job is queued again from the start;
        * a job whose inputs (``job.requires``) are not all finished is refused, naming them.
        """
        done, capped = self._submit_all([job], priority=priority, group=group, who=who)
        if capped is not None:
            raise capped
        return done[0]

    def submit_group(self, name: str, jobs: Iterable[NewJob], *, priority: str = "sweep",
                     who: str | None = None) -> list[Submission]:
        """Queue a sweep: every job joins group ``name``; finished ones come from the store.

        The whole group is one transaction with one write of each index, so its cost grows with its size
        (submitting its jobs one by one rewrote the job index and the group once per job: quadratic). A
        requester's cap reached part-way stops the sweep there, saying how many of its jobs were queued
        (those stay queued: asking again later queues the rest and finds these)."""
        if not name:
            raise LabError("a sweep needs a name: give --name (it groups the runs in the store)")
        jobs = list(jobs)
        done, capped = self._submit_all(jobs, priority=priority, group=name, who=who)
        if capped is not None:
            raise QueueCapReached(f"{capped} Of the {len(jobs)} jobs of {name!r}, {len(done)} are in the "
                                  f"queue or finished; ask again later for the rest.")
        return done

    def _submit_all(self, jobs: list[NewJob], *, priority: str, group: str | None,
                    who: str | None) -> tuple[list[Submission], QueueCapReached | None]:
        """Submit ``jobs`` in one transaction; what was submitted, and the cap refusal that stopped it (the
        jobs before it stay submitted)."""
        if priority not in PRIORITIES:
            raise LabError(f"unknown priority {priority!r}; valid priorities: {', '.join(PRIORITIES)}")
        # The cached path is one read and no lock: a finished result never changes.
        if not group and len(jobs) == 1:
            record = self.table.get(jobs[0].key)
            if record is not None and record["status"] in FINISHED:
                return [Submission(record["key"], record["status"], "cached", record)], None
        for job in jobs:  # every refusal before anything is written
            if (self.table.get(job.key) or {}).get("status") not in FINISHED:
                self._check_inputs(job)
        batch = Batch(self, who, group)
        done: list[Submission] = []
        capped = None
        with self._txn():
            for job in jobs:
                try:
                    done.append(self._submit_locked(job, priority, who, batch))
                except QueueCapReached as exc:
                    capped = exc
                    break
            batch.write()
        return done, capped

    def _submit_locked(self, job: NewJob, priority: str, who: str | None, batch: "Batch") -> Submission:
        """Inside the transaction: one job of a submission (its index entries wait in ``batch``)."""
        key = job.key
        record = self.table.get(key)
        if record is not None and record["status"] == "running":
            record = self._check_alive(record)
        if record is None:
            batch.check_cap(key)
            record = {
                "key": key, "kind": job.kind, "spec": job.spec, "label": job.label, "status": "queued",
                "requires": list(job.requires), "checkpoint": job.checkpoint, "priority": priority,
                "attempt": 0, "resume": False, "pid": None, "host": None, "submitted_at": _now(),
                "started_at": None, "finished_at": None, "error": "", "result": None,
                "groups": [batch.group] if batch.group else [], "resources": dict(job.resources),
            }
            record = _noted(dict(record, started_by=who or "", requesters=[who] if who else []), "start", who)
            batch.new_keys.append(key)
            outcome = "queued"
        elif record["status"] in FINISHED:
            batch.grouped(key)
            return Submission(key, record["status"], "cached", record)
        elif record["status"] in ACTIVE and (record["status"] == "running" or
                                             PRIORITIES[priority] >= PRIORITIES[record["priority"]]):
            joined = _asking(record, who)
            batch.grouped(key)
            if joined is not record:
                self.table.put(joined)
            return Submission(key, record["status"], "existing", joined)
        elif record["status"] == "queued":
            batch.check_cap(key)
            record = _asking(record, who)
            outcome = "existing"  # same job, moved forward: a second entry at the higher priority
        else:
            batch.check_cap(key)
            outcome = "requeued" if record["status"] == "failed" else "resumed"
            record = dict(record, status="queued", resume=outcome == "resumed", error="",
                          submitted_at=_now(), finished_at=None, started_by=who or "",
                          requesters=[who] if who else [], cancelled_by=None)
            record = _noted(record, "start", who)
        record["priority"] = priority
        if batch.group and batch.group not in record.get("groups", []):
            record["groups"] = record.get("groups", []) + [batch.group]
        batch.grouped(key)
        self.table.put(record)
        self.cache.delete(f"cancel/{key}")
        self.queue.push(key, priority, who)
        batch.asked(key)
        return Submission(key, "queued", outcome, record)

    def _asked(self, who: str) -> IndexList:
        """The keys ``who`` queued (pruned as they leave the queue): what the per-requester cap counts."""
        return IndexList(self.cache, f"asked/{requester_id(who)}")

    def waiting_for(self, who: str) -> list[str]:
        """Keys of the jobs ``who`` asked for that are still queued (inside or outside a transaction)."""
        asked = self._asked(who)
        keys = asked.items()
        waiting = [k for k in keys if (r := self.table.get(k)) is not None and r["status"] == "queued"
                   and who in (r.get("requesters") or [])]
        if len(waiting) != len(keys):
            asked.cache.set(asked.entry, waiting)
        return waiting

    def _check_inputs(self, job: NewJob) -> None:
        for needed in job.requires:
            record = self.get(needed)
            if record is None:
                raise LabError(f"this {job.kind} job needs job {needed} and there is none with that key; "
                               f"pick a finished one from the Runs page or `python -m labcore status`")
            if record["status"] not in FINISHED:
                raise LabError(f"this {job.kind} job needs {record.get('kind', 'run')} {needed} "
                               f"({record.get('label', '')}) finished, and it is {record['status']}; "
                               f"let it finish (or resume it), then ask again")

    def resume(self, key: str, who: str | None = None) -> Submission:
        """Queue a stopped job again (interactive priority); it continues from its last checkpoint."""
        record = self.record(key)
        if record["status"] not in STOPPED:
            raise LabError(f"run {key} is {record['status']}: only {', '.join(STOPPED)} runs can be resumed")
        with self._txn():
            record = self.table.get(key)
            if record["status"] not in STOPPED:  # someone resumed it in between: return that job
                joined = _asking(record, who) if record["status"] in ACTIVE else record
                if joined is not record:
                    self.table.put(joined)
                return Submission(key, record["status"], "existing", joined)
            Batch(self, who).check_cap(key)
            record = dict(record, status="queued", resume=True, priority="interactive", error="",
                          submitted_at=_now(), finished_at=None, started_by=who or "",
                          requesters=[who] if who else [], cancelled_by=None)
            record = _noted(record, "resume", who)
            self.table.put(record)
            self.cache.delete(f"cancel/{key}")
            self.queue.push(key, "interactive", who)
            if who:
                self._asked(who).add(key)
        return Submission(key, "queued", "resumed", record)

    def withdraw(self, key: str, who: str | None) -> Withdrawal:
        """A viewer's cancel: take back ``who``'s request. The job stops (as :meth:`cancel`) only when no
        other requester still waits for it; a job nobody is recorded as asking for (the CLI's) stops."""
        with self._txn():
            record = self._record_in_txn(key)
            if record["status"] not in ACTIVE:
                return Withdrawal(key, "inactive", 0, record)
            requesters = list(record.get("requesters") or [])
            others = [r for r in requesters if r != who]
            if others and who not in requesters:
                return Withdrawal(key, "not-requested", len(others), record)
            if others:
                record = _noted(dict(record, requesters=others), "withdraw", who)
                self.table.put(record)
                return Withdrawal(key, "withdrawn", len(others), record)
            return Withdrawal(key, "cancelled", 0, self._stop(record, who))

    def cancel(self, key: str, who: str | None = None) -> dict[str, Any]:
        """Cancel a job for everyone (the teacher, the CLI): a queued one at once; a running one at its
        next step (a flag it polls). ``who`` is recorded as ``cancelled_by``."""
        with self._txn():
            return self._stop(self._record_in_txn(key), who)

    def clear_queue(self, who: str | None = None) -> list[str]:
        """Cancel every queued job (the teacher's "clear the queue"); running ones go on. Returns their keys."""
        with self._txn():
            queued = [r for r in (self.table.get(k) for k in self.table.keys()) if r and r["status"] == "queued"]
            for record in queued:
                self._stop(record, who)
        return [r["key"] for r in queued]

    def _record_in_txn(self, key: str) -> dict[str, Any]:
        record = self.table.get(key)
        if record is None:
            raise LabError(f"no run with key {key!r}; `python -m labcore status` lists the runs")
        return self._check_alive(record) if record["status"] == "running" else record

    def _stop(self, record: dict[str, Any], who: str | None) -> dict[str, Any]:
        """Inside a transaction: stop a job for everyone, noting who did."""
        key = record["key"]
        if record["status"] not in ("queued", "running", "dead"):
            return record
        record = _noted(dict(record, requesters=[], cancelled_by=who or ""), "cancel", who)
        if record["status"] == "queued":
            # Its queue entry stays behind; claims skip entries whose record is not queued.
            record = dict(record, status="cancelled", finished_at=_now())
        elif record["status"] == "running":
            self.cache.set(f"cancel/{key}", record["attempt"])
            record = dict(record, cancel_requested=True)
        else:
            record = dict(record, status="cancelled")  # nobody runs it; stop offering resume as "dead"
        self.table.put(record)
        return record

    def cancel_requested(self, key: str, attempt: int) -> bool:
        """Polled by the worker once per step: one read, no lock."""
        return self.cache.get(f"cancel/{key}") == attempt

    # ----------------------------------------------------------------------------------------- reading
    def group(self, name: str) -> dict[str, Any]:
        return self.table.group(name)

    def groups(self) -> list[str]:
        return self.table.groups()

    def resolve_key(self, prefix: str) -> str:
        return self.table.resolve_key(prefix)

    def get(self, key: str) -> dict[str, Any] | None:
        """The job's record, with ``dead`` decided now for a running job nobody runs any more."""
        record = self.table.get(key)
        if record is not None and record["status"] == "running" and self._why_dead(record):
            record = self._mark_dead(key)
        return record

    def record(self, key: str) -> dict[str, Any]:
        record = self.get(key)
        if record is None:
            raise LabError(f"no run with key {key!r}; `python -m labcore status` lists the runs")
        return record

    def keys(self, kind: str | None = "run") -> list[str]:
        """Keys in submission order, of one kind (default: training runs; None: every kind)."""
        return self.table.keys(kind)

    def jobs(self, *, kind: str | None = None, status: str | None = None, group: str | None = None,
             newest: int = 0) -> list[dict[str, Any]]:
        """Records in submission order, optionally of one kind, one status or one group; with ``newest`` only
        the last that many of them, read newest first and no further (a page of a 10,000-job lab)."""
        keys = self.group(group)["keys"] if group else self.table.keys()
        found: list[dict[str, Any]] = []
        for key in reversed(keys) if newest else keys:
            record = self.get(key)
            if record is not None and (kind is None or record.get("kind", "run") == kind) and (
                    status is None or record["status"] == status):
                found.append(record)
                if len(found) == newest:
                    break
        return found[::-1] if newest else found

    def runs(self, *, status: str | None = None, group: str | None = None, newest: int = 0) -> list[dict[str, Any]]:
        """Training runs in submission order (what the Runs and Compare pages list)."""
        return self.jobs(kind="run", status=status, group=group, newest=newest)

    def heartbeat_of(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(f"hb/{key}")

    def status(self, key: str) -> JobStatus:
        record = self.record(key)
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
            total_steps=int(total or 0), loss=loss, heartbeat_age_s=(_now() - beat["t"]) if beat else None,
            pid=record.get("pid"), error=record.get("error", ""), record=record,
        )

    def queue_seq(self) -> int:
        """A counter every push increments: an idle worker claims only when it moved (no lock taken)."""
        return self.queue.seq()

    def queued(self) -> list[str]:
        return [r["key"] for r in self.jobs(status="queued")]

    # ------------------------------------------------------------------------------------- liveness
    def _why_dead(self, record: dict[str, Any]) -> str | None:
        beat = self.cache.get(f"hb/{record['key']}") or {}
        last = beat.get("t") or record.get("started_at") or 0.0
        return why_dead(record.get("host"), record.get("pid"), last, self.settings.stale_after_s)

    def _check_alive(self, record: dict[str, Any]) -> dict[str, Any]:
        """Inside a transaction: a running record, or the same record marked dead."""
        return self._mark_dead(record["key"]) if self._why_dead(record) else record

    def _mark_dead(self, key: str) -> dict[str, Any]:
        try:
            return self._write_dead(key)
        except (OSError, sqlite3.OperationalError) as exc:
            if not health.is_disk_full(exc):
                raise
            # Readers must still open while the disk is full: say it here, write it when there is room.
            record = self.table.get(key)
            return dict(record, status="dead", error=health.disk_full_message(self.root))

    def _write_dead(self, key: str) -> dict[str, Any]:
        with self._txn():
            record = self.table.get(key)
            # Re-check under the lock: the worker may have finished or heartbeated in between.
            reason = self._why_dead(record) if record["status"] == "running" else None
            if reason is None:
                return record
            record = dict(record, status="dead", finished_at=_now(),
                          error=f"the run stopped unexpectedly ({reason}); resume it to continue "
                                f"from its last checkpoint")
            self.table.put(record)
            self.table.running.remove(key)
            self.streams.append(key, [{"type": "log", "source": "store", "message": record["error"], "t": _now()}])
        return record

    def reap(self) -> list[str]:
        """Mark every running job that nobody runs any more ``dead``; return their keys."""
        reaped = []
        for key in self.table.running.items():
            record = self.table.get(key)
            if record is None or record["status"] != "running":
                with self._txn():
                    self.table.running.remove(key)
                continue
            if self._why_dead(record) and self._mark_dead(key)["status"] == "dead":
                reaped.append(key)
        return reaped

    # ------------------------------------------------------------------------------- worker side
    def claim(self, pid: int | None = None) -> Claim | None:
        """Atomically take the next queued job (interactive before sweep, FIFO within each)."""
        pid = pid or os.getpid()
        with self._txn():
            for key in self.queue.pull():
                record = self.table.get(key)
                if record is None or record["status"] != "queued":
                    continue  # cancelled, or claimed through its other priority entry
                now = _now()
                attempt = record["attempt"] + 1
                record = dict(record, status="running", attempt=attempt, pid=pid, host=HOST, node=HOST,
                              started_at=now, finished_at=None, error="", cancel_requested=False)
                self.table.put(record)
                self.cache.set(f"hb/{key}", {"t": now, "pid": pid, "host": HOST, "attempt": attempt,
                                             "step": 0, "total_steps": 0, "loss": None})
                self.cache.delete(f"cancel/{key}")
                self.table.running.add(key)
                workdir = self.workdir(key)
                checkpoint = record.get("checkpoint", "resume.pt")
                resume = bool(record.get("resume")) and bool(checkpoint) and (workdir / checkpoint).exists()
                self.streams.append(key, [{"type": "attempt", "attempt": attempt, "resume": resume,
                                           "pid": pid, "host": HOST, "t": now}])
                limit = self._limit_of(record.get("started_by"))
                return Claim(key=key, attempt=attempt, spec=record["spec"], resume=resume, workdir=workdir,
                             kind=record.get("kind", "run"), requires=tuple(record.get("requires") or ()),
                             resources=dict(record.get("resources") or {}),
                             deadline=now + limit["max_job_s"] if limit else 0.0,
                             deadline_note=limit["note"] if limit else "")
        return None

    def limit_requester(self, who: str, *, max_job_s: float, note: str) -> None:
        """Stop the jobs ``who`` starts after ``max_job_s`` of an attempt (a student's jobs under the teacher's
        max job time); ``note`` is recorded as who cancelled such a job. 0 lifts the limit."""
        entry = f"limits/{requester_id(who)}"
        if max_job_s > 0:
            self.cache.set(entry, {"max_job_s": float(max_job_s), "note": note})
        else:
            self.cache.delete(entry)

    def _limit_of(self, who: str | None) -> dict[str, Any] | None:
        return self.cache.get(f"limits/{requester_id(who)}") if who else None

    def heartbeat(self, key: str, attempt: int, *, pid: int | None = None, step: int = 0,
                  total_steps: int = 0, loss: float | None = None) -> bool:
        """Refresh a job's heartbeat; False when the job is no longer this attempt's to run."""
        record = self.table.get(key)
        if record is None or record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
            return False
        self.cache.set(f"hb/{key}", {"t": _now(), "pid": pid or os.getpid(), "host": HOST, "attempt": attempt,
                                     "step": step, "total_steps": total_steps, "loss": loss})
        if record["status"] == "dead":
            # Marked dead by a reader while it was only slow (a stalled disk, a suspended process):
            # the worker is back (its fresh heartbeat is written above), so the job is running again.
            with self._txn():
                record = self.table.get(key)
                if record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
                    return False
                if record["status"] == "dead":
                    self.table.put(dict(record, status="running", error="", finished_at=None))
                    self.table.running.add(key)
        return True

    def annotate(self, key: str, attempt: int, **fields: Any) -> bool:
        """Add facts about a running attempt to its record (where a cluster ran it: ``node``, ``task_pid``);
        False (and nothing written) once the attempt no longer holds the job."""
        with self._txn():
            if not self._holds(key, attempt):
                return False
            self.table.put(dict(self.table.get(key), **fields))
        return True

    def finish(self, key: str, attempt: int, status: str, *, result: dict[str, Any] | None = None,
               error: str = "", traceback: str = "") -> bool:
        """Record how an attempt ended; False (and nothing written) if the job is no longer its own."""
        if status not in TERMINAL:
            raise ValueError(f"finish() needs a terminal status, one of {TERMINAL}, got {status!r}")
        with self._txn():
            record = self.table.get(key)
            # A job marked dead by a reader but finished by its still-living worker keeps the result.
            if record is None or record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
                return False
            record = dict(record, status=status, finished_at=_now(), error=error, traceback=traceback,
                          resume=False)
            if result is not None:
                record["result"] = result
            self.table.put(record)
            self.cache.delete(f"hb/{key}")
            self.cache.delete(f"cancel/{key}")
            self.table.running.remove(key)
        self._keep_record(record)
        return True

    def _keep_record(self, record: dict[str, Any]) -> None:
        """A finished job's record beside its files too (what a rebuild reads); the database stays the
        source of truth, so a failed copy (a full disk) is not an error of the job. Its resume checkpoint
        goes: a result is never resumed, and a run's ``resume.pt`` (weights and optimiser state) is about
        three times its kept weights."""
        if record["status"] in FINISHED:
            try:
                self.files.write_record(record)
            except OSError:
                pass
            if record.get("checkpoint"):
                (self.workdir(record["key"]) / record["checkpoint"]).unlink(missing_ok=True)

    # --------------------------------------------------------------------------------------- fencing
    def _holds(self, key: str, attempt: int) -> bool:
        """Inside a transaction: does ``attempt`` still hold the job? (The fencing token: a claim
        increments it, so a stalled worker that comes back after a resume elsewhere holds nothing.)"""
        record = self.table.get(key)
        return record is not None and record.get("attempt") == attempt and record["status"] in ("running", "dead")

    def commit_file(self, key: str, attempt: int, tmp: Path, final: Path) -> None:
        """Move a job's finished file into place, only while ``attempt`` holds the job (under the store's
        lock, so no claim can slip in between). A superseded attempt's file is deleted: :class:`Fenced`."""
        with self._txn():
            if self._holds(key, attempt):
                os.replace(tmp, final)
                return
        tmp.unlink(missing_ok=True)
        raise Fenced(f"attempt {attempt} of {key} no longer holds it; {final.name} was not written")

    # ------------------------------------------------------------------------------------ streams
    def append_events(self, key: str, events: list[dict[str, Any]], *, attempt: int | None = None) -> None:
        """Append events to a job's stream as one chunk (the worker batches them). With ``attempt`` (a
        worker's writes) the chunk is refused with :class:`Fenced` once that attempt was superseded."""
        if events:
            with self._txn():
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
            if record is None or record["status"] not in ACTIVE:
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

    # ------------------------------------------------------------------------- results in-process
    def get_result(self, key: str) -> "RunRecord | None":
        """The engine's result record of a run that has one (any final status), else None."""
        return self.result_in(self.table.get(key))

    @staticmethod
    def result_in(record: dict[str, Any] | None) -> "RunRecord | None":
        """The result of a job record already read (a page that listed the runs reads none twice)."""
        from labcore.record import RunRecord

        if record is None or not record.get("result") or record["status"] in ACTIVE:
            return None
        return RunRecord.from_dict(record["result"])

    def put_result(self, result: "RunRecord", *, label: str = "") -> None:
        """Record a run computed in this process (``python -m labcore sweep`` without --queue)."""
        with self._txn():
            record = self.table.get(result.key)
            if record is not None and record["status"] == "running" and not self._why_dead(record):
                return  # a worker owns this run; its own result will land
            now = _now()
            base = record or {"key": result.key, "kind": "run", "spec": result.spec, "label": label,
                              "requires": [], "checkpoint": "resume.pt", "priority": "interactive",
                              "attempt": 0, "pid": None, "host": None, "submitted_at": now,
                              "started_at": now, "groups": []}
            if record is None:
                self.table.all.add(result.key)
            record = dict(base, status=result.status, result=result.to_dict(), error=result.error,
                          finished_at=now, resume=False)
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
        self.cache.set("meta/workers-held", {"who": who or "", "t": _now()})

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
        self.cache.set(f"executor/{name}", dict(info, t=_now()))

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
