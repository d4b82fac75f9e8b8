"""The run store on its own: queue, records, liveness, streams, groups. No engine, no torch.

Concurrency is checked with real processes claiming from one store; liveness with real pids (an exited
child, a zombie, this process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labcore.errors import LabError
from labcore.results.record import RunRecord
from labcore.runspec import make_spec
from labcore.events import curves_from_events
from labcore.jobs import new_job
from labcore.engine import run_results
from labcore.engine.resolve import resolve_spec
from labcore.store import NewJob, Store, StoreSettings, open_store, process_state

REPO = Path(__file__).resolve().parent.parent


def submit(store: Store, spec, **options):
    """Queue a RunSpec as the executor does: resolved and keyed by its job kind, then stored."""
    return store.submit(new_job(spec), **options)


def spec(seed: int = 0, **changes):
    return make_spec(discipline="bits-xor", discipline_params={"n_train": 64, "n_validation": 32, "n_test": 32},
                     seed=seed, **changes)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    yield s
    s.close()


def finish_done(store: Store, key: str) -> None:
    claim = store.claim()
    assert claim is not None and claim.key == key
    store.finish(key, claim.attempt, "done", result={"key": key, "status": "done", "spec": claim.spec})


def exited_pid() -> int:
    """The pid of a child that has exited and been reaped: nothing runs under it any more."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ------------------------------------------------------------------------------------------- submitting
def test_submit_queues_once_and_a_duplicate_returns_the_same_run(store):
    first = submit(store, spec())
    assert (first.status, first.outcome) == ("queued", "queued")
    assert first.key == resolve_spec(spec()).key
    again = submit(store, spec())
    assert (again.key, again.outcome) == (first.key, "existing")
    assert store.claim() is not None
    assert store.claim() is None  # one queue entry, one claim
    running = submit(store, spec())
    assert (running.status, running.outcome) == ("running", "existing")


def test_a_finished_spec_is_returned_without_touching_the_queue(store):
    key = submit(store, spec()).key
    finish_done(store, key)
    seq = store.queue_seq()
    again = submit(store, spec())
    assert (again.status, again.outcome) == ("done", "cached")
    assert store.queue_seq() == seq
    assert store.claim() is None


def test_interactive_runs_overtake_sweeps_and_each_priority_is_fifo(store):
    sweep = [submit(store, spec(i), priority="sweep").key for i in range(3)]
    interactive = [submit(store, spec(10 + i)).key for i in range(2)]
    order = []
    while (claim := store.claim()) is not None:
        order.append(claim.key)
    assert order == interactive + sweep


def test_resubmitting_a_queued_sweep_spec_interactively_moves_it_forward_once(store):
    keys = [submit(store, spec(i), priority="sweep").key for i in range(3)]
    moved = submit(store, spec(2))
    assert (moved.key, moved.outcome) == (keys[2], "existing")
    order = []
    while (claim := store.claim()) is not None:
        order.append(claim.key)
    assert order == [keys[2], keys[0], keys[1]]


def test_unknown_priority_and_unknown_key_name_the_fix(store):
    with pytest.raises(LabError, match="valid priorities: interactive, sweep"):
        submit(store, spec(), priority="urgent")
    with pytest.raises(LabError, match="labcore status"):
        store.cancel("nope")
    with pytest.raises(LabError, match="no run key starts with"):
        store.resolve_key("zzz")


def test_a_key_prefix_is_enough(store):
    key = submit(store, spec()).key
    assert store.resolve_key(key[:6]) == key


# -------------------------------------------------------------------------------------------- cancelling
def test_cancel_a_queued_run_takes_it_off_the_queue(store):
    key = submit(store, spec()).key
    assert store.cancel(key).status == "cancelled"
    assert store.claim() is None
    again = submit(store, spec())  # pressing run again continues it
    assert (again.status, again.outcome) == ("queued", "resumed")


