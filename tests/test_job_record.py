"""A job record read through JobRecord gives back exactly the dict the store holds."""

from __future__ import annotations

import dataclasses
import json

import pytest

from labcore.engine import run_results
from labcore.store.job_record import JobRecord, job_record

STORED = {
    "key": "k" * 20, "kind": "run", "spec": {"model": "tiny:bert", "seed": 1}, "label": "tiny · seed 1",
    "status": "done", "requires": [], "checkpoint": "resume.pt", "priority": "interactive", "attempt": 2,
    "resume": False, "pid": 123, "host": "node-a", "submitted_at": 1.5, "started_at": 2.5, "finished_at": 9.0,
    "error": "", "result": {"status": "done", "steps_done": 4}, "groups": ["pair"], "resources": {"CPU": 1.0},
    "started_by": "ann", "requesters": ["ann", "ben"], "history": [{"t": 1.5, "who": "ann", "did": "start"}],
    "cancelled_by": None, "node": "node-a", "cancel_requested": False, "traceback": "",
}


def test_every_stored_key_is_a_typed_field_and_the_dict_comes_back_unchanged():
    record = JobRecord.from_dict(STORED)
    assert (record.key, record.status, record.attempt, record.requesters) == ("k" * 20, "done", 2, ["ann", "ben"])
    assert record.result == {"status": "done", "steps_done": 4} and record.extra == {}
    assert record.to_dict() == STORED and list(record.to_dict()) == list(STORED)
    assert json.dumps(record.to_dict()) == json.dumps(STORED)  # the same JSON, key order included


def test_unknown_keys_survive_and_absent_keys_stay_absent():
    older = {"status": "cancelled", "key": "o" * 20, "spec": {}, "note": "from a later version", "id": 7}
    record = JobRecord.from_dict(older)
    assert record.extra == {"note": "from a later version", "id": 7}
    assert record.to_dict() == older and list(record.to_dict()) == list(older)
    # a field's default stands in for a key the record lacks, without adding it
    assert (record.kind, record.label, record.result, record.requesters) == ("run", "", None, [])
    assert not record.holds("label") and record.label_or("o" * 8) == "o" * 8 and record.holds("note")
    assert JobRecord.from_dict(dict(older, label="")).label_or("o" * 8) == ""


def test_a_record_built_here_writes_every_field_and_a_replaced_one_keeps_its_keys():
    built = JobRecord(key="b" * 20, status="queued")
    assert built.to_dict()["key"] == "b" * 20 and set(built.to_dict()) == {
        f.name for f in dataclasses.fields(JobRecord)} - {"extra", "stored_keys"}
    changed = dataclasses.replace(JobRecord.from_dict(STORED), status="failed", error="bad input")
    assert changed.to_dict() == dict(STORED, status="failed", error="bad input")
    assert job_record(None) is None and job_record(STORED) == JobRecord.from_dict(STORED)


@pytest.mark.parametrize("status, active, finished, stopped", [
    ("queued", True, False, False), ("running", True, False, False), ("done", False, True, False),
    ("diverged", False, True, False), ("failed", False, False, True), ("dead", False, False, True)])
def test_the_status_tests_follow_the_stores_status_sets(status, active, finished, stopped):
    record = JobRecord(key="s" * 20, status=status)
    assert (record.active, record.finished, record.stopped) == (active, finished, stopped)


def test_the_store_reads_records_as_job_records_and_stores_the_same_dicts(store):
    from labcore.jobs import new_job
    from labcore.runspec import make_spec

    key = store.submit(new_job(make_spec(discipline="bits-xor", model="tiny:bert", max_steps=2)), who="ann").key
    record = store.get(key)
    assert isinstance(record, JobRecord) and record.status == "queued" and record.started_by == "ann"
    assert record.to_dict() == store.table.get(key)
    assert store.record(key) == record and store.jobs() == [record] and run_results.runs(store) == [record]
    assert store.status(key).record == record and store.cancel(key).status == "cancelled"


def test_a_record_without_its_key_is_refused_by_name():
    with pytest.raises(ValueError, match="needs its key"):
        JobRecord.from_dict({"status": "done"})
