"""Hyper-parameter sweeps of one RunSpec with Ray Tune and its ASHA scheduler; every trial is a lab run.

A trial does not train. It is a Tune function trainable that submits its run to the lab's executor (the
one ``TRANSFERLAB_EXECUTOR`` names: the local workers or the Ray executor), follows the run's events in
the store and reports each validation evaluation to Tune (``tune.report``: the training step and the
discipline's metric). ASHA (``AsyncHyperBandScheduler``, its time in training steps) compares the trials
that reached each rung and stops the poor ones. A stop is carried out in the store: the run is cancelled
by :data:`STOPPED_BY`, so it finishes its step, checkpoints and ends ``cancelled`` with the curve it had,
``steps_done`` short of ``total_steps``: stopped early, never ``done`` (``resume`` would continue it like
any cancelled run). Why follow instead of train inside the trial: the store keeps one writer per job (a
worker, or the Ray executor process), so the Runs page, cancel, dead detection and resume treat a trial's
run as any run, and a spec whose run is in the store already is not trained again: its trial reports the
stored evaluations at once.

Tune places its trials with a Ray of its own: it joins ``RAY_ADDRESS``, else starts one on this machine
(dashboard off, session folder ``<TRANSFERLAB_RAY_TMP>-tune``) and stops it afterwards. A trial asks for
a hundredth of a CPU on this machine's node (it only reads the store, whose database must be read where
it lives); as many trials go at once as the executor runs jobs at once. Tune's own files (experiment
state, each trial's reports) go under ``<TRANSFERLAB_CACHE>/tune/<name>``, never ``~/ray_results``.
This module imports Ray; only the ``tune`` command and its tests import it.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import ray
from ray import tune
from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler
from ray.tune.search.basic_variant import BasicVariantGenerator

from labcore import jobs, paths
from labcore.execution import ray_pump
from labcore.errors import LabError
from labcore.events import EVAL, START, LogEvent
from labcore.execution.executor import executor_for, executor_kind
from labcore.jobs.run import resolve_run
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec, make_spec
from labcore.store import ACTIVE, JobRecord, Store, open_store

STEP = "step"  # ASHA's time: the training step of an evaluation
METRIC = "validation"  # the discipline's validation metric, higher is better for every discipline
STOPPED_BY = "ASHA (Ray Tune)"  # who cancelled a run ASHA stopped early (the Runs page: "cancelled by …")
TRIAL_CPUS = 0.01  # a trial only follows its run in the store; the run asks the executor for its own
SETTLE_S = 600.0  # how long a sweep waits, at its end, for its stopped runs to record their results
DOMAINS: dict[str, Callable[..., Any]] = {"uniform": tune.uniform, "loguniform": tune.loguniform,
                                         "grid_search": lambda values: tune.grid_search(list(values))}


@dataclass(frozen=True)
class AshaSettings:
    """How the sweep draws its trials and how ASHA judges them (times in training steps)."""

    samples: int = 1  # Tune's num_samples: draws of the ranges, each one over the whole grid of lists
    reduction_factor: float = 3.0  # at each rung ASHA lets the best 1/reduction_factor of the trials go on
    grace_steps: int = 0  # the first rung (0: max_steps / reduction_factor**2)
    concurrent: int = 0  # trials at once (0: as many as the executor runs jobs at once)
    seed: int = 0  # seeds the draws: the same command draws the same specs, and finds their runs


@dataclass(frozen=True)
class _Trial:
    """What every trial needs besides its config (it travels to the trial's process, so: plain values)."""

    base: dict[str, Any]  # the spec's fixed fields
    store_root: str
    executor: str
    autostart: bool
    group: str
    poll_s: float


def follow(config: dict[str, Any], trial: _Trial) -> None:
    """One trial (a Tune function trainable): submit its run, report each validation evaluation as it lands
    in the store, then the run's own result. A trial ASHA stops ends inside ``tune.report``."""
    store = open_store(trial.store_root)
    executor = executor_for(store, kind=trial.executor, autostart=trial.autostart)
    key = executor.submit(make_spec(**{**trial.base, **config}), priority="sweep", group=trial.group).key
    total = reported = 0
    for event in store.follow(key, poll_s=trial.poll_s):
        if event["type"] == START:
            total = int(event.get("total_steps") or 0)
        # A resumed run's stream holds its earlier attempts' evaluations too: ASHA's time may only grow.
        elif event["type"] == EVAL and event.get("split", "validation") == "validation" and event["step"] > reported:
            reported = int(event["step"])
            tune.report({STEP: reported, METRIC: float(event["value"]), "metric": event.get("metric", ""),
                         "key": key, "total_steps": total})
    record = store.record(key)
    if record.status in ("failed", "dead") or not record.result:
        raise LabError(f"run {key} ended {record.status}: {record.error or 'without a result'} "
                       f"(its log: python -m labcore status {key[:12]})")
    result = RunRecord.from_dict(record.result)
    tune.report({STEP: max(reported, result.steps_done), METRIC: result.validation.get(result.metric, math.nan),
                 "metric": result.metric, "key": key, "total_steps": result.total_steps or total,
                 "ended": record.status})


def stop_early(store: Store, key: str, step: int, value: float, metric: str) -> bool:
    """Cancel a run ASHA stopped, saying why in its log: at its next step it checkpoints and ends
    ``cancelled``. False when the run had ended already (nothing to stop; the store leaves it as it was)."""
    if not stopped_early(store.cancel(key, STOPPED_BY)):
        return False
    message = (f"stopped early by ASHA at step {step}: validation {metric} {value:.4f} was below the cut of the "
               f"trials compared at that rung")
    store.append_events(key, [LogEvent(source="tune", message=message, stopped_at=step, t=time.time()).to_dict()])
    return True


def stopped_early(record: JobRecord) -> bool:
    """Whether ASHA stopped this run: it ended ``cancelled`` by ASHA, or will at its next step (the store says
    so; Tune keeps its scheduler's state to itself). A run that reached its end first is not."""
    return record.cancelled_by == STOPPED_BY and record.status in ("cancelled", *ACTIVE)


class StoreAsha(AsyncHyperBandScheduler):
    """ASHA, its early stops carried out in the lab's store (the run of a stopped trial is cancelled)."""

    def __init__(self, store_root: str, **asha: Any) -> None:
        super().__init__(**asha)
        self.store_root = store_root

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision = super().on_trial_result(tune_controller, trial, result)
        if decision != TrialScheduler.STOP:
            return decision
        if result.get("ended") or 0 < result.get("total_steps", 0) <= result[STEP]:
            # The run trained every step it had (or ended by itself): stopping saves nothing, and its trial
            # goes on to report the run's own result.
            return TrialScheduler.CONTINUE
        if not stop_early(open_store(self.store_root), result["key"], result[STEP], result[METRIC], result["metric"]):
            return TrialScheduler.CONTINUE  # its run ended before its trial reported this far: nothing to stop
        return decision


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _value(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


class _Progress(tune.Callback):
    """A line on stderr as each trial starts and as its run ends or is stopped. (Tune runs a copy of its
    callbacks, so this one keeps nothing for anyone to read back: the store has the runs.)"""

    def __init__(self, base: dict[str, Any], searched: list[str], store_root: str) -> None:
        self.base, self.searched, self.store_root = base, searched, store_root

    def _describe(self, trial: Any) -> str:
        key = jobs.key_of(make_spec(**{**self.base, **trial.config}))
        return f"{key[:12]} ({', '.join(f'{k}={_value(trial.config[k])}' for k in self.searched)})"

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        _say(f"trial {self._describe(trial)}: started")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        last = trial.last_result or {}
        record = open_store(self.store_root).get(last["key"]) if "key" in last else None
        if record and stopped_early(record):
            what = f"stopped early by ASHA after its evaluation at step {last[STEP]:,}"
        elif last.get("ended"):
            what = f"{last['ended']} at step {last[STEP]:,}"
        else:
            what = "ended"
        value = f": validation {last.get('metric', '')} {last[METRIC]:.4f}" if METRIC in last else ""
        _say(f"trial {self._describe(trial)}: {what}{value}")


@dataclass(frozen=True)
class TuneOutcome:
    """What a sweep did: Tune's results, ASHA's stops, and the runs in the store."""

    name: str  # the store group of the trials' runs, and Tune's experiment name
    experiment: Path  # Tune's files
    scheduler: StoreAsha  # the scheduler given to Tune (Tune runs a copy of it: its state is not in here)
    searched: dict[str, tuple[Any, ...]]
    grid: Any  # Tune's ResultGrid
    records: list[JobRecord]  # the trials' runs in the store, in submission order
    best: dict[str, Any] | None  # the best run trained to its last step: key, config, validation, metric
    wall_s: float


def tune_runs(base: RunSpec, searched: dict[str, tuple[Any, ...]], *, store: Store,
              settings: AshaSettings = AshaSettings(), name: str = "", executor: str | None = None,
              autostart: bool = True, address: str | None = None, storage: Path | None = None) -> TuneOutcome:
    """Sweep ``searched`` (Tune's words: ``("loguniform", low, high)``, ``("uniform", low, high)``,
    ``("grid_search", values)``, as :func:`labcore.cli.args.search_from_args` gives them) over ``base``
    with ASHA; each trial's run goes to the ``executor`` (default: ``TRANSFERLAB_EXECUTOR``'s) on ``store``.
    """
    started = time.time()
    max_t, grace = _rungs(base, searched, settings)
    name = name or f"tune-{dt.datetime.now():%Y%m%d-%H%M%S}"
    storage = Path(storage or paths.cache_dir() / "tune")
    kind = executor_kind(executor)
    lab = executor_for(store, kind=kind, autostart=autostart)
    held = store.workers_held()
    if held:
        raise LabError(f"the workers were stopped (by {held.get('who') or 'someone'}), so no trial's run would "
                       f"start; start them again (the teacher's controls on the Runs page), then tune")
    if autostart:
        lab.ensure_workers()
    slots = settings.concurrent or lab.slots(jobs.new_job(base).resources)
    owns = ray_pump.connect(os.environ.get("RAY_ADDRESS", "") if address is None else address,
                            temp_dir=f"{ray_pump.RaySettings.temp_dir}-tune", local_cpus=1)
    try:
        resources: dict[str, float] = {"cpu": TRIAL_CPUS}
        here = f"node:{ray.util.get_node_ip_address()}"
        if here in ray.cluster_resources():  # the store's database is read on this machine
            resources[here] = TRIAL_CPUS
        fixed = base.to_dict()
        trial = _Trial(base=fixed, store_root=str(store.root), executor=kind, autostart=autostart, group=name,
                       poll_s=store.settings.poll_every_s)
        scheduler = StoreAsha(str(store.root), time_attr=STEP, max_t=max_t, grace_period=grace,
                              reduction_factor=settings.reduction_factor, stop_last_trials=False)
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(follow, trial=trial), resources),
            param_space={field: DOMAINS[how](*rest) for field, (how, *rest) in searched.items()},
            tune_config=tune.TuneConfig(metric=METRIC, mode="max", scheduler=scheduler, num_samples=settings.samples,
                                        reuse_actors=True,
                                        search_alg=BasicVariantGenerator(max_concurrent=max(1, slots),
                                                                         random_state=settings.seed)),
            run_config=tune.RunConfig(name=name, storage_path=str(storage), verbose=0,
                                      callbacks=[_Progress(fixed, list(searched), str(store.root))]))
        _say(f"tune {name}: ASHA over {', '.join(searched)}, {max_t:,} steps a trial, first rung at step {grace:,}, "
             f"reduction factor {settings.reduction_factor:g}; {max(1, slots)} trial(s) at once")
        try:
            grid = tuner.fit()
        finally:
            _settle(store, name)
    finally:
        if owns:
            ray.shutdown()
    records = store.jobs(group=name)
    return TuneOutcome(name=name, experiment=storage / name, scheduler=scheduler, searched=searched, grid=grid,
                       records=records, best=_best(grid), wall_s=time.time() - started)


