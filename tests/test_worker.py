"""Workers as real processes on a tiny random BERT: claims, cancel, SIGTERM, SIGKILL + resume, streams.

Every worker a test starts runs in its own session and is killed (whole process group) by the fixture's
finalizer, so no process outlives the test. Waits have generous deadlines that only guard against a
hang; no test asserts how fast anything is (bench/latency.py prints the figures).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from labcore.execution.executor import LocalExecutor
from labcore.runspec import make_spec
from labcore.events import curves_from_events
from labcore.jobs import new_job
from labcore.store import ACTIVE, Store, StoreSettings, process_state
from helpers import wait_for
from test_events import assert_typed

REPO = Path(__file__).resolve().parent.parent
SMALL = {"n_train": 64, "n_validation": 32, "n_test": 32}


@pytest.fixture(scope="module")
def tiny_model() -> str:
    """The lab's tiny random BERT (hidden 64, 2 layers), built once under the test cache."""
    return "tiny:bert"


def submit(store: Store, spec, **options):
    """Queue a spec as the executor does (resolved and keyed by its job kind), without starting workers."""
    return store.submit(new_job(spec), **options)


def tiny_spec(model: str, seed: int = 0, **changes):
    values = dict(model=model, discipline="bits-xor", discipline_params=SMALL, seed=seed,
                  batch_size=16, eval_every=20, epochs=1000.0, precision="fp32")
    values.update(changes)
    return make_spec(**values)


@pytest.fixture
def workers(store, tmp_path) -> Callable[..., subprocess.Popen]:
    """Start `python -m labcore worker …` processes on the test's store; all are killed afterwards."""
    started: list[subprocess.Popen] = []

    def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(tmp_path / f"worker-{len(started)}.log", "ab")
        process = subprocess.Popen([sys.executable, "-m", "labcore", "worker", "--store", str(store.root), *args],
                                   cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))
        log.close()
        started.append(process)
        return process

    yield start
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the worker and anything it started (--workers N)
        except ProcessLookupError:
            pass
        process.wait()


def steps(events):
    return [e for e in events if e["type"] == "step"]


# -------------------------------------------------------------------------------------------- the tests
def test_two_workers_run_twenty_specs_each_exactly_once(store, workers, tiny_model):
    workers("--workers", "2", "--checkpoint-every", "0")
    keys = [submit(store, tiny_spec(tiny_model, seed, max_steps=6)).key for seed in range(20)]
    assert len(set(keys)) == 20
    wait_for("20 runs to end", lambda: all(store.get(k).status not in ACTIVE for k in keys), 600, store)
    records = [store.get(k) for k in keys]
    assert [r.status for r in records] == ["done"] * 20, [r.error for r in records]
    for key, record in zip(keys, records):
        attempts = [e for e in store.events(key) if e["type"] == "attempt"]
        assert record.attempt == 1 and len(attempts) == 1  # claimed once, run once
        assert [e["step"] for e in steps(store.events(key))] == list(range(1, 7))
        assert record.result["steps_done"] == 6
    # A finished spec comes back from the store: no queue entry, no worker.
    seq = store.queue_seq()
    again = submit(store, tiny_spec(tiny_model, 3, max_steps=6))
    assert (again.key, again.status, again.outcome) == (keys[3], "done", "cached")
    assert store.queue_seq() == seq and store.queued() == []


def test_cancel_stops_a_run_within_one_step_and_keeps_its_curve(store, workers, tiny_model):
    workers()
    key = submit(store, tiny_spec(tiny_model, max_steps=100_000)).key
    wait_for("the run to take steps", lambda: len(steps(store.events(key))) >= 3, store=store)
    assert store.cancel(key).status == "running"
    # The flag is raised somewhere inside cancel() (its transaction waits for the lock on busy cores, while a
    # tiny model takes a step every few ms): from its return on, the flag is certainly up.
    raised_by = time.time()
    wait_for("the run to stop", lambda: store.get(key).status not in ACTIVE, store=store)
    record = store.get(key)
    assert record.status == "cancelled"
    after = [e for e in steps(store.events(key)) if e["t"] > raised_by]
    assert len(after) <= 1  # only the step in flight when the flag was raised
    assert record.result["status"] == "cancelled"
    assert curves_from_events(store.events(key))["train_loss"]  # the curve is kept
    assert any(e["type"] == "checkpoint" for e in store.events(key))  # and it can be resumed


