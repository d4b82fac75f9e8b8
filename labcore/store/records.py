"""The store's value types: what a submission, a claim and a status read give back, and the helpers
that note who asked for a job in its record."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labcore.store.job_record import JobRecord


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
    record: JobRecord

    @property
    def kind(self) -> str:
        return self.record.kind


@dataclass(frozen=True)
class Withdrawal:
    """What a viewer's cancel did: ``outcome`` is withdrawn (others still wait: ``others`` of them) |
    cancelled (theirs was the last request: the job stops) | not-requested (they had not asked; ``others``
    did, so nothing changed) | inactive (the job had already ended)."""

    key: str
    outcome: str
    others: int
    record: JobRecord


@dataclass(frozen=True)
class Claim:
    """A job a worker now owns: it must heartbeat ``(key, attempt)`` and finish it."""

    key: str
    attempt: int
    spec: dict[str, Any]
    kind: str
    resume: bool
    workdir: Path
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
    record: JobRecord

    # its status is its record's: the record answers for both
    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def active(self) -> bool:
        return self.record.active

    @property
    def finished(self) -> bool:
        return self.record.finished


RunStatus = JobStatus  # the name the pages and the CLI grew up with


def wall_clock() -> float:
    return time.time()


HISTORY_LIMIT = 50  # entries of who-did-what a record keeps (the oldest go first)


def noted(record: dict[str, Any], did: str, who: str | None) -> dict[str, Any]:
    """The record with ``{t, who, did}`` appended to its history (start, join, withdraw, cancel, resume)."""
    history = list(record.get("history") or []) + [{"t": wall_clock(), "who": who or "", "did": did}]
    return dict(record, history=history[-HISTORY_LIMIT:])


def asking(record: dict[str, Any], who: str | None) -> dict[str, Any]:
    """The record with ``who`` among its requesters (a join, noted once)."""
    requesters = list(record.get("requesters") or [])
    if not who or who in requesters:
        return record
    return noted(dict(record, requesters=requesters + [who]), "join", who)
