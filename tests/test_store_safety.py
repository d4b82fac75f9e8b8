"""The store under damage and attack: values are JSON (a planted pickle never runs), files are private,
a damaged database says how to repair it, the job folders rebuild it, a full disk is an error and not a
crash. Real files and real processes throughout."""

from __future__ import annotations

import errno
import os
import pickle
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labcore.engine import run_results
from labcore.execution.executor import LocalExecutor
from labcore.runspec import make_spec
from labcore.store import FINISHED, Store, StoreLocked, StoreSettings
from labcore.store.errors import REPAIR_HINT, StoreDamaged

REPO = Path(__file__).resolve().parent.parent
SMALL = {"n_train": 64, "n_validation": 32, "n_test": 32}


def spec(seed: int = 0, **changes):
    return make_spec(discipline="bits-xor", discipline_params=SMALL, seed=seed, **changes)


def finished_runs(store: Store, count: int) -> list[str]:
    """``count`` runs queued, claimed and finished with a result, as a worker would (no training)."""
    executor = LocalExecutor(store, autostart=False)
    keys = [executor.submit_group("seeds", [spec(seed)])[0].key for seed in range(count)]
    for _ in keys:
        claim = store.claim()
        store.finish(claim.key, claim.attempt, "done", result={"key": claim.key, "status": "done",
                                                               "spec": claim.spec, "test": {"accuracy": 0.5}})
    return keys


def cli(*args: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labcore", *args, "--store", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_values_are_json_and_a_planted_pickle_never_runs(tmp_path):
    root = tmp_path / "store"
    store = Store(root)
    key = finished_runs(store, 1)[0]
    store.close()
    with sqlite3.connect(root / "db" / "cache.db") as con:
        modes = {mode for (mode,) in con.execute("SELECT mode FROM Cache")}
        assert 4 not in modes  # diskcache's MODE_PICKLE: nothing the lab writes is pickled
        marker = tmp_path / "code-ran"
        con.execute("UPDATE Cache SET mode = 4, value = ? WHERE key = ?",
                    (sqlite3.Binary(pickle.dumps(_Evil(marker))), f"job/{key}"))
    reader = Store(root)
    with pytest.raises(StoreDamaged, match=REPAIR_HINT):
        reader.get(key)
    reader.close()
    status = cli("status", root=root)
    assert not marker.exists()  # neither this process nor the CLI ran it
    assert status.returncode == 2 and REPAIR_HINT in status.stderr and "Traceback" not in status.stderr
    repaired = cli("store", "repair", root=root)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert not marker.exists()
    again = Store(root)
    assert again.get(key).status == "done"  # back from its folder's record.json
    again.close()


def test_an_old_pickled_store_is_converted_with_plain_containers_only(tmp_path):
    import diskcache

    from labcore.store import DISKCACHE_SETTINGS

    old = diskcache.Cache(str(tmp_path / "store" / "db"), **DISKCACHE_SETTINGS)  # the pickling default Disk
    record = {"key": "b" * 20, "spec": spec().to_dict(), "label": "old", "status": "done", "attempt": 1,
              "priority": "interactive", "result": {"status": "done"}, "groups": [], "error": ""}
    old.set(f"run/{'b' * 20}", record)
    old.set("index/runs", ["b" * 20])
    marker = tmp_path / "code-ran"
    old.set("planted", _Evil(marker))
    old.close()
    store = Store(tmp_path / "store")
    assert store.get("b" * 20).label == "old"
    assert store.cache.get("planted") is None and not marker.exists()  # refused, dropped, never run
    store.close()


def test_the_store_is_private_to_its_user(tmp_path):
    store = Store(tmp_path / "store")
    finished_runs(store, 1)
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.root / "db" / "cache.db").st_mode) == 0o600
    store.close()


@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_a_damaged_database_names_the_repair_and_the_folders_rebuild_it(tmp_path, damage):
    root = tmp_path / "store"
    store = Store(root)
    keys = finished_runs(store, 20)
    store.close()
    db = root / "db" / "cache.db"
    data = db.read_bytes()
    db.write_bytes(data[:len(data) // 3] if damage == "truncated" else os.urandom(len(data)))
    with pytest.raises(StoreDamaged, match=REPAIR_HINT):
        run_results.runs(Store(root))
    status = cli("status", root=root)
    assert status.returncode == 2 and REPAIR_HINT in status.stderr and "Traceback" not in status.stderr
    check = cli("store", "check", root=root)
    assert check.returncode == 1 and "problem:" in check.stdout
    started = time.perf_counter()
    repaired = cli("store", "repair", root=root)
    elapsed = time.perf_counter() - started
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "rebuilt the store from 20 job folder(s)" in repaired.stdout
    print(f"store repair of a {damage} database with 20 finished runs: {elapsed:.2f} s (CLI, start-up included)")
    store = Store(root)
    runs = run_results.runs(store)
    assert [r.key for r in runs] == keys and {r.status for r in runs} <= set(FINISHED)
    assert store.group("seeds")["keys"] == keys
    assert list(root.glob("db.damaged-*"))  # the damaged file is kept aside, not deleted
    store.close()


@pytest.mark.parametrize("damage", ["empty", "missing"])
def test_a_lost_database_beside_job_folders_is_rebuilt_not_shown_empty(tmp_path, damage):
    root = tmp_path / "store"
    store = Store(root)
    keys = finished_runs(store, 3)
    store.close()
    for path in (root / "db").glob("cache.db*"):
        path.unlink()
    if damage == "empty":
        (root / "db" / "cache.db").write_bytes(b"")
    store = Store(root)
    assert [r.key for r in run_results.runs(store)] == keys
    store.close()


# ------------------------------------------------------------------------------------------- a full disk
@pytest.fixture
def small_disk(tmp_path):
    """A real 20 MB filesystem (tmpfs) for the store; skipped where this user cannot mount one."""
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 20 MB tmpfs here ({done.stderr.decode().strip()}): needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def start_worker(root: Path, log: Path, **env: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "labcore", "worker", "--store", str(root),
                                 "--checkpoint-every", "10"], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, PYTHONPATH=str(REPO), **env))


