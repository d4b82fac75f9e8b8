"""No orphans: a worker started for someone leaves once idle too long or once its starter has ended, and any
worker leaves when its store folder is deleted, without making the folder again. Real worker processes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import wait_for
from labcore.execution.lifetime import FOR_SOMEONE, Lifetime
from labcore.execution.pool import start_worker, stop_workers
from labcore.store import Store, StoreSettings, process_state

EXIT_WITHIN_S = 120.0  # generous: a loaded two-core machine takes long to import torch


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    yield s
    if s.root.exists():
        stop_workers(s, timeout_s=10)
    s.close()


def _ready(store: Store, pid: int) -> bool:
    return any(w["pid"] == pid and w.get("state") == "idle" for w in store.workers(alive_only=False))


def _log(store: Store) -> str:
    return "".join(p.read_text() for p in store.logs_dir.glob("worker-*.log"))


def test_a_worker_started_for_someone_leaves_after_its_idle_time(store):
    assert FOR_SOMEONE.idle_exit_s == StoreSettings.idle_exit_s == 1800.0
    worker = start_worker(store, new_session=False, lifetime=Lifetime(idle_exit_s=2))
    assert worker.wait(timeout=EXIT_WITHIN_S) == 0
    assert "s); leaving" in _log(store) and "idle for" in _log(store)
    assert store.workers() == []  # it unregistered on its way out


def test_a_worker_leaves_once_the_process_that_started_it_has_ended(store):
    starter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    worker = start_worker(store, new_session=False, lifetime=Lifetime(parent_pid=starter.pid))
    try:
        wait_for("the worker to be ready", lambda: _ready(store, worker.pid), timeout=EXIT_WITHIN_S)
        time.sleep(1.0)
        assert worker.poll() is None, "it left while its starter was still running"
        starter.kill()
        starter.wait()
        assert worker.wait(timeout=EXIT_WITHIN_S) == 0
    finally:
        starter.kill()
    assert f"the process that started it ({starter.pid}) has ended" in _log(store)


def test_a_worker_whose_store_folder_is_deleted_leaves_without_making_it_again(store):
    worker = start_worker(store, new_session=False, lifetime=Lifetime())  # one that would serve for ever
    wait_for("the worker to be ready", lambda: _ready(store, worker.pid), timeout=EXIT_WITHIN_S)
    with open(next(store.logs_dir.glob("worker-*.log"))) as log:  # still readable once its folder is gone
        shutil.rmtree(store.root)
        assert worker.wait(timeout=EXIT_WITHIN_S) == 0
        said = log.read()
    assert "was deleted or replaced; leaving without recreating it" in said
    time.sleep(1.0)
    assert not store.root.exists(), "the worker made its deleted store folder again"
    assert process_state(worker.pid) == "gone"


def test_a_workers_idle_time_starts_when_its_last_job_ends(tmp_path, capsys):
    # The worker runs a job in its own thread, so no tick of its loop sees the job running: its idle time
    # was counted from its start, and a worker with jobs longer than its idle limit left after each one.
    sys.path.insert(0, str(Path(__file__).resolve().parent / "kinds"))
    from labcore import jobs
    from labcore.execution.executor import LocalExecutor
    from labcore.execution.worker import Worker

    jobs.load_modules("toy_jobs")
    from toy_jobs import CountSpec

    store = Store(tmp_path / "store")
    try:
        key = LocalExecutor(store, autostart=False).submit(CountSpec(n=10, pause_s=0.5)).key  # 5 s of work
        started = time.monotonic()
        Worker(store, lifetime=Lifetime(idle_exit_s=2)).serve()
        took = time.monotonic() - started
        assert store.get(key).status == "done"
    finally:
        store.close()
    idle = float(re.search(r"idle for (\d+) s", capsys.readouterr().out).group(1))
    assert idle < 5, f"idle for {idle:g} s counted the 5 s job"
    assert took >= 5 + 2
