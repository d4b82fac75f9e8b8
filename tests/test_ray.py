"""The Ray executor on a local Ray cluster: the same jobs, events and records as the local pool.

One local cluster (2 CPUs, dashboard off, a short session folder of its own) serves the module; each test
runs the executor's loop (:class:`labcore.execution.ray_pump.RayPump`) in a thread of this process on a store of
its own, and stops it. The last test lets the executor start its process (and that process its own
cluster), as the app does. Teardown checks that no process of either cluster is left (never
``ray stop``: it would kill every Ray process on the machine, other users' too).

A wait for jobs to finish allows minutes: each Ray task starts a process of its own, which imports torch, and with
a busy process on each of two cores the six tiny runs, their attention job and their analysis took 304 s, and in
one round more than 300 s for the runs alone (4 of 6 had ended). A wait for a kill or a stop to be seen keeps its
30 s: that speed is part of what is tested.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: `pip install -r requirements-ray.txt` (make test does)")

from labcore import jobs  # noqa: E402
from labcore.engine import run_results  # noqa: E402
from labcore.errors import LabError  # noqa: E402
from labcore.execution.executor import RayExecutor  # noqa: E402
from labcore.jobs.attention import RESULT_FILE, AttentionSpec  # noqa: E402
from labcore.execution.ray_pump import RayPump, RaySettings  # noqa: E402
from labcore.runspec import make_spec  # noqa: E402
from labcore.store import ACTIVE, process_state  # noqa: E402
from helpers import wait_for  # noqa: E402

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parent.parent
KINDS_DIR = Path(__file__).resolve().parent / "kinds"
sys.path.insert(0, str(KINDS_DIR))
jobs.load_modules("toy_jobs")
from toy_jobs import CountSpec  # noqa: E402

SMALL = {"n_train": 64, "n_validation": 32, "n_test": 32}


@dataclass(frozen=True)
class GreedySpec:
    gpus: int = 8


# A kind that asks for more than the test cluster has: it must be refused at submit, not queued forever.
jobs.job_kind("greedy", GreedySpec, resources=lambda s: jobs.Resources(num_cpus=1, num_gpus=s.gpus))(
    lambda spec, ctx: iter([{"type": "result", "status": "done", "record": {}}]))


def tiny_spec(seed: int = 0, **changes):
    values = dict(model="tiny:bert", discipline="bits-xor", discipline_params=SMALL, seed=seed, batch_size=16,
                  eval_every=20, epochs=1000.0, precision="fp32")
    values.update(changes)
    return make_spec(**values)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now (a Ray cluster's gcs_server, raylet and workers are below the
    process whose ray.init started it; workers rename themselves ``ray::…``, so names do not tell)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if process_state(pid) == "alive"}


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of this module's own; afterwards none of its processes may be left."""
    temp = tempfile.mkdtemp(prefix="tlr-", dir="/tmp")  # short: Ray's socket paths must stay below 107 bytes
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        # The cluster's worker processes inherit this environment: they import the lab and the toy kinds.
        env.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(KINDS_DIR)]))
        env.setenv(jobs.MODULES_VARIABLE, "toy_jobs")
        before = descendants(os.getpid())  # children of earlier tests are not the cluster's
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp, log_to_driver=False)
        started = set()
        try:
            yield temp
        finally:
            started = descendants(os.getpid()) - before  # the cluster's processes (nothing else of this module's)
            ray.shutdown()
    assert started
    wait_for("the test cluster's processes to exit", lambda: not alive(started), 30)
    shutil.rmtree(temp, ignore_errors=True)


GRACE_S = 5.0  # the executor's wait for a stopped task to end before ray.cancel (10 s by default)


@pytest.fixture
def executor(cluster, store):
    """The executor's loop in a thread on the test's store (grace periods short), and a RayExecutor on it.
    The grace outlasts what a run does after it stops (its checkpoint, its result): on a busy machine that
    took 1.1 s, so a 1 s grace cancelled runs that were ending by themselves and lost their results."""
    pump = RayPump(store, settings=RaySettings(cancel_grace_s=GRACE_S, force_after_s=1.0))
    thread = threading.Thread(target=pump.serve, name="ray-pump", daemon=True)
    thread.start()
    executor = RayExecutor(store, autostart=False, start_timeout_s=60)
    executor.cluster()  # its first report: the cluster is up and the store reachable from every node
    yield executor
    pump.stop()
    thread.join(60)
    assert not thread.is_alive()


