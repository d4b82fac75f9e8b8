"""The figure that answers a lesson's question, read from its finished runs, with its 95 % interval.

One seed per condition (the quick lessons): a test accuracy's interval is Wilson's over the test examples; a gap's
combines the two (the half-widths added in quadrature, a normal approximation for two independent proportions).
Several seeds: Student-t intervals over the seeds (the gap's over the per-seed differences, as the recipes pair
them). A choice between "a ahead", "no measurable difference" and "b ahead" is decided by whether the gap's
interval excludes zero — the same rule a reader of the figure applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from labcore.lessons.model import NO_DIFFERENCE, Lesson, gap_choices
from labcore.results.metrics import aggregate, wilson_interval
from labcore.results.record import RunRecord


@dataclass(frozen=True)
class RoleValue:
    """One condition's measured figure: the mean over its finished runs and its interval."""

    role: str
    mean: float
    low: float
    high: float
    runs: int
    test_examples: int = 0


@dataclass(frozen=True)
class Measured:
    """What the runs answered: every finished condition's value, the figure's value (a value or gap) with its
    interval, the right choice or order, and the floor a run must beat to have learnt anything."""

    lesson: str
    metric: str
    values: tuple[RoleValue, ...]
    value: float | None  # value and gap figures
    low: float | None
    high: float | None
    answer: str  # the right choice (choice questions), the right order joined by " > " (order questions)
    order: tuple[str, ...]  # the figure's conditions, highest first
    floor: float | None  # majority class (classification) or 0.5 (bits); None where unknown

    def of(self, role: str) -> RoleValue | None:
        return next((v for v in self.values if v.role == role), None)


def _figure_value(record: RunRecord, measure: str) -> float | None:
    if record.status != "done":
        return None
    if measure == "steps_to_converge":
        return None if record.steps_to_converge is None else float(record.steps_to_converge)
    return record.test_value


def role_value(role: str, records: Sequence[RunRecord], measure: str = "test") -> RoleValue | None:
    """``role``'s value over its finished ``records`` (None: none finished with a value)."""
    values = [v for v in (_figure_value(r, measure) for r in records) if v is not None and math.isfinite(v)]
    if not values:
        return None
    examples = min((r.test_examples for r in records if r.status == "done"), default=0)
    if len(values) == 1 and measure == "test" and examples > 0 and 0.0 <= values[0] <= 1.0:
        low, high = wilson_interval(values[0] * examples, examples)
        return RoleValue(role, values[0], low, high, 1, examples)
    agg = aggregate(values)
    return RoleValue(role, agg.mean, agg.ci_low, agg.ci_high, agg.n, examples)


def _gap(a: RoleValue, b: RoleValue, pairs: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """a minus b with its 95 % interval: paired over seeds where there are two or more pairs, else from the two
    intervals (half-widths in quadrature)."""
    if len(pairs) >= 2:
        agg = aggregate([x - y for x, y in pairs])
        return agg.mean, agg.ci_low, agg.ci_high
    gap = a.mean - b.mean
    half_a, half_b = (a.high - a.low) / 2, (b.high - b.low) / 2
    half = math.hypot(half_a, half_b)
    return gap, gap - half, gap + half


def _pairs(lesson: Lesson, results: Mapping[str, RunRecord | None], keys: Mapping[int, str], a: str,
           b: str, measure: str) -> list[tuple[float, float]]:
    """(a, b) values of the seeds both conditions finished."""
    def by_seed(role: str) -> dict[int, float]:
        out = {}
        for index, run in enumerate(lesson.runs):
            record = results.get(keys[index])
            if run.role == role and record is not None and (v := _figure_value(record, measure)) is not None:
                out[run.seed] = v
        return out
    va, vb = by_seed(a), by_seed(b)
    return [(va[s], vb[s]) for s in sorted(set(va) & set(vb))]


def measure(lesson: Lesson, results: Mapping[str, RunRecord | None], keys: Sequence[str]) -> Measured | None:
    """The lesson's answer from ``results`` (by key; ``keys``: its runs' keys, in :attr:`Lesson.runs`' order);
    None until every condition the figure reads has a finished value."""
    figure = lesson.figure
    by_index = dict(enumerate(keys))
    values = []
    for role in lesson.roles:
        records = [results.get(by_index[i]) for i, run in enumerate(lesson.runs) if run.role == role]
        value = role_value(role, [r for r in records if r is not None], figure.measure)
        if value is not None:
            values.append(value)
    found = {v.role: v for v in values}
    if any(role not in found for role in figure.roles):
        return None
    finished = [r for r in results.values() if r is not None and r.status == "done"]
    metric = figure.measure if figure.measure != "test" else (finished[0].metric if finished else "")
    order = tuple(sorted(figure.roles, key=lambda r: -found[r].mean))
    value = low = high = None
    answer = " > ".join(order)
    if figure.kind == "value":
        one = found[figure.roles[0]]
        value, low, high = one.mean, one.low, one.high
    elif figure.kind == "gap":
        a, b = figure.roles
        value, low, high = _gap(found[a], found[b], _pairs(lesson, results, by_index, a, b, figure.measure))
        ahead, same, behind = gap_choices(a, b)
        answer = ahead if low > 0 else behind if high < 0 else same
    elif figure.kind == "best":
        answer = order[0]
    return Measured(lesson.name, metric, tuple(values), value, low, high, answer, order, _floor(finished))


def _floor(records: Sequence[RunRecord]) -> float | None:
    for record in records:
        if record.baseline.get("majority") is not None:
            return float(record.baseline["majority"])
        if record.metric == "bit_accuracy":
            return 0.5
    return None


def is_right(lesson: Lesson, measured: Measured, guess: object) -> bool:
    """Did ``guess`` (a number, a choice, or a list of conditions in order) get the measured answer?

    A number is right within the lesson's tolerance of the measured value, or anywhere inside its interval;
    a choice when it is the measured one; an order when every place matches."""
    kind = lesson.question.kind
    if kind == "number":
        if not isinstance(guess, (int, float)) or measured.value is None:
            return False
        return (abs(float(guess) - measured.value) <= lesson.question.tolerance
                or measured.low <= float(guess) <= measured.high)
    if kind == "choice":
        return guess == measured.answer
    return tuple(guess or ()) == measured.order


__all__ = ["Measured", "NO_DIFFERENCE", "RoleValue", "is_right", "measure", "role_value"]
