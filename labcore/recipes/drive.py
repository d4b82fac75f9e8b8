"""Running a recipe through any executor, and reading its progress and results back from the store.

A recipe is driven, not run inside a worker: a job that waited in a worker for its children would hold
the only worker of a small machine. :func:`advance` submits every stage whose earlier stages have all
ended, and is safe to call again and again (from a page's refresh or a CLI loop): a step already in the
store is never submitted twice by it, so a failed job is not retried behind the user's back (the
recipe's explicit run button retries with :func:`advance` ``retry=True``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from labcore.errors import LabError
from labcore.jobs import new_job
from labcore.recipes.base import Plan, Step
from labcore.recipes.report import wall_seconds
from labcore.record import RunRecord
from labcore.store import ACTIVE, STOPPED, TERMINAL

_KEYS: dict[tuple[str, Step], str] = {}


def step_key(step: Step) -> str:
    """The job key of a step (resolving is torch-free and memoised: a page asks on every refresh)."""
    memo = (type(step.spec).__name__, step)
    if memo not in _KEYS:
        _KEYS[memo] = new_job(step.spec).key
    return _KEYS[memo]


def plan_keys(plan: Plan) -> dict[Step, str]:
    return {step: step_key(step) for step in plan.steps}


def _result(record: Mapping[str, Any] | None) -> Any:
    if record is None or not record.get("result"):
        return None
    if record.get("kind", "run") == "run":
        return RunRecord.from_dict(record["result"])  # failed and diverged runs too: the report counts them
    return record["result"] if record["status"] == "done" else None


def results_of(plan: Plan, store: Any) -> dict[Step, Any]:
    """Step -> its finished result (a RunRecord for runs, the result dict for other kinds) or None."""
    return {step: _result(store.get(key)) for step, key in plan_keys(plan).items()}


@dataclass(frozen=True)
class Progress:
    total: int
    done: int  # finished successfully
    failed: int  # ended without a result (failed, diverged, cancelled, interrupted)
    running: int
    queued: int
    unsubmitted: int  # in a later stage that waits for an earlier one
    stage: int  # the first stage not wholly ended (len(stages): all ended)
    running_keys: tuple[str, ...]
    errors: tuple[str, ...] = ()  # why steps could not be submitted (an earlier step failed, a cap)

    @property
    def ended(self) -> bool:
        return self.done + self.failed == self.total


def _ended(record: Mapping[str, Any] | None) -> bool:
    return record is not None and record["status"] in TERMINAL


def progress(plan: Plan, store: Any, errors: tuple[str, ...] = ()) -> Progress:
    keys = plan_keys(plan)
    records = {step: store.get(key) for step, key in keys.items()}
    statuses = [r["status"] if r else "" for r in records.values()]
    stage = next((i for i, st in enumerate(plan.stages) if not all(_ended(records[s]) for s in st)), len(plan.stages))
    return Progress(
        total=len(statuses), done=statuses.count("done"),
        failed=sum(1 for s in statuses if s in TERMINAL and s != "done"),
        running=statuses.count("running"), queued=sum(1 for s in statuses if s in ACTIVE and s != "running"),
        unsubmitted=statuses.count(""), stage=stage,
        running_keys=tuple(keys[s] for s, r in records.items() if r and r["status"] == "running"),
        errors=tuple(errors))


def advance(plan: Plan, executor: Any, *, priority: str = "sweep", who: str | None = None,
            retry: bool = False) -> Progress:
    """Submit the stages whose earlier stages have ended; return the progress after.

    ``retry``: also resubmit the steps of those stages that ended without success (the run button).
    A stage after one whose steps failed is still submitted: its jobs that need a failed one are refused
    by the store with a message naming it, kept in :attr:`Progress.errors`.
    """
    store = executor.store
    errors: list[str] = []
    for number, stage in enumerate(plan.stages):
        records = {step: store.get(step_key(step)) for step in stage}
        wanted = [s for s, r in records.items() if r is None or (retry and r["status"] in STOPPED)]
        if wanted:
            for step in wanted:
                try:
                    executor.submit_group(plan.group, [step.spec], priority=priority, who=who)
                except LabError as exc:
                    errors.append(f"stage {number + 1}, {step.condition}"
                                  + (f" on {step.facet}" if step.facet else "") + f": {exc}")
            records = {step: store.get(step_key(step)) for step in stage}
        if not all(_ended(r) for r in records.values()):
            break  # later stages wait for this one
    return progress(plan, store, tuple(errors))


def expected_seconds(plan: Plan, results: Mapping[Step, Any], prior_s: float) -> tuple[float, float]:
    """(seconds of run time for the whole recipe, seconds still to go), from what its finished steps took.

    A step not yet run is expected to take the mean measured time of finished steps of its own kind and
    facet, else of its kind, else ``prior_s`` (the recipe's measured figure per step on this machine).
    """
    measured: dict[tuple[str, str], list[float]] = {}
    for step in plan.steps:
        w = wall_seconds(results.get(step))
        if w:
            measured.setdefault((type(step.spec).__name__, step.facet), []).append(w)
            measured.setdefault((type(step.spec).__name__, ""), []).append(w)
    total = left = 0.0
    for step in plan.steps:
        w = wall_seconds(results.get(step))
        if w is None:
            kind = type(step.spec).__name__
            guess = measured.get((kind, step.facet)) or measured.get((kind, ""))
            w = sum(guess) / len(guess) if guess else prior_s
            left += w
        total += w
    return (total, left) if math.isfinite(total) else (math.nan, math.nan)


__all__ = ["Progress", "advance", "expected_seconds", "plan_keys", "progress", "results_of", "step_key"]
