"""Runs as the pages see them: the store and its statuses, specs and their keys, results, event streams, the
executor, deleting and measuring what the lab holds, and the teacher's classroom settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from labcore.classroom import SECRETS_TABLE, ClassroomLimits, PasscodeGuard
from labcore.events import curves_from_events, stage_curves
from labcore.jobs import key_of
from labcore.results.record import RunRecord
from labcore.engine.resolve import resolve_spec
from labcore.spec import RunSpec, make_spec, train_defaults
from labcore.spec.resolved import ResolvedSpec
from labcore.store import ACTIVE, FINISHED, STOPPED, JobRecord, Store, open_store
from labcore.store.delete import delete, plan_delete
from labcore.store.selection import Selection
from labcore.store.usage import COMMAND_LINE, disk_usage, requester_bytes

__all__ = ["ACTIVE", "COMMAND_LINE", "FINISHED", "SECRETS_TABLE", "STOPPED", "ClassroomLimits", "JobRecord",
           "PasscodeGuard", "ResolvedSpec", "RunRecord", "RunSpec", "Selection", "Store", "curves_from_events",
           "delete", "disk_usage", "executor_on", "key_of", "make_spec", "open_store", "plan_delete",
           "requester_bytes", "resolve_spec", "result_of", "results", "stage_curves", "stored_spec", "train_defaults"]


def executor_on(store: Store):
    """The process's shared executor, moved onto ``store`` where it is a local one on another store (tests move
    the cache between apps)."""
    from labcore.execution.executor import LocalExecutor, get_executor  # the pump and its settings load on first use

    executor = get_executor()
    if isinstance(executor, LocalExecutor) and Path(executor.store.root) != Path(store.root):
        executor = executor.on_store(store)
    return executor


def stored_spec(record: JobRecord) -> Any:
    """The spec a job record holds, rebuilt as its kind's spec (what a resume queues again)."""
    from labcore import jobs

    return jobs.get_kind(record.kind).from_dict(record.spec)


def result_of(store: Store, key: str, record: JobRecord | None = None) -> RunRecord | None:
    """``key``'s result, from ``record`` where the page read it already."""
    try:
        return store.get_result(key) if record is None else Store.result_in(record)
    except Exception:  # a half-written or foreign record must not break a page
        return None


def results(store: Store, keys: Iterable[str], read: dict[str, JobRecord] | None = None) -> list[RunRecord]:
    """The results of ``keys`` that have one; ``read``: records by key the page read already."""
    read = read or {}
    return [r for r in (result_of(store, k, read.get(k)) for k in keys) if r is not None]
