"""Pretraining as a generator of events, on the lab's training loop (:func:`labcore.engine.train.train`).

The loop brings what a training run has: AdamW with warm-up and linear decay, bf16 autocast where the
hardware has it, resume checkpoints (weights, optimizer, schedule, RNG) through ``commit_file``, stop
requests, NaN detection. This module adds the corpus as the loop's data, the masking inside the forward
(the loop's ``given`` loss), masked-token accuracy on each step event, and a held-out evaluation whose
masks never change (so its curve compares step with step). When it is done, the body is written as the
backbone ``lab:<name>`` (:mod:`labcore.pretrain.export`).

Events: the loop's (``step`` with ``loss``, ``accuracy``, ``tokens_per_s``; ``eval`` with the held-out
masked accuracy as ``value`` and MLM ``loss``; ``checkpoint``; ``log``), then one ``result``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from labcore.machine import cores
from labcore.data.encode import Encoded, iterate
from labcore.events import EVAL, STEP, TRAIN_END, EvalEvent, LogEvent, ResultEvent, StartEvent, StepEvent, TrainEndEvent
from labcore.pretrain import corpora
from labcore.pretrain.mlm import (CLS_ID, IGNORED, SEP_ID, MaskedLM, build_masked_lm, load_masked_lm, mask_tokens,
                                  mask_tokens_static, substitute_rows, train_embeddings_only)
from labcore.pretrain.spec import SIZES, PretrainSpec, resolve_pretrain
from labcore.machine import device as devices
from labcore.machine.device import autocast, resolve_precision
from labcore.engine.train import TrainConfig, summarize_losses, train
from labcore.durable import CommitFn

StopFn = Callable[[], "str | None"]

EVAL_SEQUENCES = 64  # held out, drawn with another seed; enough for a steady curve at a few seconds' cost
EVAL_SEED_OFFSET = 1_000_003
EVALS_PER_RUN = 20


def corpus_data(spec: PretrainSpec, n: int, seed: int, *, held_out: bool = False) -> Encoded:
    """``n`` sequences of the spec's corpus, each wrapped in [CLS] ... [SEP], as the loop's data."""
    sequences = corpora.CORPORA[spec.corpus].generate(n, seed, held_out=held_out)
    inputs = [np.concatenate([[CLS_ID], s, [SEP_ID]]).astype(np.int64) for s in sequences]
    return Encoded(inputs, np.zeros(len(inputs), dtype=np.int64))


def train_config(spec: PretrainSpec, device: str, checkpoint_every: int) -> TrainConfig:
    per_epoch = max(1, math.ceil(spec.sequences / spec.batch_size))
    return TrainConfig(optimizer="adamw", lr=spec.lr, schedule="linear", warmup_ratio=spec.warmup_ratio,
                       batch_size=spec.batch_size, epochs=spec.steps / per_epoch, max_steps=spec.steps,
                       grad_clip=1.0, weight_decay=spec.weight_decay,
                       eval_every=max(1, spec.steps // EVALS_PER_RUN), patience=0, min_steps=0, min_evals=0,
                       seed=spec.seed, loss="given",
                       precision=resolve_precision(spec.precision, device), device=device,
                       checkpoint_every=checkpoint_every, graphs=spec.step == "graphs")


class MlmObjective:
    """The forward the loop calls (masks, decodes the masked rows, returns the loss) and the held-out
    evaluation; keeps the masked accuracy since the last step event. ``cfg.graphs``: the training forward masks
    with :func:`mask_tokens_static`, whose shapes a CUDA graph can hold (the evaluation keeps :func:`mask_tokens`)."""

    def __init__(self, model: MaskedLM, held_out: Encoded, cfg: TrainConfig, seed: int) -> None:
        self.model, self.held_out, self.cfg, self.seed = model, held_out, cfg, seed
        # A random replacement (10 % of the chosen positions) draws an ordinary token, never a special one.
        # On the device once: sent with every batch, the ids were a pageable copy each step on a GPU.
        self.replacements = torch.from_numpy(corpora.sampleable_ids()).to(cfg.device)
        # Masked predictions right and made since the last read, added to in place on the device: a replayed
        # graph adds to the same buffer, and reading it is one transfer per step event, not one per step.
        self.tally = torch.zeros(2, dtype=torch.long, device=cfg.device)

    def loss(self, ids, mask, generator=None, static: bool = False
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, logits, targets); a target of :data:`IGNORED` is an empty prediction slot (``static`` only)."""
        if static:
            inputs, rows, targets = mask_tokens_static(ids, mask, self.replacements, generator=generator)
            logits, targets = self.model.forward_rows(inputs, mask, rows), targets.reshape(-1)
        else:
            inputs, positions, targets = mask_tokens(ids, mask, self.replacements, generator=generator)
            logits = self.model(inputs, mask, positions)
        return torch.nn.functional.cross_entropy(logits.float(), targets, ignore_index=IGNORED), logits, targets

    def forward(self, batch) -> torch.Tensor:
        loss, logits, targets = self.loss(batch.inputs, batch.mask, static=self.cfg.graphs)
        taught = targets != IGNORED
        correct = ((logits.detach().argmax(-1) == targets) & taught).sum()
        self.tally.add_(torch.stack([correct, taught.sum()]))
        return loss

    def read_accuracy(self) -> float:
        """Masked accuracy over the steps since the last read (those of one step event)."""
        correct, predicted = self.tally.tolist()
        self.tally.zero_()
        return correct / predicted if predicted else math.nan

    def evaluate(self) -> dict[str, float]:
        generator = torch.Generator(device=self.cfg.device).manual_seed(self.seed + EVAL_SEED_OFFSET)
        total = correct = 0
        loss_sum = 0.0
        with torch.no_grad(), autocast(self.cfg.precision, self.cfg.device):
            for batch in iterate(self.held_out, self.cfg.eval_batch_size, shuffle=False, device=self.cfg.device):
                loss, logits, targets = self.loss(batch.inputs, batch.mask, generator)
                loss_sum += float(loss) * len(targets)
                correct += int((logits.argmax(-1) == targets).sum())
                total += len(targets)
        return {"value": correct / total, "loss": loss_sum / total}


