"""What the Ray executor costs against the local worker pool, in one run: per-event latency and per-job overhead.

Both executors get a store of their own in a temporary folder and one warm claimer: a local worker
process (``labcore.execution.pool``), and the Ray executor process (``labcore.execution.ray_pump``) with a
local Ray cluster of its own (dashboard off, a short session folder that is removed afterwards). The job kind is ``ping``
(bench/ping_kind.py): events stamped when the handler yields them and written to the store at once.

* per-event latency: from the handler's yield to the moment a reader (this process, polling the store
  every millisecond, as a page would but faster) sees the event; p50 and p95 over ``--events`` events;
* per-job overhead: from ``submit`` of a job with no events to its ``done`` record, median and p95
  over ``--jobs`` jobs (each a fresh key).

Targets for Ray: p95 per event <= 10 ms, per job <= 1 s.
Last line: ``ray_overhead event_p95_ms=<ray> job_s=<ray median> local_event_p95_ms=<x> local_job_s=<y>``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure(executor, name: str, events: int, job_count: int, nonce: int) -> tuple[list[float], list[float]]:
    from latency import wait
    from ping_kind import PingSpec

    from labcore.store import ACTIVE

    store = executor.store
    # Warm-up: the claimer's first job of the kind (Ray: a worker process is started and leased).
    warm = executor.submit(PingSpec(n=3, nonce=nonce)).key
    wait(f"{name}: the warm-up job", lambda: store.get(warm).status not in ACTIVE, 300, poll=0.01)

    key = executor.submit(PingSpec(n=events, nonce=nonce + 1)).key
    latencies: list[float] = []
    cursor = 0
    while True:
        new, cursor = store.read_events(key, cursor)
        now = time.time()
        latencies += [now - e["t"] for e in new if e["type"] == "tick"]
        if store.get(key).status not in ACTIVE and not new:
            break
        time.sleep(0.001)
    if len(latencies) != events:
        raise SystemExit(f"bench: {name} streamed {len(latencies)} of {events} events ({store.get(key).status})")

    overheads: list[float] = []
    for i in range(job_count):
        t0 = time.perf_counter()
        job = executor.submit(PingSpec(n=0, nonce=nonce + 2 + i)).key
        wait(f"{name}: job {i}", lambda job=job: store.get(job).status not in ACTIVE, 120)
        overheads.append(time.perf_counter() - t0)
    print(f"{name:5}: per event p50 {percentile(latencies, .5) * 1e3:6.2f} ms  p95 {percentile(latencies, .95) * 1e3:6.2f} ms"
          f"  ({events} events) | per job median {statistics.median(overheads):.3f} s  p95 "
          f"{percentile(overheads, .95):.3f} s  ({job_count} jobs)")
    return latencies, overheads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200, help="events of the timed stream (each executor)")
    parser.add_argument("--jobs", type=int, default=10, help="empty jobs timed for the per-job overhead")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tlb-", dir="/tmp"))  # short: Ray's socket paths live under it
    os.environ.update(PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "bench"), os.environ.get("PYTHONPATH", "")]),
                      TRANSFERLAB_JOB_MODULES="ping_kind", TRANSFERLAB_RAY_TMP=str(tmp / "ray"),
                      TRANSFERLAB_RAY_CPUS="2", RAY_USAGE_STATS_ENABLED="0")
    os.environ.pop("RAY_ADDRESS", None)

    from labcore import jobs
    from labcore.execution.executor import LocalExecutor, RayExecutor
    from labcore.store import Store

    from latency import wait

    jobs.load_modules()
    local = LocalExecutor(Store(tmp / "local"))
    ray_executor = RayExecutor(Store(tmp / "ray-store"), address="", start_timeout_s=300)
    results = {}
    try:
        t0 = time.perf_counter()
        local.ensure_workers()
        wait("the local worker", lambda: any(w["state"] == "idle" for w in local.alive_workers()), 300, poll=0.05)
        print(f"local worker ready after {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        ray_executor.cluster()
        print(f"ray executor and its local cluster ready after {time.perf_counter() - t0:.1f} s")
        results["local"] = measure(local, "local", args.events, args.jobs, 1_000_000)
        results["ray"] = measure(ray_executor, "ray", args.events, args.jobs, 2_000_000)
    finally:
        for executor in (local, ray_executor):
            executor.stop_workers(timeout_s=30)
            executor.store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    (ray_events, ray_jobs), (local_events, local_jobs) = results["ray"], results["local"]
    event_p95, job_s = percentile(ray_events, .95) * 1e3, statistics.median(ray_jobs)
    print(f"targets: ray p95 per event <= 10 ms ({'met' if event_p95 <= 10 else 'MISSED'}), "
          f"per job <= 1 s ({'met' if job_s <= 1 else 'MISSED'})")
    print(f"ray_overhead event_p95_ms={event_p95:.2f} job_s={job_s:.3f} "
          f"local_event_p95_ms={percentile(local_events, .95) * 1e3:.2f} local_job_s={statistics.median(local_jobs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
