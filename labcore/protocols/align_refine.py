"""ORCA's align-then-refine (Shen et al. 2023, "Cross-modal fine-tuning: align then refine", §3 and fig. 1).

**Align** (the protocol's stage, before the training loop): the target embedder -- the run's input layer
(the mapped pretrained rows for tokens, the new linear layer for vectors), with the body's position
embeddings and embedding norm -- trains alone to bring the distribution of the embedded target data close
to that of a source text data set embedded by the body's own embedding layer. The distance is the
optimal-transport dataset distance (:mod:`labcore.protocols.otdd`) between mean-pooled embedder outputs and their
labels. **Refine**: every parameter fine-tunes on the task, exactly as the ``full`` protocol does; with
``align_steps=0`` the run *is* full fine-tuning (the ablation of García-de-Herreros et al. 2024).

What the lab's alignment approximates, said in every run's notes: each example is the mean of its
embedder outputs over its real positions (ORCA pools the same way to compare sequences of any length);
OTDD is estimated on samples of ``examples`` target and source examples (a fresh target sample every step,
one fixed source sample, and a fixed target sample to measure before and after), with entropic
regularisation and Gaussian class fits (see :mod:`labcore.protocols.otdd`); the embedder runs without dropout while it
aligns; ORCA trained its embedder for many epochs, here it takes ``align_steps`` Adam steps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generator

from labcore.errors import LabError
from labcore.events import LogEvent, StageStepEvent
from labcore.protocols.base import Protocol, ProtocolReport, StageInput, finish, register, start

if TYPE_CHECKING:
    import torch

    from labcore.models import LabModel

DISTANCES = ("otdd",)
STAGE = "align"
MIN_EXAMPLES = 8


@dataclass(frozen=True)
class AlignRefineParams:
    """The alignment's budget, its source data and its distance; refining is the run's own training."""

    align_steps: int = 60  # Adam steps on the embedder before fine-tuning; 0: no alignment (= full)
    align_lr: float = 1e-3
    source: str = "text-sentiment"  # a text discipline, embedded by the body's own embedding layer
    examples: int = 256  # target examples per step (and in the measuring sample); source examples
    distance: str = "otdd"

    def __post_init__(self) -> None:
        if self.align_steps < 0:
            raise LabError(f"align_refine: align_steps must be 0 (no alignment) or more, got {self.align_steps}")
        if not (math.isfinite(self.align_lr) and self.align_lr > 0):
            raise LabError(f"align_refine: align_lr must be a positive number, got {self.align_lr}")
        if self.examples < MIN_EXAMPLES:
            raise LabError(f"align_refine: examples must be at least {MIN_EXAMPLES} (a Gaussian per class needs "
                           f"several examples of each), got {self.examples}")
        if self.distance not in DISTANCES:
            raise LabError(f"align_refine: unknown distance {self.distance!r}; valid distances: "
                           f"{', '.join(DISTANCES)}")


def _apply(model: LabModel, params: AlignRefineParams, seed: int) -> ProtocolReport:
    start(model)
    if params.align_steps == 0:
        notes = ["align_steps=0: no alignment, so this run trains exactly as full fine-tuning (its OTDD to "
                 f"{params.source} is still measured)"]
    else:
        notes = [f"aligned before fine-tuning: {params.align_steps} Adam steps (lr {params.align_lr:g}) of the "
                 f"embedder ({', '.join(_embedder_names(model))}) on the {params.distance.upper()} to "
                 f"{params.source}; then every parameter fine-tunes, as in full"]
    return finish(model, "align_refine", notes)


def _embedder(model: LabModel) -> dict[str, Any]:
    """The modules ORCA's embedder consists of here: the input layer, the position table, the embedding
    norm (those the family has)."""
    struct = model.structure
    parts = {"input layer": model.adapter, "positions": struct.position_embeddings,
             "embedding norm": struct.embedding_norm}
    return {name: module for name, module in parts.items() if module is not None}


def _embedder_names(model: LabModel) -> list[str]:
    return list(_embedder(model))


# ------------------------------------------------------------------------------------------------- the stage


def _features(model: LabModel, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real positions of what the first block receives: one vector per example."""
    from labcore.models.lab_model import POOLINGS

    return POOLINGS["mean"](model.first_block_input(embeds, mask), mask).float()


