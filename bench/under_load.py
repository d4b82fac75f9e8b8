"""The timing-sensitive test files, run again and again with a CPU-bound process on every core beside them.

A test that waits on another process (a worker, a Ray task, a server, a browser) must wait on a condition with
a generous limit, never on a sleep that happens to be long enough on idle cores. This runs ``--files`` (by
default the Ray, worker, job-kind, drive and browser tests) ``--times`` times in a row, each time with one busy-loop
process per core (``--burners``) started before and stopped after, and prints each round's outcome and the
count of failures per test.

    python bench/under_load.py --times 20
    python bench/under_load.py --times 5 --log rounds.jsonl     # rounds kept, counted with earlier ones
    python bench/under_load.py --times 5 --processes 2          # the files two at a time (pytest-xdist), as make test

``--processes 2`` runs two test files at once beside the busy processes: a harsher load than one file at a
time (four CPU-bound processes on two cores where a test waits on its own), and a shorter round.

With ``--log`` every round is appended to the file (its time, the commit, the CPU, the outcome and the tests that
failed) and the summary counts every round the file holds for the same code: a round at an earlier commit counts
when nothing but documentation (``docs/``, Markdown files) changed since, so the 20 rounds may be run in several
sittings. A round run from a working tree with uncommitted changes is logged as such and never counted.
"""

from __future__ import annotations

import argparse
import json
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
         "tests/test_recipes_drive_all.py", "tests/test_e2e_browser.py", "tests/test_lesson_browser.py")


def _burn() -> None:
    while True:
        pass


ERROR_LINES = 40  # of a failing round's output kept in the log


def _error_lines(output: str) -> list[str]:
    """pytest's error lines (``E   ...``) and its short summary of a failing round, at most :data:`ERROR_LINES`."""
    lines = [line for line in output.splitlines() if line.startswith(("E ", "FAILED ", "ERROR "))]
    return lines[:ERROR_LINES]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


# What a round's outcome cannot depend on: a commit that changed only these tests the same code.
NOT_CODE = (":(exclude)docs", ":(exclude)*.md")


def _same_code(earlier: str, commit: str) -> bool:
    """Whether ``earlier`` and ``commit`` differ in documentation only (an unknown commit never counts)."""
    return earlier == commit or _git("diff", "--quiet", earlier, commit, "--", ".", *NOT_CODE).returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1, help="busy processes (default: one a core)")
    parser.add_argument("--files", nargs="+", default=list(FILES))
    parser.add_argument("--processes", type=int, default=1,
                        help="test files run at once (pytest-xdist, a file to a process; default 1)")
    parser.add_argument("--log", default="", help="append each round to this JSON-lines file and sum them")
    args = parser.parse_args()
    commit = _git("rev-parse", "--short", "HEAD").stdout.strip()
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no").stdout.strip())
    failures: Counter = Counter()
    rounds_failed = 0
    for round_ in range(1, args.times + 1):
        burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
        for burner in burners:
            burner.start()
        started = time.time()
        try:
            parallel = ["-n", str(args.processes), "--dist", "loadfile"] if args.processes > 1 else []
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel,
                                   *args.files],
                                  cwd=REPO, capture_output=True, text=True)
        finally:
            for burner in burners:
                burner.kill()
        failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
        failures.update(failed)
        bad = bool(failed) or done.returncode not in (0, 5)
        rounds_failed += bad
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"exit {done.returncode}"
        print(f"round {round_}: {summary} ({time.time() - started:.0f} s)", flush=True)
        if args.log:
            with open(args.log, "a") as out:
                out.write(json.dumps({"at": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": commit, "dirty": dirty,
                                      "burners": args.burners, "processes": args.processes, "files": args.files,
                                      "summary": summary,
                                      "failed": failed, "ok": not bad,
                                      "seconds": round(time.time() - started),
                                      # what a failing round said (pytest's error lines): a flake seen once
                                      # must leave its cause behind
                                      "errors": _error_lines(done.stdout) if bad else []}) + "\n")
    print(f"{args.times} rounds with {args.burners} busy processes beside them: {rounds_failed} with a failure")
    for test, n in failures.most_common():
        print(f"  {n} x {test}")
    if args.log:
        kept = [json.loads(line) for line in open(args.log) if line.strip()]
        same = [r for r in kept if r["files"] == args.files and not r.get("dirty", True)
                and _same_code(r["commit"], commit)]
        commits = ", ".join(sorted({r["commit"] for r in same}))
        print(f"{args.log}: {len(same)} rounds of the code at {commit} (commits {commits}) with these files, "
              f"{sum(not r['ok'] for r in same)} with a failure")
    return 1 if rounds_failed else 0


if __name__ == "__main__":
    sys.exit(main())
