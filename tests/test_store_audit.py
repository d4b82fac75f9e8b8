"""``store check`` reads a whole store against its invariants and finds each planted defect; ``store repair``
fixes what it says it fixes and names what it leaves. One test per invariant, on a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labcore.events import AttemptEvent, OutcomeEvent, StepEvent
from labcore.store import Store, audit, repair
from labcore.store.artifacts import RECORD_FILE

from test_store_safety import cli, finished_runs, spec
from labcore.execution.executor import LocalExecutor


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    yield s
    s.close()


def _found(store) -> list[audit.Finding]:
    return audit.audit(store)


def _invariants(store) -> set[tuple[str, str]]:
    return {(f.invariant, f.action) for f in _found(store)}


def _repaired(store) -> list[str]:
    """Repair through the public entry (it opens its own store) and return what it did."""
    report = repair.repair(store.root)
    return report.actions


def _queued(store, seed: int = 100) -> str:
    return LocalExecutor(store, autostart=False).submit(spec(seed)).key


def _gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_sound_store_passes_and_a_missing_one_is_said_so(store, tmp_path):
    finished_runs(store, 3)
    _queued(store)
    assert _found(store) == []
    assert repair.check(store.root).ok
    nothing = cli("store", "check", root=tmp_path / "never-made")
    assert nothing.returncode == 0 and "no store at" in nothing.stdout and "yet" in nothing.stdout
    assert not (tmp_path / "never-made").exists()  # checking a lab makes no store


def test_a_finished_job_without_its_record_file_gets_it_back(store):
    key = finished_runs(store, 1)[0]
    (store.workdir(key) / RECORD_FILE).unlink()
    assert _invariants(store) == {("record", "write-record")}
    assert any("wrote record.json" in a for a in _repaired(store))
    assert json.loads((store.workdir(key) / RECORD_FILE).read_text())["key"] == key
    assert _found(store) == []


def test_a_finished_job_without_a_result_is_named_and_left(store, tmp_path):
    key = finished_runs(store, 1)[0]
    with store.transaction():
        store.table.put(dict(store.table.get(key), result=None))
    store.files.write_record(store.table.get(key))
    assert _invariants(store) == {("record", "")}
    checked = cli("store", "check", root=store.root)
    assert checked.returncode == 1 and "has no result" in checked.stdout and "delete" in checked.stdout
    repaired = cli("store", "repair", root=store.root)
    assert repaired.returncode == 1 and "left as it is" in repaired.stdout and "still:" in repaired.stdout


def _stream(store, key, *events) -> None:
    store.streams.append(key, [e.to_dict() for e in events])


def _attempt(n: int) -> AttemptEvent:
    return AttemptEvent(attempt=n, resume=n > 1, pid=1, host="here")


def _step(i: int) -> StepEvent:
    return StepEvent(step=i, steps=10, epoch=0.0, loss=1.0, lr=1e-3, samples_per_s=1.0)


def test_steps_doubled_out_of_order_or_after_the_end_are_found_and_a_resume_is_not(store):
    a, b, c, d = (_queued(store, seed) for seed in (1, 2, 3, 4))
    steps = [_step(i) for i in (1, 2, 3)]
    _stream(store, a, _attempt(1), *steps, _attempt(2), _step(2),
            _step(3))  # the designed skip: attempt 2 goes back to its checkpoint
    _stream(store, b, _attempt(1), *steps, _step(3))
    _stream(store, c, _attempt(1), _step(3), _step(2))
    _stream(store, d, _attempt(1), *steps, OutcomeEvent(status="done", metrics=None, error=""),
            _step(4))
    problems = {f.key: f.problem for f in _found(store) if f.invariant == "stream"}
    assert a not in problems
    assert "step 3 is written twice in attempt 1" == problems[b]
    assert "step 2 comes after step 3 in attempt 1" == problems[c]
    assert "a step event follows the end of attempt 1" == problems[d]


def test_a_missing_event_chunk_is_found(store):
    key = _queued(store)
    _stream(store, key, _attempt(1))
    _stream(store, key, _step(1))
    store.cache.delete(f"ev/{key}/0")
    assert [f.problem for f in _found(store)] == ["1 of 2 event chunks are missing (first: 0)"]


def test_a_running_job_nobody_runs_is_marked_dead(store):
    key = _queued(store)
    store.claim(pid=_gone_pid())
    assert ("alive", "mark-dead") in _invariants(store)
    assert any("marked" in a and "dead" in a for a in _repaired(store))
    assert store.get(key).status == "dead" and _found(store) == []


def test_queue_entries_for_missing_jobs_go_and_queued_jobs_without_one_are_queued_again(store):
    key = _queued(store)
    with store.transaction():
        list(store.queue.pull())  # takes every entry out, as a claim interrupted half-way would
        store.queue.push("0123456789abcdef0123", "interactive")
    assert _invariants(store) == {("queue", "drop-entry"), ("queue", "queue-again")}
    _repaired(store)
    assert _found(store) == []
    assert store.claim().key == key  # claimable again, and nothing else is in the queue
    assert store.claim() is None


def test_a_checkpoint_that_does_not_load_is_set_aside_and_a_finished_jobs_is_deleted(store):
    done = finished_runs(store, 1)[0]
    stopped = _queued(store)
    store.claim(pid=_gone_pid())
    store.reap()
    store.workdir(stopped).mkdir(parents=True)
    (store.workdir(stopped) / "resume.pt").write_bytes(b"PK\x03\x04 cut short by a kill")
    (store.workdir(done) / "resume.pt").write_bytes(b"left over")
    found = {f.key: f for f in _found(store)}
    assert found[stopped].action == "set-aside" and "does not load" in found[stopped].problem
    assert found[done].action == "delete-file"
    _repaired(store)
    assert not (store.workdir(done) / "resume.pt").exists()
    assert [p.name[:len("resume.pt.broken")] for p in store.workdir(stopped).iterdir()] == ["resume.pt.broken"]
    assert _found(store) == []


def test_a_checkpoint_written_whole_loads(store, tmp_path):
    import torch

    path = tmp_path / "resume.pt"
    torch.save({"w": torch.ones(3)}, path)
    assert audit.unloadable(path) == ""
    path.write_bytes(path.read_bytes()[:-40])
    assert audit.unloadable(path) != ""


def test_folders_of_no_job_are_kept_aside_or_added_back_and_dead_writers_temporaries_deleted(store):
    key, other = finished_runs(store, 2)
    kept = json.loads((store.workdir(key) / RECORD_FILE).read_text())
    with store.transaction():
        store.table.drop([key, other])  # their folders, with their record.json, are left: repair adds them back
    stray = store.runs_dir / "strayfolder"
    stray.mkdir()
    (stray / "weights.bin").write_bytes(b"x" * 100)
    tmp = store.workdir(key) / f".record.json.{_gone_pid()}.tmp"
    tmp.write_text("{")
    live = store.workdir(key) / f".record.json.{os.getpid()}.tmp"  # a writer still at work: left alone
    live.write_text("{")
    assert _invariants(store) == {("folder", "rebuild"), ("folder", "lost-and-found")}
    actions = _repaired(store)
    assert store.get(key).result == kept["result"] and store.get(key).extra.get("rebuilt")
    assert store.get(other).extra.get("rebuilt")
    assert [a for a in actions if "added" in a] == ["added 2 job(s) back from the finished records in their folders"]
    assert (store.root / "lost+found" / "strayfolder" / "weights.bin").read_bytes() == b"x" * 100
    assert any("nothing deleted" in a for a in actions)
    assert ("folder", "delete-file") in _invariants(store)  # the folder is a job's again: its temporaries count
    _repaired(store)
    assert not tmp.exists() and live.exists()
    live.unlink()
    assert _found(store) == []


def test_indexes_that_disagree_with_the_records_are_mended(store):
    key = _queued(store)
    with store.transaction():
        store.table.all.add("ffffffffffffffffffff")
        store.table.running.add(key)
    assert _invariants(store) == {("index", "drop-from-index"), ("index", "drop-from-running")}
    _repaired(store)
    assert _found(store) == []
