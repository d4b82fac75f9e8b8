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

With ``--pages`` it also prints the server's render time (Streamlit's ``AppTest``, no browser) of the Runs
page showing the group, the Runs page with one run, and the Compare page on the group (target: under 1 s at
10,000 jobs); the claimed jobs then carry 30 step events each, so curves have something to draw. The first
page a process renders imports scipy and the figures: one untimed render of each view warms it up first.

No worker runs and nothing trains: this measures the store alone. Figures depend on the disk and on what
else the machine does; name the CPU (``lscpu``) and whether other work ran when you report them.

    python bench/store_scale.py                 # 100, 1,000 and 10,000 jobs
    python bench/store_scale.py --max 1000      # a quick run
    python bench/store_scale.py --pages --claims 1000   # pages too, on a store half of whose runs finished
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def db_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "db").rglob("*") if p.is_file())


def render_s(page: str, query: dict[str, str]) -> float:
    """Seconds the server takes to run ``page`` (after Home) on the store of ``TRANSFERLAB_CACHE``."""
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600)
    app.run()
    for name, value in query.items():
        app.query_params[name] = value
    started = time.perf_counter()
    app = app.switch_page(page).run()
    if app.exception:
        raise SystemExit(f"bench: {page} failed: {app.exception[0].message}")
    return time.perf_counter() - started


def measure(n: int, claims: int, pages: bool) -> dict[str, float]:
    from labcore.cli.main import main as cli_main
    from labcore.jobs import new_job
    from labcore.results.record import RunRecord
    from labcore.runspec import make_spec
    from labcore.store import Store

    started = time.perf_counter()
    jobs = [new_job(make_spec(discipline="bits-xor", discipline_params={"n_train": 64}, seed=i)) for i in range(n)]
    key_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="store-scale-") as folder:
        os.environ["TRANSFERLAB_CACHE"] = folder  # the pages open <cache>/store
        root = Path(folder) / "store"
        store = Store(root)
        try:
            store.hold_workers("bench")  # a page would start a worker for the queued jobs
            started = time.perf_counter()
            store.submit_group(f"scale-{n}", jobs)
            submit_s = time.perf_counter() - started
            latencies = []
            for i in range(min(claims, n)):
                started = time.perf_counter()
                claim = store.claim()
                latencies.append(time.perf_counter() - started)
                steps = range(1, 31) if pages else range(1, 2)
                store.append_events(claim.key, [{"type": "step", "step": s, "loss": 1.0 / s} for s in steps],
                                    attempt=claim.attempt)
                result = RunRecord(key=claim.key, spec=claim.spec, status="done", metric="accuracy",
                                   test={"accuracy": 0.5 + i % 7 / 100}, val_curve=[[30, 0.6]], best_step=30,
                                   steps_done=30, train_loss=[[1, 1.0], [30, 0.03]])
                store.finish(claim.key, claim.attempt, "done", result=result.to_dict())
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                cli_main(["status", "--store", str(root)])
            status_s = time.perf_counter() - started
            size = db_bytes(root)
            figures = {"n": n, "key_s": key_s, "submit_s": submit_s, "rate": n / submit_s,
                       "claim_p95_ms": _p95(latencies) * 1000, "status_s": status_s, "kib_per_job": size / n / 1024}
            if pages:
                views = {"runs_group_s": ("pages/runs.py", {"group": f"scale-{n}"}),
                         "runs_one_s": ("pages/runs.py", {"run": store.keys()[0]}),
                         "compare_s": ("pages/compare.py", {"groups": f"scale-{n}"})}
                for name, (page, query) in views.items():
                    render_s(page, query)  # untimed: the process's first imports (scipy) and shared caches
                    figures[name] = render_s(page, query)
        finally:
            store.close()
    return figures


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else (values or [0.0])[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="comma-separated job counts")
    parser.add_argument("--max", type=int, default=0, help="leave out sizes above this (a quick run)")
    parser.add_argument("--claims", type=int, default=200, help="claims timed per size (default 200)")
    parser.add_argument("--pages", action="store_true", help="also time the Runs and Compare pages (AppTest)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.max:
        sizes = [s for s in sizes if s <= args.max]
    print(f"{'jobs':>7} {'key s':>7} {'submit s':>9} {'jobs/s':>8} {'claim p95 ms':>13} {'status s':>9} "
          f"{'db KiB/job':>11}" + (f" {'runs group s':>13} {'runs one s':>11} {'compare s':>10}" if args.pages else ""))
    for n in sizes:
        m = measure(n, args.claims, args.pages)
        print(f"{m['n']:>7,} {m['key_s']:>7.2f} {m['submit_s']:>9.2f} {m['rate']:>8,.0f} {m['claim_p95_ms']:>13.1f} "
              f"{m['status_s']:>9.2f} {m['kib_per_job']:>11.1f}"
              + (f" {m['runs_group_s']:>13.2f} {m['runs_one_s']:>11.2f} {m['compare_s']:>10.2f}" if args.pages else ""),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
