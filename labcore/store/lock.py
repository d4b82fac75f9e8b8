"""The store's write lock with a bounded wait.

diskcache's ``transact(retry=True)`` waits for SQLite's write lock without end. A lab process that is
suspended while it holds the lock (Ctrl-Z, SIGSTOP, a paused machine) then blocks every other writer
until it is resumed: a page that only wanted to read a running job (and write back that it is dead)
hung. Here every wait has a bound: a writer gives up after ``write_wait_s`` with a :class:`StoreLocked`
that names the likely cause and the fix, and a reader that writes back only what it can recompute on
the next read (:meth:`Attempts._mark_dead`) gives up after ``reap_wait_s`` and keeps its answer in memory.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Iterator

import diskcache

from labcore.store.errors import StoreLocked


def locked_message(root: Path | str, waited_s: float) -> str:
    return (f"the lab's store at {root} stayed locked for writing for {waited_s:.0f} s. A lab process on it "
            f"may be suspended while writing (stopped with Ctrl-Z or SIGSTOP, or its machine paused): resume "
            f"it (`fg`, or `kill -CONT <pid>`) or end it, then try again. Nothing saved was lost.")


@contextlib.contextmanager
def write_lock(cache: diskcache.Cache, *, wait_s: float, root: Path | str) -> Iterator[None]:
    """``cache.transact()`` that waits at most ``wait_s`` for the lock (nested calls take no new lock)."""
    start = time.monotonic()
    with contextlib.ExitStack() as stack:
        while True:
            left = wait_s - (time.monotonic() - start)
            try:
                with _busy_timeout(cache, max(left, 0.0)):
                    stack.enter_context(cache.transact())
                break
            except diskcache.Timeout:
                if time.monotonic() - start >= wait_s:
                    raise StoreLocked(locked_message(root, time.monotonic() - start)) from None
        yield


@contextlib.contextmanager
def _busy_timeout(cache: diskcache.Cache, seconds: float) -> Iterator[None]:
    """SQLite's busy timeout of this thread's connection set for one ``BEGIN IMMEDIATE``, then put back.
    (diskcache fixes it when it connects; the pragma is per connection, and each thread has its own.)"""
    sql = cache._sql  # noqa: SLF001 - diskcache's own connection; no public way to set it per call
    sql(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    try:
        yield
    finally:
        sql(f"PRAGMA busy_timeout = {int(cache.timeout * 1000)}")
