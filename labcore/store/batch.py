"""What one submission adds to the store's indexes, gathered job by job and written once at its end.

A group of N jobs submitted one at a time rewrote the job index, the group and the requester's list N
times each, every write the size of the list so far: the cost grew with the square of the group
(3,000 jobs took 77 s). :class:`Batch` collects the new entries inside the submission's transaction and
writes each list once, and counts the requester's queue cap once for the whole submission.
"""

from __future__ import annotations

from typing import Any

from labcore.errors import LabError


class QueueCapReached(LabError):
    """A requester already has as many jobs waiting as :attr:`StoreSettings.max_queued_per_requester`."""


class Batch:
    """The index entries of one submission (``Store._submit_all``) and its requester's queue cap.
    ``store`` is that :class:`~labcore.store.core.Store` (not imported: the core imports this module)."""

    def __init__(self, store: Any, who: str | None, group: str | None = None) -> None:
        self.store, self.who, self.group = store, who, group
        self.new_keys: list[str] = []  # new job records, for the submission-order index
        self.group_keys: list[str] = []
        self.asked_keys: list[str] = []
        self._waiting: set[str] | None = None  # the requester's queued keys, read on the first cap check

    def grouped(self, key: str) -> None:
        if self.group:
            self.group_keys.append(key)

    def asked(self, key: str) -> None:
        if self.who:
            self.asked_keys.append(key)
            if self._waiting is not None:
                self._waiting.add(key)

    def check_cap(self, key: str) -> None:
        """Refuse a new queue entry beyond the requester's cap (:attr:`StoreSettings.max_queued_per_requester`)."""
        cap = self.store.settings.max_queued_per_requester
        if not self.who or cap <= 0:
            return
        if self._waiting is None:
            self._waiting = set(self.store.waiting_for(self.who))
        if key not in self._waiting and len(self._waiting) >= cap:
            raise QueueCapReached(
                f"you already have {len(self._waiting)} jobs waiting in the queue, the most one person may queue "
                f"at a time on this server ({cap}); wait until some of them start, or cancel one on the Runs "
                f"page. (The limit is TRANSFERLAB_MAX_QUEUED_PER_SESSION.)")

    def write(self) -> None:
        """Inside the transaction: every index entry of the submission, one write per index."""
        self.store.table.all.extend(self.new_keys)
        if self.group and self.group_keys:
            self.store.table.add_to_group(self.group, self.group_keys)
        if self.who and self.asked_keys:
            self.store._asked(self.who).extend(self.asked_keys)
