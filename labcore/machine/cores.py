"""How many threads a run should train on: the cores, less those other processes keep busy.

Why it matters: torch's OpenMP threads wait for each other at the end of every parallel operation. With
OpenMP's default waiting (spin a little, then sleep) a MiniLM step on 2 idle cores ran at 58-62 samples/s
against 43-49 with ``OMP_WAIT_POLICY=PASSIVE`` (four alternating pairs). But when another process keeps a
core busy, a spinning thread waits for a partner that is not running: 13-16 samples/s on 2 threads, against
27-30 on 1 thread. So a run samples the machine while it prepares, and trains on one thread fewer for every
core that other processes keep busy. The choice is made while it prepares and checked again while it
trains (:class:`ThreadGovernor`, every ``RECHECK_S`` seconds): a run that started beside a busy process
takes its cores back once they are free. Every count a run used, and from which step, goes into its
record: a run's numbers depend on its thread count in the last bits. A ``deterministic`` run trains on
``DETERMINISTIC_THREADS`` threads from start to end, whatever the machine does, so it reruns bit for bit.

Linux only (``/proc``); elsewhere the requested count is used as it is.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

MIN_WINDOW_S = 0.3  # /proc counts in ticks of 10 ms: shorter windows say little
BUSY_THRESHOLD = 0.5  # cores busy elsewhere before a thread is given up
RECHECK_S = 20.0  # seconds between checks while a run trains (a check costs two small /proc reads)
DETERMINISTIC_THREADS = 1  # a deterministic run's thread count: the same on every machine, never spinning


@dataclass(frozen=True)
class CpuSample:
    wall: float  # time.monotonic()
    busy_ticks: int  # all CPUs, all processes: user + nice + system + irq + softirq + steal
    own_ticks: int  # this process, all its threads: user + system


def _ticks_per_s() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


def parse_proc_stat(text: str) -> int:
    """Busy ticks from the aggregate ``cpu`` line of /proc/stat."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(v) for v in line.split()[1:]]
            user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
            steal = fields[7] if len(fields) > 7 else 0
            return user + nice + system + irq + softirq + steal
    raise ValueError("no aggregate cpu line in /proc/stat")


def parse_self_stat(text: str) -> int:
    """utime + stime from /proc/self/stat (fields 14 and 15; the command name may hold spaces)."""
    after = text.rsplit(")", 1)[1].split()
    return int(after[11]) + int(after[12])


def sample() -> CpuSample | None:
    try:
        busy = parse_proc_stat(Path("/proc/stat").read_text())
        own = parse_self_stat(Path("/proc/self/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None
    return CpuSample(time.monotonic(), busy, own)


def busy_elsewhere(before: CpuSample, after: CpuSample, ticks_per_s: int | None = None) -> float:
    """Cores kept busy by other processes between two samples (0 when the window is empty)."""
    seconds = after.wall - before.wall
    if seconds <= 0:
        return 0.0
    others = (after.busy_ticks - before.busy_ticks) - (after.own_ticks - before.own_ticks)
    return max(0.0, others / (ticks_per_s or _ticks_per_s()) / seconds)


def threads_for(requested: int, cores: int, busy: float) -> int:
    """``requested`` threads, less one for every core other processes keep busy (rounded), at least 1."""
    free = cores - int(busy + (1.0 - BUSY_THRESHOLD))
    return max(1, min(requested, free))


def choose_threads(requested: int, since: CpuSample | None) -> tuple[int, float | None]:
    """(threads, cores busy elsewhere since ``since``); waits until the window is MIN_WINDOW_S long."""
    cores = os.cpu_count() or 1
    if since is None or requested <= 1:
        return max(1, requested), None
    wait = MIN_WINDOW_S - (time.monotonic() - since.wall)
    if wait > 0:
        time.sleep(wait)
    now = sample()
    if now is None:
        return requested, None
    busy = busy_elsewhere(since, now)
    return threads_for(requested, cores, busy), busy


class ThreadGovernor:
    """Checks, at most every ``interval_s`` seconds, how many cores other processes left free since the
    last check, and says when the run should train on another thread count (up to ``requested``)."""

    def __init__(self, requested: int, used: int, interval_s: float = RECHECK_S) -> None:
        self.requested, self.used, self.interval_s = requested, used, interval_s
        self.since = sample()

    def check(self) -> tuple[int, float] | None:
        """(new thread count, cores busy elsewhere) when the count should change, else None."""
        if self.requested <= 1 or self.since is None or time.monotonic() - self.since.wall < self.interval_s:
            return None
        now = sample()
        if now is None:
            return None
        busy = busy_elsewhere(self.since, now)
        self.since = now
        wanted = threads_for(self.requested, os.cpu_count() or 1, busy)
        if wanted == self.used:
            return None
        self.used = wanted
        return wanted, busy


def history_note(history: list[list[int]]) -> str:
    """The thread counts of a run, as the record's notes say them: "1 thread, 2 from step 120"."""
    parts = [f"{n} CPU thread{'s' if n > 1 else ''}" if step == 0 else f"{n} from step {step:,}"
             for step, n in history]
    return "threads while training: " + ", ".join(parts)


def thread_note(used: int, requested: int, busy: float | None) -> str:
    """The record's note on the thread count a run trained with, and why it is lower if it is."""
    note = f"trained on {used} CPU thread{'s' if used > 1 else ''}"
    if busy is not None and used < requested:
        note += f" of {requested}: other processes kept {busy:.1f} cores busy"
    return note
