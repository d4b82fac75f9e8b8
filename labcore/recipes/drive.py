"""Running a recipe through any executor, and reading its progress and results back from the store.

A recipe is driven, not run inside a worker: a job that waited in a worker for its children would hold
the only worker of a small machine. :func:`advance` submits every stage whose earlier stages have all
ended (and, sooner, the steps of later stages that build on nothing unfinished), and is safe to call again
and again (from a page's refresh or a CLI loop): a step already in the store is never submitted twice by it,
so a failed job is not retried behind the user's back (the recipe's explicit run button retries with
:func:`advance` ``retry=True``).

The app and the command line build their plans with :func:`plan_of`, so both drive and report the same
jobs; ``TRANSFERLAB_RECIPE_ADJUST=module:function`` passes every spec of those plans through one more
``adjust`` (e.g. ``recipe_helpers:tiny`` from ``tests/``: every job shrunk to seconds, for a check of the
whole path from the button to the report, as ``TRANSFERLAB_DEMO_MAX_STEPS`` does for the demos).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from labcore.errors import LabError
from labcore.fmt import fmt_duration
from labcore.recipes import needs, tuning
from labcore.recipes.base import Plan, Recipe, Step
from labcore.recipes.keys import mentions, step_key
from labcore.recipes.report import step_in, wall_seconds
from labcore.recipes.verdict import LOOKS, OPEN
from labcore.results.record import RunRecord
from labcore.store import ACTIVE, TERMINAL, JobRecord, QueueCapReached

ADJUST_VARIABLE = "TRANSFERLAB_RECIPE_ADJUST"


def named_adjust(text: str | None = None) -> tuple[str, Callable[[Any], Any] | None]:
    """(name, function) of the adjust ``TRANSFERLAB_RECIPE_ADJUST`` names as ``module:function``; ("", None)
    where it is unset."""
    text = (os.environ.get(ADJUST_VARIABLE, "") if text is None else text).strip()
    if not text:
        return "", None
    module, _, name = text.partition(":")
    try:
        function = getattr(importlib.import_module(module), name) if name else None
    except (ImportError, AttributeError) as exc:
        raise LabError(f"{ADJUST_VARIABLE}={text!r} names no importable function ({exc}); give module:function "
                       f"with the module on PYTHONPATH, or unset it") from None
    if not callable(function):
        raise LabError(f"{ADJUST_VARIABLE}={text!r} is not module:function; give e.g. recipe_helpers:tiny, or "
                       f"unset it")
    return text, function


def plan_of(recipe: Recipe, budget: str = "quick", seeds: Sequence[int] | None = None) -> Plan:
    """The plan the app and the command line drive and report: ``recipe.plan`` with the adjust of
    ``TRANSFERLAB_RECIPE_ADJUST`` where one is set (its jobs then join a group of their own)."""
    name, adjust = named_adjust()
    plan = recipe.plan(budget, seeds, adjust=adjust)
    return dataclasses.replace(plan, adjusted=name) if name else plan


def needed_steps(plan: Plan, reads: Sequence[tuple[str, Any, Any]], keep: set[Step]) -> Plan:
    """``plan`` cut to the steps in ``keep``, the steps ``reads`` name (condition, facet, part; None: any), and
    the earlier-stage steps those build on."""
    kept: list[list[Step]] = [[] for _ in plan.stages]
    for number in range(len(plan.stages) - 1, -1, -1):  # later stages first: they name what they build on
        later = [s for stage in kept[number + 1:] for s in stage]
        kept[number] = [s for s in plan.stages[number] if s in keep or step_in(s, reads)
                        or any(mentions(k.spec, s) for k in later)]
    return dataclasses.replace(plan, stages=tuple(tuple(stage) for stage in kept))


def grown_plan(recipe: Recipe, budget: str, store: Any, *, cap_s: float = math.inf) -> Plan:
    """The plan the sequential rule has reached: seeds 0-2 of the steps the paper's claims read first
    (:func:`paper_first`); once every job of a look has ended and some claim is still open, the rest of seeds 0-2
    and the next look's seeds (5, then 8, and one more for each pair a failed run broke) for
    the steps the open claims read, and only those. Stateless: recomputed from the store at every call, so a
    page refresh and the command line agree. ``cap_s``: run time (seconds) the user allows the whole
    recipe; a look whose expected total passes it is not started, and the plan says so."""
    look = LOOKS[0]
    first = dataclasses.replace(tuned_plan(recipe, budget, tuple(range(look)), store), sequential=True, can_grow=True)
    plan = paper_first(recipe, first)
    while True:
        if not progress(plan, store).ended:
            return plan
        results = results_of(plan, store)
        # a claim's secondary rows (its other tasks) are shown, never given seeds of their own: only counted
        # verdicts that are still open grow the plan
        still = [v for _, v in recipe.report(plan, results).claims if v.word == OPEN and v.primary]
        later = set(first.steps) - set(plan.steps)  # the first look's steps kept back so far (paper_first)
        following = next((n for n in LOOKS if n > look), 0) if still else 0
        if not following:
            if not later:
                return dataclasses.replace(plan, can_grow=False)
            # no claim can have another look, and the steps only tables show have not run yet: they run now
            plan = dataclasses.replace(with_steps(recipe, budget, plan, later, store), can_grow=False)
            continue
        look = following
        # a pair that a failed run broke is replaced by a further seed, on both sides (a side whose repeats are
        # not the plan's seeds, as Tamkin's permutations, breaks no pair)
        broken = max(sum(1 for s in v.unpaired if s in plan.seeds) for v in still)
        size = max(len(plan.seeds), look + broken)
        bigger = tuned_plan(recipe, budget, tuple(range(size)), store)
        reads = [r for v in still for r in v.reads] or [(s.condition, s.facet, s.part) for s in bigger.steps]
        grown = needed_steps(dataclasses.replace(bigger, sequential=True, can_grow=look < LOOKS[-1]), reads,
                             set(plan.steps) | later)
        total, _ = expected_of(recipe, grown, results_of(grown, store))
        if total > cap_s:
            if later:  # the first look is run whole, whatever the cap; only the looks after it are capped
                plan = with_steps(recipe, budget, plan, later, store)
            return dataclasses.replace(plan, can_grow=False, stopped=(
                f"the next look (n = {look}) would take the recipe to about {fmt_duration(total)} of run time, "
                f"past the cap of {fmt_duration(cap_s)}"))
        plan = grown


def with_steps(recipe: Recipe, budget: str, plan: Plan, more: set[Step], store: Any) -> Plan:
    """``plan`` (of the sequential rule) with the steps ``more`` of its own seeds added."""
    every = dataclasses.replace(tuned_plan(recipe, budget, plan.seeds, store), sequential=True,
                                can_grow=plan.can_grow)
    return needed_steps(every, [], set(plan.steps) | more)


def paper_first(recipe: Recipe, plan: Plan) -> Plan:
    """``plan`` cut to the steps the paper's claims read (and the steps they build on): the sequential rule's
    first look. The lab's own questions and the steps only a table shows join at the next look (or once the
    paper's claims are settled), so the paper's answers do not wait for them (Kao at quick: 33 of 48 jobs).

    The cut depends on the recipe and the plan alone, and finding it builds a whole report (0.08-0.46 s), which
    every refresh of the Recipes page would pay again: it is kept per (recipe, plan)."""
    # Keyed by the recipe's identity (a Recipe holds dicts: no hash), and the entry holds the recipe itself, so
    # its id cannot pass to another object while the entry lives.
    key = (id(recipe), plan)
    with _FIRST_LOOKS_LOCK:
        if key in _FIRST_LOOKS:
            _FIRST_LOOKS.move_to_end(key)
            return _FIRST_LOOKS[key][1]
    cut = _paper_first(recipe, plan)
    with _FIRST_LOOKS_LOCK:
        _FIRST_LOOKS[key] = (recipe, cut)
        while len(_FIRST_LOOKS) > _FIRST_LOOKS_KEPT:
            _FIRST_LOOKS.popitem(last=False)
    return cut


_FIRST_LOOKS: "OrderedDict[tuple[int, Plan], tuple[Recipe, Plan]]" = OrderedDict()
_FIRST_LOOKS_LOCK = threading.Lock()  # the pages' script threads share it
_FIRST_LOOKS_KEPT = 64  # first looks kept (one per recipe, budget and learning-rate choice in use)


def _paper_first(recipe: Recipe, plan: Plan) -> Plan:
    report = recipe.report(plan, {step: None for step in plan.steps})
    reads = [read for claim, verdict in report.claims if claim.headline for read in verdict.reads]
    cut = needed_steps(plan, reads, set())
    return cut if reads and cut.steps else plan


def plan_for(recipe: Recipe, budget: str, seeds: Sequence[int] | None, store: Any, *,
             cap_s: float = math.inf) -> Plan:
    """What the page and the command line drive and report: the sequential rule's plan where no seeds are
    given (:func:`grown_plan`), else the plan of exactly those seeds; either with the learning rates its grid
    chose where the recipe's budget tunes (:func:`tuned_plan`)."""
    return grown_plan(recipe, budget, store, cap_s=cap_s) if not seeds else tuned_plan(recipe, budget, seeds, store)


