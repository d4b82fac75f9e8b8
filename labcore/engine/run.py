"""Orchestration of one RunSpec: data -> mapping -> model -> protocol -> train -> evaluate -> record.

`iter_run` is a generator of JSON-able events (:mod:`labcore.events`) whose last is always a ``result``
with the run's record.
It knows nothing of stores: the CLI prints the events, the worker streams them into the run store.
Bad input raises :class:`labcore.errors.LabError` before any training starts.

What is built before the first step (:class:`labcore.engine.prepared.Prepared`) and a finished run's saved
weights (:func:`labcore.engine.prepared.load_trained`) live in labcore.engine.prepared; their names are importable
from here too.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generator, Iterator

from labcore.machine import cores
from labcore.machine import device as devices
from labcore.events import EVAL, RESULT, TRAIN_END, EvalEvent, LogEvent, ResultEvent, StartEvent, TrainEndEvent
from labcore.engine.evaluate import correct_examples, counted_labels, evaluate_logits, predict, predict_head, test_size
from labcore.engine.prepared import (  # noqa: F401  (BEST_WEIGHTS, load_trained: re-exported for callers)
    BEST_WEIGHTS, CommitFn, Prepared, load_trained, save_trained, write_text_file)
from labcore.results.record import RunRecord, pack_correct
from labcore.engine.resolve import resolve_spec
from labcore.runspec import RunSpec
from labcore.runspec.resolved import ResolvedSpec

StopFn = Callable[[], "str | None"]
STAGE_SUMMARY = "stage.json"  # what the protocol's stage before training measured, for a resumed attempt


def _versions() -> dict[str, str]:
    import torch
    import transformers

    import labcore

    # str(): torch.__version__ is a TorchVersion, which would drag torch into any reader of the record.
    return {"python": platform.python_version(), "torch": str(torch.__version__),
            "transformers": str(transformers.__version__), "labcore": labcore.__version__}


def device_kernels(model, device: str) -> list[str]:
    """Give a lab model the training kernels that suit the device (see :mod:`labcore.models.cpu_kernels`)."""
    from labcore.models.cpu_kernels import kernels_for

    return kernels_for(model.backbone, device)


def train_config(resolved: ResolvedSpec, *, loss: str, precision: str, device: str, checkpoint_every: int = 0):
    """The training loop's configuration from a resolved spec (``precision`` already resolved)."""
    import dataclasses

    from labcore.runspec import TrainParams
    from labcore.engine.train import TrainConfig

    params = {f.name: getattr(resolved, f.name) for f in dataclasses.fields(TrainParams)}
    return TrainConfig(**params, seed=resolved.seed, loss=loss, precision=precision, device=device,
                       checkpoint_every=checkpoint_every, graphs=resolved.step == "graphs")


@dataclass
class _Fit:
    """What preparing hands to training and measuring: the model on its device and how to run it."""

    prepared: Prepared
    device: str
    precision: str
    cfg: Any  # labcore.engine.train.TrainConfig
    notes: list[str]
    params_total: int
    params_trainable: int
    trained_module: Any = None  # the module the optimiser trains (the model, or its head alone)
    forward: Callable[[Any], Any] | None = None  # batch -> logits
    train_data: Any = None
    predict: Callable[[str], Any] | None = None  # split name -> logits
    threads: list[list[int]] = field(default_factory=list)  # [[from step, CPU threads], ...]; empty off CPU
    threads_requested: int = 0
    deterministic: bool = False
    stage: dict[str, Any] = field(default_factory=dict)  # the protocol stage's summary (RunRecord.stage)
    compile_notes: list[str] = field(default_factory=list)
    features_only: bool = False  # the head alone trains, on features computed once (FPT's output-only)


def _log(message: str) -> dict[str, Any]:
    return LogEvent(message=message).to_dict()


