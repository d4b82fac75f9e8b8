"""Reading the store: many records at once, a record rewritten, and the status counts a status line polls."""

from __future__ import annotations

from collections import Counter

from labcore.engine import run_results
from test_store import exited_pid, finish_done, spec, store, submit  # noqa: F401 - store: the fixture


def test_many_records_read_at_once_are_the_records_read_one_by_one(store, monkeypatch):
    from labcore.store import table

    monkeypatch.setattr(table, "SQL_CHUNK", 3)  # several chunks from a handful of keys
    keys = [submit(store, spec(seed)).key for seed in range(7)]
    finish_done(store, keys[0])
    # a record too large for a row of its own lives in a file beside the database: read the same way
    big = dict(store.get(keys[1]).to_dict(), note="x" * 100_000)
    store.table.put(big)
    read = store.table.get_many([*keys, "no-such-key"])
    assert read == {k: store.table.get(k) for k in keys}
    assert read[keys[1]]["note"] == big["note"] and read[keys[0]]["status"] == "done"
    assert [r.key for r in store.jobs()] == keys
    assert [r.key for r in store.jobs(status="done")] == [keys[0]]


def test_a_record_rewritten_reads_anew_and_a_callers_change_reaches_no_other_reader(store):
    key = submit(store, spec(0)).key
    first = store.table.get_many([key])[key]
    first["status"] = "scribbled"  # a caller's own copy
    assert store.table.get_many([key])[key]["status"] == "queued"
    finish_done(store, key)
    assert store.table.get_many([key])[key]["status"] == "done"


def test_status_counts_are_what_jobs_lists_and_keep_no_record(store, monkeypatch):
    from labcore.store import table
    from labcore.store.delete import delete_selected

    monkeypatch.setattr(table, "SQL_CHUNK", 2)  # several chunks from a handful of keys
    keys = [submit(store, spec(seed)).key for seed in range(5)]
    finish_done(store, keys[0])
    store.claim(pid=exited_pid())  # keys[1]: running under a worker that is gone, so dead
    big = dict(store.get(keys[2]).to_dict(), note="x" * 100_000)  # a record held in a file beside the database
    store.table.put(big)

    def listed() -> Counter:
        return Counter(r.status for r in store.jobs(kind=run_results.KIND))

    assert store.status_counts(run_results.KIND) == listed() == Counter(done=1, dead=1, queued=3)
    assert store.status_counts("no-such-kind") == Counter()
    # the status line polls this: no decoded record is kept for it, only each job's kind and status
    store.table.decoded.clear()
    store.status_counts()
    assert store.table.decoded == {}
    # a rewritten record is read anew, a deleted one is gone
    claim = store.claim()
    store.finish(claim.key, claim.attempt, "failed", error="boom")
    delete_selected(store, [keys[4]])
    assert store.status_counts(run_results.KIND) == listed() == Counter(done=1, dead=1, failed=1, queued=1)


def test_status_counts_read_from_many_threads_at_once_while_jobs_come_and_go(store):
    """A process keeps one store per folder, read from threads of their own (the app's sessions, an API user's):
    the counts' kept pairs must survive readers that add and drop them at the same time as each other."""
    import sys
    import threading

    template = store.get(submit(store, spec(0)).key).to_dict()
    put = [dict(template, key=f"k{i}", status="queued") for i in range(200)]
    for record in put:
        store.table.put(record)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                store.table.kinds_and_statuses()
        except BaseException as error:  # noqa: BLE001 - the test reports whatever a reader raised
            errors.append(error)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can, so any unguarded step is split
    readers = [threading.Thread(target=reader) for _ in range(4)]
    try:
        for thread in readers:
            thread.start()
        for turn in range(200):  # jobs come and go under the readers
            gone = put[turn % len(put)]
            store.table.drop([gone["key"]])
            store.table.put(dict(gone, status="done"))
            store.table.put(dict(template, key=f"new{turn}", status="queued"))
    finally:
        stop.set()
        for thread in readers:
            thread.join(timeout=60)
        sys.setswitchinterval(before)
    assert errors == []
    assert store.table.kinds_and_statuses()["new199"][1] == "queued"
    assert store.table.kinds_and_statuses()["k0"][1] == "done"
