"""``recipe run --all``: several recipes driven into one store, resumable after the drive is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "recipe_tiny_drive.py"


def _drive(store: Path, cache: Path) -> subprocess.Popen:
    env = dict(os.environ, TRANSFERLAB_CACHE=str(cache), PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]),
               OMP_NUM_THREADS="1")
    env.pop("TRANSFERLAB_RECIPE_ADJUST", None)
    return subprocess.Popen([sys.executable, str(SCRIPT), str(store)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _jobs(store: Path) -> dict[str, tuple[str, int, float | None]]:
    """key -> (status, attempts claimed, finished at) of every job in the store."""
    from labcore.store import Store

    opened = Store(store)
    try:
        return {r.key: (r.status, r.attempt, r.finished_at) for r in opened.jobs()}
    finally:
        opened.close()


def _wait_for_done(store: Path, process: subprocess.Popen, at_least: int, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.exists():
            jobs = _jobs(store)
            if sum(1 for status, *_ in jobs.values() if status == "done") >= at_least:
                return jobs
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.5)
    pytest.fail(f"fewer than {at_least} jobs finished in {timeout_s:.0f} s")


def test_a_killed_drive_goes_on_where_it_was_and_runs_no_finished_job_again(tmp_path):
    cache, store = tmp_path / "cache", tmp_path / "cache" / "store"  # bit XOR and a tiny model: no assets
    first = _drive(store, cache)
    try:
        before = _wait_for_done(store, first, at_least=2, timeout_s=400)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the drive and nothing else of the test: its own session
        first.wait()
    finished = {key: row for key, row in before.items() if row[0] == "done"}
    assert 2 <= len(finished) < 6, "the drive was killed before its last job"

    second = _drive(store, cache)
    out, _ = second.communicate(timeout=600)
    assert second.returncode == 0, out
    after = _jobs(store)
    assert len(after) == 6 and all(status == "done" for status, *_ in after.values()), after
    for key, (status, attempt, finished_at) in finished.items():
        assert after[key] == (status, attempt, finished_at), f"{key} ran again after the restart"
    assert "tiny-drive: " in out and "claims decided" in out and "Every recipe has ended" in out
    assert "1 of 1 claims decided" in out or "0 of 1 claims decided" in out
