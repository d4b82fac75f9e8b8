"""What a lesson is: a question, the kind of guess it asks for, the runs that answer it and the figure read
from them, the paper it comes from, and an optional "what if" step.

A lesson is data (one TOML file in ``labcore/lessons/library/``, read by :mod:`labcore.lessons.load`); these
frozen dataclasses are what the file becomes once it has been checked. Nothing here runs or reads a store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labcore.errors import LabError

PREDICTIONS = ("choice", "number", "order")  # one of several answers, a number in a range, an order of conditions
# What a lesson reads from its runs: one condition's value, the gap between two, which of several is best, their
# order. "gap" is also what a three-way choice (a ahead / no measurable difference / b ahead) is decided by.
FIGURES = ("value", "gap", "best", "order")
MEASURES = {"test": "the test metric of the best checkpoint",
            "steps_to_converge": "optimiser steps until validation came within 0.01 of its best (FPT table 6)"}
WHATIF_KINDS = ("mapping", "protocol")
NO_DIFFERENCE = "no measurable difference"


class LessonError(LabError):
    """A lesson file that cannot be taught as written; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class LessonRun:
    """One job a lesson needs: a training run (``kind="run"``) or the pretraining a run's body comes from
    (``kind="pretrain"``), in the stage it waits for (a fine-tune of a ``lab:`` body waits for its pretraining)."""

    role: str  # the condition it stands for, as the class sees it ("pretrained", "k = 3")
    spec: Any  # a RunSpec or a PretrainSpec, as the job store takes it
    seed: int = 0
    stage: int = 0
    kind: str = "run"


@dataclass(frozen=True)
class Question:
    """The guess a student commits to before anything runs."""

    kind: str  # one of PREDICTIONS
    text: str
    choices: tuple[str, ...] = ()  # choice: the answers offered; order: the conditions to order
    low: float = 0.0  # number: the range a student picks from
    high: float = 1.0
    unit: str = ""
    # number: a guess within this of the measured value (or inside its interval, if wider) counts as right
    tolerance: float = 0.05


@dataclass(frozen=True)
class Figure:
    """The measured figure that answers the question."""

    kind: str  # one of FIGURES
    roles: tuple[str, ...]  # the conditions it reads (value: one; gap: a then b; best and order: two or more)
    measure: str = "test"  # one of MEASURES


@dataclass(frozen=True)
class WhatIf:
    """The step after the reveal: students propose a change to one run and vote; the winner runs the same way."""

    kind: str  # "mapping": the token mapping of ``role``'s run; "protocol": its training protocol
    role: str
    options: tuple[str, ...]
    text: str = ""


@dataclass(frozen=True)
class Lesson:
    name: str
    title: str
    question: Question
    runs: tuple[LessonRun, ...]
    figure: Figure
    paper: str  # a key of labcore.recipes.demos.PAPERS
    source: str  # the section and table or figure of the paper the question comes from
    background: str = ""  # one or two sentences a teacher reads out before the guess
    whatif: WhatIf | None = None
    minutes: float = 0.0  # measured end to end on a 2-core CPU at the quick budget (0: not measured yet)

    @property
    def group(self) -> str:
        """The store group its runs join: a second sitting finds them there."""
        return f"lesson:{self.name}"

    @property
    def roles(self) -> tuple[str, ...]:
        """The conditions of its training runs, in the file's order (pretrainings are means, not conditions)."""
        out: list[str] = []
        for run in self.runs:
            if run.kind == "run" and run.role not in out:
                out.append(run.role)
        return tuple(out)

    def runs_of(self, role: str) -> tuple[LessonRun, ...]:
        return tuple(r for r in self.runs if r.role == role and r.kind == "run")

    @property
    def stages(self) -> tuple[tuple[LessonRun, ...], ...]:
        last = max(r.stage for r in self.runs)
        return tuple(tuple(r for r in self.runs if r.stage == n) for n in range(last + 1))


def gap_choices(a: str, b: str) -> tuple[str, str, str]:
    """The three answers a gap decides: a ahead, no measurable difference, b ahead."""
    return (f"{a} scores higher", NO_DIFFERENCE, f"{b} scores higher")
