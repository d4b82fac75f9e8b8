"""A recipe step's job key, and which steps build on which: what the driver and the tuning stage share."""

from __future__ import annotations

from typing import Any

from labcore.jobs import new_job
from labcore.recipes.base import Step

_KEYS: dict[tuple[str, Step], str] = {}


def step_key(step: Step) -> str:
    """The job key of a step (resolving is torch-free and memoised: a page asks on every refresh)."""
    memo = (type(step.spec).__name__, step)
    if memo not in _KEYS:
        _KEYS[memo] = new_job(step.spec).key
    return _KEYS[memo]


def mentions(spec: Any, step: Step) -> bool:
    """Whether a job spec builds on ``step``'s job: a ``run:KEY`` body, or a ``lab:`` model it pretrains."""
    text = repr(spec)
    name = getattr(step.spec, "name", "")
    return step_key(step) in text or bool(name and f"lab:{name}" in text)


__all__ = ["mentions", "step_key"]