def _prepare(resolved: ResolvedSpec, *, device: str, threads: int, checkpoint_every: int, workdir: Path | None = None,
             resume: bool = False, should_stop: StopFn = lambda: None,
             commit_file: CommitFn = os.replace) -> Iterator[dict[str, Any]]:
    """Data, mapping, model, protocol, device and threads, then the protocol's stage before training where it
    has one; yields log (and stage) events, returns a :class:`_Fit`."""
    import torch

    cpu_before = cores.sample()  # what other processes do while this run prepares decides its threads
    progress_events: list[dict[str, Any]] = []

    def progress(message: str) -> None:
        # Preparing can take minutes (a first music build); the events only go out once it is done, so
        # each message is also written to stderr at once, where the worker's run log picks it up live.
        progress_events.append(LogEvent(message=message, phase="prepare").to_dict())
        print(message, file=sys.stderr, flush=True)

    prepared = Prepared(resolved, progress=progress)
    yield from progress_events
    report = prepared.apply_protocol()
    notes = list(prepared.notes) + list(report.notes)
    for note in report.notes:
        yield _log(note)
    model = prepared.model
    # once, on the host, before anything runs the model (a protocol's stage, features, training): on a GPU the
    # adapters' forward reads no index back
    model.check_ids(prepared.splits.values())
    model.to(device)
    device_notes = []
    # Per run, not per process: a worker runs deterministic and ordinary specs one after another.
    torch.use_deterministic_algorithms(resolved.deterministic, warn_only=True)
    used_threads = 0
    if device == "cpu" and resolved.deterministic:
        used_threads = cores.DETERMINISTIC_THREADS
        torch.set_num_threads(used_threads)
        device_notes.append(f"deterministic: trained on {used_threads} CPU thread{'s' if used_threads > 1 else ''} "
                            f"throughout, with torch's deterministic algorithms, so a rerun gives the same weights")
    elif device == "cpu":
        used_threads, busy = cores.choose_threads(threads, cpu_before)
        torch.set_num_threads(used_threads)
        device_notes.append(cores.thread_note(used_threads, threads, busy))
    elif resolved.deterministic:
        device_notes.append("deterministic: torch's deterministic algorithms on")
    precision = devices.resolve_precision(resolved.precision, device)
    device_notes += devices.precision_notes(resolved.precision, precision, device)
    for note in device_notes + devices.setup(device, precision) + device_kernels(model, device):
        notes.append(note)
        yield _log(note)
    stage = yield from _protocol_stage(prepared, device=device, workdir=workdir, resume=resume,
                                       should_stop=should_stop, commit_file=commit_file)
    notes.extend(stage.get("notes", []))
    loss_kind = {"class": "ce", "multilabel": "bce", "regression": "mse"}[prepared.info.output_kind]
    fit = _Fit(prepared=prepared, device=device, precision=precision, stage=stage,
               cfg=train_config(resolved, loss=loss_kind, precision=precision, device=device,
                                checkpoint_every=checkpoint_every),
               notes=notes,
               params_total=sum(p.numel() for p in model.parameters()),
               params_trainable=sum(p.numel() for p in model.parameters() if p.requires_grad),
               threads=[[0, used_threads]] if used_threads else [], threads_requested=threads,
               deterministic=resolved.deterministic)
    if report.features_only:
        fit.features_only = True
        yield _log("computing features once for output-only training")
        _features_target(fit)
    else:
        _model_target(fit)
    for note in budget_notes(fit.cfg, len(fit.train_data)) + fit.compile_notes:
        fit.notes.append(note)
        yield _log(note)
    return fit


