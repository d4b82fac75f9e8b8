"""Queue latency with a warm worker: submit -> first metric event, and submit of a finished spec -> result.

A worker process is started on a store of the bench's own (a temporary folder, so the user's run list
stays clean) and given one untimed warm-up run, which builds the data set and pages the model in, as a
worker that has been serving a while would have. Then, for each of ``--repeat`` fresh specs (new seeds,
so new keys), the time from ``submit`` to the first ``step`` event in the store (the first point of the
loss curve a page can draw) is measured; then the same specs are submitted again and the time until the
finished record is back is measured. Medians are reported.

Default model: a tiny random BERT written to the temporary folder (no assets needed). ``--model minilm``
measures the teaching demo's backbone instead (its assets must be fetched).

Targets: first event <= 5 s, cached result <= 1 s.
Last line: ``latency first_event_s=<x> cached_result_s=<y>``
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def wait(what: str, predicate, timeout: float, poll: float = 0.005):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise SystemExit(f"bench: timed out after {timeout:.0f} s waiting for {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny (a random BERT made here), or any model name")
    parser.add_argument("--discipline", default="bits-xor")
    parser.add_argument("--repeat", type=int, default=3, help="fresh specs to time (medians are printed)")
    parser.add_argument("--max-steps", type=int, default=20, help="steps of each timed run")
    args = parser.parse_args()

    from labcore.runspec import make_spec
    from labcore.store import ACTIVE, Store
    from labcore.jobs import new_job
    from labcore.execution.pool import start_worker, stop_workers

    tmp = Path(tempfile.mkdtemp(prefix="transferlab-latency-"))
    model = "tiny:bert" if args.model == "tiny" else args.model
    params = {"n_train": 64, "n_validation": 32, "n_test": 32} if args.discipline == "bits-xor" else {}
    store = Store(tmp / "store")

    def spec(seed: int):
        return make_spec(model=model, discipline=args.discipline, discipline_params=params, seed=seed,
                         max_steps=args.max_steps)

    started = time.perf_counter()
    worker = start_worker(store)
    try:
        wait("the worker to import the engine",
             lambda: any(w["state"] == "idle" for w in store.workers()), 300, poll=0.05)
        print(f"worker {worker.pid} warm after {time.perf_counter() - started:.1f} s (torch and engine imported)")
        warm = store.submit(new_job(spec(10_000))).key
        wait("the warm-up run", lambda: store.get(warm).status not in ACTIVE, 600, poll=0.05)
        print(f"warm-up run {store.get(warm).status} ({store.get(warm).error})")

        first_event, cached, keys = [], [], []
        for seed in range(args.repeat):
            t0 = time.perf_counter()
            key = store.submit(new_job(spec(seed))).key
            keys.append(key)

            def first_step(key: str = key) -> bool:
                events, _ = store.read_events(key)
                return any(e["type"] == "step" for e in events)

            wait("the first step event", first_step, 120)
            first_event.append(time.perf_counter() - t0)
            wait("the run to end", lambda key=key: store.get(key).status not in ACTIVE, 600, poll=0.05)
            print(f"run {seed}: first step event after {first_event[-1]:.3f} s; {store.get(key).status}")
        for seed, key in enumerate(keys):
            t0 = time.perf_counter()
            submission = store.submit(new_job(spec(seed)))
            record = store.get(submission.key)
            cached.append(time.perf_counter() - t0)
            assert submission.outcome == "cached" and record.status == "done" and record.result, submission
            print(f"run {seed}: cached result after {cached[-1] * 1000:.2f} ms")
    finally:
        stop_workers(store, timeout_s=30)
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    x, y = statistics.median(first_event), statistics.median(cached)
    print(f"targets: first event <= 5 s ({'met' if x <= 5 else 'MISSED'}), "
          f"cached result <= 1 s ({'met' if y <= 1 else 'MISSED'})")
    print(f"latency first_event_s={x:.3f} cached_result_s={y:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
