"""A recipe's report: tables, figures and verdicts built from finished results only (written out by
:mod:`labcore.recipes.export`).

Everything here is a pure function of a plan and its results (``Step -> RunRecord | dict | None``), so
a report is rebuilt the same from the store at any time, half-finished recipes included: a condition
with no finished run shows n = 0 and its claims read "not measured".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from labcore.results.metrics import aggregate
from labcore.recipes import tuning
from labcore.recipes.base import Claim, Plan, Step
from labcore.recipes.gate import EVERY, SIDES, Gate, Level
from labcore.recipes.verdict import ClaimTest, Verdict, measure
from labcore.results.record import RunRecord

Results = Mapping[Step, Any]  # a RunRecord for a finished run, a result dict for other kinds, None: not done


@dataclass(frozen=True)
class PaperNumbers:
    """The paper's own numbers for a table whose shape ours matches, transcribed and cited."""

    source: str  # "Kao & Lee, table 5"
    table: pd.DataFrame


@dataclass
class Report:
    recipe: str
    title: str
    paper: str
    budget: str
    seeds: tuple[int, ...]
    claims: list[tuple[Claim, Verdict]] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    paper_numbers: list[PaperNumbers] = field(default_factory=list)
    figures: list[tuple[str, Any]] = field(default_factory=list)  # (title, a labcore.figures figure)
    cuts: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    # each tuned arm's validation metric per learning rate of the grid and the rate chosen (None: no grid)
    tuning: pd.DataFrame | None = None
    done: int = 0
    total: int = 0
    wall_s: float = 0.0  # summed wall time of the finished runs and pretrainings
    # claims the recipe once counted among the paper's headline claims, each with why it no longer does
    dropped: list[Claim] = field(default_factory=list)
    machine: str = ""  # the device its finished runs recorded (their CPU's model name): what their times are on

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done == self.total


# ------------------------------------------------------------------------------------------ reading results


def run_value(result: Any) -> float | None:
    """The test metric of a finished run (None: not finished, failed, or untrained)."""
    if isinstance(result, RunRecord) and result.status == "done":
        return result.test_value
    return None


def step_in(step: Step, read: Sequence[tuple[str, str | None, str | None]]) -> bool:
    """Whether ``step`` is one of the (condition, facet, part) triples of ``read`` (a facet or part of None: any)."""
    return any(step.condition == c and (f is None or step.facet == f) and (p is None or step.part == p)
               for c, f, p in read)


def values_by_seed(plan: Plan, results: Results, *, condition: str, facet: str | None = None,
                   part: str | None = None, value: Callable[[Any], float | None] = run_value) -> dict[int, float]:
    """{seed: value} of one condition's finished steps (of one facet and part where given)."""
    out: dict[int, float] = {}
    for step in plan.steps:
        if not step_in(step, ((condition, facet, part),)):
            continue
        v = value(results.get(step))
        if v is not None and math.isfinite(v):
            out[step.seed] = float(v)
    return out


def cell(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> str:
    """"mean ± std [low, high] (n)" with the 95 % t-interval; "–" with nothing finished."""
    if not values:
        return "–"
    agg = aggregate(values)
    if agg.n == 1:
        return f"{agg.mean * scale:.{digits}f} (n = 1)"
    return (f"{agg.mean * scale:.{digits}f} ± {agg.std * scale:.{digits}f} "
            f"[{agg.ci_low * scale:.{digits}f}, {agg.ci_high * scale:.{digits}f}] (n = {agg.n})")


def grid_table(plan: Plan, results: Results, *, conditions: Sequence[str], facets: Sequence[str],
               part: str | None = None, value: Callable[[Any], float | None] = run_value,
               scale: float = 1.0, digits: int = 3, index_name: str = "condition") -> pd.DataFrame:
    """Conditions as rows, facets as columns, each cell :func:`cell` of that condition's seeds."""
    rows = {c: {f: cell(list(values_by_seed(plan, results, condition=c, facet=f, part=part, value=value).values()),
                        scale, digits) for f in facets} for c in conditions}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(facets))
    frame.index.name = index_name
    return frame


def long_table(plan: Plan, results: Results, *, value: Callable[[Any], float | None] = run_value) -> pd.DataFrame:
    """Every step with its number: the CSV export and the data of the figures."""
    rows = []
    for step in plan.steps:
        result = results.get(step)
        status = result.status if isinstance(result, RunRecord) else ("done" if result is not None else "")
        rows.append(dict(part=step.part, facet=step.facet, condition=step.condition, seed=step.seed,
                         kind=type(step.spec).__name__, status=status or "not finished", value=value(result),
                         wall_time_s=wall_seconds(result)))
    return pd.DataFrame(rows, columns=["part", "facet", "condition", "seed", "kind", "status", "value", "wall_time_s"])


