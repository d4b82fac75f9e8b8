"""Training runs in the job store: which jobs are runs, a run's result, and a run computed in this process.

The store knows no kind of job: it keeps a job's result as the dict its kind wrote. That a run's result is a
:class:`~labcore.results.record.RunRecord`, and what a run's record holds when no worker ran it, is said here,
once. Torch-free, and below the job kinds, so the in-process sweep and the exports read runs through it as
well as the door, the lessons, the API and the recipes.
"""

from __future__ import annotations

from typing import Any

from labcore.results.record import RunRecord
from labcore.store import JobRecord, NewJob, Store

KIND = "run"  # the job kind labcore.jobs.run registers for training runs
# The file a resumed run continues from: the training loop's (labcore.engine.train.RESUME_FILE), named here
# as well because that module imports torch.
CHECKPOINT = "resume.pt"


def runs(store: Store, *, status: str | None = None, group: str | None = None, newest: int = 0) -> list[JobRecord]:
    """The training runs' records in submission order, optionally of one status or one group; ``newest``: only
    the last that many (what the Runs and Compare pages list)."""
    return store.jobs(kind=KIND, status=status, group=group, newest=newest)


def result(store: Any, key: str) -> RunRecord | None:
    """The result of the run ``key`` where it has one (any final status), else None. ``store`` is a Store or
    anything that reads a job record with ``get(key)`` (the door's Lab)."""
    return result_in(store.get(key))


def result_in(record: JobRecord | None) -> RunRecord | None:
    """The result of a run's job record already read (a page that listed the runs reads none twice)."""
    if record is None or not record.result or record.active:
        return None
    return RunRecord.from_dict(record.result)


def put_result(store: Store, run: RunRecord, *, label: str = "") -> None:
    """Record a run computed in this process (``python -m labcore sweep`` without --queue)."""
    job = NewJob(kind=KIND, key=run.key, spec=run.spec, label=label, checkpoint=CHECKPOINT)
    store.put_finished(job, status=run.status, result=run.to_dict(), error=run.error)