def _protocol_stage(prepared: Prepared, *, device: str, workdir: Path | None, resume: bool, should_stop: StopFn,
                    commit_file: CommitFn) -> Iterator[dict[str, Any]]:
    """The protocol's stage before training (ORCA's alignment), if it declares one; returns its summary.

    A resumed attempt whose folder holds both the stage's summary and a resume checkpoint skips the stage:
    the checkpoint holds every weight the stage trained (the loop restores them), so running it again
    would only be overwritten."""
    from labcore import protocols
    from labcore.engine.train import RESUME_FILE

    spec = prepared.spec
    protocol = protocols.PROTOCOLS[spec.protocol]
    if protocol.stage is None:
        return {}
    saved = workdir / STAGE_SUMMARY if workdir is not None else None
    if resume and saved is not None and saved.is_file() and (workdir / RESUME_FILE).is_file():
        summary = json.loads(saved.read_text())
        yield _log(f"the {summary.get('name', 'protocol')} stage ran in an earlier attempt; its weights come "
                   f"back with the resume checkpoint")
        return summary
    params = protocols.parse_protocol_params(spec.protocol, dict(spec.protocol_params))
    run = protocols.StageInput(model=prepared.model, spec=spec, splits=prepared.splits, info=prepared.info,
                               tokenizer=prepared.tokenizer, device=device, should_stop=should_stop)
    summary = yield from protocol.stage(run, params)
    if saved is not None:
        write_text_file(saved, json.dumps(summary), commit_file)
    return summary


def budget_notes(cfg, n_train: int) -> list[str]:
    """What the budget's floors changed for this data (more epochs, more evaluations), for the notes."""
    out = []
    per_epoch = max(1, math.ceil(n_train / cfg.batch_size))
    if cfg.min_steps and cfg.total_steps(n_train) > math.ceil(per_epoch * cfg.epochs) and \
            (not cfg.max_steps or cfg.total_steps(n_train) < cfg.max_steps):
        out.append(f"{cfg.epochs_run(n_train):.1f} epochs instead of {cfg.epochs:g}: {n_train:,} training examples "
                   f"give {per_epoch:,} steps an epoch, and the budget trains at least {cfg.min_steps:,} steps")
    every = cfg.evaluate_every(n_train)
    asked = cfg.eval_every if cfg.eval_every > 0 else per_epoch
    if every < asked:
        out.append(f"validation every {every:,} steps instead of {asked:,}, so the run evaluates at least "
                   f"{cfg.min_evals} times")
    return out


def _model_target(fit: _Fit) -> None:
    """Train and predict with the whole model."""
    model, splits = fit.prepared.model, fit.prepared.splits
    fit.trained_module = model
    trained, fit.compile_notes = devices.maybe_compile(model)  # in place: predictions run the compiled blocks too
    fit.forward = lambda batch: trained(batch.inputs, batch.mask)
    fit.predict = lambda split: predict(model, splits[split], fit.cfg.eval_batch_size, fit.device, fit.precision)
    fit.train_data = splits["train"]


def _features_target(fit: _Fit) -> None:
    """FPT §3.9: the frozen body's features are computed once; only the head trains on them."""
    from labcore.data.encode import Encoded

    model, splits = fit.prepared.model, fit.prepared.splits
    feats = {name: Encoded([f.numpy()[None, :] for f in predict(model, s, fit.cfg.eval_batch_size, fit.device, fit.precision,
                                                                 features=True)], s.labels, s.groups)
             for name, s in splits.items()}
    fit.trained_module = model.head
    fit.forward = lambda batch: model.head(batch.inputs[:, 0, :])
    fit.predict = lambda split: predict_head(model.head, feats[split], fit.cfg.eval_batch_size, fit.device)
    fit.train_data = feats["train"]


