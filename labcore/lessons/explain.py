"""A lesson's explanation, written from the measured numbers only: every figure in it is read from
:class:`~labcore.lessons.measure.Measured`, so the text can never contradict what the runs found (a lesson
whose runs come out unlike the paper says so in the same words the numbers do)."""

from __future__ import annotations

from labcore.lessons.measure import Measured, RoleValue
from labcore.lessons.model import Lesson


def _words(metric: str) -> str:
    return (metric or "metric").replace("_", " ")


def _span(low: float, high: float, signed: bool = False) -> str:
    return f"{low:+.2f} to {high:+.2f}" if signed else f"{low:.2f}-{high:.2f}"


def _one(value: RoleValue) -> str:
    runs = f"{value.runs} seeds" if value.runs > 1 else (f"{value.test_examples:,} test examples"
                                                          if value.test_examples else "one run")
    return f"{value.role} {value.mean:.2f} (95 % interval {_span(value.low, value.high)}, {runs})"


def _figure_sentence(lesson: Lesson, measured: Measured) -> str:
    kind, roles, metric = lesson.figure.kind, lesson.figure.roles, _words(measured.metric)
    if kind == "value":
        return (f"The answer to the question is {roles[0]}'s {metric}: {measured.value:.2f}, and with this test set "
                f"anything from {measured.low:.2f} to {measured.high:.2f} is as likely.")
    if kind == "gap":
        a, b = roles
        head = (f"{a} minus {b} is {measured.value:+.2f} {metric} (95 % interval "
                f"{_span(measured.low, measured.high, signed=True)})")
        if measured.low > 0:
            return f"{head}: the interval lies above zero, so {a} scores higher."
        if measured.high < 0:
            return f"{head}: the interval lies below zero, so {b} scores higher."
        return (f"{head}: the interval includes zero, so these runs show no measurable difference; more seeds "
                f"would narrow it.")
    order = measured.order
    text = f"Measured from highest to lowest: {' > '.join(order)}."
    close = [(x, y) for x, y in zip(order, order[1:]) if _overlap(measured.of(x), measured.of(y))]
    if close:
        pairs = "; ".join(f"{x} and {y}" for x, y in close)
        text += f" The intervals of {pairs} overlap: another seed could swap them."
    return text


def _overlap(a: RoleValue | None, b: RoleValue | None) -> bool:
    return a is not None and b is not None and a.low <= b.high and b.low <= a.high


def _floor_sentence(measured: Measured) -> str:
    if measured.floor is None or measured.metric in ("steps_to_converge", ""):
        return ""
    stuck = [v.role for v in measured.values if v.mean <= measured.floor + 0.01]
    what = "Guessing scores" if measured.metric == "bit_accuracy" else "Always answering the most frequent class scores"
    text = f"{what} {measured.floor:.2f}"
    if stuck:
        text += f"; {' and '.join(stuck)} did no better than that, so {'it' if len(stuck) == 1 else 'they'} " \
                f"learnt nothing measurable in this budget"
    return text + "."


def explain(lesson: Lesson, measured: Measured) -> str:
    """The explanation the reveal and the handout show: the measured values, the figure that answers the
    question and what it says, and the floor a run must beat."""
    metric = _words(measured.metric)
    sentences = [f"Measured {metric}: " + "; ".join(_one(v) for v in measured.values) + ".",
                 _figure_sentence(lesson, measured), _floor_sentence(measured),
                 f"The question comes from {lesson.source}; these are short runs on this machine, so compare the "
                 f"direction with the paper's rather than the size."]
    return " ".join(s for s in sentences if s)
