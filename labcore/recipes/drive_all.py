"""Drive several recipes into one store at once, as the sequential rule grows them, until every one has ended.

``python -m labcore recipe run --all`` (or ``recipe run NAME NAME ...``) calls :func:`drive_all`. Its jobs all go
into the one store's queue, so the workers never idle while one recipe waits on a stage. The drive keeps no state
of its own: each round it rebuilds every plan from the store (:func:`labcore.recipes.drive.plan_for`) and submits
only steps the store has no job for (:func:`labcore.recipes.drive.advance`), so after the process or the machine
is restarted the same command goes on where the store is: a finished job is served from the store by its key and
never trained again, and a job whose worker was lost (killed, or gone with a restarted machine: the store reads it
``dead``) is resumed by the drive, from its checkpoint where it kept one (:func:`resume_lost`). So is, when a drive
starts, a job left ``interrupted``: its worker was stopped (a machine shutting down sends its workers SIGTERM, and
each checkpoints its job and stops), and the drive stopped with it would have run it to the end. An interruption
while the drive runs (someone stopped its workers) is left as it is, as is a job that failed, diverged or was
cancelled. Its workers leave once the drive ends (their lifetime names its process).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from labcore.errors import LabError
from labcore.fmt import fmt_duration
from labcore.recipes.base import Plan, Recipe
from labcore.recipes.drive import advance, expected_of, plan_for, results_of, seeds_words
from labcore.recipes.export import headline_count


MAX_RESUMES = 3  # a job a drive resumes after its worker was lost, at most this often
LOST = ("dead",)  # what a drive resumes whenever it sees it: a job whose worker was lost
AT_START = ("dead", "interrupted")  # ... and at its start: one whose worker was stopped with the machine


@dataclass(frozen=True)
class Standing:
    """Where one recipe of a drive stands: its jobs, the paper's claims decided so far, and the time left."""

    recipe: str
    done: int
    total: int
    failed: int
    decided: int  # headline claims that hold or do not hold
    claims: int  # headline claims counted (one verdict each)
    left_s: float  # CPU seconds of its jobs still to run, by the times measured here (NaN: not yet known)
    ended: bool
    seeds: str

    def line(self, workers: int) -> str:
        """One line a terminal shows; the ETA spreads the CPU time left over the drive's workers."""
        eta = ("ended" if self.ended else "ETA unknown" if math.isnan(self.left_s)
               else f"ETA about {fmt_duration(self.left_s / max(1, workers))}")
        failed = f", {self.failed} failed" if self.failed else ""
        return (f"{self.recipe}: {self.decided} of {self.claims} claims decided · jobs {self.done} of {self.total} "
                f"done{failed} · {self.seeds} · {eta}")


DECIDED = ("holds", "does not hold")


def standing(recipe: Recipe, plan: Plan, store: Any, ended: bool) -> Standing:
    results = results_of(plan, store)
    counts = headline_count(recipe.report(plan, results))
    _, left = expected_of(recipe, plan, results)
    records = [store.get(key) for key in _keys(plan)]
    return Standing(recipe.name, sum(1 for r in records if r is not None and r.status == "done"), len(records),
                    sum(1 for r in records if r is not None and r.stopped), sum(counts.get(w, 0) for w in DECIDED),
                    sum(counts.values()), 0.0 if ended else left, ended, seeds_words(plan))


def _keys(plan: Plan) -> list[str]:
    from labcore.recipes.keys import step_key

    return [step_key(step) for step in plan.steps]


def resume_lost(plan: Plan, executor: Any, resumed: dict[str, int], statuses: Sequence[str] = LOST) -> list[str]:
    """Resume the plan's jobs that stand at one of ``statuses`` (by default those whose worker was lost mid-run,
    ``dead``; a drive that starts passes :data:`AT_START`); their keys. A drive asked to run its plan to the end
    takes them up again, as it would have had the machine not stopped. ``resumed`` counts the resumes of each job
    in this drive: one lost :data:`MAX_RESUMES` times (a run that kills its worker every time) is left as it
    stands and counts as ended without a result."""
    store = executor.store
    out = []
    for key in _keys(plan):
        record = store.get(key)
        if record is None or record.status not in statuses or resumed.get(key, 0) >= MAX_RESUMES:
            continue
        try:
            executor.resume(key)
        except LabError:  # resumed or deleted by someone else since the read: the next round sees what it is
            continue
        resumed[key] = resumed.get(key, 0) + 1
        out.append(key)
    return out


def drive_round(recipes: Sequence[Recipe], budget: str, seeds: Sequence[int] | None, executor: Any,
                cap_s: float = math.inf, seen: dict[str, tuple[tuple, Standing]] | None = None,
                resumed: dict[str, int] | None = None, take_up: Sequence[str] = LOST) -> list[Standing]:
    """One look at every recipe: grow its plan from the store, resume its jobs that stand at one of ``take_up``,
    submit what is ready, say where it stands. A recipe has ended when every job of its plan has ended and the
    rule, looking at them, adds no more. ``seen`` keeps each recipe's last standing: its report (figures included)
    is built again only once a job of it has ended. ``resumed`` counts each job's resumes over the drive
    (:func:`resume_lost`)."""
    seen = {} if seen is None else seen
    resumed = {} if resumed is None else resumed
    out = []
    for recipe in recipes:
        plan = plan_for(recipe, budget, seeds, executor.store, cap_s=cap_s)
        resume_lost(plan, executor, resumed, take_up)
        progress = advance(plan, executor)
        ended = progress.ended and plan_for(recipe, budget, seeds, executor.store, cap_s=cap_s).steps == plan.steps
        state = (len(plan.steps), progress.done, progress.failed, ended)
        if recipe.name not in seen or seen[recipe.name][0] != state:
            seen[recipe.name] = (state, standing(recipe, plan, executor.store, ended))
        out.append(seen[recipe.name][1])
    return out


def drive_all(recipes: Sequence[Recipe], budget: str, seeds: Sequence[int] | None, executor: Any, *,
              cap_s: float = math.inf, poll_s: float = 5.0, say: Callable[[str], None] = print,
              report_every_s: float = 60.0) -> list[Standing]:
    """Drive ``recipes`` until each has ended; print each recipe's line when it changes (at most once a
    ``report_every_s`` for the ETA alone). Returns the last standings."""
    shown: dict[str, tuple[str, float]] = {}
    seen: dict[str, tuple[tuple, Standing]] = {}
    resumed: dict[str, int] = {}
    take_up = AT_START
    while True:
        standings = drive_round(recipes, budget, seeds, executor, cap_s, seen, resumed, take_up)
        take_up = LOST
        now = time.monotonic()
        for row in standings:
            line = row.line(getattr(executor, "workers", 1))
            before = shown.get(row.recipe)
            changed = before is None or _without_eta(before[0]) != _without_eta(line)
            if changed or now - before[1] >= report_every_s:
                say(line)
                shown[row.recipe] = (line, now)
        if all(row.ended for row in standings):
            return standings
        executor.ensure_workers()
        time.sleep(max(0.1, poll_s))


def _without_eta(line: str) -> str:
    return line.rsplit(" · ", 1)[0]


__all__ = ["AT_START", "DECIDED", "LOST", "MAX_RESUMES", "Standing", "drive_all", "drive_round", "resume_lost",
           "standing"]
