"""The store and the executor as one browser session uses them: whatever it submits, resumes or withdraws is
in the requester's name, and a student's submissions are held to the teacher's settings first."""

from __future__ import annotations

from typing import Any, Iterable

from labcore.door.runs import ClassroomLimits, Store, executor_on, key_of, open_store, requester_bytes, stored_spec
from pages.state.identity import requester, student_limits
from pages.state.summary import forget_summary


def get_store() -> Store:
    return open_store()


def get_executor() -> "AskingExecutor":
    """The process's executor, on the store of the current cache (tests move the cache between apps), as
    this browser session uses it: whatever it submits, resumes or withdraws is in the requester's name."""
    return AskingExecutor(executor_on(get_store()), requester(), student_limits())


class AskingExecutor:
    """An executor seen by one requester: submissions, resumes and withdrawals carry ``who``; a cancel
    (for everyone: the teacher's control) records ``who`` as the one who cancelled. Everything else is the
    executor's own. A student's submissions (``limits`` set) are held to the teacher's settings first."""

    def __init__(self, executor, who: str, limits: ClassroomLimits | None = None) -> None:
        self.executor = executor
        self.who = who
        self.limits = limits

    def submit(self, spec: Any, **options: Any):
        self._admit([spec])
        return self._changed(self.executor.submit(spec, who=self.who, **options))

    def submit_group(self, name: str, specs: Iterable[Any], **options: Any):
        specs = list(specs)
        self._admit(specs)
        return self._changed(self.executor.submit_group(name, specs, who=self.who, **options))

    def _admit(self, specs: list[Any], adding: int | None = None) -> None:
        """A student's specs against the teacher's limits, before anything is queued; ``adding``: the queue
        entries they make (None: those not finished already)."""
        if self.limits is None:
            return
        for spec in specs:
            self.limits.check(spec)
        store = self.executor.store
        if adding is None:
            adding = sum(1 for spec in specs if not ((r := store.get(key_of(spec))) is not None and r.finished))
        self.limits.check_queue(len(store.waiting_for(self.who)), adding)
        if adding and self.limits.max_disk_mb_per_student:
            self.limits.check_disk(requester_bytes(store, self.who))
        store.limit_requester(self.who, max_job_s=self.limits.max_job_s, note=self.limits.time_limit_note())

    def resume(self, key: str):
        self._admit_resume(key)
        return self._changed(self.executor.resume(key, who=self.who))

    def _admit_resume(self, key: str) -> None:
        """A student's resume queues the job again, as a submission does, so it meets the same limits (a job
        someone else asked for at a budget or model students may not use, the queue cap, the disk quota)."""
        if self.limits is None:
            return
        record = self.executor.store.get(key)
        if record is None or not record.stopped:
            return  # nothing to queue: the store names the problem, or the job is already active
        self._admit([stored_spec(record)], adding=1)

    def withdraw(self, key: str):
        return self._changed(self.executor.withdraw(key, self.who))

    def cancel(self, key: str, who: str | None = None):
        return self._changed(self.executor.cancel(key, who or self.who))

    def clear_queue(self, who: str | None = None):
        return self._changed(self.executor.clear_queue(who or self.who))

    def _changed(self, outcome: Any) -> Any:
        """The queue changed: the next status line reads it again instead of the shared reading."""
        forget_summary(self.executor.store)
        return outcome

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executor, name)
