"""The claim loop's hooks, with a launcher that runs nothing: what the loop does for every launcher."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from labcore import jobs
from labcore.execution.attempt import EventSink
from labcore.execution.claim_loop import ClaimLoop, Identity, Launched
from labcore.jobs import new_job

sys.path.insert(0, str(Path(__file__).resolve().parent / "kinds"))
jobs.load_modules("toy_jobs")
from toy_jobs import CountSpec  # noqa: E402


@dataclass
class Slot:
    claim: object
    sink: EventSink


class Holding(ClaimLoop):
    """Launches a job by holding it (up to ``slots`` at once); each poll leaves after ``ticks`` polls."""

    def __init__(self, store, *, slots: int, ticks: int) -> None:
        super().__init__(store, Identity(os.getpid(), "test loop", role="test", command="test"))
        self.slots, self.ticks, self.polls = slots, ticks, 0
        self.held: list[Slot] = []
        self.lost_keys: list[str] = []

    def capacity(self) -> float:
        return self.slots - len(self.held)

    def launch(self, claim) -> None:
        self.held.append(Slot(claim, EventSink(self.store, claim.key, self.store.settings, attempt=claim.attempt)))

    def poll(self) -> None:
        self.polls += 1
        if self.polls >= self.ticks:
            for slot in self.held:
                self.store.finish(slot.claim.key, slot.claim.attempt, "done", result={})
            self.held.clear()
            self.leave()

    def launched(self) -> list[Launched]:
        return [Launched(slot.claim, slot.sink, handle=slot) for slot in self.held]

    def lost(self, run: Launched) -> None:
        self.lost_keys.append(run.claim.key)
        self.held.remove(run.handle)


def test_the_loop_claims_up_to_capacity_and_takes_the_queue_lock_only_when_it_moved(store, monkeypatch):
    for n in (1, 2, 3):
        store.submit(new_job(CountSpec(n=n)))
    claims = []
    claim = store.claim
    monkeypatch.setattr(store, "claim", lambda pid=None: claims.append(pid) or claim(pid))
    loop = Holding(store, slots=2, ticks=3)
    assert loop.serve() == 2  # capacity two: the third job stays queued
    assert len(claims) == 2  # capacity was reached before the queue was found empty
    assert len(store.queued()) == 1
    assert not store.workers(role="test")  # registered while it ran, gone after

    again = Holding(store, slots=5, ticks=4)
    claims.clear()
    assert again.serve() == 1
    # The first tick found the queue empty after one claim; later ticks saw no push and took no lock.
    assert len(claims) == 2


def test_a_refused_heartbeat_hands_the_job_to_lost(store):
    store.submit(new_job(CountSpec(n=1)))
    loop = Holding(store, slots=1, ticks=1)
    loop.launch(store.claim(loop.pid))
    taken = loop.held[0].claim
    store.finish(taken.key, taken.attempt, "done", result={})  # the job is no longer this attempt's
    loop.beat()
    assert loop.lost_keys == [taken.key] and not loop.held
