"""What decides a pretraining: the frozen :class:`PretrainSpec`, its model sizes and its defaults (torch-free,
so the pages and the job kind resolve and key specs without importing torch)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from labcore.errors import LabError

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
NOMINAL_TOKENS_PER_SEQUENCE = 107  # (90 + 120) / 2 ids, plus [CLS] and [SEP]: what a tokens budget divides by


@dataclass(frozen=True)
class ModelSize:
    """A RoBERTa-shaped encoder's shape."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    max_length: int  # tokens per sequence, [CLS] and [SEP] included

    def describe(self) -> str:
        return f"{self.layers} layers x {self.hidden} hidden, {self.heads} heads, feed-forward {self.ffn:,}"


SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(2, 64, 4, 128, 128),  # tests and trial runs: a step takes milliseconds
    "cpu": ModelSize(4, 256, 4, 1024, 128),  # the CPU default: ~11M parameters, 7.8M of them the embeddings
    "paper": ModelSize(12, 768, 12, 3072, 128),  # RoBERTa-base's shape (Chiang & Lee), for a GPU
}


TRAIN_PARTS = ("all", "embeddings")


def start_size(start: str) -> str:
    """The size of the lab model ``start`` (``lab:<name>``) names, from its card (torch-free)."""
    from labcore.models import model_folder, read_card

    if not start.startswith("lab:") or not start[len("lab:"):]:
        raise LabError(f"start must name a model pretrained here, lab:<name>; got {start!r}")
    folder = model_folder(start)
    card = read_card(folder) if folder is not None else {}
    size = (card.get("spec") or {}).get("size")
    if size not in SIZES:
        raise LabError(f"{start} is not a finished lab model here (no card in {folder}); pretrain it first")
    return size


@dataclass(frozen=True)
class PretrainSpec:
    """Everything that decides a pretrained model. Its key is the hash of its resolved fields: the same
    spec is never pretrained twice (a resubmission is served from the store)."""

    corpus: str = "nested"
    size: str = "cpu"
    steps: int = 1000  # optimizer steps (ignored when ``tokens`` is set)
    tokens: int = 0  # > 0: train on about this many tokens instead (steps = tokens / (batch x 107))
    batch_size: int = 32
    lr: float = 5e-4
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    sequences: int = 20_000  # corpus size; the loop goes round it as often as the steps need
    seed: int = 0
    precision: str = "auto"  # "auto" (bf16 where the hardware has it) | "bf16" | "fp32"
    substitute: bool = False  # 50-substitute (Chiang §4.3): copy the used rows over the unused ones
    name: str = ""  # the backbone's name, lab:<name>; derived from the spec when empty
    start: str = ""  # "lab:<name>": go on from that model (its body and MLM head); "": a random init
    train: str = "all"  # "all" | "embeddings": word embeddings and LM head only, the body frozen (Chiang §4.4)
    # labcore.runspec.STEPS: "auto" resolves to "graphs" where the job will train on CUDA (replayed CUDA graphs, the
    # masked positions in fixed slots: labcore.pretrain.mlm.mask_tokens_static), else "eager"; keyed as a run's is
    step: str = "auto"

    def label(self) -> str:
        what = f"{self.start}, embeddings and LM head" if self.train == "embeddings" else (self.start or self.size)
        return f"pretrain lab:{self.name} on {self.corpus} ({what}, {self.steps:,} steps, seed {self.seed})"


def resolve_pretrain(spec: PretrainSpec) -> PretrainSpec:
    """Checked, with its steps and name filled in (idempotent)."""
    from labcore.pretrain.corpora import CORPORA

    CORPORA[spec.corpus]  # an unknown corpus: an error listing the valid ones
    if spec.size not in SIZES:
        raise LabError(f"unknown model size {spec.size!r}; valid sizes: {', '.join(SIZES)}")
    if spec.precision not in ("auto", "bf16", "fp32"):
        raise LabError(f"precision must be auto, bf16 or fp32, got {spec.precision!r}")
    if spec.substitute and not CORPORA[spec.corpus].few_ids:
        few = ", ".join(n for n in CORPORA.names() if CORPORA[n].few_ids)
        raise LabError(f"substitute needs a corpus over few ids ({few}), not "
                       f"{spec.corpus!r}: every other corpus uses (nearly) the whole vocabulary")
    for field, value in (("batch_size", spec.batch_size), ("sequences", spec.sequences)):
        if int(value) < 1:
            raise LabError(f"{field} must be 1 or more, got {value}")
    from labcore.machine.device import resolve_step
    from labcore.machine.hardware import budget_device
    from labcore.runspec import STEPS

    if spec.step not in STEPS:
        raise LabError(f"step must be one of {', '.join(STEPS)}, got {spec.step!r}")
    step = resolve_step(spec.step, budget_device())
    if spec.train not in TRAIN_PARTS:
        raise LabError(f"train must be one of {', '.join(TRAIN_PARTS)}, got {spec.train!r}")
    size = spec.size
    if spec.start:
        size = start_size(spec.start)
    elif spec.train == "embeddings":
        raise LabError("train=embeddings aligns the embeddings of a pretrained body (Chiang §4.4): name the model "
                       "to start from, e.g. start=lab:<name>")
    tokens = max(0, int(spec.tokens))
    steps = math.ceil(tokens / (spec.batch_size * NOMINAL_TOKENS_PER_SEQUENCE)) if tokens else int(spec.steps)
    if steps < 1:
        raise LabError(f"steps must be 1 or more, got {steps}")
    name = spec.name.strip().lower() or (
        (f"{spec.start[len('lab:'):]}-then-" if spec.start else "") + f"{spec.corpus}-{size}-{steps}s-seed{spec.seed}"
        + ("-sub" if spec.substitute else "") + ("-emb" if spec.train == "embeddings" else ""))[:64]
    if not NAME_PATTERN.match(name):
        raise LabError(f"a model name is 1-64 lower-case letters, digits, '.', '_' or '-', starting with a letter "
                       f"or digit; got {name!r}")
    return replace(spec, size=size, steps=steps, tokens=tokens, name=name, batch_size=int(spec.batch_size),
                   sequences=int(spec.sequences), seed=int(spec.seed), lr=float(spec.lr),
                   warmup_ratio=float(spec.warmup_ratio), weight_decay=float(spec.weight_decay),
                   substitute=bool(spec.substitute), step=step)