def _rungs(base: RunSpec, searched: dict[str, tuple[Any, ...]], settings: AshaSettings) -> tuple[int, int]:
    """ASHA's horizon and first rung in steps, after checking the sweep makes sense."""
    if not searched:
        raise LabError("nothing to tune: give a range (--lr 1e-5:1e-3:log) or a list (--warmup-ratio 0,0.06,0.1)")
    if "max_steps" in searched:
        raise LabError("--max-steps is ASHA's time axis: give it one value, not a range or a list")
    if settings.samples < 1:
        raise LabError(f"--samples must be at least 1, got {settings.samples}")
    if settings.samples > 1 and all(how == "grid_search" for how, *_ in searched.values()):
        raise LabError(f"with lists only, --samples {settings.samples} would run every spec {settings.samples} "
                       f"times over (one run each: the same key); drop --samples or give a range LOW:HIGH")
    if settings.reduction_factor <= 1:
        raise LabError(f"--reduction-factor must be above 1, got {settings.reduction_factor:g}")
    max_t = resolve_run(base).max_steps
    if not max_t:
        raise LabError("tune needs --max-steps N: ASHA compares the trials at training steps, so every trial "
                       "must plan the same number of them")
    grace = settings.grace_steps or max(1, int(max_t / settings.reduction_factor ** 2))
    if not 0 < grace <= max_t:
        raise LabError(f"--grace-steps must be from 1 to --max-steps ({max_t:,}), got {grace:,}")
    return max_t, grace