def steps(events):
    return [e["step"] for e in events if e["type"] == "step"]


# -------------------------------------------------------------------------------------------- the tests
def test_a_sweep_of_six_tiny_runs_streams_events_in_order_into_the_store(executor):
    store = executor.store
    keys = [s.key for s in executor.submit_group("ray-sweep", [tiny_spec(seed, max_steps=6) for seed in range(6)])]
    wait_for("6 runs to end", lambda: all(store.get(k).status not in ACTIVE for k in keys), 600, store)
    for key in keys:
        record, events = store.get(key), store.events(key)
        assert record.status == "done", record.error
        assert record.attempt == 1 and record.node and record.task_pid != os.getpid()
        assert steps(events) == list(range(1, 7))
        assert [e["type"] for e in events][0] == "attempt" and events[-1]["type"] == "result"
        times = [e["t"] for e in events if e["type"] != "log"]  # (printed lines are stamped when read from the pipe)
        assert times == sorted(times)  # written in the order the task produced them
        assert record.result["steps_done"] == 6 and record.result["test"]
    assert store.group("ray-sweep")["keys"] == keys
    # A finished spec comes back from the store, whichever executor ran it.
    assert executor.submit(tiny_spec(3, max_steps=6)).outcome == "cached"

    maps = executor.submit(AttentionSpec(run=keys[0], split="test", index=0)).key
    wait_for("the attention job", lambda: store.get(maps).status not in ACTIVE, 180, store)
    record = store.get(maps)
    assert record.status == "done", record.error
    assert (store.workdir(maps) / RESULT_FILE).exists() and record.result["layers"] == 2

    # An analysis of a fine-tuned run against its pretrained start runs the same way.
    from labcore.jobs.analyses import ModelRef, NoiseSpec

    spec = store.get(keys[0]).spec
    noise = executor.submit(NoiseSpec(models=(ModelRef(run=keys[0]),), discipline=spec["discipline"],
                                      discipline_params=tuple(sorted(spec["discipline_params"].items())),
                                      examples=4)).key
    wait_for("the analysis job", lambda: store.get(noise).status not in ACTIVE, 300, store)
    record = store.get(noise)
    assert record.status == "done", record.error
    assert list(record.result["variation"]) == [f"run {keys[0][:8]} (fine-tuned)"] and record.node


@pytest.mark.integration  # the MiniLM vocabulary its corpus is drawn from
def test_a_pretraining_runs_on_ray_as_runs_do(executor, fetched_assets):
    from labcore.pretrain.export import lab_folder
    from labcore.pretrain.spec import PretrainSpec

    store = executor.store
    shutil.rmtree(lab_folder("test-ray"), ignore_errors=True)  # one an earlier session left may hold another key
    spec = PretrainSpec(corpus="flat", size="tiny", steps=4, batch_size=8, sequences=128, lr=3e-3, precision="fp32",
                        name="test-ray")
    first = executor.submit(spec)
    assert (first.outcome, first.kind) == ("queued", "pretrain")
    wait_for("the pretraining", lambda: store.get(first.key).status not in ACTIVE, 300, store)
    record, events = store.get(first.key), store.events(first.key)
    assert record.status == "done", store.log(first.key)
    assert record.attempt == 1 and record.node and record.task_pid != os.getpid()
    assert steps(events) == [1, 2, 3, 4] and "eval" in [e["type"] for e in events]
    assert events[0]["type"] == "attempt" and events[-1]["type"] == "result"
    assert record.result["name"] == "lab:test-ray" and record.result["steps"] == 4
    assert (lab_folder("test-ray") / "model.safetensors").is_file()  # written by the task, where every node reads
    assert executor.submit(spec).outcome == "cached"


