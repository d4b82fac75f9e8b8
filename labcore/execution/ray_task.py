"""What the Ray executor runs on a cluster's nodes: one attempt of one job as a streaming Ray task.

Imported by :mod:`labcore.execution.ray_pump` (the driver) and, by reference, by the Ray worker processes that run
:data:`TASK`; nothing here talks to the store: a task only yields events, which the driver records.
A task is asked to stop through a file in its job's folder (:func:`stop_file`), since Ray's own
non-force cancel ends a generator task before it can checkpoint.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

import ray

from labcore import jobs
from labcore.execution.attempt import Outcome, OutputCapture, run_attempt
from labcore.events import LogEvent, NodeEvent
from labcore.jobs import JobContext, JobInput
from labcore.store import HOST, JobRecord


def stop_file(workdir: Path, attempt: int) -> Path:
    """The file that asks a running attempt to stop; it holds the reason (``cancelled``/``interrupted``)."""
    return workdir / f".stop-{attempt}"


def _read_stop(path: Path) -> str | None:
    try:
        return path.read_text().strip() or "cancelled"
    except FileNotFoundError:
        return None


class _LogLines:
    """What a task prints, kept until the generator yields it (OutputCapture writes here from its threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []

    def log(self, message: str, source: str = "worker") -> None:
        with self._lock:
            self._events.append(LogEvent(source=source, message=message, t=time.time()).to_dict())

    def drain(self) -> list[dict[str, Any]]:
        with self._lock:
            events, self._events = self._events, []
        return events


def task(job: dict[str, Any]) -> Iterator[dict[str, Any] | Outcome]:
    """On a node: one attempt of one job. Yields where it runs, then the job's events, then its Outcome."""
    yield NodeEvent(node_id=ray.get_runtime_context().get_node_id(), host=HOST,
                    ip=ray.util.get_node_ip_address(), pid=os.getpid(), t=time.time()).to_dict()
    workdir = Path(job["workdir"])
    stop = stop_file(workdir, job["attempt"])
    ctx = JobContext(workdir=workdir, should_stop=lambda: _read_stop(stop), resume=job["resume"],
                     checkpoint_every=job["checkpoint_every"], threads=job["threads"],
                     inputs={key: JobInput(record=JobRecord.from_dict(record), workdir=Path(folder))
                             for key, (record, folder) in job["inputs"].items()})
    load_error = ""
    try:
        jobs.load_modules(job["modules"])
    except Exception:
        load_error = traceback.format_exc()
    lines = _LogLines()
    with OutputCapture(lines, job["capture_join_s"]):
        for item in run_attempt(job["kind"], job["spec"], ctx, store_root=Path(job["store_root"]),
                                min_free_mb=job["min_free_mb"], load_error=load_error):
            # (Plain loops: Ray drives this generator with send(), which `yield from` a list cannot take.)
            for line in lines.drain():
                yield line
            if isinstance(item, dict):
                item.setdefault("t", time.time())  # when it happened, not when the executor saw it
            yield item
    for line in lines.drain():
        yield line


def _probe(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        return f"({exc})"


TASK = ray.remote(num_returns="streaming", max_retries=0)(task)
PROBE = ray.remote(num_cpus=0, max_retries=0)(_probe)
