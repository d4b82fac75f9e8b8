"""How the store scales with the number of jobs: submit one group, claim, list, and what a job costs on disk.

For each N of ``--sizes`` (default 100,1000,10000; ``--max`` caps them for a quick run) a fresh store in a
temporary folder gets N tiny training specs (bits-xor, distinct seeds) submitted as one group, the way
``sweep --queue`` and a Tune search submit them. Per N it prints:

* ``key s``: resolving and keying the N specs (``labcore.jobs.new_job``, torch-free), before the store;
* ``submit s`` and ``jobs/s``: ``Store.submit_group`` of the N jobs (target: 10,000 in under 10 s, no slower
  per job than 100);
* ``claim p95 ms``: the 95th percentile of ``Store.claim`` over ``--claims`` claims from the full queue
  (each claimed job is then finished with a small result, so the store holds finished records too);
* ``status s``: ``python -m labcore status`` over the whole store (in this process, output discarded);
* ``db KiB/job``: the database's size (with its write-ahead log) per job: records, queue and event streams.
  A training run's files (weights, checkpoints) are not in it: ``python -m labcore store du`` shows those.

No worker runs and nothing trains: this measures the store alone. Figures depend on the disk and on what
else the machine does; name the CPU (``lscpu``) and whether other work ran when you report them.

    python bench/store_scale.py                 # 100, 1,000 and 10,000 jobs
    python bench/store_scale.py --max 1000      # a quick run
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def db_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "db").rglob("*") if p.is_file())


def measure(n: int, claims: int) -> dict[str, float]:
    from labcore.cli import main as cli_main
    from labcore.jobs import new_job
    from labcore.spec import make_spec
    from labcore.store import Store

    started = time.perf_counter()
    jobs = [new_job(make_spec(discipline="bits-xor", discipline_params={"n_train": 64}, seed=i)) for i in range(n)]
    key_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="store-scale-") as folder:
        root = Path(folder) / "store"
        store = Store(root)
        try:
            started = time.perf_counter()
            store.submit_group(f"scale-{n}", jobs)
            submit_s = time.perf_counter() - started
            latencies = []
            for _ in range(min(claims, n)):
                started = time.perf_counter()
                claim = store.claim()
                latencies.append(time.perf_counter() - started)
                store.append_events(claim.key, [{"type": "step", "step": 1, "loss": 0.5}], attempt=claim.attempt)
                store.finish(claim.key, claim.attempt, "done",
                             result={"key": claim.key, "status": "done", "spec": claim.spec, "test": {"acc": 0.5}})
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                cli_main(["status", "--store", str(root)])
            status_s = time.perf_counter() - started
            size = db_bytes(root)
        finally:
            store.close()
    p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) >= 2 else (latencies or [0.0])[0]
    return {"n": n, "key_s": key_s, "submit_s": submit_s, "rate": n / submit_s, "claim_p95_ms": p95 * 1000,
            "status_s": status_s, "kib_per_job": size / n / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="comma-separated job counts")
    parser.add_argument("--max", type=int, default=0, help="leave out sizes above this (a quick run)")
    parser.add_argument("--claims", type=int, default=200, help="claims timed per size (default 200)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.max:
        sizes = [s for s in sizes if s <= args.max]
    print(f"{'jobs':>7} {'key s':>7} {'submit s':>9} {'jobs/s':>8} {'claim p95 ms':>13} {'status s':>9} "
          f"{'db KiB/job':>11}")
    for n in sizes:
        m = measure(n, args.claims)
        print(f"{m['n']:>7,} {m['key_s']:>7.2f} {m['submit_s']:>9.2f} {m['rate']:>8,.0f} {m['claim_p95_ms']:>13.1f} "
              f"{m['status_s']:>9.2f} {m['kib_per_job']:>11.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