def test_cancel_a_running_run_raises_the_flag_of_its_attempt(store):
    key = submit(store, spec()).key
    claim = store.claim()
    assert not store.cancel_requested(key, claim.attempt)
    assert store.cancel(key).status == "running"
    assert store.cancel_requested(key, claim.attempt)
    store.append_events(key, [{"type": "step", "step": 1, "loss": 0.7}])
    assert store.finish(key, claim.attempt, "cancelled", result={"status": "cancelled"})
    record = store.get(key)
    assert record.status == "cancelled"
    assert curves_from_events(store.events(key))["train_loss"] == [(1, 0.7)]  # the curve stays
    assert not store.cancel_requested(key, claim.attempt)


# ---------------------------------------------------------------------------------------------- liveness
def test_process_state_tells_alive_gone_and_zombie():
    assert process_state(os.getpid()) == "alive"
    assert process_state(exited_pid()) == "gone"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while process_state(child.pid) == "alive":  # until it exits; nobody has reaped it yet
            time.sleep(0.02)
        assert process_state(child.pid) == "zombie"
        os.kill(child.pid, 0)  # why /proc is read: the signal check says a zombie is there
    finally:
        child.wait()


def test_a_run_whose_worker_is_gone_is_dead_then_resumes_with_its_checkpoint(store):
    key = submit(store, spec()).key
    claim = store.claim(pid=exited_pid())
    (claim.workdir / "resume.pt").parent.mkdir(parents=True)
    (claim.workdir / "resume.pt").write_bytes(b"checkpoint")
    record = store.get(key)
    assert record.status == "dead"
    assert "resume it" in record.error
    assert "resume it" in store.log(key)
    assert key not in store.cache.get("index/running", [])
    resumed = store.resume(key)
    assert (resumed.status, resumed.outcome) == ("queued", "resumed")
    second = store.claim()
    assert (second.key, second.attempt, second.resume) == (key, 2, True)
    # The first attempt may not write any more: the run is the second attempt's now.
    assert not store.heartbeat(key, claim.attempt)
    assert not store.finish(key, claim.attempt, "done")
    assert store.heartbeat(key, second.attempt)


def test_a_run_whose_worker_is_a_zombie_is_dead(store):
    key = submit(store, spec()).key
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        store.claim(pid=child.pid)
        while process_state(child.pid) == "alive":
            time.sleep(0.02)
        assert store.reap() == [key]
        assert store.get(key).status == "dead"
        assert "zombie" in store.get(key).error
    finally:
        child.wait()


def test_a_run_with_a_stale_heartbeat_is_dead_even_if_its_pid_lives(tmp_path):
    store = Store(tmp_path / "store", StoreSettings(stale_after_s=0.3))
    key = submit(store, spec()).key
    claim = store.claim()  # this very process: alive, but it will not heartbeat
    assert store.get(key).status == "running"
    time.sleep(0.5)
    assert store.status(key).status == "dead"
    assert "no heartbeat" in store.get(key).error
    # A worker that was only slow comes back: its heartbeat makes the run running again.
    assert store.heartbeat(key, claim.attempt, step=3)
    assert store.get(key).status == "running"
    assert store.status(key).step == 3


def test_a_failed_run_resubmitted_starts_over(store):
    key = submit(store, spec()).key
    claim = store.claim()
    store.finish(key, claim.attempt, "failed", error="bad input: fix it", traceback="Traceback ...")
    assert store.get(key).error == "bad input: fix it"
    again = submit(store, spec())
    assert (again.status, again.outcome) == ("queued", "requeued")
    assert store.claim().resume is False


# ----------------------------------------------------------------------------------------------- streams
def test_a_second_reader_sees_the_same_stream_in_order(store, tmp_path):
    key = submit(store, spec()).key
    store.claim()
    reader = Store(store.root)  # another connection, as another page would have
    seen, cursor = [], 0
    for chunk in range(3):
        store.append_events(key, [{"type": "step", "step": chunk * 2 + i + 1, "loss": 1.0} for i in range(2)])
        new, cursor = reader.read_events(key, cursor)
        seen.extend(new)
    steps = [e["step"] for e in seen if e["type"] == "step"]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert [e for e in store.events(key)] == reader.events(key)
    assert reader.read_events(key, cursor) == ([], cursor)
    reader.close()