def _train(fit: _Fit, *, workdir: Path | None, should_stop: StopFn, resume: bool,
           commit_file: CommitFn) -> Generator[dict[str, Any], None, TrainEnd]:
    """The training loop's events (evaluations tagged with the metric); returns how it ended."""
    from labcore.engine.train import train

    info, splits = fit.prepared.info, fit.prepared.splits

    def evaluate() -> dict[str, float]:
        result = evaluate_logits(fit.predict("validation"), splits["validation"], info)
        return {"value": result[info.metric], "loss": result["loss"]}

    between_steps = None
    if fit.threads and not fit.deterministic:
        import torch

        governor = cores.ThreadGovernor(fit.threads_requested, fit.threads[-1][1])

        def between_steps(step: int) -> dict[str, Any] | None:
            change = governor.check()
            if change is None:
                return None
            count, busy = change
            torch.set_num_threads(count)
            fit.threads.append([step, count])
            return _log(f"step {step:,}: now {count} CPU thread{'s' if count > 1 else ''} (other processes kept "
                        f"{busy:.1f} cores busy in the last {governor.interval_s:.0f} s)")

    end: TrainEndEvent | None = None
    machine_before = cores.sample()  # what other processes do while it trains qualifies its speed
    for event in train(fit.trained_module, fit.forward, fit.train_data, fit.cfg, evaluate=evaluate,
                       workdir=workdir, should_stop=should_stop, resume=resume, commit_file=commit_file,
                       between_steps=between_steps):
        kind = event["type"]
        if kind == TRAIN_END:
            end = TrainEndEvent.from_dict(event)
        else:
            if kind == EVAL:
                event = replace(EvalEvent.from_dict(event), metric=info.metric).to_dict()
            yield event
    assert end is not None, "the training loop always ends with a train_end event"
    machine_after = cores.sample()
    busy = -1.0  # unknown where /proc cannot be read
    if machine_before is not None and machine_after is not None:
        busy = round(cores.busy_elsewhere(machine_before, machine_after), 3)
    return TrainEnd(end, busy)


@dataclass(frozen=True)
class TrainEnd:
    """How training ended (the loop's last event) and how many cores other processes kept busy meanwhile."""

    event: TrainEndEvent
    busy_cores: float


def _record(fit: _Fit, resolved: ResolvedSpec, ended: TrainEnd, *, workdir: Path | None,
            started: float, commit_file: CommitFn) -> RunRecord:
    """Measure the best checkpoint on validation and test, save it, and write the run's record."""
    end = ended.event
    from labcore.results import metrics
    from labcore.engine.train import steps_to_converge, summarize_losses

    prepared, info, splits = fit.prepared, fit.prepared.info, fit.prepared.splits
    val_metrics = evaluate_logits(fit.predict("validation"), splits["validation"], info)
    test_logits = fit.predict("test")
    test_metrics = evaluate_logits(test_logits, splits["test"], info)
    correct = correct_examples(test_logits, splits["test"], info)
    baseline: dict[str, float] = {}
    if info.output_kind == "class":
        # In the unit the test metric counts: where windows vote, always answering the training records'
        # most frequent class scores the share of test records of it, not of test windows.
        baseline["majority"] = float(metrics.majority_baseline(counted_labels(splits["train"], info),
                                                               counted_labels(splits["test"], info)))
    if workdir is not None:
        save_trained(prepared.model, workdir, commit_file)
        if prepared.mapping is not None:  # the exact table this run used, for the mapping page
            write_text_file(workdir / "mapping.json", prepared.mapping.to_json(), commit_file)
    train_tokens = float(splits["train"].lengths().mean()) if len(splits["train"]) else 0.0
    return RunRecord(
        key=resolved.key, spec=resolved.to_dict(), status=end.status, metric=info.metric,
        validation=val_metrics, test=test_metrics, baseline=baseline, best_step=end.best_step,
        steps_done=end.steps_done, total_steps=end.total_steps,
        steps_to_converge=steps_to_converge(end.val_curve),
        train_loss=[list(p) for p in summarize_losses(end.losses)],
        val_curve=[list(p) for p in end.val_curve], wall_time_s=time.perf_counter() - started,
        samples_per_s=end.samples_per_s, **_speed(fit, end, train_tokens),
        params_total=fit.params_total, params_trainable=fit.params_trainable, train_examples=len(fit.train_data),
        train_tokens=train_tokens,
        device=fit.device, precision=fit.precision, pooling=prepared.model.pooling, versions=_versions(),
        notes=fit.notes + ([cores.history_note(fit.threads)] if len(fit.threads) > 1 else [])
        + ([end.step_note] if end.step_note else []),
        error=end.error or "", threads=[list(t) for t in fit.threads], busy_cores=ended.busy_cores,
        stage=fit.stage, test_correct=pack_correct(correct) if correct is not None else "",
        **test_size(splits["test"], info))


