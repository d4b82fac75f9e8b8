"""One job run in this process rather than by a worker (``python -m labcore analyze``, ``labcore.analyze``):
a finished one comes from the store, and the events go to a log function instead of the store's stream."""

from __future__ import annotations

import time

from labcore import jobs
from labcore.errors import LabError
from labcore.events import LOG, RESULT


def analyze_here(spec, store, log=lambda _m: None) -> dict:
    """Run one analysis spec in this process (a finished one comes from the store) and return its result."""
    job = jobs.new_job(spec)
    cached = store.get(job.key)
    if cached is not None and cached.status == "done":
        log(f"{job.label}: from the store")
        return cached.result
    kind = jobs.get_kind(job.kind)
    inputs = {}
    for key in job.requires:
        record = store.record(key)
        if not record.finished:
            raise LabError(f"run {key} is {record.status}: analyses of fine-tuned weights need a finished run")
        inputs[key] = jobs.JobInput(record=record, workdir=store.workdir(key))
    started = time.perf_counter()
    result = None
    for event in kind.handler(kind.from_dict(job.spec), jobs.JobContext(workdir=store.workdir(job.key),
                                                                       inputs=inputs, checkpoint=kind.checkpoint)):
        if event["type"] == LOG:
            log(event["message"])
        elif event["type"] == RESULT:
            result = event["record"]
    log(f"{job.label}: {time.perf_counter() - started:.1f} s")
    return result