def tuned_plan(recipe: Recipe, budget: str, seeds: Sequence[int], store: Any) -> Plan:
    """``plan_of`` with the recipe's learning-rate grid for this budget as its first stage, and each arm at the
    rate its grid runs chose once they have all ended (:mod:`labcore.recipes.tuning`); the plan itself where
    the budget names no grid."""
    plan = plan_of(recipe, budget, seeds)
    rates = recipe.lr_grids.get(budget, ())
    if not rates:
        return plan
    grid = dataclasses.replace(plan, stages=(tuning.grid_stage(plan, rates),))
    choices = tuning.chosen_rates(plan, rates, results_of(grid, store)) if progress(grid, store).ended else {}
    return tuning.with_rates(plan, rates, choices)


def seeds_words(plan: Plan) -> str:
    """The plan's seeds for a person: the rule's state where it chose them."""
    seeds = ",".join(map(str, plan.seeds))
    if not plan.sequential:
        return f"seeds {seeds}"
    state = ("the rule may add more where a claim is open" if plan.can_grow
             else plan.stopped or "the rule adds no more")
    return f"seeds {seeds} (chosen by the sequential rule: looks at {', '.join(map(str, LOOKS))} pairs; {state})"


def seeds_flag(plan: Plan) -> str:
    """The ``--seeds`` a command needs to name this plan again ("" for the sequential rule's)."""
    return "" if plan.sequential else " --seeds " + ",".join(map(str, plan.seeds))


