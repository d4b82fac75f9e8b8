"""The result record of one run: JSON in, JSON out, identical after a round trip. No torch here."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("done", "failed", "diverged", "cancelled", "interrupted")


def pack_correct(correct: Any) -> str:
    """Per-example right/wrong as base64 text: the count, a colon, then the bits packed eight to a byte."""
    import base64

    import numpy as np

    bits = np.asarray(correct, dtype=bool)
    return f"{len(bits)}:" + base64.b64encode(np.packbits(bits).tobytes()).decode("ascii")


def unpack_correct(text: str) -> "Any":
    """The boolean array :func:`pack_correct` wrote (None for "")."""
    import base64

    import numpy as np

    if not text:
        return None
    count, _, data = text.partition(":")
    return np.unpackbits(np.frombuffer(base64.b64decode(data), dtype=np.uint8))[:int(count)].astype(bool)


_FIELD_NAMES: dict[type, frozenset[str]] = {}


@dataclass(frozen=True)
class RunRecord:
    key: str
    spec: dict[str, Any]  # the resolved RunSpec as a dict
    status: str
    metric: str = ""  # the discipline's metric name
    validation: dict[str, float] = field(default_factory=dict)  # best-checkpoint validation metrics
    test: dict[str, float] = field(default_factory=dict)  # the best checkpoint on the test split
    baseline: dict[str, float] = field(default_factory=dict)  # majority class etc.
    best_step: int = 0
    steps_done: int = 0
    total_steps: int = 0
    steps_to_converge: int | None = None
    train_loss: list[list[float]] = field(default_factory=list)  # [[step, loss], ...] (thinned)
    val_curve: list[list[float]] = field(default_factory=list)  # [[step, metric], ...]
    wall_time_s: float = 0.0
    samples_per_s: float = 0.0
    peak_memory_mb: float = 0.0
    params_total: int = 0
    params_trainable: int = 0
    train_examples: int = 0
    # mean tokens of a training example as the model sees it ([CLS] and [SEP] in, after any cut); with
    # samples_per_s, the run's training speed in tokens/s (labcore.engine.speed). 0 in records older than it.
    train_tokens: float = 0.0
    device: str = ""  # "cpu", "cuda", "cuda:N" as the run used it
    device_name: str = ""  # the GPU's or CPU's model name
    visible_gpus: list[str] = field(default_factory=list)  # the GPUs its process saw (CUDA_VISIBLE_DEVICES' names)
    # training tokens (real, not padding) per second of steps; with flops_per_token (labcore.machine.device's count) and
    # the device's measured matmul rate in the run's precision (peak_flops, FLOP/s), its MFU. 0: not measured.
    tokens_per_s: float = 0.0
    flops_per_token: float = 0.0
    peak_flops: float = 0.0
    mfu: float = 0.0
    host_reads: int = 0  # times the loop read its losses to the host (labcore.engine.train: a sync on CUDA)
    precision: str = ""
    pooling: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # protocol notes, subsampling, anything to know
    test_examples: int = 0  # what the test metric was measured over (windows' votes count once); 0: unknown
    test_classes: int = 0  # distinct true classes among them (class outputs; 0 otherwise or unknown)
    threads: list[list[int]] = field(default_factory=list)  # [[from step, CPU threads], ...]; empty off CPU
    # cores other processes kept busy, on average, while it trained (labcore.machine.cores); -1: not measured. A speed
    # measured beside other work is not the machine's (labcore.engine.speed leaves such runs out of promises).
    busy_cores: float = -1.0
    # what a protocol's stage before training measured (ORCA's alignment: "name", "distance", "before",
    # "after", "curve" [[step, value], ...], "seconds"); empty where the protocol has no stage
    stage: dict[str, Any] = field(default_factory=dict)
    # which test examples the best checkpoint got right, in the test split's order (class outputs, windows'
    # votes counted once): base64 of the packed bits (pack_correct), about 70 characters a 500-example test set.
    # Lets a report pool paired per-example tests over seeds. "": not kept (other outputs, older records).
    test_correct: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RunRecord":
        names = _FIELD_NAMES.get(cls)
        if names is None:  # once per class: a page reads thousands of records
            names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
        return cls(**{k: v for k, v in values.items() if k in names})

    @classmethod
    def from_json(cls, text: str) -> "RunRecord":
        return cls.from_dict(json.loads(text))

    @property
    def untrained(self) -> bool:
        """The run stopped (diverged, cancelled) before its first validation: the weights it tested are the
        ones it started with, so its test figures are no result."""
        return self.best_step == 0 and not self.val_curve

    @property
    def test_value(self) -> float | None:
        """The test metric of the best checkpoint; None where there is none, or it is of untrained weights."""
        return None if self.untrained else self.test.get(self.metric)
