"""Asking for jobs and taking requests back: submit (one job or a sweep), resume, withdraw, cancel, the
per-requester cap and time limit. A mixin of :class:`~labcore.store.core.Store`, whose table, queue and
cache it uses; every read-modify-write is inside the store's transaction."""

from __future__ import annotations

from typing import Any, Iterable

from labcore.errors import LabError
from labcore.store.batch import Batch, QueueCapReached
from labcore.store.job_record import JobRecord, stored_kind
from labcore.store.queue import requester_id
from labcore.store.records import NewJob, Submission, Withdrawal, asking, noted, wall_clock
from labcore.store.settings import ACTIVE, FINISHED, PRIORITIES, STOPPED
from labcore.store.table import IndexList


class Requests:
    """The requester's side of the store (see the module's text)."""

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
                return [Submission(record["key"], record["status"], "cached", JobRecord.from_dict(record))], None
        for job in jobs:  # every refusal before anything is written
            if (self.table.get(job.key) or {}).get("status") not in FINISHED:
                self._check_inputs(job)
        batch = Batch(self, who, group)
        done: list[Submission] = []
        capped = None
        with self.transaction():
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
                "attempt": 0, "resume": False, "pid": None, "host": None, "submitted_at": wall_clock(),
                "started_at": None, "finished_at": None, "error": "", "result": None,
                "groups": [batch.group] if batch.group else [], "resources": dict(job.resources),
            }
            record = noted(dict(record, started_by=who or "", requesters=[who] if who else []), "start", who)
            batch.new_keys.append(key)
            outcome = "queued"
        elif record["status"] in FINISHED:
            batch.grouped(key)
            return Submission(key, record["status"], "cached", JobRecord.from_dict(record))
        elif record["status"] in ACTIVE and (record["status"] == "running" or
                                             PRIORITIES[priority] >= PRIORITIES[record["priority"]]):
            joined = asking(record, who)
            batch.grouped(key)
            if joined is not record:
                self.table.put(joined)
            return Submission(key, record["status"], "existing", JobRecord.from_dict(joined))
        elif record["status"] == "queued":
            batch.check_cap(key)
            record = asking(record, who)
            outcome = "existing"  # same job, moved forward: a second entry at the higher priority
        else:
            batch.check_cap(key)
            outcome = "requeued" if record["status"] == "failed" else "resumed"
            record = dict(record, status="queued", resume=outcome == "resumed", error="",
                          submitted_at=wall_clock(), finished_at=None, started_by=who or "",
                          requesters=[who] if who else [], cancelled_by=None)
            record = noted(record, "start", who)
        record["priority"] = priority
        if batch.group and batch.group not in record.get("groups", []):
            record["groups"] = record.get("groups", []) + [batch.group]
        batch.grouped(key)
        self.table.put(record)
        self.cache.delete(f"cancel/{key}")
        self.queue.push(key, priority, who)
        batch.asked(key)
        return Submission(key, "queued", outcome, JobRecord.from_dict(record))

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
            record = self._current(needed)
            if record is None:
                raise LabError(f"this {job.kind} job needs job {needed} and there is none with that key; "
                               f"pick a finished one from the Runs page or `python -m labcore status`")
            if record["status"] not in FINISHED:
                raise LabError(f"this {job.kind} job needs {stored_kind(record)} {needed} "
                               f"({record.get('label', '')}) finished, and it is {record['status']}; "
                               f"let it finish (or resume it), then ask again")

    def resume(self, key: str, who: str | None = None) -> Submission:
        """Queue a stopped job again (interactive priority); it continues from its last checkpoint."""
        record = self._current_or_raise(key)
        if record["status"] not in STOPPED:
            raise LabError(f"run {key} is {record['status']}: only {', '.join(STOPPED)} runs can be resumed")
        with self.transaction():
            record = self.table.get(key)
            if record["status"] not in STOPPED:  # someone resumed it in between: return that job
                joined = asking(record, who) if record["status"] in ACTIVE else record
                if joined is not record:
                    self.table.put(joined)
                return Submission(key, record["status"], "existing", JobRecord.from_dict(joined))
            Batch(self, who).check_cap(key)
            record = dict(record, status="queued", resume=True, priority="interactive", error="",
                          submitted_at=wall_clock(), finished_at=None, started_by=who or "",
                          requesters=[who] if who else [], cancelled_by=None)
            record = noted(record, "resume", who)
            self.table.put(record)
            self.cache.delete(f"cancel/{key}")
            self.queue.push(key, "interactive", who)
            if who:
                self._asked(who).add(key)
        return Submission(key, "queued", "resumed", JobRecord.from_dict(record))

    def withdraw(self, key: str, who: str | None) -> Withdrawal:
        """A viewer's cancel: take back ``who``'s request. The job stops (as :meth:`cancel`) only when no
        other requester still waits for it; a job nobody is recorded as asking for (the CLI's) stops."""
        with self.transaction():
            record = self._record_in_txn(key)
            if record["status"] not in ACTIVE:
                return Withdrawal(key, "inactive", 0, JobRecord.from_dict(record))
            requesters = list(record.get("requesters") or [])
            others = [r for r in requesters if r != who]
            if others and who not in requesters:
                return Withdrawal(key, "not-requested", len(others), JobRecord.from_dict(record))
            if others:
                record = noted(dict(record, requesters=others), "withdraw", who)
                self.table.put(record)
                return Withdrawal(key, "withdrawn", len(others), JobRecord.from_dict(record))
            return Withdrawal(key, "cancelled", 0, JobRecord.from_dict(self._stop(record, who)))

    def cancel(self, key: str, who: str | None = None) -> JobRecord:
        """Cancel a job for everyone (the teacher, the CLI): a queued one at once; a running one at its
        next step (a flag it polls). ``who`` is recorded as ``cancelled_by``."""
        with self.transaction():
            return JobRecord.from_dict(self._stop(self._record_in_txn(key), who))

    def clear_queue(self, who: str | None = None) -> list[str]:
        """Cancel every queued job (the teacher's "clear the queue"); running ones go on. Returns their keys."""
        with self.transaction():
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
        record = noted(dict(record, requesters=[], cancelled_by=who or ""), "cancel", who)
        if record["status"] == "queued":
            # Its queue entry stays behind; claims skip entries whose record is not queued.
            record = dict(record, status="cancelled", finished_at=wall_clock())
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

    # ------------------------------------------------------------------------------------ limits
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
