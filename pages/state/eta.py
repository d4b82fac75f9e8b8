"""A run's progress in words and its ETA, from its step counts and the wall times of its step events."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from labcore.door.runs import FINISHED
from labcore.door.views import fmt_duration

@dataclass(frozen=True)
class Progress:
    step: int
    total: int
    fraction: float
    eta_s: float | None
    text: str


def progress(status: str, step: int, total: int, events: Sequence[dict[str, Any]] = (),
             now: float | None = None) -> Progress:
    """Progress and ETA of a run from its step counts and the wall times of its step events.

    The rate comes from the step events of the current attempt (model loading is not training speed);
    with fewer than two timed steps there is no ETA yet.
    """
    now = time.time() if now is None else now
    fraction = min(1.0, step / total) if total else (1.0 if status in FINISHED else 0.0)
    attempt_start = max((i for i, e in enumerate(events) if e.get("type") == "attempt"), default=-1)
    timed = [e for i, e in enumerate(events) if i > attempt_start and e.get("type") == "step" and "t" in e]
    eta = None
    if status == "running" and total and len(timed) >= 2:
        first, last = timed[0], timed[-1]
        span_steps = int(last["step"]) - int(first["step"])
        span_time = float(last["t"]) - float(first["t"])
        if span_steps > 0 and span_time > 0:
            eta = max(0.0, (total - step) / (span_steps / span_time))
    if status == "queued":
        text = "queued"
    elif status == "running":
        text = f"step {step}" + (f" of {total}" if total else "") + (f", about {fmt_duration(eta)} left"
                                                                     if eta is not None else "")
    else:
        text = status + (f" at step {step}" + (f" of {total}" if total else "") if step else "")
    return Progress(step, total, fraction, eta, text)