Side = str | tuple[str, ...]  # a condition, or several whose per-seed mean is the side (one verdict over them)


def side_values(plan: Plan, results: Results, side: Side, *, facet: str | None = None, part: str | None = None,
                value: Callable[[Any], float | None] = run_value) -> dict[int, float]:
    """{seed: value} of a side: one condition's, or the per-seed mean of several over the seeds all of them have."""
    if isinstance(side, str):
        return values_by_seed(plan, results, condition=side, facet=facet, part=part, value=value)
    each = [values_by_seed(plan, results, condition=c, facet=facet, part=part, value=value) for c in side]
    seeds = sorted(set.intersection(*(set(v) for v in each))) if each else []
    return {s: sum(v[s] for v in each) / len(each) for s in seeds}


def side_name(side: Side) -> str:
    return side if isinstance(side, str) else "the mean of " + ", ".join(side)


def conditions_of(*sides: Side) -> tuple[str, ...]:
    return tuple(c for side in sides for c in ((side,) if isinstance(side, str) else side))


def judge(claim: Claim, plan: Plan, results: Results, a: Side, b: Side, *, facet: str | None = None,
          part: str | None = None, value: Callable[[Any], float | None] = run_value, metric: str = "",
          test: ClaimTest | None = None, name: str = "", learnt: bool = False,
          primary: bool | None = None) -> tuple[Claim, Verdict]:
    """The claim's looks on a (facet's) side a against b, by the claim's own test (or ``test``): see
    :func:`labcore.recipes.verdict.measure`; :func:`labcore.recipes.base.settle_claims` decides the report's
    claims together. A side is a condition, or several whose per-seed mean it compares.
    ``name``: the verdict's id where one claim is tested on several pairs of one facet (default: id/facet).
    ``learnt``: ``value`` reads something that means nothing unless the runs learnt the task (steps until the
    validation score levels off, a training loss), so the learnt gate holds every condition's test scores
    against the floor; with the test metric itself the gate reads the compared scores (labcore.recipes.gate).
    ``primary``: whether this is the claim's one counted verdict (default: its facet is the claim's primary)."""
    va = side_values(plan, results, a, facet=facet, part=part, value=value)
    vb = side_values(plan, results, b, facet=facet, part=part, value=value)
    reads = tuple((c, facet, part) for c in conditions_of(a, b))
    gate = sides_gate(plan, results, reads) if value is run_value else \
        levels_gate(plan, results, reads, EVERY) if learnt else None
    at = f" on {facet}" if facet else ""
    verdict = judged(claim, plan, results, name or claim.id + (f"/{facet}" if facet else ""), side_name(a) + at,
                     side_name(b) + at, va, vb, reads=reads, metric=metric, test=test, gate=gate,
                     primary=claim.primary in ("", facet) if primary is None else primary)
    if value is run_value and isinstance(a, str) and isinstance(b, str):  # per-example results to pool
        from labcore.recipes.pooled import pooled_mcnemar

        pooled = pooled_mcnemar(results_by_seed(plan, results, condition=a, facet=facet, part=part),
                                results_by_seed(plan, results, condition=b, facet=facet, part=part))
        verdict = replace(verdict, pooled=pooled.sentence() if pooled else "")
    return claim, verdict


def sides_gate(plan: Plan, results: Results, reads: Sequence[tuple[str, Any, Any]]) -> Gate | None:
    """The learnt gate of a claim whose compared values are test scores: the highest floor of the runs read
    (:func:`comparison_floor`); None where no floor is known."""
    found = comparison_floor(plan, results, reads)
    if found is None:
        return None
    facets = sorted({str(f) for _, f, _ in reads if f})
    return Gate(SIDES, found[0], found[1] or "the majority class" + (f" of {', '.join(facets)}" if facets else ""))


def levels_gate(plan: Plan, results: Results, reads: Sequence[tuple[str, Any, Any]], rule: str) -> Gate | None:
    """The learnt gate of a claim on another measure: each (condition, facet, part) read, by its runs' test
    scores over its own floor (``rule``: EVERY or BEST of them must clear it); None where no floor is known."""
    levels = []
    for condition, facet, part in reads:
        found = comparison_floor(plan, results, ((condition, facet, part),))
        if found is not None:
            scores = values_by_seed(plan, results, condition=condition, facet=facet, part=part)
            levels.append(Level(condition + (f" on {facet}" if facet else ""), found[0],
                                found[1] or "the majority class", scores))
    return Gate(rule, levels=tuple(levels)) if levels else None


