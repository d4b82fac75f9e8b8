"""Append-only event streams, one per job: ``ev/<key>/<n>`` is chunk ``n`` (a list of events) and
``evn/<key>`` the number of chunks, so a reader's cursor runs up to it and reads only new chunks."""

from __future__ import annotations

from typing import Any

import diskcache


class EventStreams:
    def __init__(self, cache: diskcache.Cache) -> None:
        self.cache = cache

    def append(self, key: str, events: list[dict[str, Any]]) -> None:
        """Append one chunk (hold the store's transaction: the count and the chunk change together)."""
        n = self.cache.get(f"evn/{key}", 0)
        self.cache.set(f"ev/{key}/{n}", list(events))
        self.cache.set(f"evn/{key}", n + 1)

    def length(self, key: str) -> int:
        """The number of chunks so far: the cursor a reader that is up to date holds (one read)."""
        return int(self.cache.get(f"evn/{key}", 0))

    def read(self, key: str, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Events appended since ``cursor`` and the cursor to pass next time (start with 0)."""
        n = self.cache.get(f"evn/{key}", 0)
        events: list[dict[str, Any]] = []
        for i in range(cursor, n):
            events.extend(self.cache.get(f"ev/{key}/{i}", []))
        return events, n

    def chunks(self, key: str) -> list[list[dict[str, Any]]]:
        """The stream as it was appended, chunk by chunk (what an archive keeps)."""
        return [list(self.cache.get(f"ev/{key}/{i}", [])) for i in range(self.length(key))]

    def drop(self, key: str) -> None:
        """Delete a job's whole stream (hold the store's transaction)."""
        for i in range(self.length(key)):
            self.cache.delete(f"ev/{key}/{i}")
        self.cache.delete(f"evn/{key}")
