"""How fast runs train on this machine: the training speed that finished runs measured, for the time the pages
promise before a run starts (:func:`labcore.spec.estimate`).

A run's speed is its tokens per second of training steps: ``samples_per_s`` (examples over the time spent in
steps, evaluation and preparing left out) times the mean tokens of a training example. Tokens, not examples,
because a step's cost follows the sequences' length: a speed measured on one discipline then serves another
of the same model.

A promise is for a run with the machine to itself, so only runs that had it count while there are any: a run
that trained on fewer threads than the machine has cores (two workers side by side, a busy machine when it
started) or beside other processes that kept a core busy (``busy_cores``) measures a fraction of the machine.
Nine MiniLM runs of a recipe's two workers, under a load of 3-6, measured 300-600 tokens/s where the machine
alone gives several thousand: taken as they were, they promised a ten-times-too-long wait. Such runs serve only
where nothing else is known. Pure functions over run records; no torch, no store.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Iterable

from labcore.cores import BUSY_THRESHOLD
from labcore.device import native_bf16
from labcore.record import RunRecord
from labcore.spec import MINILM_TOKENS_PER_S, MINILM_TOKENS_PER_S_BF16

# What a model trains at where no run of it was measured here, by the precision ``auto`` gives on this CPU:
# MiniLM's quick-budget measurements (see labcore.spec). Other models have no typical figure: their time is
# promised only once one of them ran.
TYPICAL_TOKENS_PER_S = {"minilm": {"fp32": MINILM_TOKENS_PER_S, "bf16": MINILM_TOKENS_PER_S_BF16}}


def typical_tokens_per_s(model: str) -> float | None:
    """The model's typical figure on this CPU (native bf16 or not: twice the speed), None where it has none."""
    figures = TYPICAL_TOKENS_PER_S.get(model)
    if figures is None:
        return None
    return figures["bf16" if native_bf16("cpu") else "fp32"]


@dataclass(frozen=True)
class Speed:
    """A training speed and where it comes from."""

    tokens_per_s: float
    runs: int  # finished runs it is the median of; 0: the typical figure, nothing measured
    model: str
    protocol: str
    discipline: str  # the runs' discipline; "" where they trained on any discipline of the model
    shared: int = 0  # runs measured here that shared the machine: left out, or (shared_figure) all there is
    shared_figure: bool = False  # the figure comes from such runs: a machine of one's own is faster

    def words(self) -> str:
        """Where the figure comes from, as the New experiment page says it."""
        plural = "s" if self.shared != 1 else ""
        if not self.runs:
            if self.shared:
                return (f"a typical figure, {self.tokens_per_s:,.0f} tokens/s: the {self.shared} run{plural} measured "
                        f"here shared the machine with other work, so their speed is not the machine's")
            return f"no run measured yet: a typical figure, {self.tokens_per_s:,.0f} tokens/s"
        where = f"on {self.discipline}" if self.discipline else "on other disciplines"
        said = (f"from {self.runs} {self.protocol} run{'s' if self.runs != 1 else ''} of {self.model} {where} here: "
                f"{self.tokens_per_s:,.0f} tokens/s")
        if self.shared_figure:
            return said + " (measured beside other work: a machine of its own is faster)"
        if self.shared:
            return said + f" ({self.shared} run{plural} that shared the machine left out)"
        return said


def run_tokens_per_s(record: RunRecord, mean_tokens: float = 0.0) -> float:
    """The training tokens per second a finished run measured; 0 where it measured none.

    Records older than ``train_tokens`` do not say how long their examples were: ``mean_tokens`` stands in
    for it, and is given only for runs on the very data being estimated (where it is the same figure).
    """
    tokens = record.train_tokens or mean_tokens
    if record.status != "done" or record.samples_per_s <= 0 or tokens <= 0:
        return 0.0
    return record.samples_per_s * tokens


def had_the_machine(record: RunRecord, cores: int) -> bool:
    """Whether a run trained with the machine to itself: on as many threads as it has cores from start to end,
    and no other process kept a core busy meanwhile. Runs off the CPU (no thread counts) and records older than
    ``busy_cores`` are judged on what they say."""
    fewest = min((n for _, n in record.threads), default=cores)
    return fewest >= cores and record.busy_cores < BUSY_THRESHOLD


def measured_speed(records: Iterable[RunRecord], model: str, protocol: str, discipline: str, *,
                   mean_tokens: float = 0.0, cores: int | None = None) -> Speed | None:
    """The speed to promise a run of ``model`` under ``protocol`` on ``discipline`` (whose examples hold
    ``mean_tokens`` tokens with the specials, where known), from the finished runs in ``records`` on a
    machine of ``cores`` cores (this one's by default).

    The median over that model and protocol's runs that had the machine (:func:`had_the_machine`) on the
    same discipline where there are any, else on every discipline; where none was measured alone, the
    model's typical figure (:data:`TYPICAL_TOKENS_PER_S`); where it has none, the runs that shared the
    machine in the same order; None where nothing is known. The median, because one run slowed by something
    its record cannot see must not move the promise.
    """
    cores = cores or os.cpu_count() or 1
    same_model = [r for r in records if r.spec.get("model") == model and r.spec.get("protocol") == protocol]
    alone: list[RunRecord] = []
    beside: list[RunRecord] = []
    for r in same_model:
        if had_the_machine(r, cores):
            alone.append(r)
        elif run_tokens_per_s(r, mean_tokens) > 0:
            beside.append(r)

    def median_of(runs: list[RunRecord], shared_figure: bool) -> Speed | None:
        here = [t for r in runs if r.spec.get("discipline") == discipline
                if (t := run_tokens_per_s(r, mean_tokens)) > 0]
        if here:
            return Speed(statistics.median(here), len(here), model, protocol, discipline,
                         len(beside), shared_figure)
        anywhere = [t for r in runs if (t := run_tokens_per_s(r)) > 0]
        if anywhere:
            return Speed(statistics.median(anywhere), len(anywhere), model, protocol, "", len(beside), shared_figure)
        return None

    found = median_of(alone, False)
    if found is not None:
        return found
    typical = typical_tokens_per_s(model)
    if typical is not None:
        return Speed(typical, 0, model, protocol, discipline, len(beside))
    return median_of(beside, True)
