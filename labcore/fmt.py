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


def fmt_speed(result: dict) -> str:
    """Where a finished run trained and how fast, from its record's fields ("" for records older than them):
    device and its name, training tokens/s, peak memory, and the MFU against the device's measured rate."""
    if not result.get("device") or not result.get("tokens_per_s"):
        return ""
    name = f" ({result['device_name']})" if result.get("device_name") else ""
    text = (f"Trained on {result['device']}{name} in {result.get('precision', '')}: "
            f"{result['tokens_per_s']:,.0f} tokens/s, peak memory {result.get('peak_memory_mb', 0):,.0f} MB")
    if result.get("peak_flops"):
        text += (f", MFU {100 * result.get('mfu', 0):.1f} % of the device's measured "
                 f"{result.get('precision', '')} matrix-product rate ({result['peak_flops'] / 1e12:,.2f} TFLOP/s)")
    return text
