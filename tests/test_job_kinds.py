"""A job kind registered in a few lines (tests/kinds/toy_jobs.py) gets what training runs have, through a
real worker process: the queue, live events, the result cache, cancel, SIGKILL -> dead -> resume from its
own checkpoint, and inputs from other jobs. This is what makes each next kind one module."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Callable

import pytest

from labcore import jobs
from labcore.errors import LabError
from labcore.jobs import job_kind
from labcore.execution.executor import LocalExecutor
from labcore.store import ACTIVE, Store, process_state

REPO = Path(__file__).resolve().parent.parent
KINDS_DIR = Path(__file__).resolve().parent / "kinds"
sys.path.insert(0, str(KINDS_DIR))
jobs.load_modules("toy_jobs")
from toy_jobs import CountSpec, DoubleSpec  # noqa: E402


@pytest.fixture
def executor(store):
    return LocalExecutor(store, autostart=False)


@pytest.fixture
def worker(store, tmp_path) -> Callable[[], subprocess.Popen]:
    """Start a real worker process that also loads the toy kinds; every one is killed afterwards."""
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(KINDS_DIR)]),
                   TRANSFERLAB_JOB_MODULES="toy_jobs")
        with open(tmp_path / f"worker-{len(started)}.log", "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "labcore", "worker", "--store", str(store.root)],
                                       cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def wait_for(what: str, condition: Callable[[], object], timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def steps(store: Store, key: str) -> list[int]:
    return [e["step"] for e in store.events(key) if e["type"] == "step"]


def test_a_toy_kind_is_one_registry_entry():
    assert {"run", "attention", "count", "double"} <= set(jobs.KINDS.names())
    job = jobs.new_job(CountSpec(n=3))
    assert (job.kind, job.label, job.checkpoint, job.spec) == ("count", "count to 3", "count.json",
                                                               {"n": 3, "pause_s": 0.0})
    assert job.key == jobs.new_job(CountSpec(n=3)).key != jobs.new_job(CountSpec(n=4)).key


def test_queued_live_done_then_served_from_the_cache(store, executor, worker):
    first = executor.submit(CountSpec(n=30, pause_s=0.05))
    assert (first.outcome, first.kind) == ("queued", "count")
    worker()
    wait_for("live step events", lambda: len(steps(store, first.key)) >= 3)
    assert store.get(first.key).status == "running"  # events arrive while it runs
    wait_for("the job to end", lambda: store.get(first.key).status not in ACTIVE)
    assert store.get(first.key).status == "done", store.log(first.key)
    assert steps(store, first.key) == list(range(1, 31))
    assert executor.result(first.key) == {"total": 465}
    seq = store.queue_seq()
    again = executor.submit(CountSpec(n=30, pause_s=0.05))
    assert (again.key, again.outcome, again.status) == (first.key, "cached", "done")
    assert store.queue_seq() == seq  # nothing was queued


def test_cancel_stops_a_running_job_of_any_kind(store, executor, worker):
    key = executor.submit(CountSpec(n=100_000, pause_s=0.02)).key
    worker()
    wait_for("steps", lambda: len(steps(store, key)) >= 3)
    assert executor.cancel(key).status == "running"  # asked; it stops at its next event
    wait_for("the job to stop", lambda: store.get(key).status not in ACTIVE)
    assert store.get(key).status == "cancelled"
    assert len(steps(store, key)) < 100_000


def test_sigkill_is_seen_dead_and_resume_continues_from_the_kinds_checkpoint(store, executor, worker):
    key = executor.submit(CountSpec(n=60, pause_s=0.05)).key
    first = worker()
    wait_for("steps", lambda: len(steps(store, key)) >= 10)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    # The checkpoint the kill left: the checkpoint event goes out before its file is written, so a kill between
    # the two leaves the one before it (the stream then doubles back, which readers drop).
    kept = json.loads((store.workdir(key) / "count.json").read_text())["i"]
    wait_for("the job to be dead", lambda: store.get(key).status == "dead", 15)
    assert executor.resume(key).outcome == "resumed"
    worker()
    wait_for("the resumed job to end", lambda: store.get(key).status not in ACTIVE)
    assert store.get(key).status == "done", store.log(key)
    attempts = [e for e in store.events(key) if e["type"] == "attempt"]
    assert [a["resume"] for a in attempts] == [False, True]
    events = store.events(key)
    second = events.index(attempts[1])
    before = [e["step"] for e in events[:second] if e["type"] == "step"]
    after = [e["step"] for e in events[second:] if e["type"] == "step"]
    announced = [e["step"] for e in events[:second] if e["type"] == "checkpoint"]
    assert kept in announced[-2:] and kept >= 5  # the last whole checkpoint: the last announced, or the one before
    assert after == list(range(kept + 1, 61))  # on from its checkpoint, not from the start
    assert before[:kept] == list(range(1, kept + 1))  # and the stream has every step before it


def test_a_job_that_needs_another_is_refused_until_that_one_is_finished(store, executor, worker):
    source = executor.submit(CountSpec(n=4)).key
    with pytest.raises(LabError, match=rf"needs count {source}.*it is queued"):
        executor.submit(DoubleSpec(source=source))
    with pytest.raises(LabError, match="there is none with that key"):
        executor.submit(DoubleSpec(source="0" * 20))
    worker()
    wait_for("the count to end", lambda: store.get(source).status == "done")
    doubled = executor.submit(DoubleSpec(source=source)).key
    wait_for("the double to end", lambda: store.get(doubled).status not in ACTIVE)
    assert executor.result(doubled) == {"total": 20}


def test_a_worker_that_is_not_running_is_never_believed(store, executor):
    # A claim by a process that has exited is dead at the next read, whatever the kind.
    key = executor.submit(CountSpec(n=5)).key
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert store.claim(pid=child.pid).kind == "count"
    assert process_state(child.pid) == "gone"
    assert store.get(key).status == "dead"


@dataclass(frozen=True)
class _StoppedSpec:
    status: str


@job_kind("stopped-with-none-error", _StoppedSpec, stops_itself=True)
def _stopped_with_none_error(spec, ctx):
    # As a pretraining stopped between steps reports itself: its record carries "error": None.
    yield {"type": "result", "status": spec.status, "record": {"steps": 3, "error": None}}


def test_a_record_whose_error_is_none_ends_with_an_error_string(tmp_path):
    """A stopped pretraining's record says ``"error": None``; the worker once crashed reading that outcome
    (``None.startswith``) and left the job dead instead of interrupted."""
    from labcore.execution.attempt import Outcome, run_attempt
    from labcore.jobs.base import JobContext

    for status in ("interrupted", "done"):
        items = list(run_attempt("stopped-with-none-error", {"status": status}, JobContext(workdir=tmp_path / status),
                                 store_root=tmp_path, min_free_mb=0))
        outcome = items[-1]
        assert isinstance(outcome, Outcome)
        assert outcome.status == status and outcome.error == ""
