"""The run store: a durable queue of RunSpecs, run records, metric streams and artifacts on disk.

Every page, CLI and worker process talks to the same diskcache directory (SQLite in WAL mode, so
readers never block and writers serialise on a short lock). What lives where:

=========================  ==========================================================================
``run/<key>``              the run record: spec, status, attempt, owner pid, times, result, error
``hb/<key>``               the owner's heartbeat: time, pid, host, progress (rewritten every second)
``cancel/<key>``           the cancel flag a worker polls once per training step
``ev/<key>/<n>``           chunk ``n`` of the append-only metric stream (a list of events)
``evn/<key>``              how many chunks the stream has (the readers' cursor runs up to it)
``q0-…`` / ``q1-…``        queue entries (diskcache ``push``/``pull``): interactive runs, then sweeps
``group/<name>``           a sweep: a named, ordered list of run keys
``worker/<pid>``           a registered worker process and its heartbeat
``index/…``                lists of run keys, running keys, groups and workers (no full scans)
=========================  ==========================================================================

Files a run writes (checkpoints, attention maps, cached features) live beside the database under
``runs/<key>/``: the engine writes there directly and the pages read them back by path.

Rules that keep the store honest:

* Every read-modify-write happens inside ``cache.transact()`` (SQLite ``BEGIN IMMEDIATE``), so a claim,
  a submission or a status change is atomic across processes: each queued spec is claimed once.
* A queue entry only names a key; the record decides. A claim skips entries whose record is no longer
  ``queued`` (cancelled, or already claimed through a second, higher-priority entry).
* ``running`` is only believed while its heartbeat is fresh and its pid is a live, non-zombie process.
  Reads compute ``dead`` lazily and write it back, so no run stays ``running`` once nobody runs it.

This module imports no torch: the pages import it.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import diskcache

from labcore import paths
from labcore.errors import LabError
from labcore.spec import RunSpec, make_spec

if TYPE_CHECKING:
    from labcore.record import RunRecord

# Statuses. `done` and `diverged` are results: the same key gives the same result, so a resubmission
# returns them from the store. The stopped ones can be resumed from their last checkpoint.
STATUSES = ("queued", "running", "done", "diverged", "failed", "cancelled", "interrupted", "dead")
FINISHED = ("done", "diverged")
STOPPED = ("failed", "cancelled", "interrupted", "dead")
ACTIVE = ("queued", "running")
TERMINAL = FINISHED + STOPPED
# Lower number is claimed first: a teacher's interactive run overtakes a queued sweep.
PRIORITIES = {"interactive": 0, "sweep": 1}


@dataclass(frozen=True)
class StoreSettings:
    """Every knob of the store and its workers, with units, in one place."""

    stale_after_s: float = 10.0  # a running run whose heartbeat is older than this is dead
    heartbeat_every_s: float = 1.0  # how often a worker rewrites its heartbeats (contract: <= 2 s)
    flush_every_s: float = 0.5  # how often buffered step events are written (other events: at once)
    poll_every_s: float = 0.2  # how often an idle worker looks at the queue
    reap_every_s: float = 2.0  # how often an idle worker marks stale runs dead
    checkpoint_every: int = 100  # training steps between resume checkpoints (0: only on stop)
    worker_start_grace_s: float = 30.0  # a started worker that has not yet heartbeated counts as alive
    log_limit_chars: int = 1_000_000  # a run's captured log is cut beyond this
    sqlite_timeout_s: float = 60.0  # how long a writer waits for the lock before diskcache.Timeout


# diskcache settings (see diskcache.core.DEFAULT_SETTINGS). Records and streams are results, not a
# cache: nothing may ever be culled, so eviction is off and the size limit is out of reach.
DISKCACHE_SETTINGS: dict[str, Any] = {
    "eviction_policy": "none",
    "size_limit": 2**50,  # bytes
    "sqlite_journal_mode": "wal",  # readers never block writers
    "sqlite_synchronous": 1,  # NORMAL: durable at WAL checkpoints, safe against process crashes
    "disk_min_file_size": 2**20,  # bytes: values under 1 MiB (records, chunks) stay inside SQLite
}


@dataclass(frozen=True)
class Submission:
    """What a submit did: ``outcome`` is cached | queued | existing | resumed | requeued."""

    key: str
    status: str
    outcome: str
    record: dict[str, Any]


@dataclass(frozen=True)
class Claim:
    """A spec a worker now owns: it must heartbeat ``(key, attempt)`` and finish it."""

    key: str
    attempt: int
    spec: dict[str, Any]
    resume: bool
    workdir: Path


@dataclass(frozen=True)
class RunStatus:
    """A run at a glance, for tables and progress bars (the full record stays in ``record``)."""

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
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


# ---------------------------------------------------------------------------------------------- processes
def process_state(pid: int | None) -> str:
    """``alive`` | ``zombie`` | ``gone`` | ``unknown`` for a local pid.

    ``os.kill(pid, 0)`` succeeds on a zombie (an exited child its parent has not reaped), so Linux's
    ``/proc/PID/stat`` state letter decides; ``unknown`` where there is no /proc (then the heartbeat
    alone decides).
    """
    if not pid or pid <= 0:
        return "gone"
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return "gone"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "unknown"
        return "unknown"
    except OSError:
        return "unknown"
    # "pid (comm) S ...": comm may hold spaces and parentheses, so split after the last ")".
    state = text.rsplit(")", 1)[-1].split()[0]
    return "zombie" if state in ("Z", "X", "x") else "alive"


HOST = socket.gethostname()


def _now() -> float:
    return time.time()


# ------------------------------------------------------------------------------------------------- spec key
def resolve_for_key(spec: RunSpec) -> RunSpec:
    """The resolved spec whose ``.key`` names the run (what the engine will actually run).

    ``labcore.run.resolve_spec`` decides (it reads the discipline registry; that module imports torch
    only inside its functions), so the pages key a submission exactly as the engine keys its result.
    """
    if spec.is_resolved:
        return spec
    from labcore.run import resolve_spec

    return resolve_spec(spec)


# ---------------------------------------------------------------------------------------------- the store
class Store:
    """Process-safe store of queued specs, run records, metric streams and artifacts.

    ``root`` defaults to ``<TRANSFERLAB_CACHE>/store``. Open it once per process with :func:`open_store`
    (several ``Store`` objects on one root in a process also work, they just cost a connection each).
    """

    def __init__(self, root: Path | str | None = None, settings: StoreSettings = StoreSettings()) -> None:
        self.root = Path(root) if root is not None else paths.cache_dir() / "store"
        self.settings = settings
        self.runs_dir = self.root / "runs"
        self.logs_dir = self.root / "logs"
        self.cache = diskcache.Cache(str(self.root / "db"), timeout=settings.sqlite_timeout_s,
                                     **DISKCACHE_SETTINGS)

    def close(self) -> None:
        self.cache.close()

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # ------------------------------------------------------------------------------------ plumbing
    def _txn(self):
        # retry=True: a writer that loses the race for the SQLite lock tries again instead of raising.
        return self.cache.transact(retry=True)

    def _append_index(self, name: str, item: Any) -> None:
        items = self.cache.get(f"index/{name}", [])
        if item not in items:
            self.cache.set(f"index/{name}", items + [item])

    def _remove_index(self, name: str, item: Any) -> None:
        items = self.cache.get(f"index/{name}", [])
        if item in items:
            self.cache.set(f"index/{name}", [i for i in items if i != item])

    def workdir(self, key: str) -> Path:
        """The folder the engine writes this run's artifacts and checkpoints into."""
        return self.runs_dir / key

    # ---------------------------------------------------------------------------------- submitting
    def submit(self, spec: RunSpec, *, priority: str = "interactive", group: str | None = None) -> Submission:
        """Queue a spec unless its result or its run already exists.

        * a ``done``/``diverged`` record is returned at once, without touching the queue;
        * a queued or running run is returned as it is (a higher priority moves it forward);
        * a cancelled, interrupted or dead run is queued again and continues from its checkpoint;
        * a failed run is queued again from the start.
        """
        if priority not in PRIORITIES:
            raise LabError(f"unknown priority {priority!r}; valid priorities: {', '.join(PRIORITIES)}")
        resolved = resolve_for_key(spec)
        key = resolved.key
        # The cached path is one read and no lock: a finished result never changes.
        record = self.cache.get(f"run/{key}")
        if record is not None and record["status"] in FINISHED:
            if group:
                with self._txn():
                    self._add_to_group(group, [key])
            return Submission(key, record["status"], "cached", record)
        with self._txn():
            record = self.cache.get(f"run/{key}")
            if record is not None and record["status"] == "running":
                record = self._check_alive(record)
            if group:
                self._add_to_group(group, [key])
            if record is None:
                record = {
                    "key": key, "spec": resolved.to_dict(), "label": resolved.label(), "status": "queued",
                    "priority": priority, "attempt": 0, "resume": False, "pid": None, "host": None,
                    "submitted_at": _now(), "started_at": None, "finished_at": None, "error": "",
                    "result": None, "groups": [group] if group else [],
                }
                self._append_index("runs", key)
                outcome = "queued"
            elif record["status"] in FINISHED:
                return Submission(key, record["status"], "cached", record)
            elif record["status"] == "running":
                return Submission(key, "running", "existing", record)
            elif record["status"] == "queued":
                if PRIORITIES[priority] >= PRIORITIES[record["priority"]]:
                    return Submission(key, "queued", "existing", record)
                outcome = "existing"  # same run, moved forward: a second entry at the higher priority
            else:
                outcome = "requeued" if record["status"] == "failed" else "resumed"
                record = dict(record, status="queued", resume=outcome == "resumed", error="",
                              submitted_at=_now(), finished_at=None)
            record["priority"] = priority
            if group and group not in record.get("groups", []):
                record["groups"] = record.get("groups", []) + [group]
            self.cache.set(f"run/{key}", record)
            self.cache.delete(f"cancel/{key}")
            self.cache.push(key, prefix=f"q{PRIORITIES[priority]}")
            self.cache.incr("queue/seq")  # wakes idle workers without them taking the lock
        return Submission(key, "queued", outcome, record)

    def resume(self, key: str) -> Submission:
        """Queue a stopped run again (interactive priority); it continues from its last checkpoint."""
        record = self.get(key)
        if record is None:
            raise LabError(f"no run with key {key!r}; `python -m labcore status` lists the runs")
        if record["status"] not in STOPPED:
            raise LabError(f"run {key} is {record['status']}: only {', '.join(STOPPED)} runs can be resumed")
        with self._txn():
            record = self.cache.get(f"run/{key}")
            if record["status"] not in STOPPED:  # someone resumed it in between: return that run
                return Submission(key, record["status"], "existing", record)
            record = dict(record, status="queued", resume=True, priority="interactive", error="",
                          submitted_at=_now(), finished_at=None)
            self.cache.set(f"run/{key}", record)
            self.cache.delete(f"cancel/{key}")
            self.cache.push(key, prefix="q0")
            self.cache.incr("queue/seq")
        return Submission(key, "queued", "resumed", record)

    def cancel(self, key: str) -> dict[str, Any]:
        """Cancel a run: a queued one at once; a running one at its next training step (a flag)."""
        with self._txn():
            record = self.cache.get(f"run/{key}")
            if record is None:
                raise LabError(f"no run with key {key!r}; `python -m labcore status` lists the runs")
            if record["status"] == "running":
                record = self._check_alive(record)
            if record["status"] == "queued":
                # Its queue entry stays behind; claims skip entries whose record is not queued.
                record = dict(record, status="cancelled", finished_at=_now())
                self.cache.set(f"run/{key}", record)
            elif record["status"] == "running":
                self.cache.set(f"cancel/{key}", record["attempt"])
                record = dict(record, cancel_requested=True)
                self.cache.set(f"run/{key}", record)
            elif record["status"] == "dead":
                record = dict(record, status="cancelled")  # nobody runs it; stop offering resume as "dead"
                self.cache.set(f"run/{key}", record)
        return record

    def cancel_requested(self, key: str, attempt: int) -> bool:
        """Polled by the worker once per training step: one read, no lock."""
        return self.cache.get(f"cancel/{key}") == attempt

    # ----------------------------------------------------------------------------------------- groups
    def _add_to_group(self, name: str, keys: Iterable[str]) -> None:
        group = self.cache.get(f"group/{name}")
        if group is None:
            group = {"name": name, "created_at": _now(), "keys": []}
            self._append_index("groups", name)
        new = [k for k in keys if k not in group["keys"]]
        if new:
            self.cache.set(f"group/{name}", dict(group, keys=group["keys"] + new))
        elif f"group/{name}" not in self.cache:
            self.cache.set(f"group/{name}", group)

    def submit_group(self, name: str, specs: Iterable[RunSpec], *, priority: str = "sweep") -> list[Submission]:
        """Queue a sweep: every spec joins group ``name``; finished ones come from the store."""
        if not name:
            raise LabError("a sweep needs a name: give --name (it groups the runs in the store)")
        return [self.submit(spec, priority=priority, group=name) for spec in specs]

    def group(self, name: str) -> dict[str, Any]:
        group = self.cache.get(f"group/{name}")
        if group is None:
            valid = ", ".join(self.groups()) or "(none yet)"
            raise LabError(f"no sweep named {name!r}; sweeps in the store: {valid}")
        return group

    def groups(self) -> list[str]:
        return list(self.cache.get("index/groups", []))

    # ----------------------------------------------------------------------------------------- reading
    def resolve_key(self, prefix: str) -> str:
        """A full run key from a unique prefix (keys are long; the CLI accepts their start)."""
        if self.cache.get(f"run/{prefix}") is not None:
            return prefix
        matches = [k for k in self.cache.get("index/runs", []) if k.startswith(prefix)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise LabError(f"no run key starts with {prefix!r}; `python -m labcore status` lists the runs")
        raise LabError(f"{len(matches)} run keys start with {prefix!r}; give more characters")

    def get(self, key: str) -> dict[str, Any] | None:
        """The run record, with ``dead`` decided now for a running run nobody runs any more."""
        record = self.cache.get(f"run/{key}")
        if record is not None and record["status"] == "running" and not self._alive(record):
            record = self._mark_dead(key)
        return record

    def record(self, key: str) -> dict[str, Any]:
        record = self.get(key)
        if record is None:
            raise LabError(f"no run with key {key!r}; `python -m labcore status` lists the runs")
        return record

    def keys(self) -> list[str]:
        return list(self.cache.get("index/runs", []))

    def runs(self, *, status: str | None = None, group: str | None = None) -> list[dict[str, Any]]:
        """Records in submission order, optionally of one status or one sweep."""
        keys = self.group(group)["keys"] if group else self.keys()
        records = [r for r in (self.get(k) for k in keys) if r is not None]
        return [r for r in records if status is None or r["status"] == status]

    def heartbeat_of(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(f"hb/{key}")

    def status(self, key: str) -> RunStatus:
        record = self.record(key)
        beat = self.cache.get(f"hb/{key}") if record["status"] == "running" else None
        result = record.get("result") or {}
        step = total = 0
        loss = None
        if beat:
            step, total, loss = beat.get("step", 0), beat.get("total_steps", 0), beat.get("loss")
        elif result:
            step, total = result.get("steps_done", 0), result.get("total_steps", 0)
            losses = result.get("train_loss") or []
            loss = losses[-1][1] if losses else None
        return RunStatus(
            key=key, status=record["status"], label=record.get("label", ""), step=int(step or 0),
            total_steps=int(total or 0), loss=loss, heartbeat_age_s=(_now() - beat["t"]) if beat else None,
            pid=record.get("pid"), error=record.get("error", ""), record=record,
        )

    # ------------------------------------------------------------------------------------- liveness
    def _alive(self, record: dict[str, Any]) -> bool:
        beat = self.cache.get(f"hb/{record['key']}") or {}
        last = beat.get("t") or record.get("started_at") or 0.0
        if _now() - last > self.settings.stale_after_s:
            return False
        if record.get("host") == HOST and process_state(record.get("pid")) in ("gone", "zombie"):
            return False
        return True

    def _check_alive(self, record: dict[str, Any]) -> dict[str, Any]:
        """Inside a transaction: a running record, or the same record marked dead."""
        return record if self._alive(record) else self._mark_dead(record["key"])

    def _mark_dead(self, key: str) -> dict[str, Any]:
        with self._txn():
            record = self.cache.get(f"run/{key}")
            # Re-check under the lock: the worker may have finished or heartbeated in between.
            if record["status"] != "running" or self._alive(record):
                return record
            beat = self.cache.get(f"hb/{key}") or {}
            age = _now() - (beat.get("t") or record.get("started_at") or 0.0)
            state = process_state(record.get("pid")) if record.get("host") == HOST else "unknown"
            reason = (f"worker pid {record.get('pid')} is {state}" if state in ("gone", "zombie")
                      else f"no heartbeat for {age:.0f} s")
            record = dict(record, status="dead", finished_at=_now(),
                          error=f"the run stopped unexpectedly ({reason}); resume it to continue "
                                f"from its last checkpoint")
            self.cache.set(f"run/{key}", record)
            self._remove_index("running", key)
            self._append_chunk(key, [{"type": "log", "source": "store", "message": record["error"], "t": _now()}])
        return record

    def reap(self) -> list[str]:
        """Mark every running run that nobody runs any more ``dead``; return their keys."""
        reaped = []
        for key in self.cache.get("index/running", []):
            record = self.cache.get(f"run/{key}")
            if record is None or record["status"] != "running":
                with self._txn():
                    self._remove_index("running", key)
                continue
            if not self._alive(record) and self._mark_dead(key)["status"] == "dead":
                reaped.append(key)
        return reaped

    # ------------------------------------------------------------------------------- worker side
    def claim(self, pid: int | None = None) -> Claim | None:
        """Atomically take the next queued spec (interactive before sweep, FIFO within each)."""
        pid = pid or os.getpid()
        with self._txn():
            for prefix in ("q0", "q1"):
                while True:
                    entry, key = self.cache.pull(prefix=prefix)
                    if entry is None:
                        break
                    record = self.cache.get(f"run/{key}")
                    if record is None or record["status"] != "queued":
                        continue  # cancelled, or claimed through its other priority entry
                    now = _now()
                    attempt = record["attempt"] + 1
                    record = dict(record, status="running", attempt=attempt, pid=pid, host=HOST,
                                  started_at=now, finished_at=None, error="", cancel_requested=False)
                    self.cache.set(f"run/{key}", record)
                    self.cache.set(f"hb/{key}", {"t": now, "pid": pid, "host": HOST, "attempt": attempt,
                                                 "step": 0, "total_steps": 0, "loss": None})
                    self.cache.delete(f"cancel/{key}")
                    self._append_index("running", key)
                    workdir = self.workdir(key)
                    resume = bool(record.get("resume")) and (workdir / "resume.pt").exists()
                    self._append_chunk(key, [{"type": "attempt", "attempt": attempt, "resume": resume,
                                              "pid": pid, "host": HOST, "t": now}])
                    return Claim(key=key, attempt=attempt, spec=record["spec"], resume=resume, workdir=workdir)
        return None

    def queue_seq(self) -> int:
        """A counter every push increments: an idle worker claims only when it moved (no lock taken)."""
        return int(self.cache.get("queue/seq", 0))

    def queued(self) -> list[str]:
        return [r["key"] for r in self.runs(status="queued")]

    def heartbeat(self, key: str, attempt: int, *, pid: int | None = None, step: int = 0,
                  total_steps: int = 0, loss: float | None = None) -> bool:
        """Refresh a run's heartbeat; False when the run is no longer this attempt's to run."""
        record = self.cache.get(f"run/{key}")
        if record is None or record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
            return False
        self.cache.set(f"hb/{key}", {"t": _now(), "pid": pid or os.getpid(), "host": HOST, "attempt": attempt,
                                     "step": step, "total_steps": total_steps, "loss": loss})
        if record["status"] == "dead":
            # Marked dead by a reader while it was only slow (a stalled disk, a suspended process):
            # the worker is back (its fresh heartbeat is written above), so the run is running again.
            with self._txn():
                record = self.cache.get(f"run/{key}")
                if record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
                    return False
                if record["status"] == "dead":
                    self.cache.set(f"run/{key}", dict(record, status="running", error="", finished_at=None))
                    self._append_index("running", key)
        return True

    def finish(self, key: str, attempt: int, status: str, *, result: dict[str, Any] | None = None,
               error: str = "", traceback: str = "") -> bool:
        """Record how an attempt ended; False (and nothing written) if the run is no longer its own."""
        if status not in TERMINAL:
            raise ValueError(f"finish() needs a terminal status, one of {TERMINAL}, got {status!r}")
        with self._txn():
            record = self.cache.get(f"run/{key}")
            # A run marked dead by a reader but finished by its still-living worker keeps the result.
            if record is None or record.get("attempt") != attempt or record["status"] not in ("running", "dead"):
                return False
            record = dict(record, status=status, finished_at=_now(), error=error, traceback=traceback,
                          resume=False)
            if result is not None:
                record["result"] = result
            self.cache.set(f"run/{key}", record)
            self.cache.delete(f"hb/{key}")
            self.cache.delete(f"cancel/{key}")
            self._remove_index("running", key)
        return True

    # ------------------------------------------------------------------------------------ streams
    def _append_chunk(self, key: str, events: list[dict[str, Any]]) -> None:
        n = self.cache.get(f"evn/{key}", 0)
        self.cache.set(f"ev/{key}/{n}", events)
        self.cache.set(f"evn/{key}", n + 1)

    def append_events(self, key: str, events: list[dict[str, Any]]) -> None:
        """Append events to a run's stream as one chunk (the worker batches them)."""
        if events:
            with self._txn():
                self._append_chunk(key, list(events))

    def read_events(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Events appended since ``cursor`` and the cursor to pass next time (start with 0)."""
        n = self.cache.get(f"evn/{key}", 0)
        events: list[dict[str, Any]] = []
        for i in range(cursor, n):
            events.extend(self.cache.get(f"ev/{key}/{i}", []))
        return events, n

    def events(self, key: str) -> list[dict[str, Any]]:
        return self.read_events(key, 0)[0]

    def follow(self, key: str, *, poll_s: float = 0.5, cursor: int = 0) -> Iterator[dict[str, Any]]:
        """Yield a run's events as they arrive, until it is no longer queued or running."""
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
        """The run's log: engine messages, the worker's stdout/stderr, tracebacks, store notes."""
        lines = []
        for event in self.events(key):
            if event.get("type") == "log":
                source = event.get("source", "engine")
                prefix = "" if source == "engine" else f"[{source}] "
                lines.append(prefix + str(event.get("message", "")).rstrip("\n"))
            elif event.get("type") == "attempt":
                how = "resumed from checkpoint" if event.get("resume") else "started"
                lines.append(f"--- attempt {event['attempt']} {how} by pid {event.get('pid')} ---")
        record = self.cache.get(f"run/{key}") or {}
        if record.get("traceback") and record["traceback"] not in "\n".join(lines):
            lines.append(record["traceback"].rstrip("\n"))
        return "\n".join(lines)

    # ------------------------------------------------------------------------- results in-process
    def get_result(self, key: str) -> "RunRecord | None":
        """The engine's result record of a run that has one (any final status), else None."""
        from labcore.record import RunRecord

        record = self.cache.get(f"run/{key}")
        if record is None or not record.get("result") or record["status"] in ACTIVE:
            return None
        return RunRecord.from_dict(record["result"])

    def run_dir(self, key: str) -> Path:
        """Same as :meth:`workdir` (the name the in-process sweep uses)."""
        return self.workdir(key)

    def put_result(self, result: "RunRecord") -> None:
        """Record a result computed in this process (``python -m labcore sweep`` without --queue)."""
        with self._txn():
            record = self.cache.get(f"run/{result.key}")
            if record is not None and record["status"] == "running" and self._alive(record):
                return  # a worker owns this run; its own result will land
            now = _now()
            spec = make_spec(**result.spec)
            base = record or {"key": result.key, "spec": result.spec, "label": spec.label(), "priority":
                              "interactive", "attempt": 0, "pid": None, "host": None, "submitted_at": now,
                              "started_at": now, "groups": []}
            if record is None:
                self._append_index("runs", result.key)
            self.cache.set(f"run/{result.key}", dict(base, status=result.status, result=result.to_dict(),
                                                     error=result.error, finished_at=now, resume=False))

    # ------------------------------------------------------------------------------- analysis jobs
    # Short jobs on a finished run (attention maps): queued apart from runs and taken first by an idle
    # worker between runs, so a page asks for them and polls, and never computes them itself.
    JOB_KINDS = ("attention",)

    @staticmethod
    def job_id(kind: str, key: str, split: str, index: int) -> str:
        return f"{kind}:{key}:{split}:{int(index)}"

    def attention_path(self, key: str, split: str, index: int) -> Path:
        return self.workdir(key) / f"attention-{split}-{int(index)}.npz"

    def request_attention(self, key: str, split: str = "test", index: int = 0) -> dict[str, Any]:
        """Queue an attention job for a finished run (idempotent); return the job's record."""
        record = self.get(key)
        if record is None:
            raise LabError(f"no run with key {key!r}; pick a run from the Runs page or `labcore status`")
        if record["status"] not in FINISHED:
            raise LabError(f"run {key} is {record['status']}: attention maps need a finished run")
        job_id = self.job_id("attention", key, split, index)
        with self._txn():
            job = self.cache.get(f"job/{job_id}")
            if job is not None and job["status"] in ("queued", "running", "done"):
                if job["status"] != "running" or self._job_alive(job):
                    return job
            job = {"id": job_id, "kind": "attention", "key": key, "split": split, "index": int(index),
                   "status": "queued", "error": "", "pid": None, "host": None, "requested_at": _now()}
            self.cache.set(f"job/{job_id}", job)
            self.cache.push(job_id, prefix="jobs")
            self.cache.incr("queue/seq")
        return job

    def job(self, job_id: str) -> dict[str, Any] | None:
        job = self.cache.get(f"job/{job_id}")
        if job is not None and job["status"] == "running" and not self._job_alive(job):
            job = dict(job, status="failed", error="the worker running this job stopped; ask again")
        return job

    def attention_job(self, key: str, split: str = "test", index: int = 0) -> dict[str, Any] | None:
        return self.job(self.job_id("attention", key, split, index))

    def attention_result(self, key: str, split: str = "test", index: int = 0) -> Path | None:
        """The attention maps' .npz once computed, else None."""
        job = self.attention_job(key, split, index)
        path = self.attention_path(key, split, index)
        return path if job is not None and job["status"] == "done" and path.is_file() else None

    def _job_alive(self, job: dict[str, Any]) -> bool:
        return not (job.get("host") == HOST and process_state(job.get("pid")) in ("gone", "zombie"))

    def claim_job(self, pid: int | None = None) -> dict[str, Any] | None:
        pid = pid or os.getpid()
        with self._txn():
            while True:
                entry, job_id = self.cache.pull(prefix="jobs")
                if entry is None:
                    return None
                job = self.cache.get(f"job/{job_id}")
                if job is None or job["status"] != "queued":
                    continue
                job = dict(job, status="running", pid=pid, host=HOST, started_at=_now())
                self.cache.set(f"job/{job_id}", job)
                return job

    def finish_job(self, job_id: str, status: str, error: str = "") -> None:
        with self._txn():
            job = self.cache.get(f"job/{job_id}") or {"id": job_id}
            self.cache.set(f"job/{job_id}", dict(job, status=status, error=error, finished_at=_now()))

    # ---------------------------------------------------------------------------------- artifacts
    def artifacts(self, key: str) -> dict[str, Path]:
        """Files the run wrote (``best.safetensors``, ``*.npz`` attention maps, cached features …)."""
        folder = self.workdir(key)
        if not folder.is_dir():
            return {}
        return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}

    # ------------------------------------------------------------------------------------ workers
    def register_worker(self, pid: int, *, state: str = "starting", command: str = "") -> None:
        with self._txn():
            self.cache.set(f"worker/{pid}", {"pid": pid, "host": HOST, "state": state, "run": None,
                                             "started_at": _now(), "t": _now(), "command": command})
            self._append_index("workers", pid)

    def worker_heartbeat(self, pid: int, *, state: str, run: str | None = None) -> None:
        info = self.cache.get(f"worker/{pid}") or {"pid": pid, "host": HOST, "started_at": _now(),
                                                   "command": ""}
        if pid not in self.cache.get("index/workers", []):
            with self._txn():
                self._append_index("workers", pid)
        self.cache.set(f"worker/{pid}", dict(info, state=state, run=run, t=_now()))

    def unregister_worker(self, pid: int) -> None:
        with self._txn():
            self.cache.delete(f"worker/{pid}")
            self._remove_index("workers", pid)

    def worker_alive(self, info: dict[str, Any]) -> bool:
        if info.get("host") == HOST and process_state(info["pid"]) in ("gone", "zombie"):
            return False
        age = _now() - info.get("t", 0.0)
        if info.get("state") == "starting":
            return age <= self.settings.worker_start_grace_s
        return age <= self.settings.stale_after_s

    def workers(self, *, alive_only: bool = True) -> list[dict[str, Any]]:
        """Registered workers (each with ``alive``); dead registrations are dropped on the way."""
        out = []
        for pid in self.cache.get("index/workers", []):
            info = self.cache.get(f"worker/{pid}")
            alive = info is not None and self.worker_alive(info)
            if not alive:
                self.unregister_worker(pid)
            if info is not None and (alive or not alive_only):
                out.append(dict(info, alive=alive))
        return out


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


# --------------------------------------------------------------------------------------------- curves
def curves_from_events(events: Iterable[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Loss and evaluation curves from a metric stream, as ``{name: [(step, value), ...]}``.

    A resumed (or restarted) attempt starts again at its checkpoint step: points an earlier attempt
    logged at or after that step are dropped, so the curve continues from the checkpoint instead of
    doubling back. Names: ``train_loss``, ``lr``, ``<split>_loss`` and ``<split>_<metric>``.
    """
    out: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, step: int, value: Any) -> None:
        if value is None:
            return
        points = out.setdefault(name, [])
        while points and points[-1][0] >= step:
            points.pop()
        points.append((step, float(value)))

    last_step = -1
    for event in events:
        kind = event.get("type")
        if kind == "step":
            step = int(event["step"])
            if step <= last_step:
                # A step that is not past the last one: a new attempt starts here. Cut every curve.
                for points in out.values():
                    while points and points[-1][0] >= step:
                        points.pop()
            last_step = step
            add("train_loss", step, event.get("loss"))
            add("lr", step, event.get("lr"))
        elif kind == "eval":
            split = event.get("split", "validation")
            add(f"{split}_loss", int(event["step"]), event.get("loss"))
            add(f"{split}_{event.get('metric', 'metric')}", int(event["step"]), event.get("value"))
    return {name: points for name, points in out.items() if points}


def spec_from_record(record: dict[str, Any]) -> RunSpec:
    return make_spec(**record["spec"])


__all__ = [
    "ACTIVE", "Claim", "DISKCACHE_SETTINGS", "FINISHED", "PRIORITIES", "RunStatus", "STATUSES", "STOPPED",
    "Store", "StoreSettings", "Submission", "TERMINAL", "curves_from_events", "open_store", "process_state",
    "resolve_for_key", "spec_from_record",
]
