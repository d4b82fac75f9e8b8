"""One durable queue of job keys with priorities (diskcache ``push``/``pull`` under a prefix per priority).

An entry only names a key; the job table decides: a claim skips entries whose record is no longer
``queued`` (cancelled, or already claimed through a second, higher-priority entry). ``seq`` counts
pushes, so idle workers look for work without taking the lock.
"""

from __future__ import annotations

from typing import Iterator

import diskcache

from labcore.store.settings import PRIORITIES


class JobQueue:
    def __init__(self, cache: diskcache.Cache) -> None:
        self.cache = cache

    def push(self, key: str, priority: str) -> None:
        self.cache.push(key, prefix=f"q{PRIORITIES[priority]}")
        self.cache.incr("queue/seq")  # wakes idle workers without them taking the lock

    def pull(self) -> Iterator[str]:
        """Keys in claim order (interactive first, FIFO within a priority), each removed as it is read.

        Call inside the store's transaction and stop iterating at the entry you take.
        """
        for priority in sorted(PRIORITIES.values()):
            while True:
                entry, key = self.cache.pull(prefix=f"q{priority}")
                if entry is None:
                    break
                yield key

    def seq(self) -> int:
        return int(self.cache.get("queue/seq", 0))
