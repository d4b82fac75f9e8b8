"""How long each lesson's runs take from submitting to the last result, as a class would wait for them.

Every lesson runs on a store of its own (a fresh folder, so nothing is served from earlier runs; the fetched
weights and built data sets of the lab's cache are shared, as in a lab that ran ``make run``), with the app's
worker count (``TRANSFERLAB_WORKERS``, default 1), one lesson after another. It prints the machine (CPU model,
its bf16 and AVX-512 flags), the load average before and after each lesson, the seconds and the answer.

    python bench/lesson_times.py                 # every lesson
    python bench/lesson_times.py kao fpt         # some
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300  # a lesson's runs at the quick budget fit in five minutes on two cores


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_lesson(name: str, folder: Path) -> tuple[float, str]:
    """(seconds, the lines it printed) of ``python -m labcore.lessons run NAME`` on a fresh store."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "labcore.lessons", "run", name, "--store", str(folder / name),
                           "--poll", "1"], cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - start
    return seconds, (done.stdout + done.stderr).strip()


def main(argv: list[str] | None = None) -> int:
    from recipe_drive import cpu_words  # puts the repository on the path too

    from labcore.lessons import catalogue

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="lessons (default: every one)")
    args = parser.parse_args(argv)
    names = args.names or catalogue.names()
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC · {cpu_words()}, {os.cpu_count()} cores · "
          f"workers {os.environ.get('TRANSFERLAB_WORKERS', '1')}", flush=True)
    over = []
    with tempfile.TemporaryDirectory(prefix="lesson-times-") as tmp:
        for name in names:
            before = load()
            seconds, printed = run_lesson(name, Path(tmp))
            answer = next((line for line in printed.splitlines() if line.startswith("answer:")), printed[-300:])
            print(f"{name:8} {seconds:6.0f} s  load before {before}, after {load()}  {answer}", flush=True)
            if seconds > TARGET_S:
                over.append(name)
    print(f"over {TARGET_S} s: {', '.join(over) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
