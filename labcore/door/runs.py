"""Runs as the pages see them: job records and their statuses, groups, results, event streams, logs and the
workers' heartbeats, all read through a :class:`~labcore.door.lab.Lab` and returned as rows; specs and their
keys; what the lab holds on disk; and the teacher's classroom settings. Changing anything (submitting,
cancelling, holding workers, deleting) is the :class:`~labcore.door.desk.Desk`'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from labcore.classroom import SECRETS_TABLE, ClassroomLimits, PasscodeGuard
from labcore.door.lab import Lab, open_lab, store_of
from labcore.engine import run_results
from labcore.engine.resolve import resolve_spec
from labcore.events import curves_from_events, stage_curves
from labcore.jobs import key_of
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec, make_spec, train_defaults
from labcore.runspec.resolved import ResolvedSpec
from labcore.store import ACTIVE, FINISHED, STOPPED, JobRecord, JobStatus
from labcore.store.selection import Selection
from labcore.store.usage import COMMAND_LINE, Usage, disk_usage as _disk_usage

__all__ = ["ACTIVE", "COMMAND_LINE", "FINISHED", "SECRETS_TABLE", "STOPPED", "ClassroomLimits", "JobRecord",
           "Lab", "PasscodeGuard", "ResolvedSpec", "RunRecord", "RunSpec", "Selection", "curves_from_events",
           "disk_usage", "events", "group_keys", "groups", "heartbeat", "jobs", "key_of", "log", "make_spec",
           "open_lab", "read_events", "record", "resolve_key", "resolve_spec", "result_of", "results", "run_counts",
           "runs", "stage_curves", "status", "stream_length", "train_defaults", "workdir", "workers", "workers_held"]


def record(lab: Lab, key: str) -> JobRecord | None:
    """``key``'s job record, None where there is none."""
    return store_of(lab).get(key)


def runs(lab: Lab, *, status: str | None = None, group: str | None = None, newest: int = 0) -> list[JobRecord]:
    """The training runs' records, oldest first (``newest``: only that many of the latest)."""
    return run_results.runs(store_of(lab), status=status, group=group, newest=newest)


def run_counts(lab: Lab) -> dict[str, int]:
    """How many training runs stand at each status (a running one whose worker is gone counts as dead),
    without keeping their records in memory: what a status line reads every few seconds."""
    return dict(store_of(lab).status_counts(run_results.KIND))


def jobs(lab: Lab, *, kind: str | None = None) -> list[JobRecord]:
    """Every job's record (``kind``: of that kind only), oldest first."""
    return store_of(lab).jobs(kind=kind)


def groups(lab: Lab) -> list[str]:
    return store_of(lab).groups()


def group_keys(lab: Lab, name: str) -> list[str]:
    """The keys a group lists, in its order."""
    return list(store_of(lab).group(name)["keys"])


def resolve_key(lab: Lab, prefix: str) -> str:
    """The one key that starts with ``prefix`` (a LabError names the problem otherwise)."""
    return store_of(lab).resolve_key(prefix)


def status(lab: Lab, key: str) -> JobStatus:
    return store_of(lab).status(key)


def heartbeat(lab: Lab, key: str) -> dict[str, Any] | None:
    """A running job's last heartbeat, None where it sent none."""
    return store_of(lab).heartbeat_of(key)


def log(lab: Lab, key: str) -> str:
    return store_of(lab).log(key)


def events(lab: Lab, key: str) -> list[dict[str, Any]]:
    """``key``'s whole event stream."""
    return store_of(lab).events(key)


def read_events(lab: Lab, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
    """``key``'s events from chunk ``cursor`` on, and the cursor after them."""
    return store_of(lab).read_events(key, cursor)


def stream_length(lab: Lab, key: str) -> int:
    """How many chunks ``key``'s stream holds (one read: whether a live view must read more)."""
    return store_of(lab).stream_length(key)


def workdir(lab: Lab, key: str) -> Path:
    """The folder ``key``'s files are written in."""
    return store_of(lab).workdir(key)


def workers(lab: Lab, *, role: str | None = None) -> list[dict[str, Any]]:
    """The alive workers' registrations (``role``: of that role only)."""
    return store_of(lab).workers(role=role)


def workers_held(lab: Lab) -> dict[str, Any] | None:
    """Who held the workers and when (the teacher stopped them), or None."""
    return store_of(lab).workers_held()


def disk_usage(lab: Lab) -> Usage:
    """What the lab's jobs hold on disk (walks every job's folder: seconds for 10,000 jobs; on request)."""
    return _disk_usage(store_of(lab))


def result_of(lab: Lab, key: str, read: JobRecord | None = None) -> RunRecord | None:
    """``key``'s result, from ``read`` where the page read its record already."""
    try:
        return run_results.result(store_of(lab), key) if read is None else run_results.result_in(read)
    except Exception:  # a half-written or foreign record must not break a page
        return None


def results(lab: Lab, keys: Iterable[str], read: dict[str, JobRecord] | None = None) -> list[RunRecord]:
    """The results of ``keys`` that have one; ``read``: records by key the page read already."""
    read = read or {}
    return [r for r in (result_of(lab, k, read.get(k)) for k in keys) if r is not None]
