"""How fast runs train on this machine: the training speed that finished runs measured, for the time the pages
promise before a run starts (:func:`labcore.runspec.estimate`).

A run's speed is its tokens per second of training steps: ``samples_per_s`` (examples over the time spent in
steps, evaluation and preparing left out) times the mean tokens of a training example. Tokens, not examples,
because a step's cost follows the sequences' length: a speed measured on one discipline then serves another
of the same model.

A promise is for a run with the machine to itself, so only runs that had it count while there are any: a run
that trained on fewer threads than the machine has cores (two workers side by side, a busy machine when it
started) or beside other processes that kept a core busy (``busy_cores``) measures a fraction of the machine.
Nine MiniLM runs of a recipe's two workers, under a load of 3-6, measured 300-600 tokens/s where the machine
alone gives several thousand: taken as they were, they promised a ten-times-too-long wait. Such runs serve only
where nothing else is known.

A token does not cost the same at every length: attention grows with the square of it, so a run borrowing the
speed of 60-token data for 490-token windows promised half the time it took. The seconds per token of the model's
runs are a line in their examples' length (:func:`length_cost`, fitted on the runs themselves), and a speed
measured at one length is carried to another along it. Pure functions over run records; no torch, no store.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from dataclasses import dataclass
from typing import Iterable

from labcore.machine.cores import BUSY_THRESHOLD
from labcore.machine.device import native_bf16
from labcore.results.record import RunRecord
from labcore.runspec import MINILM_TOKENS_PER_S, MINILM_TOKENS_PER_S_BF16

# What a model trains at where no run of it was measured here, by the precision ``auto`` gives on this CPU:
# MiniLM's quick-budget measurements (labcore/runspec/priors.json, each with its machine and date). Other models
# have no typical figure: their time is promised only once one of them ran.
TYPICAL_TOKENS_PER_S = {"minilm": {"fp32": MINILM_TOKENS_PER_S, "bf16": MINILM_TOKENS_PER_S_BF16}}


def typical_tokens_per_s(model: str) -> float | None:
    """The model's typical figure on this CPU (native bf16 or not: twice the speed), None where it has none."""
    figures = TYPICAL_TOKENS_PER_S.get(model)
    if figures is None:
        return None
    return figures["bf16" if native_bf16("cpu") else "fp32"]


@dataclass(frozen=True)
class LengthCost:
    """Seconds a training token costs as a line in the examples' mean length: ``per_token_s +
    per_token_per_length_s * length``, fitted on runs that trained under the same conditions (their thread counts
    and whether the machine was busy), so the line's shape is the length's alone."""

    per_token_s: float
    per_token_per_length_s: float
    runs: int
    shortest: float  # the fitted runs' examples, in tokens
    longest: float

    def seconds_per_token(self, length: float) -> float:
        return self.per_token_s + self.per_token_per_length_s * length

    def carry(self, tokens_per_s: float, from_length: float, to_length: float) -> float:
        """A speed measured on examples of ``from_length`` tokens, for examples of ``to_length``."""
        return tokens_per_s * self.seconds_per_token(from_length) / self.seconds_per_token(to_length)


# A line through fewer runs, or over lengths closer than twice apart, says more about noise than about length.
LENGTH_FIT_MIN_RUNS = 3
LENGTH_FIT_MIN_SPAN = 2.0
# Carried speeds that move less than this are said without the carrying.
LENGTH_WORTH_SAYING = 0.05


