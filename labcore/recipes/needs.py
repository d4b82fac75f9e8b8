"""What a plan needs on this machine before its first job is queued: the packaged weights and data sets.

A drive runs for hours; a job that fails minutes in because ``mnist5k`` was never fetched costs its seeds and
leaves a claim untested. So the plan is checked once, up front, and refused with the commands that fix it.
"""

from __future__ import annotations

from typing import Iterable

from labcore import assets, data
from labcore.errors import LabError
from labcore.recipes.base import Plan


def missing(specs: Iterable[object]) -> dict[str, str]:
    """For every model or discipline the specs name that this machine lacks: its name and the fix."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    for spec in specs:
        model, discipline = getattr(spec, "model", None), getattr(spec, "discipline", None)
        if isinstance(model, str) and model in assets.ASSETS and model not in seen:
            seen.add(model)
            if not assets.is_available(model):
                found[model] = f"model {model!r}: run `python -m labcore assets fetch {model}`"
        if isinstance(discipline, str) and discipline not in seen and discipline in data.names():
            seen.add(discipline)
            ok, why = data.get(discipline).available()
            if not ok:
                found[discipline] = f"discipline {discipline!r}: {why}"
    return found


def require(plan: Plan) -> None:
    """Refuse a plan whose jobs could not start here, naming each missing part and its command."""
    if lacking := missing(step.spec for step in plan.steps):
        raise LabError(f"recipe {plan.recipe!r} needs what this machine has not fetched yet, so no more of its "
                       f"jobs were queued: " + "; ".join(lacking.values())
                       + ". Then run the recipe again: its finished jobs are kept.")
