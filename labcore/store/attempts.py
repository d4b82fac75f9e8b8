"""The runner's side of a job: claim, heartbeat, annotate, finish, the fencing token that keeps a
superseded attempt from writing, and ``dead`` for a running job nobody runs any more. A mixin of
:class:`~labcore.store.core.Store`, whose table, cache and streams it uses."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from labcore.events import AttemptEvent, LogEvent
from labcore.store import health
from labcore.store.errors import Fenced, StoreLocked
from labcore.store.job_record import LEGACY_CHECKPOINT, stored_kind
from labcore.store.liveness import HOST, why_dead
from labcore.store.records import Claim, wall_clock
from labcore.store.settings import FINISHED, TERMINAL


class Attempts:
    """Claimed attempts and their liveness (see the module's text)."""

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
        except StoreLocked:
            # A writer holds the lock (suspended mid-write?): the reader must not hang behind it. The
            # answer is recomputed on every read, so it is said here and written by a later read.
            record = self.table.get(key)
            reason = self._why_dead(record) if record["status"] == "running" else None
            return record if reason is None else dict(record, status="dead", error=_dead_error(reason))
        except (OSError, sqlite3.OperationalError) as exc:
            if not health.is_disk_full(exc):
                raise
            # Readers must still open while the disk is full: say it here, write it when there is room.
            record = self.table.get(key)
            return dict(record, status="dead", error=health.disk_full_message(self.root))

    def _write_dead(self, key: str) -> dict[str, Any]:
        with self.transaction(self.settings.reap_wait_s):
            record = self.table.get(key)
            # Re-check under the lock: the worker may have finished or heartbeated in between.
            reason = self._why_dead(record) if record["status"] == "running" else None
            if reason is None:
                return record
            record = dict(record, status="dead", finished_at=wall_clock(), error=_dead_error(reason))
            self.table.put(record)
            self.table.running.remove(key)
            self.streams.append(key, [LogEvent(source="store", message=record["error"], t=wall_clock()).to_dict()])
        return record

    def reap(self) -> list[str]:
        """Mark every running job that nobody runs any more ``dead``; return their keys."""
        reaped = []
        for key in self.table.running.items():
            record = self.table.get(key)
            if record is None or record["status"] != "running":
                with self.transaction():
                    self.table.running.remove(key)
                continue
            if self._why_dead(record) and self._mark_dead(key)["status"] == "dead":
                reaped.append(key)
        return reaped

    # ------------------------------------------------------------------------------- worker side
    def claim(self, pid: int | None = None) -> Claim | None:
        """Atomically take the next queued job (interactive before sweep, FIFO within each)."""
        pid = pid or os.getpid()
        with self.transaction():
            for key in self.queue.pull():
                record = self.table.get(key)
                if record is None or record["status"] != "queued":
                    continue  # cancelled, or claimed through its other priority entry
                now = wall_clock()
                attempt = record["attempt"] + 1
                record = dict(record, status="running", attempt=attempt, pid=pid, host=HOST, node=HOST,
                              started_at=now, finished_at=None, error="", cancel_requested=False)
                self.table.put(record)
                self.cache.set(f"hb/{key}", {"t": now, "pid": pid, "host": HOST, "attempt": attempt,
                                             "step": 0, "total_steps": 0, "loss": None})
                self.cache.delete(f"cancel/{key}")
                self.table.running.add(key)
                workdir = self.workdir(key)
                checkpoint = record.get("checkpoint", LEGACY_CHECKPOINT)
                resume = bool(record.get("resume")) and bool(checkpoint) and (workdir / checkpoint).exists()
                self.streams.append(key, [AttemptEvent(attempt=attempt, resume=resume, pid=pid, host=HOST,
                                                       t=now).to_dict()])
                limit = self._limit_of(record.get("started_by"))
                return Claim(key=key, attempt=attempt, spec=record["spec"], resume=resume, workdir=workdir,
                             kind=stored_kind(record), requires=tuple(record.get("requires") or ()),
                             resources=dict(record.get("resources") or {}),
                             deadline=now + limit["max_job_s"] if limit else 0.0,
                             deadline_note=limit["note"] if limit else "")
        return None

    def heartbeat(self, key: str, attempt: int, *, pid: int | None = None, step: int = 0,
                  total_steps: int = 0, loss: float | None = None) -> bool:
        """Refresh a job's heartbeat; False when the job is no longer this attempt's to run."""
        record = self.table.get(key)
        if record is None or record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
            return False
        self.cache.set(f"hb/{key}", {"t": wall_clock(), "pid": pid or os.getpid(), "host": HOST, "attempt": attempt,
                                     "step": step, "total_steps": total_steps, "loss": loss})
        if record["status"] == "dead":
            # Marked dead by a reader while it was only slow (a stalled disk, a suspended process):
            # the worker is back (its fresh heartbeat is written above), so the job is running again.
            with self.transaction():
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
        with self.transaction():
            if not self._holds(key, attempt):
                return False
            self.table.put(dict(self.table.get(key), **fields))
        return True

    def finish(self, key: str, attempt: int, status: str, *, result: dict[str, Any] | None = None,
               error: str = "", traceback: str = "") -> bool:
        """Record how an attempt ended; False (and nothing written) if the job is no longer its own."""
        if status not in TERMINAL:
            raise ValueError(f"finish() needs a terminal status, one of {TERMINAL}, got {status!r}")
        with self.transaction():
            record = self.table.get(key)
            # A job marked dead by a reader but finished by its still-living worker keeps the result.
            if record is None or record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
                return False
            record = dict(record, status=status, finished_at=wall_clock(), error=error, traceback=traceback,
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
        with self.transaction():
            if self._holds(key, attempt):
                os.replace(tmp, final)
                return
        tmp.unlink(missing_ok=True)
        raise Fenced(f"attempt {attempt} of {key} no longer holds it; {final.name} was not written")


def _dead_error(reason: str) -> str:
    return f"the run stopped unexpectedly ({reason}); resume it to continue from its last checkpoint"