def _source_sample(run: StageInput, params: AlignRefineParams, rng) -> tuple[torch.Tensor, Any]:
    """The source sample's features: ``examples`` training texts of ``params.source`` through the body's own
    word embeddings, positions and norm (as the body was before alignment), and their labels."""
    import numpy as np
    import torch

    from labcore import data as data_registry
    from labcore.data.encode import TEXT_MAX_LENGTH, Encoded, collate
    from labcore.models import load_backbone, structure

    spec = run.spec
    dataset, info = data_registry.load(params.source, {}, progress=lambda _m: None)
    if info.input_kind != "text":
        raise LabError(f"align_refine: the source {params.source!r} gives {info.input_kind}, not text; choose a "
                       f"text discipline (text-sentiment)")
    if run.tokenizer is None:
        raise LabError(f"align_refine needs the model's tokenizer to embed the source text, and {spec.model!r} "
                       f"has none; use a model with a tokenizer (minilm)")
    train = dataset["train"]
    rows = train.select(np.sort(rng.choice(len(train), size=min(params.examples, len(train)), replace=False)))
    ids = run.tokenizer(list(rows["text"]), truncation=True, max_length=TEXT_MAX_LENGTH)["input_ids"]
    labels = np.asarray(rows["label"])
    # The run's model keeps only the word-embedding rows of its own data; the source text needs the body's
    # whole table, as the run loaded it (same model, init and seed).
    base, _, _ = load_backbone(spec.model, spec.init, seed=spec.seed)
    table = structure(base).word_embeddings.to(run.device)
    batch = collate(Encoded([np.asarray(x, dtype=np.int64) for x in ids], labels), np.arange(len(ids)), run.device)
    with torch.no_grad():
        features = _features(run.model, table(batch.inputs), batch.mask)
    return features, labels


def _align(run: StageInput, params: AlignRefineParams) -> Generator[dict[str, Any], None, dict[str, Any]]:
    """ORCA's embedder learning (fig. 1, stage 2): train the embedder alone on the OTDD to the source sample,
    streaming the distance of every step."""
    import numpy as np
    import torch

    from labcore.protocols import otdd
    from labcore.data.encode import collate
    from labcore.models import derive_seed

    started = time.perf_counter()
    model = run.model
    rng = np.random.default_rng(derive_seed(run.spec.seed, "align"))
    yield LogEvent(message=f"align: embedding {params.examples} {params.source} examples with the body's "
                           f"own embedding layer").to_dict()
    was_training = model.training
    model.eval()  # the embedder aligns without dropout: the distance is a function of its weights alone
    try:
        source_x, source_y = _source_sample(run, params, rng)
        source = otdd.sample(source_x, otdd.class_ids(source_y))
        train = run.splits["train"]
        labels = otdd.class_ids(train.labels)
        size = min(params.examples, len(train))
        fixed = np.sort(rng.choice(len(train), size=size, replace=False))

        def target(index: np.ndarray) -> otdd.Sample:
            batch = collate(train, index, run.device)
            return otdd.sample(_features(model, model.adapter(batch.inputs), batch.mask), labels[index])

        with torch.no_grad():
            measured = target(fixed)
            # ε stays what it was at the start: the objective must not move under the embedder's feet
            reg = otdd.default_reg(measured, source)
            source_self = otdd.self_cost(source, reg)
            before = float(otdd.otdd(measured, source, reg=reg, self_b=source_self))
        yield LogEvent(message=f"align: OTDD to {params.source} before alignment {before:.4f} "
                               f"({size} target and {len(source_y)} source examples, ε {reg:.4g})").to_dict()
        curve: list[list[float]] = []
        stopped = ""
        if params.align_steps:
            embedder = [p for module in _embedder(model).values() for p in module.parameters()]
            optimiser = torch.optim.Adam(embedder, lr=params.align_lr)
            for step in range(1, params.align_steps + 1):
                index = np.sort(rng.choice(len(train), size=size, replace=False))
                distance = otdd.otdd(target(index), source, reg=reg, self_b=source_self)
                optimiser.zero_grad(set_to_none=True)
                distance.backward()
                optimiser.step()
                value = float(distance.detach())
                curve.append([step, value])
                yield StageStepEvent(stage=STAGE, step=step, total_steps=params.align_steps,
                                     metric=params.distance, value=value).to_dict()
                stopped = run.should_stop() or ""
                if stopped:
                    break
            with torch.no_grad():
                after = float(otdd.otdd(target(fixed), source, reg=reg, self_b=source_self))
        else:
            after = before
    finally:
        for param in model.parameters():
            param.grad = None  # the body's other tensors got gradients too; the training loop starts clean
        model.train(was_training)
    seconds = time.perf_counter() - started
    done = len(curve)
    notes = [f"align: OTDD to {params.source} {before:.4f} before, {after:.4f} after {done} step"
             f"{'s' if done != 1 else ''} ({seconds:.1f} s)" + (f", stopped early: {stopped}" if stopped else ""),
             f"align: OTDD approximated: mean of the embedder outputs per example, {size} target (a fresh sample "
             f"each step; a fixed one measures before and after) and {len(source_y)} source examples, Gaussian "
             f"class fits, debiased Sinkhorn with ε {reg:.4g} ({otdd.ENTROPIC:g} of the mean ground cost at the "
             f"start), embedder without dropout"]
    for note in notes:
        yield LogEvent(message=note).to_dict()
    return {"name": STAGE, "distance": params.distance, "source": params.source, "steps": params.align_steps,
            "steps_done": done, "before": before, "after": after, "curve": curve, "seconds": seconds,
            "reg": reg, "target_examples": size, "source_examples": int(len(source_y)), "notes": notes}


PROTOCOL = register(Protocol(
    name="align_refine",
    Params=AlignRefineParams,
    description="ORCA: align the embedder to text by OTDD, then fine-tune all (Shen et al. 2023, §3, fig. 1).",
    procedure=_apply,
    stage=_align,
))
