"""The timing-sensitive test files, run again and again with a CPU-bound process on every core beside them.

A test that waits on another process (a worker, a Ray task, a server, a browser) must wait on a condition with
a generous limit, never on a sleep that happens to be long enough on idle cores. This runs ``--files`` (by
default the Ray, worker, job-kind and browser tests) ``--times`` times in a row, each time with one busy-loop
process per core (``--burners``) started before and stopped after, and prints each round's outcome and the
count of failures per test.

    python bench/under_load.py --times 20
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILES = ("tests/test_ray.py", "tests/test_worker.py", "tests/test_worker_lifetime.py", "tests/test_job_kinds.py",
         "tests/test_e2e_browser.py")


def _burn() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1, help="busy processes (default: one a core)")
    parser.add_argument("--files", nargs="+", default=list(FILES))
    args = parser.parse_args()
    failures: Counter = Counter()
    rounds_failed = 0
    for round_ in range(1, args.times + 1):
        burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
        for burner in burners:
            burner.start()
        started = time.time()
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.files],
                                  cwd=REPO, capture_output=True, text=True)
        finally:
            for burner in burners:
                burner.kill()
        failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
        failures.update(failed)
        rounds_failed += bool(failed) or done.returncode not in (0, 5)
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"exit {done.returncode}"
        print(f"round {round_}: {summary} ({time.time() - started:.0f} s)", flush=True)
    print(f"{args.times} rounds with {args.burners} busy processes beside them: {rounds_failed} with a failure")
    for test, n in failures.most_common():
        print(f"  {n} x {test}")
    return 1 if rounds_failed else 0


if __name__ == "__main__":
    sys.exit(main())
