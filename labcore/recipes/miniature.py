"""Faithful miniatures: the paper's own task scaled until a run on two cores learns it, chosen by a pilot.

Where a headline claim's primary task is one no affordable run of the quick budget learns (FPT's frozen bodies end
under bit memory's copy floor), the claim cannot be tested at that size at all. DESIGN.md's rule is to scale the
task, not the claim: a smaller variant of the paper's own task (fewer or shorter bit strings), a longer run, or
both, picked by a pilot of a *reference arm* that no headline claim compares (FPT's own baseline, a transformer of
the same size trained fully from scratch), never by either compared arm and never by the difference under test.

A :class:`Miniature` records the paper's setting, the candidate sizes the pilot tried (cheapest first), the rule
that picks one, the pilot's numbers and the choice. ``bench/pilot.py NAME`` reruns the pilot (seeded) and writes
its curve to :func:`pilot_path`; the recipe's quick budget reads the chosen size's settings from here, so the
choice was committed before any run that reads the claim.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from labcore.errors import LabError
from labcore.recipes.verdict import ClaimTest

DATA = Path(__file__).resolve().parent / "data"
EFFECT = ClaimTest().effect  # the gate's smallest effect of interest: a size is learnt where the arm clears it


@dataclass(frozen=True)
class PilotSize:
    """One candidate of a pilot: its name and the reference arm's run settings at that size."""

    label: str  # "20 bits x 5 strings in tokens of 5 (24 tokens), 300 steps"
    discipline_params: tuple[tuple[str, Any], ...] = ()
    run: tuple[tuple[str, Any], ...] = ()  # RunSpec fields beside the discipline's (max_steps, train_size, lr)

    def fields(self) -> dict[str, Any]:
        return dict(self.run, discipline_params=dict(self.discipline_params))


@dataclass(frozen=True)
class Miniature:
    """A paper's task as the quick budget runs it, with the paper's setting, the reason and the pilot behind it."""

    name: str  # the pilot's name (bench/pilot.py NAME) and its data file's
    recipe: str
    task: str  # the discipline
    claims: tuple[str, ...]  # the headline claims whose primary task this is
    paper: str  # the paper's own setting, in words
    reason: str  # why the quick budget cannot run the paper's (or today's) setting as it is
    reference: str  # the reference arm, in words, and why no headline claim compares it
    arm: tuple[tuple[str, Any], ...]  # the reference arm's RunSpec fields common to every size
    sizes: tuple[PilotSize, ...]  # the candidates, cheapest first
    floor: float  # the task's floor (majority class, chance, the copy floor) the arm must clear
    rule: str = ""  # how the pilot's numbers pick the size (default: :data:`RULE`)
    chosen: str = ""  # the chosen size's label; "" while no pilot has run (the budget keeps its setting)
    seeds: tuple[int, ...] = (0,)

    @property
    def rule_text(self) -> str:
        return self.rule or RULE.format(effect=EFFECT)

    def size(self, label: str) -> PilotSize:
        for size in self.sizes:
            if size.label == label:
                return size
        raise LabError(f"miniature {self.name} has no size {label!r}; its sizes: "
                       f"{', '.join(s.label for s in self.sizes)}")

    @property
    def choice(self) -> PilotSize | None:
        return self.size(self.chosen) if self.chosen else None

    def record(self) -> dict[str, Any]:
        """What the report and the docs show: the settings side by side, the reason and the pilot's numbers."""
        return {"name": self.name, "recipe": self.recipe, "task": self.task, "claims": list(self.claims),
                "paper": self.paper, "ours": self.chosen or "(no pilot yet: the budget's own setting)",
                "reason": self.reason, "reference arm": self.reference, "rule": self.rule_text,
                "pilot": pilot_numbers(self.name)}


def cuts(miniatures: Iterable[Miniature], recipe: str) -> tuple[str, ...]:
    """The quick budget's cut lines of a recipe's chosen miniatures: what runs, instead of what, and why."""
    return tuple(f"{m.task}: {m.chosen} instead of the paper's {m.paper}, the size a pilot of {m.reference.split(':')[0]} "
                 f"learnt (the {m.name} miniature: {m.reason})" for m in miniatures if m.recipe == recipe and m.chosen)


def pilot_words(miniature: Miniature) -> str:
    """The pilot in one sentence for a report: each size's reference-arm test score against the floor, and the pick."""
    sizes = pilot_numbers(miniature.name).get("sizes", {})
    if not sizes:
        return f"The {miniature.name} miniature has no pilot yet (bench/pilot.py {miniature.name})."
    scores = "; ".join(f"{label}: {row['test']:.3f}" for label, row in sizes.items() if row.get("test") is not None)
    picked = f"chosen: {miniature.chosen}" if miniature.chosen else "no size chosen: the budget's own setting runs"
    return (f"The {miniature.name} miniature ({miniature.task}): the pilot of {miniature.reference.split(':')[0]} "
            f"scored {scores} (floor {miniature.floor:g}, needed {miniature.floor + EFFECT:g}); {picked}.")


RULE = ("the cheapest size whose reference arm's mean test score over the pilot's seeds is at least the task's "
        "floor plus {effect:g} (the gate's smallest effect of interest), read before any run of a compared arm")


def pilot_path(name: str) -> Path:
    return DATA / f"pilot-{name}.json"


def pilot_numbers(name: str) -> dict[str, Any]:
    """The pilot's written curve ({} before it ran): per size, the test score, the validation curve, the time."""
    path = pilot_path(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def pick(miniature: Miniature, numbers: Mapping[str, Any]) -> str:
    """The rule: the cheapest candidate (the sizes' order) whose reference arm cleared floor + effect; "" if none."""
    for size in miniature.sizes:
        row = numbers.get("sizes", {}).get(size.label)
        floor = row.get("floor", miniature.floor) if row else miniature.floor  # the measured majority class
        if row and row.get("test") is not None and row["test"] >= floor + EFFECT - 1e-9:
            return size.label
    return ""


__all__ = ["DATA", "EFFECT", "Miniature", "PilotSize", "RULE", "cuts", "pick", "pilot_words", "pilot_numbers", "pilot_path"]