def wait_for(what: str, condition, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()


def fill(disk: Path, leave: int) -> None:
    """Fill `disk` up to `leave` free bytes. The worker writes on it at the same time and may take the last
    bytes first: then the filler gives `leave` back, so the store still has room to open."""
    filler = disk / "filler"
    free = os.statvfs(disk)
    try:
        filler.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - leave))
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        os.truncate(filler, max(0, filler.stat().st_size - leave))


def test_a_full_disk_fails_the_job_with_its_reason_and_the_worker_lives_on(small_disk, tmp_path):
    root = small_disk / "store"
    store = Store(root)
    executor = LocalExecutor(store, autostart=False)
    worker = start_worker(root, tmp_path / "worker.log", TRANSFERLAB_MIN_FREE_MB="1")
    try:
        key = executor.submit(spec(model="tiny:bert", batch_size=16, eval_every=20, epochs=1000.0,
                                   precision="fp32", max_steps=100_000)).key
        wait_for("a checkpoint", lambda: any(e["type"] == "checkpoint" for e in store.events(key)))
        fill(small_disk, leave=64 * 1024)
        wait_for("the job to stop", lambda: store.get(key).status not in ("queued", "running"), 180)
        record = store.get(key)
        assert record.status == "failed", store.log(key)
        assert record.error.startswith("the disk holding the lab's store is full (free space at")
        assert worker.poll() is None  # the worker survived it
        assert not list(store.workdir(key).glob(".*.tmp"))  # no half-written checkpoint left behind
        status = cli("status", key, root=root)  # the store still opens while the disk is full
        assert status.returncode == 0 and "disk holding the lab's store is full" in status.stdout
    finally:
        stop(worker)
        store.close()


def test_a_job_does_not_start_without_room_for_its_checkpoints(small_disk, tmp_path):
    root = small_disk / "store"
    store = Store(root)
    executor = LocalExecutor(store, autostart=False)
    key = executor.submit(spec(model="tiny:bert", max_steps=5, precision="fp32")).key
    worker = start_worker(root, tmp_path / "worker.log")  # the default: 64 MB free to start, on 20 MB
    try:
        wait_for("the job to stop", lambda: store.get(key).status not in ("queued", "running"))
        assert store.get(key).status == "failed"
        assert "a job starts with at least 64 MB free" in store.get(key).error
        assert worker.poll() is None
    finally:
        stop(worker)
        store.close()


HOLD_THE_LOCK = """
import os, signal, sys
from labcore.store import Store
store = Store(sys.argv[1])
with store.transaction():
    print("held", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # suspended in the middle of a write
"""


def test_a_writer_suspended_mid_write_blocks_no_reader_and_fails_writers_with_the_fix(tmp_path):
    # Reads that decide a job is dead write it back; behind a frozen writer they once waited without end.
    root = tmp_path / "store"
    store = Store(root, StoreSettings(stale_after_s=0.3, write_wait_s=1.0, reap_wait_s=0.2))
    key = LocalExecutor(store, autostart=False).submit_group("one", [spec()])[0].key
    store.claim()  # this process owns it and never heartbeats: the run goes stale
    writer = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(root)], cwd=REPO, stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert writer.stdout.readline().strip() == "held"
        time.sleep(0.5)
        record = store.get(key)  # answers instead of waiting behind the lock
        assert (record.status, "no heartbeat" in record.error) == ("dead", True)
        with pytest.raises(StoreLocked, match=r"suspended.*kill -CONT"):
            store.cancel(key, "someone")
        assert store.table.get(key)["status"] == "running"  # nothing was written while locked
    finally:
        writer.send_signal(signal.SIGCONT)
        assert writer.wait(timeout=60) == 0
    assert store.get(key).status == "dead"  # written back by the first read after the lock came free
    assert store.table.get(key)["status"] == "dead"