def plan_keys(plan: Plan) -> dict[Step, str]:
    return {step: step_key(step) for step in plan.steps}


def _result(record: JobRecord | None) -> Any:
    if record is None or not record.result:
        return None
    if record.kind == "run":
        return RunRecord.from_dict(record.result)  # failed and diverged runs too: the report counts them
    if record.status != "done":
        return None
    result = record.result
    if not (result.get("wall_time_s") or result.get("wall_s")) and record.started_at and record.finished_at:
        # An analysis records no time of its own: the store's clock of its attempt times it, so the expected
        # time of the steps like it is learnt from it instead of the prior.
        result = {**result, "wall_time_s": round(float(record.finished_at) - float(record.started_at), 1)}
    return result


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
    errors: tuple[str, ...] = ()  # why steps could not be submitted (an earlier step failed)
    # steps kept back because the requester already has as many jobs waiting as the store allows one person
    # (TRANSFERLAB_MAX_QUEUED_PER_SESSION): not an error, a later advance queues them as the queue drains
    held: int = 0

    @property
    def ended(self) -> bool:
        return self.done + self.failed == self.total


def _ended(record: JobRecord | None) -> bool:
    return record is not None and record.status in TERMINAL


def progress(plan: Plan, store: Any, errors: tuple[str, ...] = (), held: int = 0) -> Progress:
    keys = plan_keys(plan)
    records = {step: store.get(key) for step, key in keys.items()}
    statuses = [r.status if r else "" for r in records.values()]
    stage = next((i for i, st in enumerate(plan.stages) if not all(_ended(records[s]) for s in st)), len(plan.stages))
    return Progress(
        total=len(statuses), done=statuses.count("done"),
        failed=sum(1 for s in statuses if s in TERMINAL and s != "done"),
        running=statuses.count("running"), queued=sum(1 for s in statuses if s in ACTIVE and s != "running"),
        unsubmitted=statuses.count(""), stage=stage,
        running_keys=tuple(keys[s] for s, r in records.items() if r and r.status == "running"),
        errors=tuple(errors), held=held)


def advance(plan: Plan, executor: Any, *, priority: str = "sweep", who: str | None = None,
            retry: bool = False) -> Progress:
    """Submit the stages whose earlier stages have ended; return the progress after.

    ``retry``: also resubmit the steps of those stages that ended without success (the run button).
    A stage after one whose steps failed is still submitted: its jobs that need a failed one are refused
    by the store with a message naming it, kept in :attr:`Progress.errors`.
    """
    store = executor.store
    errors: list[str] = []
    held = 0
    for number, stage in enumerate(plan.stages):
        records = {step: store.get(step_key(step)) for step in stage}
        wanted = [s for s, r in records.items() if r is None or (retry and r.stopped)]
        if wanted:
            needs.require(plan)  # before a job of a plan that cannot run here is queued, with the fix
            for step in wanted:
                if held:  # the requester's queue is full: the rest of the stage waits for the next advance
                    held += 1
                    continue
                try:
                    executor.submit_group(plan.group, [step.spec], priority=priority, who=who)
                except QueueCapReached:
                    held += 1
                except LabError as exc:
                    errors.append(f"stage {number + 1}, {_step_words(step)}: {exc}")
            records = {step: store.get(step_key(step)) for step in stage}
        if not all(_ended(r) for r in records.values()):
            if not held:
                _submit_ready(plan, number, executor, priority, who, errors)
            break  # the rest of the later stages waits for this one
    return progress(plan, store, tuple(errors), held)


