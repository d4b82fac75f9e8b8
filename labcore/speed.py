"""How fast runs train on this machine: the training speed that finished runs measured, for the time the pages
promise before a run starts (:func:`labcore.spec.estimate`).

A run's speed is its tokens per second of training steps: ``samples_per_s`` (examples over the time spent in
steps, evaluation and preparing left out) times the mean tokens of a training example. Tokens, not examples,
because a step's cost follows the sequences' length: a speed measured on one discipline then serves another
of the same model. Pure functions over run records; no torch, no store.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable

from labcore.record import RunRecord
from labcore.spec import MINILM_TOKENS_PER_S

# What a model trains at where no run of it was measured here: MiniLM's quick-budget measurements (see
# labcore.spec). Other models have no typical figure: their time is promised only once one of them ran.
TYPICAL_TOKENS_PER_S = {"minilm": MINILM_TOKENS_PER_S}


@dataclass(frozen=True)
class Speed:
    """A training speed and where it comes from."""

    tokens_per_s: float
    runs: int  # finished runs it is the median of; 0: the typical figure, nothing measured
    model: str
    protocol: str
    discipline: str  # the runs' discipline; "" where they trained on any discipline of the model

    def words(self) -> str:
        """Where the figure comes from, as the New experiment page says it."""
        if not self.runs:
            return f"no run measured yet: a typical figure, {self.tokens_per_s:,.0f} tokens/s"
        where = f"on {self.discipline}" if self.discipline else "on other disciplines"
        return (f"from {self.runs} {self.protocol} run{'s' if self.runs != 1 else ''} of {self.model} {where} here: "
                f"{self.tokens_per_s:,.0f} tokens/s")


def run_tokens_per_s(record: RunRecord, mean_tokens: float = 0.0) -> float:
    """The training tokens per second a finished run measured; 0 where it measured none.

    Records older than ``train_tokens`` do not say how long their examples were: ``mean_tokens`` stands in
    for it, and is given only for runs on the very data being estimated (where it is the same figure).
    """
    tokens = record.train_tokens or mean_tokens
    if record.status != "done" or record.samples_per_s <= 0 or tokens <= 0:
        return 0.0
    return record.samples_per_s * tokens


def measured_speed(records: Iterable[RunRecord], model: str, protocol: str, discipline: str, *,
                   mean_tokens: float = 0.0) -> Speed | None:
    """The speed to promise a run of ``model`` under ``protocol`` on ``discipline`` (whose examples hold
    ``mean_tokens`` tokens with the specials, where known), from the finished runs in ``records``.

    The median over that model and protocol's runs on the same discipline where there are any, else on every
    discipline; where none was measured, the model's typical figure (:data:`TYPICAL_TOKENS_PER_S`); None
    where it has none. The median, because a run that shared the cores with other work measures a fraction
    of the machine's speed, and one such run must not move the promise.
    """
    same_model = [r for r in records if r.spec.get("model") == model and r.spec.get("protocol") == protocol]
    here = [t for r in same_model if r.spec.get("discipline") == discipline
            if (t := run_tokens_per_s(r, mean_tokens)) > 0]
    if here:
        return Speed(statistics.median(here), len(here), model, protocol, discipline)
    anywhere = [t for r in same_model if (t := run_tokens_per_s(r)) > 0]
    if anywhere:
        return Speed(statistics.median(anywhere), len(anywhere), model, protocol, "")
    if model in TYPICAL_TOKENS_PER_S:
        return Speed(TYPICAL_TOKENS_PER_S[model], 0, model, protocol, discipline)
    return None