def test_cancel_stops_a_run_at_its_step_and_a_stuck_task_by_ray_cancel(executor):
    store = executor.store
    run = executor.submit(tiny_spec(max_steps=100_000)).key
    stuck = executor.submit(CountSpec(n=2, pause_s=60)).key  # sleeps in its first step: never reads the flag
    # Patient waits for the start: a Ray worker process importing torch on a busy machine takes a minute.
    wait_for("the run to take steps", lambda: len(steps(store.events(run))) >= 3, 180, store)
    wait_for("the stuck job to start", lambda: store.get(stuck).task_pid, 180, store)
    requested_at = time.time()
    executor.cancel(run)
    executor.cancel(stuck)
    wait_for("both to stop", lambda: all(store.get(k).status not in ACTIVE for k in (run, stuck)), 30, store)
    record = store.get(run)
    assert record.status == "cancelled"
    assert record.result["status"] == "cancelled"  # the run stopped itself: checkpoint and curve kept
    last_step = max(e["t"] for e in store.events(run) if e["type"] == "step")
    assert last_step - requested_at < 2  # the flag is read every 0.2 s; the run stops at its next step
    assert store.get(stuck).status == "cancelled"
    assert time.time() - requested_at < GRACE_S + 10  # the grace, then ray.cancel, then by force after 1 s


def test_sigkill_of_a_task_process_shows_dead_and_resume_finishes_it(executor):
    store = executor.store
    key = executor.submit(CountSpec(n=40, pause_s=0.05)).key
    wait_for("a checkpoint", lambda: len(steps(store.events(key))) >= 12, 180, store)
    os.kill(store.get(key).task_pid, signal.SIGKILL)
    wait_for("the job to be dead", lambda: store.get(key).status == "dead", 30, store)
    assert "WorkerCrashedError" in store.get(key).error
    executor.resume(key)
    wait_for("the resumed job to end", lambda: store.get(key).status not in ACTIVE, 180, store)
    record, events = store.get(key), store.events(key)
    assert record.status == "done" and record.result["total"] == 40 * 41 // 2
    attempts = [e for e in events if e["type"] == "attempt"]
    assert [a["resume"] for a in attempts] == [False, True]
    assert steps(events)[-1] == 40


def test_tune_sweeps_one_spec_with_asha_each_trial_a_run_in_the_store(executor, tmp_path, capsys):
    pytest.importorskip("ray.tune", reason="Ray Tune is not installed: `pip install -r requirements-ray.txt`")
    from ray.tune.schedulers import ASHAScheduler

    from labcore.execution import tune
    from labcore.results.record import RunRecord

    store = executor.store
    # One trial at a time, in the grid's order: lr 1e-5 sets the cut of the first rung (step 10), and a trial
    # below it there is stopped. Enough steps (a tiny run takes ~10 ms a step) that the stop, which reaches
    # the run about a second after its evaluation, comes before its end.
    STEPS = 400
    outcome = tune.tune_runs(tiny_spec(max_steps=STEPS, eval_every=10), {"lr": ("grid_search", (1e-5, 1e-3, 1e-2))},
                             store=store, executor="ray", autostart=False, name="tune-test", storage=tmp_path / "tune",
                             settings=tune.AshaSettings(grace_steps=10, reduction_factor=2, concurrent=1))
    assert isinstance(outcome.scheduler, ASHAScheduler)
    assert len(outcome.grid) == 3 and not outcome.grid.errors
    assert (outcome.experiment.parent == tmp_path / "tune") and outcome.experiment.is_dir()  # Tune's own files

    runs = run_results.runs(store, group="tune-test")
    assert [r.spec["lr"] for r in runs] == [1e-5, 1e-3, 1e-2]
    for record in runs:
        events, result = store.events(record.key), RunRecord.from_dict(record.result)
        assert record.node and events[0]["type"] == "attempt" and events[-1]["type"] == "result"
        evaluated = [e["step"] for e in events if e["type"] == "eval"]
        if tune.stopped_early(record):  # stopped early, and recorded so: cancelled short of its steps, never done
            [stop] = [e["stopped_at"] for e in events if e.get("source") == "tune"]
            assert stop in evaluated and stop < STEPS and record.cancelled_by == tune.STOPPED_BY
            assert result.status == "cancelled" and stop <= result.steps_done < result.total_steps == STEPS
        else:
            assert record.status == "done" and result.steps_done == result.total_steps == STEPS
            assert evaluated == list(range(10, STEPS + 1, 10))
    saved = tune.savings(runs)
    assert (saved.trials, saved.done + saved.stopped) == (3, 3) and saved.stopped >= 1 and saved.steps_saved > 0
    done = [RunRecord.from_dict(r.result) for r in runs if r.status == "done"]
    best = max(done, key=lambda r: r.validation[r.metric])
    assert outcome.best == {"key": best.key, "config": {"lr": best.spec["lr"]}, "validation": best.validation[best.metric],
                            "metric": best.metric}
    assert capsys.readouterr().err.count("stopped early by ASHA") == saved.stopped  # the progress lines