def _speed(fit: _Fit, end: TrainEndEvent, mean_tokens: float) -> dict[str, Any]:
    """The record's device and speed fields (:func:`labcore.machine.device.speed_fields`) and the loop's host reads.

    The FLOPs a token are counted on the eager model as it computes (:func:`labcore.engine.flops.flops_per_token`):
    the pooled-row last block, frozen weights' missing gradients and the head's one row a sequence included."""
    from labcore.engine import flops as counting

    if fit.features_only:  # the head trains on one cached feature row per example, not on its tokens
        flops = devices.module_flops_per_token(fit.trained_module, 1.0) / max(mean_tokens, 1.0)
    else:
        model = fit.prepared.model
        flops = counting.flops_per_token(model, lambda b: model(b.inputs, b.mask), fit.train_data, fit.device)
    return {**devices.speed_fields(fit.device, fit.precision, end.samples_per_s * mean_tokens, flops),
            "host_reads": end.host_reads}


def iter_run(spec: ResolvedSpec | RunSpec, *, workdir: Path | None = None, should_stop: StopFn = lambda: None,
             resume: bool = False, checkpoint_every: int = 0, device: str | None = None,
             threads: int | None = None, commit_file: CommitFn = os.replace) -> Iterator[dict[str, Any]]:
    """Run one spec: prepare -> protocol -> fit -> evaluate -> record. Yields events; the last is
    a ``result`` whose ``record`` is the RunRecord's dict. Files go into place through ``commit_file``.

    The worker, the CLI, a sweep and the API hand it a resolved spec, which it trains as it is; a bare RunSpec
    (a script's or a test's) enters here, so it is resolved here, once, for where this process submits to."""
    import torch
    import transformers

    started = time.perf_counter()
    transformers.utils.logging.disable_progress_bar()  # events report progress; bars only flood logs
    requested_threads = threads or os.cpu_count() or 1
    torch.set_num_threads(requested_threads)
    device = device or devices.choose_device()
    resolved = spec if isinstance(spec, ResolvedSpec) else resolve_spec(spec)
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    fit = yield from _prepare(resolved, device=device, threads=requested_threads,
                              checkpoint_every=checkpoint_every, workdir=workdir, resume=resume,
                              should_stop=should_stop, commit_file=commit_file)
    yield StartEvent(key=resolved.key, total_steps=fit.cfg.total_steps(len(fit.train_data)),
                     params_total=fit.params_total, params_trainable=fit.params_trainable, device=device,
                     device_name=devices.describe(device),
                     precision=fit.precision, train_examples=len(fit.train_data)).to_dict()
    ended = yield from _train(fit, workdir=workdir, should_stop=should_stop, resume=resume, commit_file=commit_file)
    record = _record(fit, resolved, ended, workdir=workdir, started=started, commit_file=commit_file)
    yield ResultEvent(status=record.status, record=record.to_dict()).to_dict()


def warm_up() -> None:
    """Import what every run needs, so a worker's first run starts at once."""
    import torch  # noqa: F401
    import transformers  # noqa: F401
    # Every model file imports these on first use (about 2 s, mostly transformers' kernel integrations).
    import transformers.activations  # noqa: F401
    import transformers.modeling_utils  # noqa: F401

    from labcore import models, protocols
    from labcore.engine import train  # noqa: F401


def run(spec: ResolvedSpec | RunSpec, **kwargs: Any) -> RunRecord:
    """Run to the end and return the record (the events are dropped)."""
    record = None
    for event in iter_run(spec, **kwargs):
        if event["type"] == RESULT:
            record = RunRecord.from_dict(ResultEvent.from_dict(event).record)
    assert record is not None
    return record