def _settle(store: Store, name: str) -> None:
    """After Tune: cancel the runs no trial follows any more (the sweep was interrupted, a trial failed), then
    wait until every run of the sweep has ended, so their records are final. (A stopped run checkpoints, then
    tests its best checkpoint on validation and test: on a busy CPU that takes a minute or more.)"""
    keys = store.group(name)["keys"]
    for key in keys:
        record = store.get(key)
        if record is not None and record.active and not record.cancel_requested:
            store.cancel(key, "Ray Tune (the sweep ended before this trial did)")
    deadline = time.time() + SETTLE_S
    while time.time() < deadline and any((r := store.get(k)) is not None and r.active for k in keys):
        time.sleep(store.settings.poll_every_s)


def _best(grid: Any) -> dict[str, Any] | None:
    """The trial whose run trained to its end with the best validation (its best checkpoint's); a trial ASHA
    stopped is no candidate: its figure is of a run cut short."""
    finished = [r for r in grid if r.metrics and r.metrics.get("ended") == "done" and not math.isnan(r.metrics[METRIC])]
    if not finished:
        return None
    top = max(finished, key=lambda r: r.metrics[METRIC])
    return {"key": top.metrics["key"], "config": dict(top.config), "validation": top.metrics[METRIC],
            "metric": top.metrics["metric"]}