def _submit_ready(plan: Plan, number: int, executor: Any, priority: str, who: str | None,
                  errors: list[str]) -> None:
    """Queue the steps of the stages after stage ``number`` that build on no step still unfinished: most of a
    recipe's runs need nothing an earlier stage makes, so no worker waits idle while a stage's last jobs run
    (FPT's bit bodies are three jobs: on two workers one idled through the third's whole run). A step that
    builds on an unfinished one waits, as before, until its stage's turn. Stops at the requester's queue cap.
    """
    if any(s.part == tuning.GRID_PART for stage in plan.stages[:number + 1] for s in stage):
        return  # the later steps' rates are not chosen yet: their specs change when the grid has ended
    store = executor.store
    unfinished: list[Step] = []
    for index, stage in enumerate(plan.stages):
        # one read a step: a step submitted below was not done before and is not done after
        records = {step: store.get(step_key(step)) for step in stage}
        waiting = [step for step, record in records.items() if record is None or record.status != "done"]
        if index > number:
            for step in waiting:
                if records[step] is not None or any(mentions(step.spec, s) for s in unfinished):
                    continue
                try:
                    executor.submit_group(plan.group, [step.spec], priority=priority, who=who)
                except QueueCapReached:
                    return
                except LabError as exc:
                    errors.append(f"{_step_words(step)}: {exc}")
        unfinished += waiting


def _step_words(step: Step) -> str:
    """A step for a person: its condition, and its task where it has one."""
    return step.condition + (f" on {step.facet}" if step.facet else "")


def expected_seconds(plan: Plan, results: Mapping[Step, Any], prior_s: float) -> tuple[float, float]:
    """(seconds of run time for the whole recipe, seconds still to go), from what its finished steps took.

    A step not yet run is expected to take the mean measured time of finished steps of its own kind and
    facet, else of its kind, else ``prior_s`` (the recipe's measured figure per step on this machine). A
    finished step whose result records no time (an analysis) is guessed the same way for the total, and
    is not still to go.
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
            if results.get(step) is None:
                left += w
        total += w
    return (total, left) if math.isfinite(total) else (math.nan, math.nan)


def expected_of(recipe: Recipe, plan: Plan, results: Mapping[Step, Any]) -> tuple[float, float]:
    """:func:`expected_seconds` with the recipe's prior for the plan's budget (NaN where the budget's steps
    were never measured here: see :meth:`Recipe.prior_s`)."""
    return expected_seconds(plan, results, recipe.prior_s(plan.budget))


def measured_count(results: Mapping[Step, Any]) -> int:
    """How many steps have a measured run time: what :func:`expected_seconds` learnt its times from."""
    return sum(1 for result in results.values() if wall_seconds(result))


def expected_sentence(recipe: Recipe, plan: Plan, results: Mapping[Step, Any]) -> str:
    """The expected CPU time in words, saying where the figure comes from (the app and the CLI show it)."""
    total, left = expected_of(recipe, plan, results)
    measured = measured_count(results)
    if math.isnan(total):
        return (f"not known yet: some kinds of its jobs have never run here at the {plan.budget} budget (the "
                f"recipe's {recipe.prior_step_s:g} s a job holds for the quick budget only)")
    if measured and left == 0:
        return f"about {fmt_duration(total)} of CPU time, every job finished (timed from the {measured} measured here)"
    if measured:
        return (f"about {fmt_duration(total)} of CPU time, {fmt_duration(left)} of it still to run (from the "
                f"{measured} of its jobs measured here)")
    return (f"about {fmt_duration(total)} of CPU time (at {recipe.prior_step_s:g} s a job, the recipe's figure for "
            f"this machine)")


__all__ = ["ADJUST_VARIABLE", "Progress", "advance", "grown_plan", "needed_steps", "paper_first", "plan_for",
           "seeds_flag", "tuned_plan",
           "seeds_words", "expected_of", "expected_sentence", "expected_seconds",
           "measured_count", "named_adjust", "plan_keys", "plan_of", "progress", "results_of", "step_key"]
