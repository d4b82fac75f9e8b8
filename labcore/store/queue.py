"""One durable queue of job keys with priorities, fair between the people who asked (diskcache
``push``/``pull`` under a prefix per priority and requester).

An entry only names a key; the job table decides: a claim skips entries whose record is no longer
``queued`` (cancelled, or already claimed through a second, higher-priority entry). ``seq`` counts
pushes, so idle workers look for work without taking the lock.

Within a priority, each requester (a browser session, a user name) has a FIFO of their own, and claims
serve the requesters round-robin: one student's 50-spec sweep waits its turn behind each classmate's
single run instead of starving them. Entries without a requester (the CLI, stores written before
requesters existed) live under the bare prefix ``q<priority>`` and take their turn like one requester.
``queue/ring/<p>`` lists the requesters with entries at priority ``p`` (in the order they first asked)
and ``queue/turn/<p>`` names the one served last.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import diskcache

from labcore.store.settings import PRIORITIES

ANONYMOUS = ""  # the requester of entries pushed without one


def requester_id(who: str | None) -> str:
    """A short, prefix-safe name for a requester's FIFO ("" for none). It starts with a letter, so its
    keys (``q0s<hex>-<n>``) never fall inside the bare prefix's range (``q0-<digits>``)."""
    return f"s{hashlib.sha1(who.encode()).hexdigest()[:12]}" if who else ANONYMOUS


class JobQueue:
    def __init__(self, cache: diskcache.Cache) -> None:
        self.cache = cache

    def push(self, key: str, priority: str, who: str | None = None) -> None:
        """Append ``key`` to the requester's FIFO (hold the store's transaction)."""
        level = PRIORITIES[priority]
        sid = requester_id(who)
        self.cache.push(key, prefix=f"q{level}{sid}")
        ring = self._ring(level)
        if sid not in ring:
            self.cache.set(f"queue/ring/{level}", ring + [sid])
        self.cache.incr("queue/seq")  # wakes idle workers without them taking the lock

    def pull(self) -> Iterator[str]:
        """Keys in claim order, each removed as it is read: interactive before sweep; within a priority,
        the requesters in turn after the one served last, FIFO within each requester.

        Call inside the store's transaction and stop iterating at the entry you take: the requester of the
        last key yielded is recorded as served, so the next claim starts with the one after it.
        """
        for level in sorted(PRIORITIES.values()):
            ring = self._ring(level)
            turn = self.cache.get(f"queue/turn/{level}")
            start = ring.index(turn) + 1 if turn in ring else 0
            for sid in ring[start:] + ring[:start]:
                while True:
                    entry, key = self.cache.pull(prefix=f"q{level}{sid}")
                    if entry is None:
                        break
                    self.cache.set(f"queue/turn/{level}", sid)
                    yield key
                if sid != ANONYMOUS:  # an emptied FIFO leaves the ring until its requester asks again
                    self.cache.set(f"queue/ring/{level}", [s for s in self._ring(level) if s != sid])

    def _ring(self, level: int) -> list[str]:
        ring = list(self.cache.get(f"queue/ring/{level}", []))
        return ring if ANONYMOUS in ring else [ANONYMOUS] + ring

    def seq(self) -> int:
        return int(self.cache.get("queue/seq", 0))