def test_curves_continue_from_the_checkpoint_step_after_a_resume():
    events = [{"type": "step", "step": s, "loss": 1.0 / s} for s in range(1, 8)]
    events.append({"type": "eval", "step": 5, "split": "validation", "value": 0.6, "loss": 0.5})
    events.append({"type": "attempt", "attempt": 2, "resume": True})
    # Checkpoint at step 5: the new attempt starts at 6; steps 6 and 7 of the first attempt go.
    events += [{"type": "step", "step": s, "loss": 2.0} for s in range(6, 9)]
    curves = curves_from_events(events)
    assert [s for s, _ in curves["train_loss"]] == list(range(1, 9))
    assert curves["train_loss"][5] == (6, 2.0)
    assert curves["validation_metric"] == [(5, 0.6)]


def test_the_log_collects_engine_output_and_the_traceback(store):
    key = submit(store, spec()).key
    claim = store.claim()
    store.append_events(key, [{"type": "log", "message": "loading model"},
                              {"type": "log", "source": "stderr", "message": "a warning"}])
    store.finish(key, claim.attempt, "failed", error="ValueError: x", traceback="Traceback: boom")
    log = store.log(key)
    assert "loading model" in log and "[stderr] a warning" in log and "Traceback: boom" in log
    assert "attempt 1 started" in log


# -------------------------------------------------------------------------------------- groups, results
def test_a_sweep_is_a_named_group_of_specs(store):
    finished = submit(store, spec(0)).key
    finish_done(store, finished)
    subs = store.submit_group("seeds", [new_job(spec(i)) for i in range(3)])
    assert [s.outcome for s in subs] == ["cached", "queued", "queued"]
    assert store.group("seeds")["keys"] == [s.key for s in subs]
    assert [r.key for r in store.jobs(group="seeds", status="queued")] == [subs[1].key, subs[2].key]
    assert store.groups() == ["seeds"]
    with pytest.raises(LabError, match="sweeps in the store: seeds"):
        store.group("other")
    with pytest.raises(LabError, match="--name"):
        store.submit_group("", [new_job(spec())])


def test_a_group_is_submitted_whole_in_order_or_not_at_all(store):
    keys = [s.key for s in store.submit_group("big", [new_job(spec(i)) for i in range(300)])]
    assert store.group("big")["keys"] == keys == store.keys()  # submission order, each key once
    again = store.submit_group("big", [new_job(spec(i)) for i in range(300, 302)] + [new_job(spec(0))])
    assert [s.outcome for s in again] == ["queued", "queued", "existing"]
    assert store.group("big")["keys"] == keys + [again[0].key, again[1].key]
    # a job whose input is missing is refused before anything of its group is written
    body = make_spec(discipline="bits-xor", model="run:" + "f" * 64)
    with pytest.raises(LabError, match="needs job f{64}"):
        store.submit_group("mixed", [new_job(spec(500)), new_job(body)])
    assert "mixed" not in store.groups() and len(store.keys()) == 302
    newest = store.jobs(newest=3)  # a page's read of a large lab: the last three, in submission order
    assert [r.key for r in newest] == store.keys()[-3:]
    assert [r.key for r in store.jobs(newest=2, status="queued", group="big")] == store.group("big")["keys"][-2:]


def test_in_process_results_are_served_like_worker_results(store):
    resolved = resolve_spec(spec())
    record = RunRecord(key=resolved.key, spec=resolved.to_dict(), status="done", steps_done=4, total_steps=4,
                       train_loss=[[4, 0.25]])
    run_results.put_result(store, record)
    assert run_results.result(store, resolved.key) == record
    assert submit(store, spec()).outcome == "cached"
    status = store.status(resolved.key)
    assert (status.status, status.step, status.loss) == ("done", 4, 0.25)
    assert store.run_dir(resolved.key) == store.workdir(resolved.key)


def test_a_job_finished_in_process_is_recorded_as_its_caller_describes_it(store):
    # the store knows no kind: the kind, label and checkpoint are the caller's, none is filled in as a run's
    job = NewJob(kind="noise", key="n" * 20, spec={"x": 1}, label="a noise job", checkpoint="state.bin")
    store.put_finished(job, status="done", result={"value": 3})
    record = store.get(job.key)
    assert (record.kind, record.label, record.checkpoint, record.result) == ("noise", "a noise job", "state.bin",
                                                                             {"value": 3})
    assert store.keys() == [job.key] and store.keys(kind="run") == [] and run_results.runs(store) == []
    with pytest.raises(LabError, match="no status it can end with"):
        store.put_finished(job, status="running", result={})