def length_cost(records: Iterable[RunRecord], cores: int) -> LengthCost | None:
    """The seconds per token of ``records`` (one model and protocol) as a line in their examples' length.

    Runs are grouped by the conditions they trained under (fewest threads, busy machine or not): across groups
    the speed differs for reasons other than length. The group whose lengths span the most (at least
    :data:`LENGTH_FIT_MIN_RUNS` runs over lengths :data:`LENGTH_FIT_MIN_SPAN` times apart) gives the line
    (``scipy.stats.linregress`` of seconds per token on length). None where no group qualifies or the line
    does not rise with length from a positive cost: then nothing is carried.
    """
    groups: dict[tuple[int, bool], list[tuple[float, float]]] = {}
    for r in records:
        speed = run_tokens_per_s(r)
        if speed <= 0 or r.busy_cores < 0:  # older records do not say whether the machine was busy
            continue
        groups.setdefault(condition(r, cores), []).append((r.train_tokens, 1.0 / speed))
    fits = [points for points in groups.values() if len(points) >= LENGTH_FIT_MIN_RUNS
            and max(x for x, _ in points) >= LENGTH_FIT_MIN_SPAN * min(x for x, _ in points)]
    if not fits:
        return None
    points = max(fits, key=lambda p: (max(x for x, _ in p) / min(x for x, _ in p), len(p)))
    from scipy import stats

    line = stats.linregress([x for x, _ in points], [y for _, y in points])
    if not (line.slope > 0 and line.intercept > 0):
        return None
    lengths = [x for x, _ in points]
    return LengthCost(float(line.intercept), float(line.slope), len(points), min(lengths), max(lengths))


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
    measured_tokens: float = 0.0  # the runs' examples (median, tokens) where their speed was carried to another length
    length: LengthCost | None = None  # what carried it
    for_tokens: float = 0.0  # the length it was carried to

    def carried(self) -> str:
        """How the speed was carried from the runs' length to the data's, '' where it was not."""
        if self.length is None:
            return ""
        return (f" at {self.for_tokens:,.0f} tokens an example, carried from their {self.measured_tokens:,.0f} by the "
                f"cost per token {self.length.runs} runs measured at {self.length.shortest:,.0f} to "
                f"{self.length.longest:,.0f} tokens")

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
                f"{self.tokens_per_s:,.0f} tokens/s{self.carried()}")
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
    fewest, busy = condition(record, cores)
    return fewest >= cores and not busy


def condition(record: RunRecord, cores: int) -> tuple[int, bool]:
    """What a run trained under: its fewest threads (``cores`` off the CPU, where it has no thread counts) and
    whether other processes kept a core busy meanwhile."""
    return min((n for _, n in record.threads), default=cores), record.busy_cores >= BUSY_THRESHOLD


def measured_speed(records: Iterable[RunRecord], model: str, protocol: str, discipline: str, *,
                   mean_tokens: float = 0.0, cores: int | None = None) -> Speed | None:
    """The speed to promise a run of ``model`` under ``protocol`` on ``discipline`` (whose examples hold
    ``mean_tokens`` tokens with the specials, where known), from the finished runs in ``records`` on a
    machine of ``cores`` cores (this one's by default).

    The median over that model and protocol's runs that had the machine (:func:`had_the_machine`) on the
    same discipline where there are any, else on every discipline; where none was measured alone, the
    model's typical figure (:data:`TYPICAL_TOKENS_PER_S`); where it has none, the runs that shared the
    machine in the same order; None where nothing is known. The median, because one run slowed by something
    its record cannot see must not move the promise. Where ``mean_tokens`` is known and the runs trained on
    examples of another length, each run's speed is carried to it first (:func:`length_cost`, fitted on all
    the model and protocol's runs).
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

    cost = length_cost(same_model, cores) if mean_tokens > 0 else None

    def median_of(runs: list[RunRecord], shared_figure: bool, where: str) -> Speed | None:
        measured = [(r.train_tokens or mean_tokens, t) for r in runs
                    if (t := run_tokens_per_s(r, mean_tokens if where else 0.0)) > 0]
        if not measured:
            return None
        speed = statistics.median(t for _, t in measured)
        carried = statistics.median(cost.carry(t, n, mean_tokens) for n, t in measured) if cost else speed
        found = Speed(speed, len(measured), model, protocol, where, len(beside), shared_figure)
        if abs(carried / speed - 1) <= LENGTH_WORTH_SAYING:
            return found
        return dataclasses.replace(found, tokens_per_s=carried, length=cost, for_tokens=mean_tokens,
                                   measured_tokens=statistics.median(n for n, _ in measured))

    def first_of(runs: list[RunRecord], shared_figure: bool) -> Speed | None:
        here = [r for r in runs if r.spec.get("discipline") == discipline]
        return median_of(here, shared_figure, discipline) or median_of(runs, shared_figure, "")

    found = first_of(alone, False)
    if found is not None:
        return found
    typical = typical_tokens_per_s(model)
    if typical is not None:
        return Speed(typical, 0, model, protocol, discipline, len(beside))
    return first_of(beside, True)