# ---------------------------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Savings:
    """What ASHA's early stops spared: counts, steps and training seconds at each stopped run's speed."""

    trials: int
    done: int
    stopped: int
    steps_planned: int
    steps_trained: int
    saved_s: float  # the steps stopped runs did not train, times each one's own measured seconds a step

    @property
    def steps_saved(self) -> int:
        return self.steps_planned - self.steps_trained


def savings(records: list[JobRecord]) -> Savings:
    """Pure: the figures of a sweep's run records."""
    ended = [(record, RunRecord.from_dict(record.result)) for record in records if record.result]
    saved_s = sum((result.total_steps - result.steps_done) * result.spec["batch_size"] / result.samples_per_s
                  for record, result in ended if stopped_early(record) and result.samples_per_s > 0)
    return Savings(trials=len(records), done=sum(r.status == "done" for r in records),
                   stopped=sum(stopped_early(r) for r in records),
                   steps_planned=sum(result.total_steps for _, result in ended),
                   steps_trained=sum(result.steps_done for _, result in ended), saved_s=saved_s)


def trial_rows(outcome: TuneOutcome) -> list[dict[str, Any]]:
    """Pure: one row per trial's run: its searched values, how it ended, its steps and best validation."""
    rows = []
    for record in outcome.records:
        result = RunRecord.from_dict(record.result) if record.result else None
        ended = ("stopped early by ASHA" if stopped_early(record) else
                 f"cancelled by {record.cancelled_by or 'the command line'}"
                 if record.status == "cancelled" and record.cancelled_by is not None else record.status)
        row = {"key": record.key[:12], **{k: record.spec.get(k) for k in outcome.searched}, "ended": ended}
        if result is not None:
            row.update(steps=f"{result.steps_done:,}/{result.total_steps:,}",
                       validation=result.validation.get(result.metric), test=result.test_value
                       if record.status == "done" else None)
        rows.append(row)
    return rows
