"""Lessons as the pages see them: the catalogue, a sitting and its seats, the lesson's runs and what they
measured, the figures, and which runs students may not see yet.

A page passes the store; everything here returns data or a figure. What a student sees before the reveal is
decided by the page's role (teacher, solo owner, student) and :func:`hidden_keys`: the runs of every lesson
whose sitting has not revealed them yet, so the Runs and Compare pages can keep them from students too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from labcore.figures import lessons as lesson_figures
from labcore.jobs import key_of
from labcore.lessons import catalogue, runs, sittings
from labcore.lessons.explain import explain
from labcore.lessons.runs import command
from labcore.lessons.handout import handout_html, handout_pdf
from labcore.lessons.measure import Measured, is_right, measure
from labcore.lessons.model import Figure, Lesson, LessonError
from labcore.store import Store

__all__ = ["Lesson", "LessonError", "LessonView", "Measured", "catalogue", "command", "handout_html", "handout_pdf",
           "hidden_keys", "is_right", "prediction_figure", "result_figure", "runs", "share_right", "sittings",
           "view", "whatif_view"]

UNREVEALED = ("predict", "running")  # phases whose lesson runs students may not see
UNREVEALED_WHATIF = ("vote", "whatif")


@dataclass(frozen=True)
class LessonView:
    """A lesson's runs as they stand: statuses by role, how many ended, and once all have, the answer."""

    lesson: Lesson
    keys: tuple[str, ...]
    statuses: tuple[tuple[str, str], ...]  # (role, status), one per run ("" not submitted)
    done: int
    ended: bool
    measured: Measured | None
    explanation: str


def view(store: Store, lesson: Lesson) -> LessonView:
    keys = runs.lesson_keys(lesson)
    records = runs.records(store, keys)
    statuses = tuple((run.role, (records[k].status if records[k] else "")) for run, k in zip(lesson.runs, keys))
    ended = runs.ended(store, keys)
    measured = measure(lesson, runs.results(store, keys), keys) if ended else None
    return LessonView(lesson, keys, statuses, sum(1 for _, s in statuses if s == "done"), ended, measured,
                      explain(lesson, measured) if measured else "")


def whatif_view(store: Store, lesson: Lesson, option: str) -> LessonView:
    """The what-if run beside the run it changes: a lesson of the two, answered by their gap."""
    base = lesson.whatif.role
    role = runs.whatif_role(lesson, option)
    spec = runs.whatif_spec(lesson, option)
    pair = replace(runs.with_role(lesson, role, spec), name=f"{lesson.name}:whatif:{option}",
                   figure=Figure("gap", (role, base), lesson.figure.measure))
    pair = replace(pair, runs=tuple(r for r in pair.runs if r.role in (role, base) or r.kind == "pretrain"))
    return view(store, pair)


def hidden_keys(store: Store) -> set[str]:
    """Run keys students may not see yet: those of every lesson whose class sitting has not revealed them (one
    person's solo sitting hides nothing from others, and an abandoned one must not hide a demo for good)."""
    hidden: set[str] = set()
    for sitting in sittings.all_sittings(store.root):
        if sitting.solo:
            continue
        try:
            lesson = catalogue.get(sitting.lesson)
        except LessonError:
            continue
        if sitting.phase in UNREVEALED:
            hidden.update(runs.lesson_keys(lesson))
        if sitting.phase in UNREVEALED_WHATIF and sitting.whatif and lesson.whatif:
            hidden.add(key_of(runs.whatif_spec(lesson, sitting.whatif)))
    return hidden


def share_right(lesson: Lesson, measured: Measured, guesses: Sequence[Any]) -> tuple[int, int]:
    """(right, answered) of the class's guesses."""
    return sum(1 for g in guesses if is_right(lesson, measured, g)), len(guesses)


def prediction_figure(lesson: Lesson, guesses: Sequence[Any], measured: Measured | None = None, mine: Any = None,
                      title: str = ""):
    """The class's predictions (with the answer drawn once ``measured`` is given, and ``mine`` marked)."""
    question = lesson.question
    if question.kind == "number":
        return lesson_figures.number_histogram(
            [float(g) for g in guesses], question.low, question.high, unit=question.unit,
            answer=measured.value if measured else None, answer_low=measured.low if measured else None,
            answer_high=measured.high if measured else None, mine=mine, title=title)
    return lesson_figures.answer_bars(guesses, question.choices if question.kind == "choice" else (),
                                      answer=measured.answer if measured else None, mine=mine, title=title)


def result_figure(measured: Measured, title: str = ""):
    values = measured.values
    return lesson_figures.measured_bars([v.role for v in values], [v.mean for v in values],
                                        [v.low for v in values], [v.high for v in values], metric=measured.metric,
                                        floor=measured.floor, title=title)
