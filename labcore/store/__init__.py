"""The store: small classes over one diskcache ``Cache`` (in the style of diskcache's own ``Deque`` and
``Index``), composed by :class:`Store`. It knows jobs and their kinds by name only, never the engine.

=========================  ==========================================================================
``job/<key>``              a job's record (:mod:`.table`): kind, spec, status, attempt, owner, result,
                           who asked (``requesters``, ``started_by``, ``cancelled_by``, ``history``);
                           a plain dict, read as a :class:`JobRecord` (:mod:`.job_record`)
``index/jobs``             job keys in submission order; ``index/running`` the running ones
``group/<name>``           a named, ordered list of job keys (a sweep, a demo)
``q0…`` / ``q1…``          the queue (:mod:`.queue`): interactive jobs, then sweeps; a FIFO per requester,
                           served round-robin (``queue/ring/<p>``, ``queue/turn/<p>``)
``asked/<requester>``      the keys a requester queued (what the per-requester cap counts)
``limits/<requester>``     a requester's time limit on each job it starts (a student's, set by the teacher)
``ev/<key>/<n>``           chunk ``n`` of a job's append-only event stream (:mod:`.streams`)
``hb/<key>``               the owner's heartbeat: time, pid, host, progress (rewritten every second)
``cancel/<key>``           the cancel flag a worker polls once per step
``worker/<pid>``           a registered worker process and its heartbeat (:mod:`.workers`)
``executor/<name>``        what an executor process publishes (a Ray cluster's nodes and resources)
``meta/format``            the store's format (:mod:`.migrate` upgrades older ones on open)
=========================  ==========================================================================

Files a job writes live in ``<store>/runs/<key>/`` (:mod:`.artifacts`).
"""

from labcore.store.core import (Claim, JobRecord, JobStatus, NewJob, QueueCapReached, RunStatus, Store, Submission,
                                Withdrawal, open_store)
from labcore.store.errors import Fenced, StoreDamaged, StoreLocked
from labcore.store.liveness import HOST, process_state
from labcore.store.settings import (ACTIVE, DISKCACHE_SETTINGS, FINISHED, PRIORITIES, STATUSES, STOPPED,
                                    TERMINAL, StoreSettings)

__all__ = [
    "ACTIVE", "Claim", "DISKCACHE_SETTINGS", "FINISHED", "Fenced", "HOST", "JobRecord", "JobStatus", "NewJob",
    "PRIORITIES", "QueueCapReached", "RunStatus", "STATUSES", "STOPPED", "Store", "StoreDamaged", "StoreLocked",
    "StoreSettings", "Submission", "TERMINAL", "Withdrawal", "open_store", "process_state",
]
