"""The training loop: a generator of JSON-able events that knows nothing of stores or pages.

Whoever iterates it decides where events go: the CLI prints them, the worker appends them to the run
store. The loop keeps the best-on-validation weights (Kao & Lee appendix A: choose the checkpoint on
validation, then test it), stops on a NaN/inf loss with status ``diverged`` and keeps what it had, writes
resume checkpoints (trainable weights, optimizer, scheduler, RNG, curves) and honours a stop request
once per step.

Events (as dicts: the ``to_dict()`` of :mod:`labcore.events`' dataclasses): ``step``, ``eval``,
``checkpoint``, ``log`` and finally ``train_end``, which stays with the caller.

No host sync per step where it costs (CUDA): each step's loss stays on the device, and the losses are read
together every :attr:`TrainConfig.read_every` steps (1 on a CPU, 25 on CUDA), before every evaluation,
checkpoint and stop, and at the end. A step event then stands for the ``steps`` steps since the last one and
carries their mean loss; the record's loss curve keeps every step's value. A non-finite loss is found at the
read, and the run ends ``diverged`` naming the first step whose loss was not finite.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from labcore.machine import device as devices
from labcore.data.encode import Batch, Encoded, iterate
from labcore.engine.step import OPTIMIZERS, GraphedStep, StepParts, build_optimizer, take_step  # noqa: F401
from labcore.durable import CommitFn, write_file
from labcore.events import CheckpointEvent, EvalEvent, LogEvent, StepEvent, TrainEndEvent
from labcore.runspec import TrainParams

StopFn = Callable[[], "str | None"]
ForwardFn = Callable[[Batch], torch.Tensor]
EvaluateFn = Callable[[], dict[str, float]]  # -> {"value": metric, "loss": loss}

CONVERGE_TOLERANCE = 0.01
RESUME_FILE = "resume.pt"  # the loop's resume checkpoint in a run's folder
CAPTURE_COMPILED = False  # capture models with compiled blocks in CUDA graphs too (off: see TrainingLoop)


# The smallest evaluation batch, in examples. Evaluation holds no gradients or optimizer state, so its
# batches are twice the training batch (:attr:`TrainConfig.eval_batch_size`), never fewer than this.
EVAL_BATCH_MIN = 32


@dataclass(frozen=True)
class TrainConfig(TrainParams):
    """The training hyper-parameters (:class:`labcore.runspec.TrainParams`) and what the run decides."""

    seed: int
    loss: str  # "ce" | "bce" | "mse" | "given" (the forward returns its own loss: MLM pretraining)
    precision: str  # "bf16" | "fp32" (already resolved)
    device: str = "cpu"
    checkpoint_every: int = 0  # steps between resume checkpoints (0: only when stopped)
    # steps between host reads of the training loss (0: the device's own, labcore.machine.device.LOSS_EVERY): each
    # read waits for the device, so on CUDA the losses stay there and a step event covers an interval
    loss_every: int = 0
    # the graph-ready step (labcore.engine.step): batches padded to length buckets, the learning rate on the
    # device; on CUDA replayed from CUDA graphs. Off: the eager step, as on a CPU
    graphs: bool = False

    @property
    def read_every(self) -> int:
        """Steps between host reads of the loss (:attr:`loss_every`, else the device's own)."""
        return self.loss_every if self.loss_every > 0 else devices.loss_every(self.device)

    @property
    def eval_batch_size(self) -> int:
        """Examples per batch when evaluating or predicting."""
        return max(EVAL_BATCH_MIN, 2 * self.batch_size)


def loss_fn(kind: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if kind == "ce":
        return torch.nn.functional.cross_entropy
    if kind == "bce":
        return torch.nn.functional.binary_cross_entropy_with_logits
    if kind == "given":  # the forward computed the loss itself (its targets are not the batch's labels)
        return lambda loss, _labels: loss
    return lambda logits, target: torch.nn.functional.mse_loss(logits.squeeze(-1), target)


def steps_to_converge(curve: list[tuple[int, float]], tolerance: float = CONVERGE_TOLERANCE) -> int | None:
    """Steps to converge: the first evaluation step whose validation metric is within `tolerance`
    (absolute, 0.01 by default: one point of accuracy) of the best value the run ever reached.

    Relative to the run's own best, so a run that plateaus early at a poor value converges early:
    read it beside the metric (FPT table 6 reports both)."""
    if not curve:
        return None
    best = max(v for _, v in curve)
    for step, value in curve:
        if value >= best - tolerance:
            return step
    return None


def make_optimizer(cfg: TrainConfig, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """The run's optimiser (:func:`labcore.engine.step.build_optimizer`); for graphs, its rate on the device."""
    return build_optimizer(cfg.optimizer, params, cfg.lr, cfg.weight_decay, device_lr=cfg.graphs)


def _schedule(cfg: TrainConfig, total: int) -> Callable[[int], float]:
    warmup = int(round(cfg.warmup_ratio * total))

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if cfg.schedule == "constant":
            return 1.0
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # dropout on a GPU draws from its generators
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


@dataclass
class LoopState:
    """Everything the loop carries from step to step; a resume checkpoint is this plus the parameters,
    optimiser, scheduler and RNG (same names in the file, so a checkpoint stays readable)."""

    best_state: dict[str, torch.Tensor]  # the best-on-validation trainable parameters by name
    step: int = 0
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, training loss)
    val_curve: list[tuple[int, float]] = field(default_factory=list)  # (step, validation metric)
    best_value: float = -math.inf
    best_step: int = 0
    bad_evals: int = 0  # evaluations since the last improvement (early stopping)
    seen: int = 0  # training examples processed
    train_time: float = 0.0  # seconds spent in steps (speed excludes evaluation and preparing)

    def to_checkpoint(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any]) -> "LoopState":
        return cls(**{f.name: state[f.name] for f in fields(cls)})

    def record_eval(self, step: int, value: float, params: dict[str, torch.Tensor]) -> None:
        self.val_curve.append((step, value))
        if value > self.best_value:
            self.best_value, self.best_step, self.bad_evals = value, step, 0
            self.best_state = {n: p.detach().clone() for n, p in params.items()}
        else:
            self.bad_evals += 1


@dataclass(frozen=True)
class LoopHooks:
    """Where the loop meets its caller: ``evaluate()`` gives the validation metric (``{"value", "loss"}``);
    ``should_stop()`` a reason to stop, or None; ``commit_file(tmp, final)`` moves a written checkpoint into
    place (a worker's refuses once its attempt was superseded, and the loop then ends by that error);
    ``between_steps(step)`` runs after every step (the run re-checks its threads there) and may return an
    event to pass on."""

    evaluate: EvaluateFn
    should_stop: StopFn = lambda: None
    commit_file: CommitFn = os.replace
    between_steps: Callable[[int], dict[str, Any] | None] | None = None


class TrainingLoop:
    """One training run's loop, in named steps: :meth:`restore` (a resume checkpoint), :meth:`step` (one
    optimiser step), :meth:`evaluate`, :meth:`checkpoint`, :meth:`flush` (the pending losses read to the
    host) and :meth:`finish`; :meth:`run` strings them together as the module docstring describes. Built
    whole in ``__init__``: nothing is filled in later."""

    def __init__(self, module: torch.nn.Module, forward: ForwardFn, train_data: Encoded, cfg: TrainConfig,
                 hooks: LoopHooks, workdir: Path | None = None) -> None:
        torch.manual_seed(cfg.seed)
        self.module, self.forward, self.train_data, self.cfg, self.hooks = module, forward, train_data, cfg, hooks
        self.named = {n: p for n, p in module.named_parameters() if p.requires_grad}
        self.params = list(self.named.values())
        if not self.params:
            raise ValueError("nothing to train: the protocol froze every parameter")
        self.optimizer = make_optimizer(cfg, self.params)
        self.total = cfg.total_steps(len(train_data))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _schedule(cfg, self.total))
        self.criterion = loss_fn(cfg.loss)
        parts = StepParts(forward, self.criterion, self.params, self.optimizer, cfg.grad_clip, cfg.precision,
                          cfg.device)
        # Blocks compiled by torch.compile are not captured: with them, the first eager step after another model's
        # graphs failed in dropout's random-number bookkeeping (one H200, torch 2.11); they take the bucketed step.
        # (bench/gpu_compile.py's (f) sets CAPTURE_COMPILED to measure whether, and how, they capture.)
        compiled = any(getattr(m, "_compiled_call_impl", None) is not None for m in module.modules())
        self.graphed = (GraphedStep(parts, int(train_data.lengths().max()), capture=str(cfg.device).startswith(
                                    "cuda") and (CAPTURE_COMPILED or not compiled))
                        if cfg.graphs else None)
        self.take_step = self.graphed or (lambda batch: take_step(parts, batch))
        self.per_epoch = max(1, math.ceil(len(train_data) / cfg.batch_size))
        self.eval_every = cfg.evaluate_every(len(train_data))
        self.resume_path = workdir / RESUME_FILE if workdir else None
        self.st = LoopState(best_state={n: p.detach().clone() for n, p in self.named.items()})
        self.pending: list[torch.Tensor] = []  # this interval's step losses, still on the device
        self.reads = 0  # host reads of the loss (each one a sync on CUDA)

    # ------------------------------------------------------------------------------------ named steps
    def restore(self) -> Iterator[dict[str, Any]]:
        """Load the resume checkpoint, where there is one: weights, optimiser, scheduler, RNG, curves."""
        if not (self.resume_path and self.resume_path.is_file()):
            return
        # weights_only: tensors and plain containers only, so a checkpoint file can never run code.
        state = torch.load(self.resume_path, weights_only=True)
        with torch.no_grad():
            for n, p in self.named.items():
                p.copy_(state["params"][n])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"]["torch"])
        if "cuda" in state["rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self.st = LoopState.from_checkpoint(state)
        yield LogEvent(message=f"resumed from step {self.st.step}").to_dict()

    def step(self, batch: Batch) -> None:
        """One optimiser step; its loss stays on the device until :meth:`flush`."""
        st = self.st
        tick = time.perf_counter()
        loss = self.take_step(batch)
        self.scheduler.step()
        self.pending.append(loss)
        st.step += 1
        st.seen += len(batch.index)
        st.train_time += time.perf_counter() - tick

    def evaluate(self) -> dict[str, Any]:
        """Validate now; the eval event (the best weights are kept by :class:`LoopState`)."""
        self.module.eval()
        result = self.hooks.evaluate()
        self.module.train()
        self.st.record_eval(self.st.step, result["value"], self.named)
        return EvalEvent(step=self.st.step, split="validation", value=result["value"],
                         loss=result.get("loss")).to_dict()

    def checkpoint(self) -> Iterator[dict[str, Any]]:
        """Write the resume checkpoint (the event first: see below)."""
        assert self.resume_path is not None
        # The event goes out before the file is written: whoever streams the events has stored every step
        # up to this one by the time the checkpoint exists, so a resumed run's stream never has a gap. A
        # kill in between leaves the previous checkpoint, and the stream doubles back, which readers drop.
        yield CheckpointEvent(step=self.st.step, path=str(self.resume_path)).to_dict()
        state = {"params": {n: p.detach().clone() for n, p in self.named.items()},
                 "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "rng": _rng_state(), **self.st.to_checkpoint()}
        write_file(self.resume_path, lambda tmp: torch.save(state, tmp), self.hooks.commit_file)

    def finish(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Hand back the best weights (the caller tests those); the train_end event (``error``: why a
        diverged run ended)."""
        st = self.st
        with torch.no_grad():
            for n, p in self.named.items():
                p.copy_(st.best_state[n])
        return TrainEndEvent(status=status, best_step=st.best_step,
                             best_value=None if st.best_value == -math.inf else st.best_value, steps_done=st.step,
                             total_steps=self.total, losses=st.losses, val_curve=st.val_curve,
                             samples_per_s=self._samples_per_s(), host_reads=self.reads, error=error,
                             step_note=self.graphed.note() if self.graphed else None).to_dict()

    def flush(self) -> Iterator[dict[str, Any]]:
        """Read what is pending; yields its step event, or ends the run (``StopIteration`` value: ended)."""
        if not self.pending:
            return False
        event, error = self._read_losses()
        yield event
        if error is not None:
            yield self.finish("diverged", error)
            return True
        return False

    # ------------------------------------------------------------------------------------------ helpers
    def _samples_per_s(self) -> float:
        return self.st.seen / self.st.train_time if self.st.train_time > 0 else 0.0

    def _read_losses(self) -> tuple[dict[str, Any], str | None]:
        """Read the interval's losses to the host (one transfer); the step event for them and None, or for a
        diverged run the log event and error that end it. Timed as training: on CUDA the read waits for the
        interval's queued steps."""
        st = self.st
        tick = time.perf_counter()
        values = torch.stack(self.pending).float().cpu().tolist()
        self.reads += 1
        st.train_time += time.perf_counter() - tick
        first = st.step - len(values) + 1
        self.pending.clear()
        for offset, value in enumerate(values):
            if not math.isfinite(value):
                # The steps after the first bad one trained on its weights: the run ends where the loss broke.
                st.step = first + offset - 1
                st.losses.extend((first + i, v) for i, v in enumerate(values[:offset]))
                error = diverged_error(st.step + 1, value, self.cfg.lr, st.best_step)
                return LogEvent(message=error).to_dict(), error
        st.losses.extend((first + i, v) for i, v in enumerate(values))
        return StepEvent(step=st.step, steps=len(values), epoch=round(st.step / self.per_epoch, 3),
                         loss=sum(values) / len(values), lr=float(self.scheduler.get_last_lr()[0]),
                         samples_per_s=self._samples_per_s()).to_dict(), None

    def _plateaued(self) -> bool:
        # A plateau ends the run only past the floor of min_steps: a run must first leave its start (the
        # majority class) before a lull in validation may stop it.
        cfg = self.cfg
        return cfg.patience > 0 and self.st.bad_evals >= cfg.patience and self.st.step >= cfg.min_steps

    def _batches(self) -> Iterator[Batch]:
        """The training batches from where the state stands to the last step, epoch by epoch."""
        cfg, st = self.cfg, self.st
        start_epoch, skip = divmod(st.step, self.per_epoch)
        for epoch in range(start_epoch, math.ceil(self.total / self.per_epoch)):
            for batch in iterate(self.train_data, cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch,
                                 device=cfg.device, skip=skip if epoch == start_epoch else 0):
                if st.step >= self.total:
                    return
                yield batch

    # --------------------------------------------------------------------------------------------- run
    def after_step(self) -> Iterator[dict[str, Any]]:
        """What follows a step: the loss read, evaluation and early stop, the caller's hook, the checkpoint
        and a stop request, in that order (``StopIteration`` value: the run ended)."""
        cfg, st = self.cfg, self.st
        evaluating = st.step % self.eval_every == 0 or st.step == self.total
        checkpointing = bool(self.resume_path and cfg.checkpoint_every > 0 and st.step % cfg.checkpoint_every == 0)
        if st.step % cfg.read_every == 0 or evaluating or checkpointing or st.step == self.total:
            if (yield from self.flush()):
                return True
        if evaluating:
            yield self.evaluate()
            if self._plateaued():
                yield LogEvent(message=f"early stop at step {st.step}: no improvement in "
                                       f"{cfg.patience} evaluations").to_dict()
                yield self.finish("done")
                return True
        if self.hooks.between_steps is not None and (event := self.hooks.between_steps(st.step)) is not None:
            yield event
        if checkpointing:
            yield from self.checkpoint()
        reason = self.hooks.should_stop()
        if reason:
            if (yield from self.flush()):
                return True
            if self.resume_path:
                yield from self.checkpoint()
            yield self.finish(reason)
            return True
        return False

    def run(self, resume: bool = False) -> Iterator[dict[str, Any]]:
        if resume:
            yield from self.restore()
        self.module.train()
        for batch in self._batches():
            self.step(batch)
            if (yield from self.after_step()):
                return
        if (yield from self.flush()):
            return
        if not self.st.val_curve or self.st.val_curve[-1][0] != self.st.step:
            yield self.evaluate()
        yield self.finish("done")


def train(module: torch.nn.Module, forward: ForwardFn, train_data: Encoded, cfg: TrainConfig, *,
          evaluate: EvaluateFn, workdir: Path | None = None, should_stop: StopFn = lambda: None,
          resume: bool = False, commit_file: CommitFn = os.replace,
          between_steps: Callable[[int], dict[str, Any] | None] | None = None) -> Iterator[dict[str, Any]]:
    """Train `module`'s trainable parameters; `forward(batch)` returns logits for a batch. The events of
    :class:`TrainingLoop` (see :class:`LoopHooks` for the callbacks)."""
    hooks = LoopHooks(evaluate=evaluate, should_stop=should_stop, commit_file=commit_file, between_steps=between_steps)
    yield from TrainingLoop(module, forward, train_data, cfg, hooks, workdir).run(resume)


def diverged_error(step: int, loss: float, lr: float, best_step: int) -> str:
    """What a diverged run's record says: where, with which loss, what its test figures are, what to try."""
    tested = ("no validation had run yet, so its weights are untrained and its test figures mean nothing"
              if best_step == 0 else f"the weights tested are those of step {best_step}, the best validation")
    return (f"diverged at step {step}: the training loss was {loss} at learning rate {lr:g}; {tested}; "
            f"try a smaller learning rate (e.g. {lr / 10:g})")


def summarize_losses(losses: list[tuple[int, float]], points: int = 400) -> list[tuple[int, float]]:
    """Thin a long loss curve to at most `points` (step, mean loss) pairs for records and plots."""
    if len(losses) <= points:
        return [(int(s), float(v)) for s, v in losses]
    chunks = np.array_split(np.asarray(losses, dtype=np.float64), points)
    return [(int(c[-1, 0]), float(c[:, 1].mean())) for c in chunks]
