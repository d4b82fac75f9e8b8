"""The status line every page shows (alive workers, what the queue holds), read once for every session."""

from __future__ import annotations

import threading
import time
from typing import Any

from labcore.door import runs as lab_runs
from labcore.door.runs import Lab

_SUMMARIES: dict[str, tuple[float, dict[str, Any]]] = {}
_SUMMARIES_LOCK = threading.Lock()
SUMMARY_TTL_S = 1.0  # how long one reading of the workers and the queue serves every session, at least
SUMMARY_COST_SHARE = 0.1  # ... and at least ten times what it took: the status line takes at most a tenth of a core


def worker_summary(lab: Lab) -> dict[str, Any]:
    """Alive workers and what the queue holds, for the status line every page shows: read at most once a
    second per server (less often where reading takes longer) and shared by every session (it reads every
    run's status, and each viewer's sidebar asks); a submission reads it again at once."""
    root = str(lab.root)
    with _SUMMARIES_LOCK:
        found = _SUMMARIES.get(root)
        if found is None or time.monotonic() > found[0]:
            started = time.monotonic()
            workers = lab_runs.workers(lab)
            counts = lab_runs.run_counts(lab)  # every run's status, its record not kept (hence the longer life below)
            cost = time.monotonic() - started
            found = _SUMMARIES[root] = (time.monotonic() + max(SUMMARY_TTL_S, cost / SUMMARY_COST_SHARE), {
                "workers": workers, "queued": counts.get("queued", 0), "running": counts.get("running", 0),
                "total": sum(counts.values())})
    return dict(found[1])


def forget_summary(lab: Lab) -> None:
    """The queue changed: the next status line reads it again instead of the shared reading."""
    with _SUMMARIES_LOCK:
        _SUMMARIES.pop(str(lab.root), None)
