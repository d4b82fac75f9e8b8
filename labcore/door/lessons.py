"""Lessons as the pages see them: the catalogue, a sitting and its seats, the lesson's runs and what they
measured, the figures, and which runs students may not see yet.

A page passes its :class:`~labcore.door.lab.Lab` (a sitting lives in the lab's folder, a lesson's runs in its
store) and, to submit a lesson's runs, its :class:`~labcore.door.desk.Desk`; everything here returns data or a
figure. What a student sees before the reveal is decided by the page's role (teacher, solo owner, student) and
:func:`hidden_keys`: the runs of every lesson whose sitting has not revealed them yet, so the Runs and Compare
pages can keep them from students too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from labcore.door.desk import Desk
from labcore.door.lab import Lab
from labcore.figures import lessons as lesson_figures
from labcore.jobs import key_of
from labcore.errors import LabError
from labcore.lessons import catalogue, proposals, runs, sittings
from labcore.lessons.explain import explain
from labcore.lessons.runs import command
from labcore.lessons.handout import handout_html, handout_pdf
from labcore.lessons.measure import Measured, is_right, measure
from labcore.lessons.model import Figure, Lesson, LessonError
from labcore.lessons.sittings import CODE_LENGTH, MAX_NICKNAME, Seat, Sitting, leader, seat_of_token

__all__ = ["CODE_LENGTH", "MAX_NICKNAME", "Lesson", "LessonError", "LessonView", "Measured", "Seat", "Sitting",
           "advance", "all_sittings", "command", "delete_sitting", "get_lesson", "get_sitting", "guesses",
           "handout_html", "handout_pdf", "hidden_keys", "is_right", "join", "leader", "lesson_names",
           "open_sitting", "predict", "prediction_figure", "propose_table", "propose_table_as_teacher",
           "result_figure", "seat_of", "seat_of_token", "seats", "set_phase", "share_right", "submit_whatif",
           "table_example", "takes_tables", "tally", "view", "vote", "vote_winner", "votes", "whatif_options",
           "whatif_view"]

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


def lesson_names() -> list[str]:
    """Every lesson of the catalogue, in its order."""
    return catalogue.names()


def get_lesson(name: str) -> Lesson:
    """The lesson called ``name`` (a LessonError names the lessons where there is none)."""
    return catalogue.get(name)


def view(lab: Lab, lesson: Lesson) -> LessonView:
    keys = runs.lesson_keys(lesson)
    records = runs.records(lab, keys)
    statuses = tuple((run.role, (records[k].status if records[k] else "")) for run, k in zip(lesson.runs, keys))
    ended = runs.ended(lab, keys)
    measured = measure(lesson, runs.results(lab, keys), keys) if ended else None
    return LessonView(lesson, keys, statuses, sum(1 for _, s in statuses if s == "done"), ended, measured,
                      explain(lesson, measured) if measured else "")


def whatif_view(lab: Lab, lesson: Lesson, option: str) -> LessonView:
    """The what-if run beside the run it changes: a lesson of the two, answered by their gap."""
    base = lesson.whatif.role
    role = runs.whatif_role(lesson, option)
    spec = runs.whatif_spec(lesson, option)
    pair = replace(runs.with_role(lesson, role, spec), name=f"{lesson.name}:whatif:{option}",
                   figure=Figure("gap", (role, base), lesson.figure.measure))
    pair = replace(pair, runs=tuple(r for r in pair.runs if r.role in (role, base) or r.kind == "pretrain"))
    return view(lab, pair)


def hidden_keys(lab: Lab) -> set[str]:
    """Run keys students may not see yet: those of every lesson whose class sitting has not revealed them (one
    person's solo sitting hides nothing from others, and an abandoned one must not hide a demo for good)."""
    hidden: set[str] = set()
    for sitting in sittings.all_sittings(lab.root):
        if sitting.solo:
            continue
        try:
            lesson = catalogue.get(sitting.lesson)
        except LessonError:
            continue
        if sitting.phase in UNREVEALED:
            hidden.update(runs.lesson_keys(lesson))
        if sitting.phase in UNREVEALED_WHATIF and sitting.whatif and lesson.whatif:
            try:
                hidden.add(key_of(runs.whatif_spec(lesson, sitting.whatif)))
            except LabError:
                continue  # a table this machine's vocabulary now refuses: no run of it was queued to hide
    return hidden


def advance(desk: Desk, lesson: Lesson) -> int:
    """Submit, in the desk's requester's name, the lesson's stages whose earlier stages have ended; the number
    of jobs submitted (finished ones are served from the store, not submitted again)."""
    return runs.advance(lesson, desk)


def submit_whatif(desk: Desk, lesson: Lesson, option: str) -> str:
    """Queue the run the class voted for, in the desk's requester's name, unless the store has it; its key."""
    return runs.submit_whatif(lesson, option, desk)


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


# ---------------------------------------------------------------------------- sittings, in the lab's folder
def open_sitting(lab: Lab, lesson: Lesson, *, solo: bool = False, owner_token: str = "") -> Sitting:
    """A new sitting of ``lesson`` with a fresh code (``solo``: for the one browser holding ``owner_token``)."""
    return sittings.open_sitting(lab.root, lesson, solo=solo, owner_token=owner_token)


def get_sitting(lab: Lab, code: str) -> Sitting:
    """The sitting ``code`` (a LessonError says so where the lab has none)."""
    return sittings.get(lab.root, code)


def all_sittings(lab: Lab) -> list[Sitting]:
    """The lab's sittings, oldest first."""
    return sittings.all_sittings(lab.root)


def set_phase(lab: Lab, code: str, phase: str, *, whatif: str = "") -> Sitting:
    """Move a sitting on (the teacher's action, or a solo owner's); the lock and reveal times are kept."""
    return sittings.set_phase(lab.root, code, phase, whatif=whatif)


def delete_sitting(lab: Lab, code: str) -> None:
    """The sitting and every prediction and vote in it (its runs stay in the store)."""
    sittings.delete(lab.root, code)


def seats(lab: Lab, code: str) -> list[Seat]:
    """Every seat of a sitting, names included (the teacher's list, a handout that asks for names)."""
    return sittings.seats(lab.root, code)


def join(lab: Lab, code: str, nickname: str, token: str = "") -> str:
    """Seat ``nickname`` in the sitting; the token the browser keeps (``token``: the one it has, to come back)."""
    return sittings.join(lab.root, code, nickname, token)


def seat_of(lab: Lab, code: str, token: str) -> Seat | None:
    """The seat of the browser holding ``token``, None where it has none in the sitting."""
    return sittings.seat_of(lab.root, code, token)


def predict(lab: Lab, code: str, token: str, guess: Any) -> Seat:
    """Write this browser's prediction (only its own; refused once the runs have started)."""
    return sittings.predict(lab.root, code, token, guess)


def vote(lab: Lab, code: str, token: str, option: str) -> Seat:
    return sittings.vote(lab.root, code, token, option)


def guesses(lab: Lab, code: str) -> list[Any]:
    """The predictions that count (written before the lock), without names: the histogram's data."""
    return sittings.guesses(lab.root, code)


def tally(lab: Lab, code: str) -> tuple[list[Any], int]:
    """(the predictions that count, the students seated), from one reading of the seats."""
    return sittings.tally(lab.root, code)


def votes(lab: Lab, code: str) -> dict[str, int]:
    """Option -> the votes cast for it before the vote closed, in the options' order."""
    return sittings.votes(lab.root, code)


def vote_winner(lab: Lab, code: str) -> str:
    """The option with the most votes (a tie goes to the one listed first)."""
    return sittings.winner(lab.root, code)


def whatif_options(lab: Lab, code: str) -> tuple[str, ...]:
    """The vote's options: the lesson's own, then the tables proposed in the sitting."""
    return sittings.options(lab.root, code)


def takes_tables(lesson: Lesson) -> bool:
    """Whether the lesson's what-if votes on a token mapping, so its class may propose a mapping table."""
    return proposals.takes_tables(lesson)


def table_example(lesson: Lesson) -> str:
    """A mapping table in the form a proposal takes (``A:1012,C:1013,...``), for the lesson's discipline."""
    return proposals.example(lesson)


def propose_table(lab: Lab, code: str, token: str, text: str) -> str:
    """This browser's student proposes a mapping table while the vote is open (one each): its vote option, or
    a LessonError naming what is wrong with the table and how to fix it."""
    return sittings.propose(lab.root, code, token, text)


def propose_table_as_teacher(lab: Lab, code: str, text: str) -> str:
    """The teacher (or a solo owner) proposes a mapping table, after the reveal or during the vote: its option."""
    return sittings.propose_as_teacher(lab.root, code, text)
