"""Durations and ages as people read them, for the pages and the command line alike."""

from __future__ import annotations

import time


def fmt_duration(seconds: float | None) -> str:
    """``42 s``, ``2 min 05 s``, ``1 h 03 min``; ``–`` when unknown."""
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def fmt_age(t: float | None, now: float | None = None) -> str:
    """How long ago the wall time ``t`` was (``2 min 05 s ago``); ``–`` when there is none."""
    if not t:
        return "–"
    return fmt_duration((time.time() if now is None else now) - t) + " ago"