def counted_flops_per_token(objective: MlmObjective, data: Encoded, device: str) -> float:
    """Training FLOPs a real token as the MLM step computes them (labcore.engine.flops, on the data's own examples,
    unpadded), as a fine-tuning run's record counts them; :func:`useful_flops_per_token`, the analytic
    count, read about 6 % high. The masked-accuracy tally the counting forwards add is cleared after."""
    from labcore.engine import flops as counting

    try:
        return counting.flops_per_token(objective.model, objective.forward, data, device)
    finally:
        objective.tally.zero_()


MASKED_SHARE = 0.15  # of the positions (labcore.pretrain.mlm.mask_tokens): those the decoder runs on


def useful_flops_per_token(size_name: str, length: float, masked_share: float = MASKED_SHARE) -> float:
    """Training FLOPs a token needs when only the masked positions are predicted: every block but the last
    for every row; the last block's keys and values for every row and the rest for the masked rows; the LM
    head for the masked rows (6 FLOPs a parameter and token: forward and backward), plus attention."""
    from labcore.pretrain.mlm import VOCAB_SIZE

    size = SIZES[size_name]
    h = size.hidden
    block = 4 * h * h + 2 * h * size.ffn  # attention projections and feed-forward
    last = 2 * h * h + (2 * h * h + 2 * h * size.ffn) * masked_share
    head = (h * VOCAB_SIZE + h * h) * masked_share
    attention = 2 * length * h * (size.layers - 1 + masked_share)  # scores and weighted sum
    return 6 * ((size.layers - 1) * block + last + head + attention)


def unigram_baseline(data: Encoded) -> float:
    """The masked accuracy of always guessing the corpus's most frequent id (what a model that learnt only
    the unigram distribution gets)."""
    ids = np.concatenate([x[1:-1] for x in data.inputs])
    return float(np.bincount(ids).max() / len(ids))


def pretrain_record(spec: PretrainSpec, key: str, end: TrainEndEvent, last: EvalEvent | None,
                    objective: MlmObjective, data: Encoded, held_out: Encoded, *, wall_s: float) -> dict[str, Any]:
    """A pretraining's record from the loop's train_end event and its last evaluation; ``wall_s``: this
    attempt's seconds."""
    cfg, device = objective.cfg, objective.cfg.device
    mean_tokens = float(data.lengths().sum()) / len(data)
    losses = end.losses
    return {
        "name": f"lab:{spec.name}", "corpus": spec.corpus, "size": spec.size, "start": spec.start,
        "train": spec.train, "steps": end.steps_done,
        "total_steps": end.total_steps, "tokens_seen": int(end.steps_done * spec.batch_size * mean_tokens),
        "final_loss": losses[-1][1] if losses else None, "eval_loss": last.loss if last else None,
        "eval_accuracy": last.value if last else None, "best_step": end.best_step,
        "unigram_baseline_accuracy": unigram_baseline(held_out), "wall_s": wall_s,
        "precision": cfg.precision, "device": device, "threads": torch.get_num_threads(),
        **devices.speed_fields(device, cfg.precision, end.samples_per_s * mean_tokens,
                               counted_flops_per_token(objective, data, device)),
        "losses": summarize_losses(losses), "eval_curve": end.val_curve,  # every attempt's
        "spec": spec.__dict__, "key": key}


