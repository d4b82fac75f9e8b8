"""The executor as one browser session uses it, behind the door: whatever it submits, resumes or withdraws is
in the requester's name, a student's submissions are held to the teacher's settings first, and holding the
workers and deleting are its methods, so a page never holds the executor or the store it runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from labcore.classroom import ClassroomLimits
from labcore.door.lab import Lab, store_of
from labcore.jobs import key_of
from labcore.store import JobStatus
from labcore.store.delete import DeletePlan, delete, plan_delete
from labcore.store.records import Submission, Withdrawal
from labcore.store.selection import Selection
from labcore.store.usage import requester_bytes

__all__ = ["Desk", "desk_on", "on_change", "stored_spec"]

_FORGET: list[Any] = []  # what to call when the queue changed (the pages' shared status line registers itself)


def stored_spec(record: Any) -> Any:
    """The spec a job record holds, rebuilt as its kind's spec (what a resume or a retry queues again)."""
    from labcore import jobs

    return jobs.get_kind(record.kind).from_dict(record.spec)


def _executor_on(lab: Lab):
    """The process's shared executor, moved onto ``lab``'s store where it is a local one on another store (tests
    move the cache between apps)."""
    from labcore.execution.executor import LocalExecutor, get_executor  # the pump and its settings load on first use

    executor = get_executor()
    if isinstance(executor, LocalExecutor) and Path(executor.store.root) != Path(lab.root):
        executor = executor.on_store(store_of(lab))
    return executor


def desk_on(lab: Lab, who: str, limits: ClassroomLimits | None = None) -> "Desk":
    """``who``'s desk on the process's executor, on ``lab``'s store."""
    return Desk(_executor_on(lab), who, limits)


class Desk:
    """An executor seen by one requester: submissions, resumes and withdrawals carry ``who``; a cancel (for
    everyone: the teacher's control) records ``who`` as the one who cancelled. A student's submissions
    (``limits`` set) are held to the teacher's settings first. ``store`` is the read-only :class:`Lab` the
    lessons' runs read records from."""

    def __init__(self, executor: Any, who: str, limits: ClassroomLimits | None = None) -> None:
        self._executor = executor
        self.who = who
        self.limits = limits

    @property
    def store(self) -> Lab:
        return Lab(Path(self._executor.store.root))

    def submit(self, spec: Any, *, priority: str = "interactive", group: str | None = None) -> Submission:
        self._admit([spec])
        return self._changed(self._executor.submit(spec, priority=priority, group=group, who=self.who))

    def submit_group(self, name: str, specs: Iterable[Any], *, priority: str = "sweep") -> list[Submission]:
        specs = list(specs)
        self._admit(specs)
        return self._changed(self._executor.submit_group(name, specs, priority=priority, who=self.who))

    def _admit(self, specs: list[Any], adding: int | None = None) -> None:
        """A student's specs against the teacher's limits, before anything is queued; ``adding``: the queue
        entries they make (None: those not finished already)."""
        if self.limits is None:
            return
        for spec in specs:
            self.limits.check(spec)
        store = self._executor.store
        if adding is None:
            adding = sum(1 for spec in specs if not ((r := store.get(key_of(spec))) is not None and r.finished))
        self.limits.check_queue(len(store.waiting_for(self.who)), adding)
        if adding and self.limits.max_disk_mb_per_student:
            self.limits.check_disk(requester_bytes(store, self.who))
        store.limit_requester(self.who, max_job_s=self.limits.max_job_s, note=self.limits.time_limit_note())

    def resume(self, key: str) -> Submission:
        self._admit_resume(key)
        return self._changed(self._executor.resume(key, who=self.who))

    def _admit_resume(self, key: str) -> None:
        """A student's resume queues the job again, as a submission does, so it meets the same limits (a job
        someone else asked for at a budget or model students may not use, the queue cap, the disk quota)."""
        if self.limits is None:
            return
        record = self._executor.store.get(key)
        if record is None or not record.stopped:
            return  # nothing to queue: the store names the problem, or the job is already active
        self._admit([stored_spec(record)], adding=1)

    def withdraw(self, key: str) -> Withdrawal:
        return self._changed(self._executor.withdraw(key, self.who))

    def cancel(self, key: str, who: str | None = None) -> JobStatus:
        return self._changed(self._executor.cancel(key, who or self.who))

    def clear_queue(self, who: str | None = None) -> list[str]:
        return self._changed(self._executor.clear_queue(who or self.who))

    def ensure_workers(self) -> list[int]:
        """Start what runs queued jobs unless it is alive (none while the teacher holds the workers)."""
        return self._executor.ensure_workers()

    def start_workers(self) -> list[int]:
        """Lift the teacher's hold and start workers."""
        return self._executor.start_workers()

    def hold_workers(self, who: str) -> None:
        """No worker starts, by a submission or a page, until :meth:`start_workers` (the teacher's stop)."""
        self._executor.store.hold_workers(who)

    def stop_workers(self) -> list[int]:
        """Stop the alive workers (their runs checkpoint and become interrupted)."""
        return self._executor.stop_workers()

    def plan_delete(self, selection: Selection) -> DeletePlan:
        """What deleting ``selection`` would do (reads only), for the person to confirm."""
        return plan_delete(self._executor.store, selection)

    def delete(self, plan: DeletePlan, who: str) -> DeletePlan:
        """Carry out a confirmed plan (refused, with nothing deleted, where the store no longer matches it)."""
        return self._changed(delete(self._executor.store, plan, who=who))

    def _changed(self, outcome: Any) -> Any:
        """The queue changed: whoever shares a reading of it (the pages' status line) reads it again."""
        for forget in _FORGET:
            forget(self.store)
        return outcome


def on_change(forget: Any) -> None:
    """Call ``forget(lab)`` after every change a desk makes (the pages' shared status line forgets its reading)."""
    if forget not in _FORGET:
        _FORGET.append(forget)


def executor_of(desk: Desk) -> Any:
    """The executor behind ``desk``, for the door's own modules that drive it in the desk's name (a recipe's
    driver); no page is given it (it is not in ``__all__``)."""
    return desk._executor
