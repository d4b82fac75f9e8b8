"""Budgets: the training loop's hyper-parameters, each declared once, and what each budget sets them to.

:class:`TrainParams` declares the loop's hyper-parameters and :class:`BudgetParams` adds how much training data
the loop sees; ``quick``, ``standard`` and ``paper`` give each protocol family its values
(:func:`train_defaults`), per device kind where a GPU trains differently (:data:`DEVICE_BUDGETS`). A
:class:`labcore.runspec.RunSpec` carries every field as an optional one (None: the budget's value), and
labcore.runspec re-exports these names.

This module imports no torch: the pages build and show specs without it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from labcore.errors import LabError

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("linear", "constant")
BUDGETS = ("quick", "standard", "paper")

# Protocols whose body stays frozen train a few parameters and want the FPT learning rate.
FROZEN_FAMILY = ("frozen", "output_only", "probe")


@dataclass(frozen=True)
class TrainParams:
    """The training loop's hyper-parameters, each declared once, here.

    :class:`labcore.engine.train.TrainConfig` extends this class with what the run decides (seed, loss,
    precision, device); :class:`labcore.runspec.RunSpec` carries every field of :class:`BudgetParams` as an optional
    one (None: the budget's value); the New experiment page shows a widget per field. A field's
    ``choices`` metadata lists its valid values.
    """

    optimizer: str = field(metadata={"choices": OPTIMIZERS})
    lr: float
    schedule: str = field(metadata={"choices": SCHEDULES})
    warmup_ratio: float  # share of the steps over which the learning rate rises linearly from 0
    batch_size: int  # examples per training step
    epochs: float
    max_steps: int  # 0: run for `epochs`; > 0: stop after this many steps
    grad_clip: float  # 0: off
    weight_decay: float
    eval_every: int  # steps between validation evaluations (0: once per epoch)
    patience: int  # evaluations without improvement before stopping early (0: off), never before min_steps
    # floors that fit a budget to small data (0: off). An explicit epochs / max_steps turns min_steps off,
    # an explicit eval_every turns min_evals off (see labcore.runspec.resolved): the floors adapt a budget, not a choice.
    min_steps: int  # more epochs where `epochs` would give fewer optimiser steps than this
    min_evals: int  # validation evaluations per run at least: eval_every shortens to steps // min_evals

    def total_steps(self, n_train: int) -> int:
        """Optimiser steps of the run: ``epochs`` of the data, at least ``min_steps``, at most ``max_steps``."""
        per_epoch = max(1, math.ceil(n_train / self.batch_size))
        total = max(1, math.ceil(per_epoch * self.epochs), self.min_steps)
        return min(total, self.max_steps) if self.max_steps > 0 else total

    def epochs_run(self, n_train: int) -> float:
        """Epochs the run's steps amount to (more than ``epochs`` where ``min_steps`` raised them)."""
        return self.total_steps(n_train) / max(1, math.ceil(n_train / self.batch_size))

    def evaluate_every(self, n_train: int) -> int:
        """Steps between validation evaluations: ``eval_every`` (0: an epoch), shortened so the run
        evaluates at least ``min_evals`` times."""
        every = self.eval_every if self.eval_every > 0 else max(1, math.ceil(n_train / self.batch_size))
        total = self.total_steps(n_train)
        if self.min_evals > 0 and math.ceil(total / every) < self.min_evals:  # the last step evaluates too
            every = max(1, total // self.min_evals)
        return every


@dataclass(frozen=True)
class BudgetParams(TrainParams):
    """What a budget sets: the loop's hyper-parameters and how much training data the loop sees."""

    train_token_budget: int  # cap on train tokens per epoch (0: no cap), applied before the loop starts
    # the token cap keeps at least this many training examples (or all there are): long sequences would
    # otherwise leave a handful (0: off; an explicit train_token_budget turns it off)
    min_train_examples: int


BUDGET_PARAMS = dataclasses.fields(BudgetParams)  # for forms: name, type and metadata of each
TRAIN_FIELDS = tuple(f.name for f in BUDGET_PARAMS)

# Budget presets. "quick" is a teaching demo: one MiniLM run in about three minutes on a 2-core CPU. Training
# costs about the same per token on every discipline (MiniLM, fp32, 2 idle cores: about 1,850 tokens/s, measured
# as labcore/runspec/priors.json says), so the token budget caps the training set: 2 epochs of 140,000 tokens take
# about 150 s of steps (splice: 2,258 of its 2,868 examples; the whole run 172 s), leaving room for preparing
# and evaluating.
# "paper" is each paper's own recipe: Kao (Adam 1e-5, batch 32, no warm-up, linear decay), FPT (Adam
# 1e-3), Tamkin (Adam 2e-5, batch 8).
# Floors that fit the quick budget to small and long data (issue 13): 106 examples x 2 epochs were 12
# steps, and learned nothing; 1,000-symbol sequences under the 140k-token cap left 283 examples. 150 steps
# of batch 16 see 2,400 examples (a 106-example set: 25 epochs), and 500 examples are kept whatever the cap
# says. Every budget but the papers' own recipes evaluates at least 8 times a run (the last step counts),
# so a short run still draws a validation curve. A quick splice run (284 steps, 8 evaluations every 40
# steps, 2,258 examples kept) is as it was.
QUICK_MIN_STEPS = 150
QUICK_MIN_EXAMPLES = 500
MIN_EVALS = 8
_TRAIN_DEFAULTS: dict[str, dict[str, BudgetParams]] = {
    # quick, measured with MiniLM on dna-splice, seeds 0-2 (test accuracy; wall time of the run, which
    # drifts by 10-15 % with the machine):
    #   2 epochs at 1e-4, 140k tokens: 0.950 / 0.931 / 0.893, 78-90 s (random init 0.805-0.836) <- the preset
    #   2 epochs at 1e-4, 150k tokens: 0.987 / 0.950 / 0.931, 80-83 s, up to 90-95 s on a slower hour
    #   2 epochs at 5e-5, 140k tokens: 0.918 / 0.912 / 0.780, 75-76 s
    #   2 epochs at 5e-5, all 2,868 examples: 0.950 (seed 0), 98 s
    #   1 epoch at 1e-4, all examples: 0.937 / 0.862 / 0.704, 56-64 s (still improving at its last step)
    "quick": {
        "finetune": BudgetParams(
            optimizer="adamw", lr=1e-4, schedule="linear", warmup_ratio=0.06, batch_size=16,
            epochs=2.0, max_steps=0, grad_clip=1.0, weight_decay=0.01, eval_every=40,
            patience=0, min_steps=QUICK_MIN_STEPS, min_evals=MIN_EVALS, train_token_budget=140_000,
            min_train_examples=QUICK_MIN_EXAMPLES),
        "frozen": BudgetParams(
            optimizer="adam", lr=1e-3, schedule="constant", warmup_ratio=0.0, batch_size=32,
            epochs=3.0, max_steps=0, grad_clip=1.0, weight_decay=0.0, eval_every=40,
            patience=0, min_steps=QUICK_MIN_STEPS, min_evals=MIN_EVALS, train_token_budget=140_000,
            min_train_examples=QUICK_MIN_EXAMPLES),
    },
    "standard": {
        "finetune": BudgetParams(
            optimizer="adamw", lr=5e-5, schedule="linear", warmup_ratio=0.06, batch_size=16,
            epochs=5.0, max_steps=0, grad_clip=1.0, weight_decay=0.01, eval_every=100,
            patience=5, min_steps=0, min_evals=MIN_EVALS, train_token_budget=0, min_train_examples=0),
        "frozen": BudgetParams(
            optimizer="adam", lr=1e-3, schedule="constant", warmup_ratio=0.0, batch_size=32,
            epochs=10.0, max_steps=0, grad_clip=1.0, weight_decay=0.0, eval_every=100,
            patience=5, min_steps=0, min_evals=MIN_EVALS, train_token_budget=0, min_train_examples=0),
    },
    "paper": {
        "finetune": BudgetParams(
            optimizer="adam", lr=1e-5, schedule="linear", warmup_ratio=0.0, batch_size=32,
            epochs=10.0, max_steps=0, grad_clip=0.0, weight_decay=0.0, eval_every=200,
            patience=0, min_steps=0, min_evals=0, train_token_budget=0, min_train_examples=0),
        "frozen": BudgetParams(
            optimizer="adam", lr=1e-3, schedule="constant", warmup_ratio=0.0, batch_size=32,
            epochs=20.0, max_steps=0, grad_clip=0.0, weight_decay=0.0, eval_every=200,
            patience=0, min_steps=0, min_evals=0, train_token_budget=0, min_train_examples=0),
        # Tamkin et al. fine-tune reinitialised / permuted models with Adam 2e-5, batch 8.
        "tamkin": BudgetParams(
            optimizer="adam", lr=2e-5, schedule="constant", warmup_ratio=0.0, batch_size=8,
            epochs=3.0, max_steps=0, grad_clip=0.0, weight_decay=0.0, eval_every=200,
            patience=0, min_steps=0, min_evals=0, train_token_budget=0, min_train_examples=0),
    },
}
_TAMKIN = ("reinit_after", "reinit_block", "reinit_layer", "permute_layers")

# On a GPU the standard budget trains larger batches and longer text: a batch of 16 leaves an H100 mostly
# idle (a MiniLM step is launch-bound), 64 fills it better; the learning rate doubles with the batch's
# fourfold growth (square-root scaling, rounded). Quick keeps its CPU meaning (a teaching demo's time and
# result are the same anywhere); paper keeps each paper's own batches. What changes, budget by family:
DEVICE_BUDGETS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "cuda": {
        "standard": {
            "finetune": {"batch_size": 64, "lr": 1e-4},
            "frozen": {"batch_size": 128},
        },
    },
}
TEXT_MAX_LENGTH = 64  # tokens a text example keeps by default: snippets average ~19 words, quick runs stay quick
# ... and on a GPU under the standard budget, where longer inputs cost little
DEVICE_TEXT_MAX_LENGTH = {"cuda": {"standard": 128}}
DEVICE_KINDS = ("cpu", "cuda")


def kept_by_budget(n: int, token_budget: int, mean_length: float, min_examples: int = 0) -> int:
    """Training examples a token budget keeps of ``n`` (0: no budget), never fewer than ``min_examples``."""
    if token_budget > 0 and mean_length > 0:
        return min(n, max(1, int(token_budget // mean_length), min_examples))
    return n

def _family(budget: str, protocol: str) -> str:
    if protocol in FROZEN_FAMILY:
        return "frozen"
    if budget == "paper" and protocol in _TAMKIN:
        return "tamkin"
    return "finetune"


def train_defaults(budget: str, protocol: str, device: str = "cpu") -> dict[str, Any]:
    """The training hyper-parameters a budget gives a protocol on a ``device`` kind (``cpu`` or ``cuda``):
    what `None` fields resolve to."""
    if budget not in _TRAIN_DEFAULTS:
        raise LabError(f"unknown budget {budget!r}; valid budgets: {', '.join(BUDGETS)}")
    check_choice("device kind", device, DEVICE_KINDS)
    family = _family(budget, protocol)
    changes = DEVICE_BUDGETS.get(device, {}).get(budget, {}).get(family, {})
    return dataclasses.asdict(dataclasses.replace(_TRAIN_DEFAULTS[budget][family], **changes))


def text_max_length(budget: str, device: str = "cpu") -> int:
    """Tokens a text example keeps where the spec leaves ``max_length`` at 0."""
    return DEVICE_TEXT_MAX_LENGTH.get(device, {}).get(budget, TEXT_MAX_LENGTH)


def check_choice(name: str, value: Any, valid: tuple[str, ...]) -> None:
    """An error listing the valid choices where ``value`` is not one of them (labcore.runspec checks with it too)."""
    if value not in valid:
        raise LabError(f"unknown {name} {value!r}; valid choices: {', '.join(valid)}")
