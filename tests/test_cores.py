"""Thread choice: cores less those other processes keep busy, read from /proc."""

from __future__ import annotations

import os
import sys

import pytest

from labcore.machine import cores

STAT = """cpu  1000 20 300 5000 40 5 6 7 0 0
cpu0 500 10 150 2500 20 2 3 3 0 0
intr 12345
"""


def test_parse_proc_stat_counts_busy_ticks_without_idle_and_iowait():
    assert cores.parse_proc_stat(STAT) == 1000 + 20 + 300 + 5 + 6 + 7
    with pytest.raises(ValueError):
        cores.parse_proc_stat("intr 1\n")


def test_parse_self_stat_survives_spaces_and_parentheses_in_the_command():
    fields = ["S", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "111", "222", "0", "0"]
    assert cores.parse_self_stat("4242 (my (odd) name) " + " ".join(fields)) == 111 + 222


def sample(wall, busy, own):
    return cores.CpuSample(wall=wall, busy_ticks=busy, own_ticks=own)


def test_busy_elsewhere_subtracts_this_process():
    # 2 s, 300 ticks busy in all, 100 of them ours: 200 ticks = 2 s of CPU = 1 core elsewhere.
    assert cores.busy_elsewhere(sample(0, 0, 0), sample(2, 300, 100), ticks_per_s=100) == pytest.approx(1.0)
    assert cores.busy_elsewhere(sample(0, 0, 0), sample(1, 50, 80), ticks_per_s=100) == 0.0  # never negative
    assert cores.busy_elsewhere(sample(1, 0, 0), sample(1, 50, 0), ticks_per_s=100) == 0.0  # empty window


@pytest.mark.parametrize("requested, n_cores, busy, expected", [
    (2, 2, 0.0, 2), (2, 2, 0.3, 2), (2, 2, 0.6, 1), (2, 2, 1.0, 1), (2, 2, 2.0, 1),
    (8, 8, 2.4, 6), (4, 8, 2.4, 4), (1, 2, 0.0, 1),
])
def test_threads_for_gives_up_one_thread_per_busy_core(requested, n_cores, busy, expected):
    assert cores.threads_for(requested, n_cores, busy) == expected


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_choose_threads_on_this_machine_waits_for_a_window_and_stays_in_range():
    since = cores.sample()
    assert since is not None and since.busy_ticks > 0
    threads, busy = cores.choose_threads(os.cpu_count() or 1, since)
    assert 1 <= threads <= (os.cpu_count() or 1)
    assert busy is None or busy >= 0.0
    assert cores.choose_threads(1, since) == (1, None)
    assert cores.choose_threads(4, None) == (4, None)


def test_thread_note_says_why_threads_were_given_up():
    assert cores.thread_note(2, 2, 0.1) == "trained on 2 CPU threads"
    assert cores.thread_note(1, 1, None) == "trained on 1 CPU thread"
    assert cores.thread_note(1, 2, 0.96) == "trained on 1 CPU thread of 2: other processes kept 1.0 cores busy"


def test_the_governor_takes_back_cores_that_free_up(monkeypatch):
    """Issue 13: a run that started beside a busy process kept 1 thread for its whole 6 minutes."""
    samples = iter([cores.CpuSample(0.0, 0, 0), cores.CpuSample(30.0, 3000, 0),  # 1 core busy elsewhere
                    cores.CpuSample(60.0, 3000, 0)])  # then idle
    monkeypatch.setattr(cores, "sample", lambda: next(samples))
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 2)
    clock = iter([10.0, 30.0, 60.0])
    monkeypatch.setattr(cores.time, "monotonic", lambda: next(clock))
    governor = cores.ThreadGovernor(requested=2, used=2, interval_s=20.0)
    assert governor.check() is None  # 10 s: too early to look
    assert governor.check() == (1, 1.0)  # a core busy elsewhere: one thread
    assert governor.check() == (2, 0.0)  # freed: taken back
    assert cores.history_note([[0, 1], [120, 2]]) == "threads while training: 1 CPU thread, 2 from step 120"