def results_by_seed(plan: Plan, results: Results, *, condition: str, facet: str | None = None,
                    part: str | None = None) -> dict[int, Any]:
    """{seed: result} of one condition's steps that have a result (of one facet and part where given)."""
    return {step.seed: results[step] for step in plan.steps
            if step_in(step, ((condition, facet, part),)) and results.get(step) is not None}


def judged(claim: Claim, plan: Plan, results: Results, name: str, a: str, b: str, values_a: Mapping[int, float],
           values_b: Mapping[int, float], *, reads: Sequence[tuple[str, str | None, str | None]],
           metric: str = "", test: ClaimTest | None = None, gate: Gate | None = None,
           primary: bool = True) -> Verdict:
    """The looks of a claim on values the report computed itself (a gain, a mean of permutations): ``reads``
    names the (condition, facet, part) of the steps they come from, so the sequential driver knows which
    steps a still open claim needs more seeds of, and the report what they cost. ``gate``: the learnt gate
    (:func:`sides_gate`, :func:`levels_gate`); None: no floor is known."""
    verdict = measure(name, a, b, values_a, values_b, test=test or claim.test, metric=metric,
                      headline=claim.headline, can_grow=plan.can_grow, gate=gate, primary=primary)
    n = verdict.n or max(min(verdict.n_a, verdict.n_b), 0)
    return replace(verdict, reads=tuple(reads), cpu_s=cpu_seconds(plan, results, reads, n))


def cpu_seconds(plan: Plan, results: Results, read: Sequence[tuple[str, str | None, str | None]],
                pairs: int) -> float:
    """The run time of the steps a claim read, over the first ``pairs`` seeds of the plan (every seed where
    no pair exists yet)."""
    seeds = set(sorted(plan.seeds)[:pairs]) if pairs else set(plan.seeds)
    return sum(wall_seconds(results.get(step)) or 0.0 for step in plan.steps
               if step.seed in seeds and step_in(step, read))


def wall_seconds(result: Any) -> float | None:
    """The wall time a finished job recorded: a run's ``wall_time_s``, a pretraining's ``wall_s`` (its record
    says so under that name), an analysis's ``wall_time_s`` where it keeps one; None where none is known."""
    if isinstance(result, RunRecord):
        return result.wall_time_s or None
    if isinstance(result, dict):
        return float(result.get("wall_time_s") or result.get("wall_s") or 0) or None
    return None


def progress_counts(plan: Plan, results: Results) -> tuple[int, int, float]:
    """(finished steps, all steps, their summed wall time in seconds)."""
    done = [results.get(s) for s in plan.steps if results.get(s) is not None]
    return len(done), len(plan.steps), sum(wall_seconds(r) or 0.0 for r in done)


def new_report(recipe: Any, plan: Plan, results: Results) -> Report:
    done, total, wall = progress_counts(plan, results)
    rates = recipe.lr_grids.get(plan.budget, ())
    grid = rates and any(step.part == tuning.GRID_PART for step in plan.steps)
    return Report(recipe=recipe.name, title=recipe.title, paper=recipe.paper, budget=plan.budget,
                  seeds=plan.seeds, cuts=plan.cuts, done=done, total=total, wall_s=wall,
                  dropped=[claim for claim in recipe.claims if claim.dropped], machine=machine_of(results),
                  tuning=tuning.rate_table(_untuned(plan, rates), rates, results) if grid else None,
                  notes=miniature_notes(recipe.name) if plan.budget == "quick" else [])


def miniature_notes(recipe: str) -> list[str]:
    """The quick budget's miniatures of ``recipe``: each pilot's numbers and its choice (labcore.recipes.miniatures)."""
    from labcore.recipes.miniature import pilot_words
    from labcore.recipes.miniatures import MINIATURES

    return [pilot_words(MINIATURES[name]) for name in MINIATURES if MINIATURES[name].recipe == recipe]


def machine_of(results: Results) -> str:
    """The device name most of the finished runs recorded ("" where none did)."""
    names = [r.device_name for r in results.values() if isinstance(r, RunRecord) and r.device_name]
    return max(set(names), key=names.count) if names else ""


def _untuned(plan: Plan, rates: Sequence[float]) -> Plan:
    """The plan without its grid stage (the arms, as the grid was built from them)."""
    stages = tuple(stage for stage in plan.stages if not any(s.part == tuning.GRID_PART for s in stage))
    return replace(plan, stages=stages)


