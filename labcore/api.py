"""The lab from Python: runs, sweeps, tables, curves, comparisons, recipes, analyses and the atlas.

    import labcore.api as lab

    record = lab.run(model="tiny:bert", discipline="dna-splice", max_steps=20)
    lab.sweep(model="tiny:bert", init=["pretrained", "random"], seed=[0, 1], max_steps=20)
    table = lab.runs(discipline="dna-splice")          # one row a run
    lab.compare(group="my-sweep").bars                 # the Compare page's figure

Every function takes the spec's fields as keyword arguments (the CLI's flags without the dashes) and
validates them as the CLI does (:func:`labcore.runspec.make_spec`, then :func:`labcore.jobs.run.resolve_run`),
so a bad value gets the same error. A spec is resolved once, there; running or queueing it reads that resolution. Runs go through the pages' machinery: :func:`run` and :func:`sweep`
train in this process and record into the store the pages read (as ``python -m labcore sweep`` does);
``background=True`` (and :func:`submit`) hands them to the executor's workers instead, so they appear live
on the Runs page. Figures are Plotly figures, which display inline in Jupyter.

This module imports no torch: a run imports it when it trains.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from labcore.engine import run_results
from labcore.errors import LabError
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec, make_spec
from labcore.runspec.resolved import ResolvedSpec
from labcore.store import JobRecord, Store, Submission, open_store

# Fields whose value is itself a mapping or a table: a list there is the value, never a sweep's options.
_WHOLE_FIELDS = ("discipline_params", "protocol_params", "mapping_table")

POLL_S = 1.0  # how often a waiting call looks at the store (a tiny run takes seconds)


def _spec_keywords(swept: bool = False) -> Callable[[Callable], Callable]:
    """Show a function's ``**fields`` as the RunSpec's fields, with their types and defaults (``help()``,
    Jupyter's signature tips), read from the dataclass, so each field is still declared once, in
    :mod:`labcore.runspec`. ``swept``: each also takes a list of values (a sweep's options)."""
    import dataclasses
    import inspect

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        own = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
        defaults = RunSpec()
        typed = {f.name: f"{f.type} | list" if swept else f.type for f in dataclasses.fields(RunSpec)}
        typed.update(discipline_params="dict[str, Any]", protocol_params="dict[str, Any]",
                     mapping_table=typed["mapping_table"].removesuffix(" | list"))  # given whole, never swept
        fields = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=getattr(defaults, f.name),
                                    annotation=typed[f.name]) for f in dataclasses.fields(RunSpec)]
        function.__signature__ = signature.replace(parameters=own + fields)
        return function

    return decorate


# ------------------------------------------------------------------------------------------------ specs
@_spec_keywords()
def spec(**fields: Any) -> ResolvedSpec:
    """The :class:`~labcore.runspec.resolved.ResolvedSpec` of ``fields`` (the CLI's spec flags as keyword arguments: ``model``,
    ``init``, ``discipline``, ``protocol``, ``lr``, ``max_steps`` ...; ``discipline_params`` and
    ``protocol_params`` as dicts). Raises :class:`LabError` naming the bad field and the valid values."""
    from labcore.jobs.run import resolve_run

    return resolve_run(make_spec(**fields))


@_spec_keywords(swept=True)
def specs(**fields: Any) -> list[ResolvedSpec]:
    """The resolved specs of a sweep: every field given a list (or tuple) is varied, and the sweep is the
    product of those lists, in the order given (``init=["pretrained", "random"], seed=[0, 1, 2]``)."""
    varied = {name: list(value) for name, value in fields.items()
              if isinstance(value, (list, tuple)) and name not in _WHOLE_FIELDS}
    fixed = {name: value for name, value in fields.items() if name not in varied}
    empty = [name for name, options in varied.items() if not options]
    if empty:
        raise LabError(f"{', '.join(empty)}: an empty list sweeps over nothing; give at least one value")
    return [spec(**fixed, **dict(zip(varied, values))) for values in itertools.product(*varied.values())]


def _store(store: Store | str | None) -> Store:
    return store if isinstance(store, Store) else open_store(store)


def _executor(store: Store, start: bool):
    from labcore.execution.executor import executor_for

    return executor_for(store, autostart=start)


# ------------------------------------------------------------------------------------------- running
@_spec_keywords()
def run(*, background: bool = False, store: Store | str | None = None,
        progress: Callable[[str], None] | None = None, **fields: Any) -> RunRecord:
    """Train one spec and return its :class:`RunRecord` (a finished spec comes from the store at once).

    In this process by default, recorded in the store with its weights (what :func:`export_model` reads);
    ``background=True`` queues it for the executor's workers (live on the Runs page) and waits for it.
    ``progress`` receives one line per event worth telling (validations, the result).
    """
    listed = [name for name, value in fields.items() if isinstance(value, list) and name not in _WHOLE_FIELDS]
    if listed:
        raise LabError(f"run takes one value per field, and {', '.join(listed)} got a list; sweep(...) runs the "
                       f"product of lists")
    return sweep(background=background, store=store, progress=progress, **fields)[0]