def test_artifacts_are_the_files_in_the_run_folder(store):
    key = submit(store, spec()).key
    folder = store.workdir(key)
    (folder / "attention").mkdir(parents=True)
    (folder / "best.safetensors").write_bytes(b"x")
    (folder / "attention" / "layer0.npz").write_bytes(b"x")
    assert sorted(store.artifacts(key)) == ["attention/layer0.npz", "best.safetensors"]


def test_open_store_is_one_store_per_root_per_process(tmp_path):
    assert open_store(tmp_path / "a") is open_store(tmp_path / "a")
    assert open_store(tmp_path / "a") is not open_store(tmp_path / "b")


# ------------------------------------------------------------------------------------------- workers
def test_worker_registrations_drop_dead_pids(store):
    store.register_worker(os.getpid(), state="idle")
    store.register_worker(exited_pid(), state="idle")
    assert [w["pid"] for w in store.workers()] == [os.getpid()]
    store.unregister_worker(os.getpid())
    assert store.workers() == []


# --------------------------------------------------------------------------------------- real processes
CLAIMER = """
import json, sys
from labcore.store import Store
store = Store(sys.argv[1])
got = []
while (claim := store.claim()) is not None:
    got.append(claim.key)
    store.finish(claim.key, claim.attempt, "done", result={"status": "done"})
print(json.dumps(got))
"""


def test_concurrent_processes_claim_each_spec_exactly_once(store):
    keys = [submit(store, spec(i)).key for i in range(30)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(store.root)], stdout=subprocess.PIPE,
                              env=env, text=True) for _ in range(3)]
    claimed = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            claimed += json.loads(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert sorted(claimed) == sorted(keys)
    assert {r.status for r in run_results.runs(store)} == {"done"}


def test_the_store_side_never_imports_torch(tmp_path):
    # The pages import these modules; torch must stay in the worker process.
    code = f"""
import sys
from labcore.cli.worker import add_commands
from labcore.execution.executor import LocalExecutor
from labcore.runspec import make_spec
from labcore.store import Store
store = Store({str(tmp_path / 'store')!r})
LocalExecutor(store, autostart=False).submit(make_spec(discipline="bits-xor"))
print(store.status(store.keys()[0]).status, "torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.stdout.split() == ["queued", "False"], out.stderr


def test_a_store_written_before_job_kinds_is_upgraded_on_open(tmp_path):
    # The first format: run records at run/<key> listed in index/runs, attention jobs on a side queue.
    import diskcache

    from labcore.store import DISKCACHE_SETTINGS

    old = diskcache.Cache(str(tmp_path / "store" / "db"), **DISKCACHE_SETTINGS)
    record = {"key": "a" * 20, "spec": spec().to_dict(), "label": "old run", "status": "done", "attempt": 1,
              "priority": "interactive", "result": {"key": "a" * 20, "status": "done", "spec": spec().to_dict()},
              "groups": ["pair"], "submitted_at": 1.0, "error": ""}
    old.set(f"run/{'a' * 20}", record)
    old.set("index/runs", ["a" * 20])
    old.set("group/pair", {"name": "pair", "keys": ["a" * 20], "created_at": 1.0})
    old.set("index/groups", ["pair"])
    old.set(f"job/attention:{'a' * 20}:test:0", {"id": "x", "status": "done"})
    old.push(f"attention:{'a' * 20}:test:0", prefix="jobs")
    old.close()
    store = Store(tmp_path / "store")
    try:
        assert [r.key for r in run_results.runs(store)] == ["a" * 20]
        assert store.get("a" * 20).kind == "run" and run_results.result(store, "a" * 20).status == "done"
        assert store.group("pair")["keys"] == ["a" * 20]
        # the old attention job records are gone, not listed as jobs
        assert store.jobs() == run_results.runs(store)
        assert store.claim() is None  # and so is their queue
        again = Store(tmp_path / "store")  # opening an upgraded store again changes nothing
        assert [r.key for r in run_results.runs(again)] == ["a" * 20]
        again.close()
    finally:
        store.close()
