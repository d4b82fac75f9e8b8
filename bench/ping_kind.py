"""A job kind for bench/ray_overhead.py: ``ping`` yields ``n`` timestamped events ``pause_s`` apart.

Its events are of type ``tick`` (not ``step``), so an executor writes each to the store at once instead
of batching it: what a reader sees is the executor's own latency, not the step-batching interval.
"""

import time
from dataclasses import dataclass

from labcore.jobs import Resources, job_kind


@dataclass(frozen=True)
class PingSpec:
    n: int
    pause_s: float = 0.02
    nonce: int = 0  # a fresh key for every timed job


@job_kind("ping", PingSpec, resources=lambda spec: Resources(num_cpus=1))
def ping(spec, ctx):
    for i in range(spec.n):
        time.sleep(spec.pause_s)
        yield {"type": "tick", "i": i, "t": time.time()}
    yield {"type": "result", "status": "done", "record": {"n": spec.n}}
