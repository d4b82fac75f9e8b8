"""Two toy job kinds, registered in a few lines each: what a new kind of background work costs.

``count`` counts to ``n`` (one step event a number; every 5 a checkpoint, announced before the kind API
writes it so the stream always holds the steps the file has, and a resumed attempt goes on from there);
``double`` needs a finished ``count`` job and doubles its total.
"""

import time
from dataclasses import dataclass

from labcore.jobs import job_kind


@dataclass(frozen=True)
class CountSpec:
    n: int
    pause_s: float = 0.0


@job_kind("count", CountSpec, label=lambda s: f"count to {s.n}", checkpoint="count.json")
def count(spec, ctx):
    start = ctx.load_checkpoint()["i"] if ctx.resume else 0
    for i in range(start + 1, spec.n + 1):
        time.sleep(spec.pause_s)
        yield {"type": "step", "step": i, "loss": 1.0 / i}
        if i % 5 == 0:
            yield {"type": "checkpoint", "step": i}
            ctx.save_checkpoint({"i": i})
    yield {"type": "result", "status": "done", "record": {"total": spec.n * (spec.n + 1) // 2}}


@dataclass(frozen=True)
class DoubleSpec:
    source: str  # the key of a count job


@job_kind("double", DoubleSpec, requires=lambda s: (s.source,))
def double(spec, ctx):
    yield {"type": "result", "status": "done", "record": {"total": 2 * ctx.inputs[spec.source].record.result["total"]}}