def test_sigkill_makes_the_run_dead_and_resume_continues_from_the_checkpoint(store, workers, tiny_model):
    total = 80
    first = workers("--checkpoint-every", "5")
    key = submit(store, tiny_spec(tiny_model, max_steps=total)).key
    # The event for step 15 comes once the file for step 10 exists (events go out before their file).
    wait_for("a checkpoint", lambda: any(e["type"] == "checkpoint" and e["step"] >= 15
                                         for e in store.events(key)), store=store)
    os.killpg(first.pid, signal.SIGKILL)
    # Not reaped yet: the worker is a zombie, which os.kill(pid, 0) would call alive.
    wait_for("the run to be dead", lambda: store.get(key).status == "dead", 15, store)
    assert process_state(first.pid) in ("zombie", "gone")
    first.wait()
    assert store.resume(key).outcome == "resumed"
    workers("--checkpoint-every", "5")
    wait_for("the resumed run to end", lambda: store.get(key).status not in ACTIVE, store=store)
    record = store.get(key)
    assert record.status == "done", store.log(key)
    events = store.events(key)
    marker = next(i for i, e in enumerate(events) if e["type"] == "attempt" and e["attempt"] == 2)
    assert events[marker]["resume"] is True
    resumed_from = int(re.search(r"resumed from step (\d+)", store.log(key)).group(1))
    assert resumed_from >= 10 and resumed_from % 5 == 0
    assert steps(events[marker:])[0]["step"] == resumed_from + 1
    loss_curve = curves_from_events(events)["train_loss"]
    assert [s for s, _ in loss_curve] == list(range(1, total + 1))  # continues, no gap, no doubling back
    assert record.result["steps_done"] == total
    assert_typed(events)  # the stream as stored: stamped events of both attempts, the store's and the worker's


def test_a_frozen_worker_looks_dead_and_comes_back_when_it_thaws(store, workers, tiny_model):
    # The reader decides what "stale" means; a short limit keeps the test quick.
    reader = Store(store.root, StoreSettings(stale_after_s=2.0))
    worker = workers()
    key = submit(store, tiny_spec(tiny_model, max_steps=60)).key
    wait_for("the run to take steps", lambda: steps(store.events(key)), store=store)
    os.killpg(worker.pid, signal.SIGSTOP)  # alive, not a zombie, but silent: only the heartbeat tells
    try:
        wait_for("the run to look dead", lambda: reader.get(key).status == "dead", 30, store)
        assert process_state(worker.pid) == "alive"
        assert "no heartbeat" in reader.get(key).error
    finally:
        os.killpg(worker.pid, signal.SIGCONT)
    wait_for("the run to end", lambda: reader.get(key).status not in ACTIVE + ("dead",), store=store)
    assert reader.get(key).status == "done"  # the same attempt finished: its result counts
    reader.close()