@_spec_keywords(swept=True)
def sweep(*, background: bool = False, group: str | None = None, store: Store | str | None = None,
          progress: Callable[[str], None] | None = None, **fields: Any) -> list[RunRecord]:
    """Train the product of every list-valued field (see :func:`specs`) and return the records in order.

    In this process by default, one run after the other (finished keys come from the store);
    ``background=True`` queues them as the group ``group`` (default: ``sweep-<time>``) and waits for all.
    """
    chosen = specs(**fields)
    the_store = _store(store)
    if background:
        name = group or time.strftime("sweep-%Y%m%d-%H%M%S")
        submissions = _executor(the_store, True).submit_group(name, chosen, priority="sweep")
        return [wait(s.key, store=the_store) for s in submissions]
    from labcore.events import LOG, STEP, describe
    from labcore.engine.sweep import run_sweep

    def on_event(event: dict[str, Any]) -> None:
        line = describe(event) if progress and event["type"] not in (STEP, LOG) else None
        if line is not None:
            progress(line)

    records = run_sweep(chosen, store=the_store, progress=progress or (lambda _m: None), on_event=on_event)
    if group:
        with the_store.transaction():
            the_store.table.add_to_group(group, [r.key for r in records])
    return records


@_spec_keywords()
def submit(*, group: str | None = None, priority: str = "interactive", who: str | None = None,
           store: Store | str | None = None, start: bool = True, **fields: Any) -> Submission:
    """Queue one spec for the executor's workers (the pages' path) and return at once.

    ``start`` starts a worker when none is alive; ``who`` names the requester the Runs page shows.
    Follow it with :func:`wait`, :func:`runs` or the Runs page.
    """
    return _executor(_store(store), start).submit(spec(**fields), priority=priority, group=group, who=who)


def wait(key: str, *, store: Store | str | None = None, timeout_s: float | None = None) -> RunRecord:
    """The record of run ``key`` (a prefix will do) once it has finished; raises if it stopped otherwise."""
    return RunRecord.from_dict(_finished_job(_store(store), key, timeout_s).result)


def _finished_job(the_store: Store, key: str, timeout_s: float | None = None) -> JobRecord:
    """The stored record of job ``key`` once it has finished (polled); an error naming why if it stopped."""
    key = the_store.resolve_key(key)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        record = the_store.get(key)
        if record is not None and record.finished:
            return record
        if record is not None and record.stopped:
            raise LabError(f"job {key} is {record.status}: {record.error or 'no result'}; "
                           f"`python -m labcore tail {key[:12]}` shows why")
        if deadline is not None and time.monotonic() > deadline:
            raise LabError(f"job {key} is still {record.status if record is not None else 'unknown'} after "
                           f"{timeout_s:g} s")
        time.sleep(POLL_S)


# -------------------------------------------------------------------------------------------- tables
SPEC_COLUMNS = tuple(f for f in RunSpec.__dataclass_fields__)
RUN_COLUMNS = ("key", "label", "status", "groups", "requester", *SPEC_COLUMNS, "metric", "test", "test_low",
               "test_high", "test_examples", "validation", "majority", "best_step", "steps_done", "tokens_per_s",
               "samples_per_s", "device", "device_name", "precision", "wall_time_s", "error")
"""The columns of :func:`runs`: the job (key, label, status, groups, requester), every RunSpec field as it
was resolved, then the result: the test metric of the best checkpoint with its 95 % Wilson interval where
it is an accuracy over a known number of examples, the validation metric, the majority baseline, the speed
(tokens/s, samples/s), where it trained and how long it took. Runs without a result have empty result cells."""


def _row(record: JobRecord) -> dict[str, Any]:
    from labcore.results import metrics

    result = RunRecord.from_dict(record.result) if record.result else None
    row: dict[str, Any] = {"key": record.key, "label": record.label, "status": record.status,
                           "groups": ",".join(record.groups or []),
                           "requester": record.started_by or ",".join(record.requesters or []),
                           **{name: (record.spec or {}).get(name) for name in SPEC_COLUMNS}}
    if result is not None:
        low = high = None
        if result.metric == "accuracy" and result.test_examples and result.test_value is not None:
            low, high = metrics.wilson_interval(round(result.test_value * result.test_examples), result.test_examples)
        row.update(metric=result.metric, test=result.test_value, test_low=low, test_high=high,
                   test_examples=result.test_examples or None, validation=result.validation.get(result.metric),
                   majority=result.baseline.get("majority"), best_step=result.best_step,
                   steps_done=result.steps_done, tokens_per_s=result.tokens_per_s or None,
                   samples_per_s=result.samples_per_s, device=result.device, device_name=result.device_name,
                   precision=result.precision, wall_time_s=result.wall_time_s)
    row["error"] = record.error or ""
    return row