def test_a_job_no_node_can_run_is_refused_at_submit_with_the_cluster_in_the_message(executor):
    with pytest.raises(LabError, match=r"asks for 1 CPU, 8 GPU.*2 CPU, 0 GPU"):
        executor.submit(GreedySpec(gpus=8))
    assert executor.store.jobs() == []


def test_the_executor_starts_its_own_process_and_cluster_and_stopping_leaves_none(cluster, store, monkeypatch):
    temp = tempfile.mkdtemp(prefix="tlp-", dir="/tmp")
    monkeypatch.setenv("TRANSFERLAB_RAY_TMP", temp)
    monkeypatch.setenv("TRANSFERLAB_RAY_CPUS", "1")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    executor = RayExecutor(store, address="")
    try:
        # starts `python -m labcore.execution.ray_pump` and waits for its report
        key = executor.submit(CountSpec(n=5)).key
        wait_for("the job", lambda: store.get(key).status not in ACTIVE, 180, store)
        assert store.get(key).status == "done" and store.get(key).node
        [pump] = executor.alive_workers()
        assert pump["role"] == "ray-executor"
        cluster_processes = descendants(pump["pid"])  # its gcs_server, raylet and workers
        assert len(cluster_processes) >= 3
        going = executor.submit(CountSpec(n=1000, pause_s=0.05)).key
        wait_for("the long job to take steps", lambda: len(steps(store.events(going))) >= 3, 180, store)
    finally:
        executor.stop_workers(timeout_s=30)  # SIGTERM: its tasks stop at their next step
    assert store.get(going).status == "interrupted" and store.get(going).error == ""
    wait_for("the executor's cluster to exit", lambda: not alive(cluster_processes | {pump["pid"]}), 30)
    shutil.rmtree(temp, ignore_errors=True)
    # A finished key is a result: it comes back at once, with no executor process to ask.
    t0 = time.time()
    assert RayExecutor(store, autostart=False, start_timeout_s=5).submit(CountSpec(n=5)).outcome == "cached"
    assert time.time() - t0 < 1


def test_workers_the_teacher_stopped_start_no_ray_executor_and_a_submit_says_why(store, monkeypatch):
    """No cluster: the hold is honoured before any process (and so any Ray) would start."""
    from labcore.execution import pool

    started = []
    monkeypatch.setattr(pool, "start_worker", lambda *a, **k: started.append(k) or pytest.fail("a process started"))
    store.hold_workers("teacher")
    executor = RayExecutor(store, address="", start_timeout_s=30)
    assert executor.ensure_workers() == [] and executor.alive_workers() == []
    t0 = time.time()
    with pytest.raises(LabError, match=r"stopped \(by teacher\).*start the workers again"):
        executor.submit(CountSpec(n=5))  # at once: no executor process will come to report
    assert time.time() - t0 < 5
    assert started == [] and store.jobs() == []
    assert store.workers() == []


def test_the_pages_side_never_imports_ray(tmp_path):
    """Only the executor process imports Ray: the pages and the CLI choose it and submit without it."""
    code = f"""
import sys
from labcore.cli.worker import add_commands
from labcore.execution.executor import RayExecutor, get_executor
from labcore.store import Store
executor = RayExecutor(Store({str(tmp_path / 'store')!r}), autostart=False)
print("ray" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.stdout.split() == ["False"], out.stderr