def iter_pretrain(spec: PretrainSpec, *, key: str = "", workdir: Path | None = None,
                  should_stop: StopFn = lambda: None, resume: bool = False, checkpoint_every: int = 0,
                  threads: int | None = None, commit_file: CommitFn = os.replace) -> Iterator[dict[str, Any]]:
    """Pretrain ``spec``; on success write the backbone ``lab:<name>`` and end with its record."""
    from labcore.models.cpu_kernels import kernels_for
    from labcore.pretrain import export

    started = time.time()
    spec = resolve_pretrain(spec)
    export.check_name_free(spec.name, key)
    requested_threads = threads or os.cpu_count() or 1
    torch.set_num_threads(requested_threads)
    cpu_before = cores.sample()  # what other processes do while this prepares decides its threads
    device = devices.choose_device()
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    size = SIZES[spec.size]
    data = corpus_data(spec, spec.sequences, spec.seed)
    held_out = corpus_data(spec, EVAL_SEQUENCES, spec.seed + EVAL_SEED_OFFSET, held_out=True)
    tokens = int(data.lengths().sum())
    yield LogEvent(message=f"corpus {spec.corpus}: {len(data):,} sequences, {tokens:,} tokens "
                           f"(built in {time.time() - started:.1f} s)").to_dict()
    if spec.start:
        from labcore.models import model_folder

        model = load_masked_lm(str(model_folder(spec.start)))
        yield LogEvent(message=f"starting from {spec.start}").to_dict()
    else:
        model = build_masked_lm(size, spec.seed)
    if spec.train == "embeddings":
        train_embeddings_only(model)
    model = model.to(device)
    cfg = train_config(spec, device, checkpoint_every)
    notes = devices.setup(device, cfg.precision) + kernels_for(model.body, device)
    if device == "cpu":
        used_threads, busy = cores.choose_threads(requested_threads, cpu_before)
        torch.set_num_threads(used_threads)
        notes.append(cores.thread_note(used_threads, requested_threads, busy))
    n_params = sum(p.numel() for p in model.parameters())
    n_trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    yield LogEvent(message=f"RoBERTa-shaped, {size.describe()}: {n_params:,} parameters, {n_trained:,} "
                           f"trained; {cfg.precision} on {device}; " + "; ".join(notes)).to_dict()
    yield StartEvent(key=key, total_steps=cfg.total_steps(len(data)), params_total=n_params,
                     params_trainable=n_trained, device=device, precision=cfg.precision).to_dict()
    objective = MlmObjective(model, held_out, cfg, spec.seed)
    mean_tokens = tokens / len(data)
    end: TrainEndEvent | None = None
    evals: list[EvalEvent] = []
    for event in train(model, objective.forward, data, cfg, evaluate=objective.evaluate, workdir=workdir,
                       should_stop=should_stop, resume=resume, commit_file=commit_file):
        if event["type"] == STEP:
            event = replace(StepEvent.from_dict(event), accuracy=objective.read_accuracy(),
                            tokens_per_s=event["samples_per_s"] * mean_tokens).to_dict()
        elif event["type"] == EVAL:
            evals.append(replace(EvalEvent.from_dict(event), metric="masked_accuracy"))
            event = evals[-1].to_dict()
        elif event["type"] == TRAIN_END:
            end = TrainEndEvent.from_dict(event)
            continue
        yield event
    assert end is not None, "the training loop always ends with a train_end event"
    status = end.status
    record = pretrain_record(spec, key, end, evals[-1] if evals else None, objective, data, held_out,
                             wall_s=round(time.time() - started, 1))
    if status != "done":
        yield ResultEvent(status=status, record={**record, "error": end.error}).to_dict()
        return
    if spec.substitute:
        used = torch.from_numpy(corpora.CORPORA[spec.corpus].tokens().ids)
        unused = torch.from_numpy(np.setdiff1d(corpora.sampleable_ids(), used.numpy()))
        substitute_rows(model.word_embeddings.weight, used, unused)
        yield LogEvent(message=f"50-substitute: {len(unused):,} unused rows now copy the "
                               f"{len(used):,} used ones").to_dict()
    folder = export.save_lab_model(spec.name, model, record, workdir=workdir, commit_file=commit_file)
    yield LogEvent(message=f"saved lab:{spec.name} in {folder}").to_dict()
    yield ResultEvent(status="done", record={**record, "folder": str(folder)}).to_dict()
