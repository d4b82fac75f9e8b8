"""Each run's event stream and its live curves, read once per server process and shared by every session."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

from labcore.door import runs as lab_runs
from labcore.door.runs import Lab, curves_from_events, result_of

@dataclass
class _RunStream:
    """One run's events as read so far, and its curves at that cursor (computed once per cursor)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    cursor: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    curves: tuple[list, list, str] | None = None
    pace: tuple[int, list[dict[str, Any]]] = (-1, [])  # (cursor, first and last timed step of its attempt)


def _pace(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events :func:`pages.state.eta.progress` needs for an ETA, at most two: the current attempt's first and last timed
    steps (so thirty viewers do not each walk a long run's whole stream on every refresh)."""
    start = max((i for i, e in enumerate(events) if e.get("type") == "attempt"), default=-1)
    timed = [e for e in events[start + 1:] if e.get("type") == "step" and "t" in e]
    return timed[:1] + timed[-1:] if len(timed) > 1 else timed


class StreamCache:
    """Each run's event stream, read once per server process and shared by every session.

    A live view looks at the stream's chunk count (:func:`labcore.door.runs.stream_length`, one read); only the first
    view to find that it moved reads the new chunks and rebuilds the run's curves, under the run's own lock,
    while every other session (30 students watching one demo) gets the same lists: the server's work
    grows with the runs watched, not with the viewers. Callers treat what they get as read-only.
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit  # runs kept (the least recently read go first)
        self._runs: dict[tuple[str, str], _RunStream] = {}
        self._lock = threading.Lock()

    def _entry(self, lab: Lab, key: str) -> _RunStream:
        name = (str(lab.root), key)
        with self._lock:
            entry = self._runs.pop(name, None) or _RunStream()
            self._runs[name] = entry  # most recently used last
            while len(self._runs) > self.limit:
                self._runs.pop(next(iter(self._runs)))
        return entry

    def _fresh(self, lab: Lab, key: str) -> _RunStream:
        entry = self._entry(lab, key)
        length = lab_runs.stream_length(lab, key)
        if length != entry.cursor:
            with entry.lock:
                if length < entry.cursor:  # a store rebuilt under us: read it again
                    entry.cursor, entry.events = 0, []
                if entry.cursor < length:
                    new, cursor = lab_runs.read_events(lab, key, entry.cursor)
                    entry.events = entry.events + new  # a new list: readers holding the old one keep theirs
                    entry.cursor, entry.curves = cursor, None
        return entry

    def read(self, lab: Lab, key: str) -> list[dict[str, Any]]:
        """The run's events up to now (read-only)."""
        return self._fresh(lab, key).events

    def cursor(self, lab: Lab, key: str) -> int:
        """The cursor the shared view of the run is at, after catching up."""
        return self._fresh(lab, key).cursor

    def pace(self, lab: Lab, key: str, *, read: bool = True) -> list[dict[str, Any]]:
        """What :func:`pages.state.eta.progress` needs of the run's events for its ETA, computed once per cursor. With
        ``read=False`` only what was already read (nothing for a run no view follows)."""
        entry = self._fresh(lab, key) if read else self._runs.get((str(lab.root), key))
        if entry is None:
            return []
        cursor, pace = entry.pace
        if cursor != entry.cursor:
            with entry.lock:
                entry.pace = (entry.cursor, _pace(entry.events))
                pace = entry.pace[1]
        return pace

    def curves(self, lab: Lab, key: str) -> tuple[list, list, str]:
        """``(train_loss, validation_metric, metric_name)`` at the current cursor, computed once per cursor."""
        entry = self._fresh(lab, key)
        curves = entry.curves
        if curves is None:
            with entry.lock:
                curves = entry.curves or _curves(lab, key, entry.events)
                if curves[0]:  # nothing yet (a run without a stream, before its result lands): ask again
                    entry.curves = curves
        return curves


_STREAMS = StreamCache()


def stream_cache() -> StreamCache:
    """The server process's shared stream cache (the same for every session)."""
    return _STREAMS


def run_curves(lab: Lab, key: str, cache: StreamCache | None = None) -> tuple[list, list, str]:
    """``(train_loss, validation_metric, metric_name)`` of a run, live from its event stream.

    A run recorded without a stream (an in-process sweep) falls back to its result's thinned curves.
    """
    return (cache or _STREAMS).curves(lab, key)


def _curves(lab: Lab, key: str, events: list[dict[str, Any]]) -> tuple[list, list, str]:
    curves = curves_from_events(events)
    metric = ""
    validation: list = []
    for name, points in curves.items():
        if name.startswith("validation_") and name != "validation_loss":
            metric, validation = name[len("validation_"):], points
    train = curves.get("train_loss", [])
    if not train:
        result = result_of(lab, key)
        if result is not None:
            train = [tuple(p) for p in result.train_loss]
            validation = [tuple(p) for p in result.val_curve]
            metric = result.metric
    return list(train), list(validation), metric
