"""The pages' handle on the lab: which store they read, as data. A page that holds a ``Store`` can do anything
to it; a page that holds a :class:`Lab` can only hand it back to the door, whose functions return rows.

The door's modules open the store behind the handle with :func:`store_of` (the process keeps one ``Store`` per
folder, so a handle costs nothing to pass around and two handles on one folder read the same store).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labcore.engine import run_results
from labcore.results.record import RunRecord
from labcore.store import JobRecord, Store, open_store

__all__ = ["Lab", "open_lab"]


@dataclass(frozen=True)
class Lab:
    """A store's folder, and two readings of it by name: a job's record (``get``, all the lessons' runs and
    :func:`labcore.engine.run_results.result` ask of it) and a run's result (``get_result``): rows, never the
    store itself."""

    root: Path

    def get(self, key: str) -> JobRecord | None:
        """``key``'s job record, None where there is none."""
        return store_of(self).get(key)

    def get_result(self, key: str) -> RunRecord | None:
        """``key``'s result, None where it has none yet."""
        return run_results.result(store_of(self), key)


def open_lab(root: Path | str | None = None) -> Lab:
    """The lab on ``root`` (default: the current cache's store)."""
    return Lab(Path(open_store(root).root))


def store_of(lab: Lab) -> Store:
    """The door's own way to the store behind ``lab``; no page is given it (it is not in ``__all__``)."""
    return open_store(lab.root)