def runs(*, store: Store | str | None = None, **filters: Any) -> pd.DataFrame:
    """Every stored training run as one row of :data:`RUN_COLUMNS`, in submission order.

    ``filters`` keep the rows whose column equals the value, or is in it where a list is given:
    ``runs(discipline="dna-splice", init=["pretrained", "random"], status="done")``; ``group="name"`` keeps
    the runs of a stored group.
    """
    the_store = _store(store)
    group = filters.pop("group", None)
    unknown = sorted(set(filters) - set(RUN_COLUMNS))
    if unknown:
        raise LabError(f"runs() cannot filter on {', '.join(unknown)}; filter on group or a column: "
                       f"{', '.join(RUN_COLUMNS)}")
    table = pd.DataFrame([_row(r) for r in run_results.runs(the_store, group=group)], columns=list(RUN_COLUMNS))
    for name, value in filters.items():
        wanted = list(value) if isinstance(value, (list, tuple, set)) else [value]
        table = table[table[name].isin(wanted)]
    return table.reset_index(drop=True)


def records(keys: str | Iterable[str] | None = None, *, group: str | None = None,
            store: Store | str | None = None) -> list[RunRecord]:
    """The result records of the runs ``keys`` and of the group ``group`` (runs without a result left out)."""
    from labcore.export.runs import finished_records

    return finished_records(_store(store), keys, group)


def curves(keys: str | Iterable[str] | None = None, *, group: str | None = None,
           store: Store | str | None = None) -> pd.DataFrame:
    """The runs' curves as a long table: ``key``, ``label``, ``curve`` (``train_loss``, ``lr``,
    ``validation_<metric>`` ...), ``step``, ``value``. Finished runs and runs still going alike: the curves
    come from each run's event stream where it has one, else from its record's thinned curves."""
    from labcore.export.runs import run_curves, run_keys

    the_store = _store(store)
    rows = []
    for key in run_keys(the_store, keys, group):
        label = the_store.record(key).label
        rows += [{"key": key, "label": label, "curve": name, "step": int(step), "value": float(value)}
                 for name, points in run_curves(the_store, key).items() for step, value in points]
    return pd.DataFrame(rows, columns=["key", "label", "curve", "step", "value"])


# ------------------------------------------------------------------------------------- what the pages show
@dataclass(frozen=True)
class Comparison:
    """The Compare page's content for a set of runs: the table per condition and its two figures."""

    table: pd.DataFrame  # one row per condition: n, mean, std, 95 % t-interval, majority, steps to converge
    bars: Any  # a figure (labcore.figures): the test metric's mean with std error bars
    curves: Any  # a figure (labcore.figures): mean train loss and validation metric with std bands
    paper: pd.DataFrame  # Kao & Lee's table 5: mean (std) in percent, conditions by discipline
    steps: pd.DataFrame  # FPT's table 6: steps to converge and the speed-up (empty without a pretrained-random pair)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.table, self.bars, self.curves)


def compare(keys: str | Iterable[str] | None = None, *, group: str | None = None, smoothing: float = 0.6,
            store: Store | str | None = None) -> Comparison:
    """What the Compare page shows for the runs ``keys`` and the group ``group``."""
    from labcore import figures

    chosen = records(keys, group=group, store=store)
    if not chosen:
        raise LabError("none of these runs has a result yet; wait for them (lab.wait) and compare again")
    table = figures.summary_table(chosen)
    return Comparison(table, figures.bars_with_error(table, title="Test metric: mean ± std over seeds"),
                      figures.condition_curves(chosen, smoothing=smoothing), figures.paper_table(table),
                      figures.steps_to_converge_table(chosen))


@dataclass(frozen=True)
class AtlasView:
    """The Atlas page's grid: pretrained minus random per model and discipline, as a table and a figure."""

    table: pd.DataFrame
    figure: Any  # a figure (labcore.figures.atlas.gain_grid)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.table, self.figure)


def atlas(*, models: Sequence[str] | None = None, disciplines: Sequence[str] | None = None,
          protocol: str = "full", budget: str | None = None, store: Store | str | None = None) -> AtlasView:
    """The transfer atlas of the stored finished runs (default: the models and disciplines they cover)."""
    from labcore.recipes import atlas as atlases

    the_store = _store(store)
    found = atlases.finished_runs(the_store)
    present_models, _ = atlases.present(found)
    models = list(models or present_models or ["minilm"])
    disciplines = list(disciplines or dict.fromkeys(r.spec["discipline"] for r in found) or ["dna-splice"])
    grid = atlases.build_atlas(found, models=models, disciplines=disciplines, protocol=atlases.Protocol(protocol),
                               budget=budget or atlases.FILL_BUDGET)
    grid = grid.with_estimates(atlases.estimates_from_store(the_store, grid.logme_specs()))
    return AtlasView(atlases.atlas_table(grid), atlases.atlas_figure(grid))


