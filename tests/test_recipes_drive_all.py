"""``recipe run --all``: several recipes driven into one store, resumable after the drive is killed."""

from __future__ import annotations

import contextlib
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


def _lab_pids(opened, records) -> set[int]:
    """The open store's workers and the processes of its running jobs (``records``, as just read)."""
    running = [r for r in records if r.status == "running"]
    return {w["pid"] for w in opened.workers()} | {pid for r in running for pid in (r.pid, r.task_pid) if pid}


def _wait_gone(pids: set[int], timeout_s: float = 60.0) -> None:
    """Wait until every one of ``pids`` has exited: a SIGKILL is delivered, not done, when ``kill`` returns, and a
    process in the middle of a write dies only after it (until then the store rightly counts its job alive)."""
    from labcore.store.liveness import process_state

    deadline = time.monotonic() + timeout_s
    while any(process_state(pid) not in ("gone", "zombie") for pid in pids):
        assert time.monotonic() < deadline, f"killed processes still running after {timeout_s:.0f} s"
        time.sleep(0.05)


HALF_WAY = 15  # of a tiny job's 30 steps: a job this early has seconds of training left, even on idle cores


def _moment_to_stop(store: Path, process: subprocess.Popen, at_least: int,
                    timeout_s: float) -> tuple[dict, set[int]]:
    """The store's jobs and the lab's processes, read together once ``at_least`` jobs have finished and another
    is at most half-way through its steps (so it is still running when they are killed a moment later)."""
    from labcore.store import Store

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.exists():
            opened = Store(store)
            try:
                records = opened.jobs()
                early = [r for r in records if r.status == "running"
                         and (opened.heartbeat_of(r.key) or {}).get("step", 0) <= HALF_WAY]
                if sum(r.status == "done" for r in records) >= at_least and early:
                    return {r.key: (r.status, r.attempt, r.finished_at) for r in records}, _lab_pids(opened, records)
            finally:
                opened.close()
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.2)
    pytest.fail(f"fewer than {at_least} jobs finished, with one more early in its run, in {timeout_s:.0f} s")


def test_a_killed_drive_goes_on_where_it_was_and_runs_no_finished_job_again(tmp_path):
    cache, store = tmp_path / "cache", tmp_path / "cache" / "store"  # bit XOR and a tiny model: no assets
    first = _drive(store, cache)
    pids: set[int] = set()
    try:
        before, pids = _moment_to_stop(store, first, at_least=2, timeout_s=400)
    finally:
        # The machine stops: the workers and their jobs die with the drive, a job mid-run. The drive is frozen
        # first, so it cannot see its worker gone and resume the job before it dies itself (on busy cores the
        # gap between two kills is long enough for one of its looks); then the workers, while their drive still
        # lives, since a worker whose drive has ended stops its job gracefully (interrupted), as no stopped
        # machine lets it; then the drive.
        os.killpg(first.pid, signal.SIGSTOP)  # the drive and nothing else of the test: its own session
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(pids)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    finished = {key: row for key, row in before.items() if row[0] == "done"}
    assert 2 <= len(finished) < 6, "the drive was killed before its last job"
    now = _jobs(store)
    lost = [key for key, (status, *_) in now.items() if status == "dead"]
    assert lost, f"no job was mid-run when the machine stopped: before {before}, killed {sorted(pids)}, after {now}"

    second = _drive(store, cache)
    out, _ = second.communicate(timeout=600)
    assert second.returncode == 0, out
    after = _jobs(store)
    assert len(after) == 6 and all(status == "done" for status, *_ in after.values()), after
    for key, (status, attempt, finished_at) in finished.items():
        assert after[key] == (status, attempt, finished_at), f"{key} ran again after the restart"
    assert all(after[key][1] == 2 for key in lost), "a lost job was not resumed (its second attempt)"
    assert "tiny-drive: " in out and "claims decided" in out and "Every recipe has ended" in out
    assert "1 of 1 claims decided" in out or "0 of 1 claims decided" in out


def test_a_job_a_lost_worker_left_dead_is_resumed_at_most_its_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))  # bit XOR and a tiny model: no assets
    from recipe_tiny_drive import plan as tiny_plan

    from labcore.errors import LabError
    from labcore.execution.executor import LocalExecutor
    from labcore.recipes.drive_all import MAX_RESUMES, resume_lost
    from labcore.recipes.keys import step_key
    from labcore.store import Store

    store = Store(tmp_path / "cache" / "store")
    executor = LocalExecutor(store, autostart=False)
    plan = tiny_plan("quick", (0,), lambda spec: spec)
    step = plan.steps[0]
    key = step_key(step)
    executor.submit_group(plan.group, [step.spec])
    gone = subprocess.Popen(["true"])
    gone.wait()  # a worker pid that no longer runs

    class Racing:  # another drive resumed it between the read and the resume
        def __init__(self) -> None:
            self.store = store

        def resume(self, key: str, who: str | None = None):
            raise LabError(f"run {key} is queued: only stopped runs can be resumed")

    resumed: dict[str, int] = {}
    for _ in range(MAX_RESUMES):
        assert store.claim(pid=gone.pid).key == key
        assert store.get(key).status == "dead"
        before = dict(resumed)
        assert resume_lost(plan, Racing(), resumed) == [] and resumed == before  # a lost race counts no resume
        assert resume_lost(plan, executor, resumed) == [key]
        assert store.get(key).status == "queued"
    assert store.claim(pid=gone.pid).key == key
    assert resume_lost(plan, executor, resumed) == [] and store.get(key).status == "dead"
    store.close()


def test_a_job_its_stopped_worker_left_interrupted_is_taken_up_when_a_drive_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))  # bit XOR and a tiny model: no assets
    from recipe_tiny_drive import plan as tiny_plan

    from labcore.execution.executor import LocalExecutor
    from labcore.recipes.drive_all import AT_START, drive_round, resume_lost
    from labcore.recipes.keys import step_key
    from labcore.store import Store

    store = Store(tmp_path / "cache" / "store")
    executor = LocalExecutor(store, autostart=False)
    plan = tiny_plan("quick", (0,), lambda spec: spec)
    key = step_key(plan.steps[0])
    executor.submit_group(plan.group, [step.spec for step in plan.steps])
    # a machine shutting down: the worker got SIGTERM, checkpointed its job and recorded it interrupted
    claim = store.claim(pid=os.getpid())
    assert claim.key == key and store.finish(key, claim.attempt, "interrupted")
    resumed: dict[str, int] = {}
    assert resume_lost(plan, executor, resumed) == [] and store.get(key).status == "interrupted"  # mid-drive: kept
    assert resume_lost(plan, executor, resumed, AT_START) == [key] and store.get(key).status == "queued"
    # the drive's first round takes it up, its later rounds do not
    claim = store.claim(pid=os.getpid())
    assert claim.key == key and store.finish(key, claim.attempt, "interrupted")
    from recipe_tiny_drive import RECIPE as tiny

    drive_round([tiny], "quick", (0,), executor, resumed=resumed)
    assert store.get(key).status == "interrupted"
    drive_round([tiny], "quick", (0,), executor, resumed=resumed, take_up=AT_START)
    assert store.get(key).status == "queued"
    store.close()