def test_a_stalled_worker_is_fenced_out_once_its_run_is_resumed_elsewhere(store, workers, tiny_model, tmp_path):
    # The sequence that corrupted runs: a worker stalls (SIGSTOP), its run is seen dead and resumed by a
    # second worker, then the first one wakes (SIGCONT). Its buffered steps, its checkpoint and its
    # "interrupted" must all be refused: the resumed attempt's curve stays whole. 600 steps leave the
    # second attempt training for hundreds of steps after the first wakes (it wakes at step 200 or later).
    total = 600
    reader = Store(store.root, StoreSettings(stale_after_s=2.0))
    first = workers("--checkpoint-every", "20")
    key = submit(store, tiny_spec(tiny_model, max_steps=total)).key
    wait_for("a checkpoint", lambda: any(e["type"] == "checkpoint" and e["step"] >= 40
                                         for e in store.events(key)), store=store)
    with store.transaction():  # frozen outside any write: one frozen mid-write would hold the lock
        os.killpg(first.pid, signal.SIGSTOP)
    try:
        wait_for("the run to look dead", lambda: reader.get(key).status == "dead", 30, store)
        assert reader.resume(key).outcome == "resumed"
        workers("--checkpoint-every", "20")
        wait_for("the second attempt to train",
                 lambda: store.get(key).attempt == 2 and store.status(key).step >= 200, 120, store)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    wait_for("the run to end", lambda: store.get(key).status not in ACTIVE, 300, store)
    record = store.get(key)
    assert (record.status, record.attempt) == ("done", 2), store.log(key)
    events = store.events(key)
    marker = next(i for i, e in enumerate(events) if e["type"] == "attempt" and e["attempt"] == 2)
    after = events[marker:]
    assert [e["status"] for e in after if e["type"] == "result"] == ["done"]  # no "interrupted" from the first
    loss_curve = curves_from_events(events)["train_loss"]
    assert [s for s, _ in loss_curve] == list(range(1, total + 1))  # every point, in order
    wait_for("the first worker to say why it stopped", lambda: "resumed elsewhere" in
             (tmp_path / "worker-0.log").read_text(), 60, store)
    assert "Traceback" not in (tmp_path / "worker-0.log").read_text()
    reader.close()


def test_sigterm_checkpoints_records_interrupted_and_exits(store, workers, tiny_model):
    worker = workers()
    key = submit(store, tiny_spec(tiny_model, max_steps=100_000)).key
    wait_for("the run to take steps", lambda: steps(store.events(key)), store=store)
    os.kill(worker.pid, signal.SIGTERM)
    assert worker.wait(timeout=120) == 0
    record = store.get(key)
    assert record.status == "interrupted"
    assert (store.workdir(key) / "resume.pt").is_file()
    assert store.workers() == []  # it unregistered itself