def analyze(kind: str, *, models: Sequence[str] | None = None, background: bool = False,
            store: Store | str | None = None, **fields: Any) -> dict[str, Any]:
    """One analysis (``similarity``, ``jacobian``, ``gradients``, ``noise`` ... as ``python -m labcore
    analyze`` lists them) of ``models`` given as the CLI writes them (``minilm``, ``tiny:bert@random@1``,
    ``run=KEY``); its result as a dict. ``background=True`` queues it for the workers and waits."""
    from labcore.jobs.analyses import ANALYSES, SPEC_TYPES, parse_model
    from labcore.jobs.inline import analyze_here

    if kind not in ANALYSES:
        raise LabError(f"unknown analysis {kind!r}; valid analyses: {', '.join(ANALYSES)}")
    if models:
        fields["models"] = tuple(parse_model(m) for m in models)
    unknown = sorted(set(fields) - set(SPEC_TYPES[kind].__dataclass_fields__))
    if unknown:
        raise LabError(f"{kind} takes no {', '.join(unknown)}; it takes "
                       f"{', '.join(SPEC_TYPES[kind].__dataclass_fields__)}")
    the_store = _store(store)
    job = SPEC_TYPES[kind](**fields)
    if not background:
        return analyze_here(job, the_store)
    return _finished_job(the_store, _executor(the_store, True).submit(job).key).result


# ------------------------------------------------------------------------------------------- recipes
@dataclass(frozen=True)
class RecipeRun:
    """A paper's recipe at one budget and seeds: :meth:`run` queues and waits, :meth:`report` reads."""

    name: str
    budget: str = "quick"
    seeds: tuple[int, ...] | None = None
    store: Any = None

    def _plan(self):
        from labcore.recipes import RECIPES
        from labcore.recipes.drive import plan_of

        return RECIPES[self.name], plan_of(RECIPES[self.name], self.budget, self.seeds)

    def run(self, *, wait: bool = True, start: bool = True, poll_s: float = 5.0):
        """Queue the recipe's stages for the workers (each once the earlier ones ended, as ``python -m labcore
        recipe run`` does) and, with ``wait``, return its report when every job has ended; without, the
        progress (:class:`labcore.recipes.drive.Progress`). ``start``: start a worker when none is alive."""
        from labcore.recipes.drive import advance

        _, plan = self._plan()
        executor = _executor(_store(self.store), start)
        progress = advance(plan, executor, retry=True)
        while wait and not progress.ended:
            time.sleep(poll_s)
            progress = advance(plan, executor)
        return self.report() if wait else progress

    def report(self):
        """The recipe's report from the finished jobs in the store (any time, half finished too)."""
        from labcore.recipes.drive import results_of

        recipe, plan = self._plan()
        return recipe.report(plan, results_of(plan, _store(self.store)))


def recipe(name: str, *, budget: str = "quick", seeds: Sequence[int] | None = None,
           store: Store | str | None = None) -> RecipeRun:
    """The recipe ``name`` (``python -m labcore recipe list`` lists them) at ``budget`` with ``seeds``."""
    from labcore.recipes import RECIPES

    RECIPES[name]  # an unknown name raises an error that lists the recipes
    return RecipeRun(name, budget, tuple(seeds) if seeds else None, store)


# ------------------------------------------------------------------------------------------- exports
def export_tensorboard(keys: str | Iterable[str] | None = None, logdir: str = "runs", *, group: str | None = None,
                       store: Store | str | None = None) -> list[str]:
    """Write the runs' curves, hyper-parameters and final metrics as TensorBoard event files under ``logdir``
    (one folder per condition, one run per seed); returns the folders written."""
    from labcore.export.tensorboard import write_runs

    the_store = _store(store)
    return [str(p) for p in write_runs(the_store, records(keys, group=group, store=the_store), logdir)]


def export_model(key: str, folder: str, *, store: Store | str | None = None) -> str:
    """Write a finished run's fine-tuned model as a folder ``transformers`` loads (weights with the head,
    config with the label names, a tokenizer for the discipline's raw symbols, a model card)."""
    from labcore.export.model import export_stored

    return str(export_stored(_store(store), key, folder))


__all__ = ["AtlasView", "Comparison", "RUN_COLUMNS", "RecipeRun", "analyze", "atlas", "compare", "curves",
           "export_model", "export_tensorboard", "records", "recipe", "run", "runs", "spec", "specs", "submit",
           "sweep", "wait"]
