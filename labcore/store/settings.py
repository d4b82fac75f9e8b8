"""The store's statuses, priorities and every timing knob, with units, in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

# Statuses. `done` and `diverged` are results: the same key gives the same result, so a resubmission
# returns them from the store. The stopped ones can be resumed (from the kind's checkpoint, if it has one).
STATUSES = ("queued", "running", "done", "diverged", "failed", "cancelled", "interrupted", "dead")
FINISHED = ("done", "diverged")
STOPPED = ("failed", "cancelled", "interrupted", "dead")
ACTIVE = ("queued", "running")
TERMINAL = FINISHED + STOPPED
# Lower number is claimed first: a teacher's interactive run overtakes a queued sweep. Within a priority the
# requesters are served round-robin (:mod:`.queue`).
PRIORITIES = {"interactive": 0, "sweep": 1}


@dataclass(frozen=True)
class StoreSettings:
    """Every knob of the store and its workers, with units, in one place."""

    stale_after_s: float = 10.0  # a running job whose heartbeat is older than this is dead
    heartbeat_every_s: float = 1.0  # how often a worker rewrites its heartbeats (contract: <= 2 s)
    flush_every_s: float = 0.5  # how often buffered step events are written (other events: at once)
    poll_every_s: float = 0.2  # how often an idle worker looks at the queue counter
    full_claim_every_s: float = 5.0  # an idle worker takes the queue lock at least this often (safety net)
    reap_every_s: float = 2.0  # how often an idle worker marks stale jobs dead
    checkpoint_every: int = 100  # training steps between resume checkpoints (0: only on stop)
    # a started worker that has not yet heartbeated counts as alive this long: on a 2-core machine busy with two
    # other trainings, a worker took over 30 s to import torch
    worker_start_grace_s: float = 120.0
    log_limit_chars: int = 1_000_000  # a job's captured log is cut beyond this
    sqlite_timeout_s: float = 60.0  # how long a single write outside a transaction waits for the lock
    # how long a transaction waits for the write lock before StoreLocked (a process suspended mid-write)
    write_wait_s: float = 600.0
    # how long a read that decided a job is dead waits to write it back (it keeps the answer in memory)
    reap_wait_s: float = 2.0
    stop_timeout_s: float = 30.0  # how long `worker --stop` lets a run checkpoint before SIGKILL
    idle_exit_s: float = 1800.0  # a worker started for someone (a page, the API, a drive) leaves after this idle
    capture_join_s: float = 2.0  # how long a finished job waits for its output pumps to drain
    # A job starts only with this much free disk beside the store (its checkpoints and weights need room).
    min_free_mb: float = float(os.environ.get("TRANSFERLAB_MIN_FREE_MB", "64"))
    # Jobs one requester (a browser session, a user) may have waiting in the queue at once (0: no cap); a
    # class shares one worker, so a 50-spec sweep is queued in parts. Submissions without one are not capped.
    max_queued_per_requester: int = int(os.environ.get("TRANSFERLAB_MAX_QUEUED_PER_SESSION", "20"))


# diskcache settings (see diskcache.core.DEFAULT_SETTINGS). Records and streams are results, not a
# cache: nothing may ever be culled, so eviction is off and the size limit is out of reach.
DISKCACHE_SETTINGS: dict[str, Any] = {
    "eviction_policy": "none",
    "size_limit": 2**50,  # bytes
    "sqlite_journal_mode": "wal",  # readers never block writers
    "sqlite_synchronous": 1,  # NORMAL: durable at WAL checkpoints, safe against process crashes
    "disk_min_file_size": 2**20,  # bytes: values under 1 MiB (records, chunks) stay inside SQLite
}