__all__ = ["PaperNumbers", "Report", "Results", "Side", "cell", "comparison_floor", "condition_bars",
           "conditions_of", "cpu_seconds", "grid_table", "judge", "judged", "levels_gate", "long_table",
           "loss_curve_figure", "majority_floors", "new_report", "progress_counts", "results_by_seed", "run_value",
           "side_name", "side_values", "sides_gate", "step_in", "task_floor", "values_by_seed", "wall_seconds"]


# ------------------------------------------------------------------------------------------ figures


def condition_bars(plan: Plan, results: Results, *, conditions: Sequence[str], facets: Sequence[str],
                   part: str | None = None, value: Callable[[Any], float | None] = run_value,
                   title: str = "", y_title: str = "test metric (mean ± std over seeds)",
                   floors: Mapping[str, float] | None = None):
    """Grouped bars: one group per facet, one bar per condition, ±1 std error bars over seeds;
    ``floors`` (facet -> value) draws the majority class or chance as a dashed line per group."""
    from labcore.figures.recipes import condition_bars as bars

    values = {condition: [list(values_by_seed(plan, results, condition=condition, facet=facet, part=part,
                                              value=value).values()) for facet in facets]
              for condition in conditions}
    return bars(values, facets, title=title, y_title=y_title, floors=floors)


def loss_curve_figure(plan: Plan, results: Results, *, conditions: Sequence[str], facet: str | None = None,
                      part: str | None = None, title: str = ""):
    """Mean training-loss curve per condition with a ±1 std band over seeds (Kao & Lee fig. 3)."""
    from labcore.figures import mean_std_curves

    groups: dict[str, list] = {c: [] for c in conditions}
    validation: dict[str, list] = {c: [] for c in conditions}
    metric = "metric"
    for step in plan.steps:
        result = results.get(step)
        if step.condition in groups and (facet is None or step.facet == facet) \
                and (part is None or step.part == part) and isinstance(result, RunRecord) and result.train_loss:
            groups[step.condition].append([tuple(p) for p in result.train_loss])
            validation[step.condition].append([tuple(p) for p in result.val_curve])
            metric = result.metric or metric
    return mean_std_curves({c: g for c, g in groups.items() if g}, validation=validation, metric=metric,
                           title=title)


def task_floor(spec: Any) -> tuple[float, str] | None:
    """(score, how) of the trivial solution of a run spec's task (the spec, or a record's dict of it) where its
    discipline has one (bit memory: copying the query, 0.75), else None."""
    from labcore import data
    from labcore.data.base import parse_params

    fields = spec if isinstance(spec, Mapping) else vars(spec) if hasattr(spec, "__dict__") else {}
    name = fields.get("discipline")
    if not name:
        return None
    try:
        discipline = data.get(name)
        return discipline.floor(parse_params(discipline, dict(fields.get("discipline_params") or {})))
    except Exception:  # an upload or a discipline not known here: the records' majority class stands
        return None


def step_floor(step: Step, result: Any) -> tuple[float, str] | None:
    """(score, how) a step's run reaches without learning its task: the discipline's trivial solution where it
    has one (bit memory: 0.75 from copying the visible bits), else the majority class its record holds (how:
    ""), else chance for bit accuracy; None if unknown."""
    trivial = task_floor(step.spec)
    if trivial is not None:
        return trivial
    if isinstance(result, RunRecord):
        if result.baseline.get("majority") is not None:
            return float(result.baseline["majority"]), ""
        if result.metric == "bit_accuracy":
            return 0.5, "chance, for bit accuracy"
    return None


def comparison_floor(plan: Plan, results: Results,
                     reads: Sequence[tuple[str, Any, Any]]) -> tuple[float, str] | None:
    """(score, how) the runs of ``reads`` (condition, facet, part) reach without learning: the highest of their
    steps' floors (:func:`step_floor`); None if unknown."""
    floors = [floor for step in plan.steps if step_in(step, reads)
              if (floor := step_floor(step, results.get(step))) is not None]
    return max(floors) if floors else None


def majority_floors(plan: Plan, results: Results, facets: Sequence[str]) -> dict[str, float]:
    """facet -> the score a model reaches without learning the task (:func:`step_floor` of its first step
    that has one)."""
    out: dict[str, float] = {}
    for step in plan.steps:
        if step.facet in facets and step.facet not in out:
            floor = step_floor(step, results.get(step))
            if floor is not None:
                out[step.facet] = floor[0]
    return out
