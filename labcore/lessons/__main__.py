"""Run a lesson from the command line and print its answer: ``python -m labcore.lessons run NAME``.

The same runs as the Lessons page (their keys are the same, so what either ran serves the other), in the lab's
store (``--store``: another folder); it waits for them, then prints the measured figure, its interval and the
explanation, and the seconds from submitting to the last result. ``python -m labcore.lessons list`` names them.
"""

from __future__ import annotations

import argparse
import sys
import time

from labcore.lessons import catalogue, runs
from labcore.lessons.explain import explain
from labcore.lessons.measure import measure


def _run(name: str, store_root: str | None, poll_s: float) -> int:
    from labcore.execution.executor import LocalExecutor
    from labcore.store import open_store

    lesson = catalogue.get(name)
    executor = LocalExecutor(open_store(store_root))
    keys = runs.lesson_keys(lesson)
    start = time.monotonic()
    while True:
        runs.advance(lesson, executor)
        executor.ensure_workers()
        if runs.ended(executor.store, keys):
            break
        time.sleep(poll_s)
    seconds = time.monotonic() - start
    measured = measure(lesson, runs.results(executor.store, keys), keys)
    print(f"{lesson.title} ({lesson.name}): {seconds:.0f} s from submitting to the last result")
    if measured is None:
        print("not every run finished with a result: see `python -m labcore status`")
        return 1
    print(f"answer: {measured.answer}" + (f"; figure {measured.value:.3f} (95 % interval {measured.low:.3f} to "
                                          f"{measured.high:.3f})" if measured.value is not None else ""))
    print(explain(lesson, measured))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labcore.lessons", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the lessons and their questions")
    run = sub.add_parser("run", help="run a lesson's runs (or read them from the store) and print its answer")
    run.add_argument("name", choices=catalogue.names())
    run.add_argument("--store", default=None, help="the store folder (default: the lab's)")
    run.add_argument("--poll", type=float, default=2.0, help="seconds between looks at the runs")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name in catalogue.names():
            lesson = catalogue.get(name)
            print(f"{name:8} {lesson.title} — {lesson.question.text}")
        return 0
    return _run(args.name, args.store, args.poll)


if __name__ == "__main__":
    sys.exit(main())
