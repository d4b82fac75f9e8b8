"""Many jobs on few cores: one worker with every core's thread, or one single-threaded worker per core?

A recipe queues dozens of runs; the machine's throughput over the queue is what decides how long its first look
takes. This bench measures the lab's training step (MiniLM, batch 16, full fine-tune, as bench/throughput.py)
in the two ways a machine can spend its cores on such a queue:

* one process on every core (``torch.set_num_threads(cores)``): how one worker trains;
* one process per core, one thread each, all training at once: how ``cores`` workers share the machine (each
  local worker takes the machine's cores divided by the workers alive, labcore.execution.worker).

The processes of the second way prepare apart and then start their timed steps together (each waits for the
others at a barrier), and their samples/s are summed. The two ways alternate for several rounds on dna-splice
and text-sentiment, and each figure is the median over the rounds.

    python bench/workers.py [--rounds 3] [--steps 20] [--disciplines dna-splice,text-sentiment]

Last line: workers <discipline>=<gain> ...: the many-workers' samples/s over the one worker's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from throughput import Setting, lab_speed, machine  # noqa: E402

DISCIPLINES = ("dna-splice", "text-sentiment")


def one(setting: Setting, threads: int, barrier: Path | None) -> dict:
    """One measurement in this process: ``threads`` torch threads; waits for ``barrier`` to exist before its
    first step, after writing that it is ready."""
    import torch

    torch.set_num_threads(threads)

    def ready() -> None:
        if barrier is None:
            return
        print("READY", flush=True)
        while not barrier.exists():
            time.sleep(0.05)

    measured = lab_speed(setting, ready=ready)
    return {"samples_per_s": measured.samples_per_s, "step_s": measured.step_s, "precision": measured.precision}


def together(setting: Setting, processes: int, threads: int, folder: Path) -> list[dict]:
    """``processes`` measurements with ``threads`` threads each, their timed steps started together."""
    barrier = folder / f"go-{time.monotonic_ns()}"
    command = [sys.executable, __file__, "--one", "--threads", str(threads), "--barrier", str(barrier),
               "--discipline", setting.discipline, "--steps", str(setting.steps), "--warmup", str(setting.warmup),
               "--batch", str(setting.batch)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    for child in children:  # each prepares (model, data) before the clock starts
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("READY"):
                break
    barrier.touch()
    results = []
    for child in children:
        out, _ = child.communicate()
        results += [json.loads(line[len("RESULT "):]) for line in out.splitlines() if line.startswith("RESULT ")]
    barrier.unlink(missing_ok=True)
    if len(results) != processes:
        raise RuntimeError(f"{processes - len(results)} of {processes} measurements failed")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--disciplines", default=",".join(DISCIPLINES))
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a measurement's own process
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--barrier", default="", help=argparse.SUPPRESS)
    parser.add_argument("--discipline", default="dna-splice", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        setting = Setting(args.discipline, args.batch, args.steps, args.warmup)
        result = one(setting, args.threads, Path(args.barrier) if args.barrier else None)
        print("RESULT " + json.dumps(result), flush=True)
        return
    cores = os.cpu_count() or 1
    folder = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    print(f"{machine()}; {cores} cores", flush=True)
    rows: dict[str, dict[str, list[float]]] = {}
    started = time.perf_counter()
    for round_ in range(1, args.rounds + 1):
        for discipline in args.disciplines.split(","):
            setting = Setting(discipline.strip(), args.batch, args.steps, args.warmup)
            single = sum(r["samples_per_s"] for r in together(setting, 1, cores, folder))
            parts = together(setting, cores, 1, folder)
            many = sum(r["samples_per_s"] for r in parts)
            got = rows.setdefault(setting.discipline, {"one": [], "many": []})
            got["one"].append(single), got["many"].append(many)
            print(f"round {round_} {setting.discipline}: 1 worker x {cores} threads {single:.1f} samples/s; "
                  f"{cores} workers x 1 thread {many:.1f} samples/s "
                  f"({', '.join(format(r['samples_per_s'], '.1f') for r in parts)})", flush=True)
    folder.rmdir()
    print(f"{machine()}; {time.perf_counter() - started:.0f} s in all")
    gains = []
    for discipline, got in rows.items():
        one_median, many_median = statistics.median(got["one"]), statistics.median(got["many"])
        gains.append(f"{discipline}={many_median / one_median:.2f}")
        print(f"{discipline}: 1 worker x {cores} threads {one_median:.1f} samples/s, {cores} workers x 1 thread "
              f"{many_median:.1f} samples/s (medians of {len(got['one'])}): {many_median / one_median:.2f}x")
    print("workers " + " ".join(gains))


if __name__ == "__main__":
    main()
