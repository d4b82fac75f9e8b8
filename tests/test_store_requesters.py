"""Who asked for a job, on a store one class shares: withdrawing a request, a teacher's cancel, clearing the
queue, round-robin service between requesters and the per-requester queue cap."""

from __future__ import annotations

import pytest

from labcore.jobs import new_job
from labcore.store import Store, StoreSettings
from test_store import spec, store, submit  # noqa: F401 - store: the fixture


def test_a_non_requesters_cancel_withdraws_only_their_request(store):
    key = submit(store, spec(), who="ann").key
    assert submit(store, spec(), who="ben").outcome == "existing"  # the same demo: one run, two requesters
    assert submit(store, spec(), who="cat").outcome == "existing"
    record = store.get(key)
    assert (record.started_by, record.requesters) == ("ann", ["ann", "ben", "cat"])
    gone = store.withdraw(key, "ben")
    assert (gone.outcome, gone.others) == ("withdrawn", 2)
    assert store.get(key).status == "queued" and store.get(key).requesters == ["ann", "cat"]
    stranger = store.withdraw(key, "dan")  # never asked: nothing changes
    assert (stranger.outcome, stranger.others) == ("not-requested", 2)
    claim = store.claim()
    assert claim.key == key and not store.cancel_requested(key, claim.attempt)
    assert store.withdraw(key, "ann").outcome == "withdrawn"
    assert not store.cancel_requested(key, claim.attempt)  # cat still waits: the run goes on
    store.finish(key, claim.attempt, "done", result={"key": key})


def test_the_last_withdrawal_stops_the_run(store):
    key = submit(store, spec(), who="ann").key
    submit(store, spec(), who="ben")
    claim = store.claim()
    assert store.withdraw(key, "ann").outcome == "withdrawn"
    last = store.withdraw(key, "ben")
    assert (last.outcome, last.others) == ("cancelled", 0)
    assert store.cancel_requested(key, claim.attempt)
    record = store.get(key)
    assert record.cancelled_by == "ben" and [h["did"] for h in record.history] == [
        "start", "join", "withdraw", "cancel"]
    store.finish(key, claim.attempt, "cancelled")
    queued = submit(store, spec(1), who="ann").key  # a queued run is cancelled at once
    assert store.withdraw(queued, "ann").record.status == "cancelled"
    assert store.claim() is None


def test_the_teachers_cancel_stops_a_run_many_asked_for(store):
    key = submit(store, spec(), who="ann").key
    submit(store, spec(), who="ben")
    claim = store.claim()
    record = store.cancel(key, "teacher")
    assert record.cancelled_by == "teacher" and record.requesters == []
    assert store.cancel_requested(key, claim.attempt)
    store.finish(key, claim.attempt, "cancelled")
    again = submit(store, spec(), who="ben")  # a later click resumes it, now ben's alone
    assert again.outcome == "resumed" and again.record.requesters == ["ben"] and again.record.started_by == "ben"
    assert store.claim().key == key
    store.reap()


def test_clearing_the_queue_cancels_every_waiting_job(store):
    keys = [submit(store, spec(i), who=f"s{i}").key for i in range(3)]
    assert sorted(store.clear_queue("teacher")) == sorted(keys)
    assert {store.get(k).status for k in keys} == {"cancelled"}
    assert store.claim() is None


def test_requesters_are_served_round_robin_within_a_priority(store):
    sweep = [submit(store, spec(i), who="ann").key for i in range(4)]  # one student's 4-run sweep first
    ben = [submit(store, spec(10 + i), who="ben").key for i in range(2)]
    cli = submit(store, spec(20)).key  # the command line takes its turn like one more requester
    order = []
    while (claim := store.claim()) is not None:
        order.append(claim.key)
    assert order == [cli, sweep[0], ben[0], sweep[1], ben[1], sweep[2], sweep[3]]
    later = submit(store, spec(30), who="ben").key, submit(store, spec(31), who="cat").key
    assert [store.claim().key, store.claim().key] == list(later)


def test_round_robin_keeps_interactive_before_sweep(store):
    sweeps = [submit(store, spec(i), priority="sweep", who="ann").key for i in range(2)]
    mine = submit(store, spec(9), who="ben").key
    assert [store.claim().key for _ in range(3)] == [mine] + sweeps


def test_a_requesters_queue_is_capped_with_a_clear_message(tmp_path):
    from labcore.store import QueueCapReached

    store = Store(tmp_path / "store", StoreSettings(max_queued_per_requester=2))
    try:
        first = [submit(store, spec(i), who="ann").key for i in range(2)]
        with pytest.raises(QueueCapReached, match="2 jobs waiting.*TRANSFERLAB_MAX_QUEUED_PER_SESSION"):
            submit(store, spec(2), who="ann")
        assert submit(store, spec(2), who="ben").outcome == "queued"  # others are not held back
        assert submit(store, spec(2), who="ann").outcome == "existing"  # joining a queued job is free
        with pytest.raises(QueueCapReached, match="Of the 3 jobs of 'sweep', 0 are in the queue"):
            store.submit_group("sweep", [new_job(spec(5 + i)) for i in range(3)], who="ann")
        assert submit(store, spec(9)).outcome == "queued"  # the command line is not capped
        store.withdraw(first[0], "ann")  # a slot frees up once one leaves the queue
        assert submit(store, spec(3), who="ann").outcome == "queued"
        assert len(store.waiting_for("ann")) == 2
    finally:
        store.close()