def test_a_second_reader_and_tail_see_the_same_live_stream(store, workers, tiny_model):
    workers()
    key = submit(store, tiny_spec(tiny_model, max_steps=60)).key
    tail = subprocess.Popen([sys.executable, "-m", "labcore", "tail", key[:10], "--json", "--store", str(store.root)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        reader = Store(store.root)
        live, cursor = [], 0
        while reader.get(key).status in ACTIVE:
            new, cursor = reader.read_events(key, cursor)
            live.extend(new)
            time.sleep(0.05)
        live.extend(reader.read_events(key, cursor)[0])
        out, _ = tail.communicate(timeout=120)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert store.get(key).status == "done"
    assert live == store.events(key)
    assert [json.loads(line) for line in out.splitlines()] == store.events(key)
    assert tail.returncode == 0


def test_failures_are_explained_in_the_run_log(store, workers, tiny_model, tmp_path):
    missing = submit(store, tiny_spec(f"local:{tmp_path / 'no-such-model'}")).key  # before the worker: it exits when idle
    workers("--exit-when-idle")
    wait_for("the run to fail", lambda: store.get(missing).status == "failed", store=store)
    assert "save_pretrained" in store.get(missing).error  # a LabError: its message names the fix


def test_a_crash_leaves_its_traceback_in_the_run_log(store, workers, tiny_model):
    # Job kinds that cannot even be imported: every job the worker is given fails with the traceback,
    # so the page says why instead of the jobs waiting forever.
    key = submit(store, tiny_spec(tiny_model)).key
    workers("--exit-when-idle", env={"TRANSFERLAB_JOB_MODULES": "labcore.no_such_engine"})
    wait_for("the run to fail", lambda: store.get(key).status == "failed", store=store)
    assert "traceback is in the run's log" in store.get(key).error
    assert "ModuleNotFoundError" in store.log(key)
    assert "Traceback (most recent call last)" in store.log(key)


def test_the_app_starts_one_worker_and_the_cli_stops_it(store, tiny_model):
    executor = LocalExecutor(store, workers=1)
    started = executor.ensure_workers()
    try:
        assert len(started) == 1
        assert executor.ensure_workers() == []  # never twice
        key = executor.submit(tiny_spec(tiny_model, max_steps=4)).key
        wait_for("the run to end", lambda: store.get(key).status not in ACTIVE, store=store)
        assert store.get(key).status == "done"
        assert "loading model" in store.log(key)  # the engine's log reaches the store, not a terminal
        stop = subprocess.run([sys.executable, "-m", "labcore", "worker", "--stop", "--store", str(store.root)],
                              cwd=REPO, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert stop.returncode == 0 and str(started[0]) in stop.stdout
        wait_for("the worker to exit", lambda: process_state(started[0]) in ("gone", "zombie"), 60)
    finally:
        if process_state(started[0]) == "alive":
            os.killpg(started[0], signal.SIGKILL)
        from labcore.execution.pool import reap_children

        def reaped() -> bool:
            reap_children()  # the executor started it from this process: collect its exit status
            return process_state(started[0]) == "gone"

        wait_for("the worker to be reaped", reaped, 30)


def test_stop_reaches_a_started_worker_whose_registration_was_dropped(store):
    from labcore.execution.pool import start_worker, stop_workers

    process = start_worker(store, new_session=False)
    try:
        # as a listing drops it once a start outlives its grace (a loaded machine importing torch)
        store.unregister_worker(process.pid)
        assert process.pid in stop_workers(store, timeout_s=30)
        assert process.wait(timeout=30) is not None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_stop_reaches_a_worker_another_process_started_and_nobody_registered(store):
    from labcore.execution.pool import stop_workers, worker_command

    # started by someone else (not this process's child list) and not in the registry (dropped, or not yet in)
    process = subprocess.Popen(worker_command(store), cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        wait_for("the worker to register", lambda: any(w["pid"] == process.pid for w in store.workers()), 120)
        with store.transaction():  # frozen outside any write, or the unregister below would wait behind it
            os.kill(process.pid, signal.SIGSTOP)  # frozen, so no heartbeat registers it again
        store.unregister_worker(process.pid)
        assert process.pid in stop_workers(store, timeout_s=2)  # SIGTERM waits on a frozen process; SIGKILL not
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_heartbeat_about_the_claim_that_just_ended_leaves_the_next_one_running(store, tiny_model, monkeypatch):
    # The heartbeat thread reads the current claim, the main thread ends that job and starts the next, then
    # the beat's refused heartbeat (the first job is done) arrives: it must not mark the next job lost. It did:
    # the next run stopped after its first step and was reaped dead with its worker alive.
    from labcore.execution.attempt import EventSink
    from labcore.execution.worker import Worker

    worker = Worker(store)
    submit(store, tiny_spec(tiny_model, 0, max_steps=2))
    submit(store, tiny_spec(tiny_model, 1, max_steps=2))
    first = store.claim(worker.pid)
    assert worker.run_claim(first) == "done"
    second = store.claim(worker.pid)
    worker._current = (first, EventSink(store, first.key, worker.settings, attempt=first.attempt))
    refused = store.heartbeat

    def next_claim_meanwhile(*args, **kwargs):
        answer = refused(*args, **kwargs)
        worker._current = (second, EventSink(store, second.key, worker.settings, attempt=second.attempt))
        return answer

    monkeypatch.setattr(store, "heartbeat", next_claim_meanwhile)
    worker.beat()
    assert worker._should_stop(second) is None
    monkeypatch.undo()
    worker._current = None
    assert worker.run_claim(second) == "done"
