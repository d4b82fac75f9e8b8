"""The claim loop: what every process that takes the store's queued jobs does, whatever runs them.

The local worker (:mod:`labcore.execution.worker`, which runs each job in its own process) and the Ray driver
(:mod:`labcore.execution.ray_pump`, which runs them as Ray tasks) are both subclasses. The loop holds what they share:

* registration in the store's worker registry, and the process's own heartbeat (its state, its job);
* the fenced heartbeat of every launched job: a refused beat means the job was resumed elsewhere after a
  false ``dead`` and its launcher must stop writing for it (:meth:`ClaimLoop.lost`);
* reaping every ``reap_every_s``;
* the queue gate: the queue's lock is only taken when something was pushed since the queue was last seen
  empty (and every ``full_claim_every_s`` anyway, as a safety net);
* a full disk is waited out (the process stays, launched jobs go on), not a crash;
* its :class:`Lifetime`: a process started for someone leaves once idle too long or once its starter has
  ended, and any leaves when its store folder is deleted (it never makes the folder again).

What differs are the hooks: :meth:`~ClaimLoop.capacity` (how many more jobs may start now),
:meth:`~ClaimLoop.launch` (start a claimed job), :meth:`~ClaimLoop.poll` (collect launched jobs that ended,
and wait for the next tick) and :meth:`~ClaimLoop.launched` (the jobs to heartbeat). A loop whose ``launch``
runs the job to its end (``beat_from_thread``) beats from a side thread, since its own thread is busy;
one whose ``launch`` only starts the job beats between ticks, on the loop's thread.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from labcore.execution.attempt import EventSink
from labcore.execution.lifetime import Lifetime
from labcore.store import Claim, Store, health, process_state


@dataclass(frozen=True)
class Identity:
    """Who the process is in the store's worker registry and in its own messages."""

    pid: int
    label: str  # how its messages begin: "worker 123", "ray executor 123"
    role: str = "worker"
    # How it was started, recorded when it registers itself; None where its supervisor (labcore.execution.pool)
    # registered it already: it then only reports the GPU it was given.
    command: str | None = None
    gpu: str | None = None  # the CUDA_VISIBLE_DEVICES it was given ("" where it sees the machine's)


class Launched(NamedTuple):
    """A launched job as the heartbeat sees it; ``handle`` is the launcher's own, given back to ``lost``."""

    claim: Claim
    sink: EventSink
    handle: Any


class ClaimLoop:
    """Claims jobs and keeps them alive in the store until stopped; subclasses say how jobs run."""

    beat_from_thread = False  # True where launch() runs the job to its end: nothing else could beat meanwhile

    def __init__(self, store: Store, identity: Identity, lifetime: Lifetime = Lifetime()) -> None:
        self.store = store
        self.identity = identity
        self.lifetime = lifetime
        self.store_gone = False  # the store's folder was deleted or replaced: nothing more is written to it
        self._db_folder = _identity(store.root / "db")
        self._idle_since = time.time()
        self.pid = identity.pid
        self.stop_reason: str | None = None  # "interrupted" once asked to stop (a signal, stop())
        self.state = "starting"  # "idle" once start() is done (a warm process)
        self.handled = 0  # jobs launched so far
        self.wake = threading.Event()  # ends the loop's waits at once: set when asked to stop
        self._leaving = False  # leave once nothing runs, without a stop reason (exit when idle, max runs)
        self._beats_done = threading.Event()
        self._empty_seq: int | None = None  # the queue counter when a claim last found nothing
        self._last_claim = self._last_reap = self._last_beat = 0.0

    # -------------------------------------------------------------------------------------- hooks
    def start(self) -> str:
        """Get ready to run jobs (imports, a cluster); the message that says it is ready, or why not."""
        return "ready"

    def capacity(self) -> float:
        """How many more jobs may be launched now (0 or less: none)."""
        raise NotImplementedError

    def launch(self, claim: Claim) -> None:
        """Start a claimed job; it is the launcher's to finish (``store.finish``) unless it is lost."""
        raise NotImplementedError

    def poll(self) -> None:
        """Collect launched jobs that ended, then wait until the next tick."""
        raise NotImplementedError

    def launched(self) -> list[Launched]:
        """The launched jobs still running: each is heartbeated."""
        raise NotImplementedError

    def lost(self, run: Launched) -> None:
        """The store refused ``run``'s heartbeat: another attempt owns the job now."""
        raise NotImplementedError

    def tick(self, now: float) -> None:
        """Once a tick, before the queue is looked at."""

    def close(self) -> None:
        """The loop has ended (also by an error): whatever still runs is the launcher's to end."""

    # ---------------------------------------------------------------------------------- the loop
    def stop(self, reason: str = "interrupted") -> None:
        """Ask launched jobs to stop (they checkpoint) and leave the loop once they have."""
        self.stop_reason = reason
        self.wake.set()

    def leave(self) -> None:
        """Leave the loop once nothing runs (launched jobs are not asked to stop)."""
        self._leaving = True

    def serve(self) -> int:
        """Run until stopped (or left); returns the number of jobs launched."""
        self._register()
        beating = None
        if self.beat_from_thread:
            beating = threading.Thread(target=self._beat_until_done, name="heartbeat", daemon=True)
            beating.start()
        try:
            message = self.start()
            self.state = "idle"
            self._idle_since = time.time()  # its warm-up (importing torch, seconds) is not idle time
            self.beat()
            print(f"{self.identity.label}: {message}", flush=True)
            while not ((self.stop_reason or self._leaving) and not self.launched()):
                self._tick_waiting_out_full_disk()
        finally:
            self._beats_done.set()
            if beating is not None:
                beating.join(timeout=5)
            self.close()
            if not self.store_gone:
                self.store.unregister_worker(self.pid)
            print(f"{self.identity.label}: stopped after {self.handled} job(s)", flush=True)
        return self.handled

    def _register(self) -> None:
        who = self.identity
        if who.command is None:
            self.store.worker_heartbeat(self.pid, state="starting", gpu=who.gpu)
        else:
            self.store.register_worker(self.pid, state="starting", command=who.command, role=who.role)

    def _tick_waiting_out_full_disk(self) -> None:
        try:
            self._tick()
        except (OSError, sqlite3.OperationalError) as exc:
            if not health.is_disk_full(exc):
                raise
            # The process stays: launched jobs go on and their events wait in their sinks until there is room.
            print(f"{self.identity.label}: {health.disk_full_message(self.store.root)}", file=sys.stderr,
                  flush=True)
            if self.launched():
                time.sleep(self.store.settings.reap_every_s)  # a stop must not turn this into a busy loop
            else:
                self.wake.wait(self.store.settings.reap_every_s)

    def _tick(self) -> None:
        settings = self.store.settings
        now = time.time()
        if not self.stop_reason:
            self._leave_when_done(now)
        if self.store_gone:
            self.poll()
            return
        if not self.beat_from_thread and now - self._last_beat >= settings.heartbeat_every_s:
            self.beat()
        self.tick(now)
        if not (self.stop_reason or self._leaving):
            if now - self._last_reap >= settings.reap_every_s:
                self.store.reap()
                self._last_reap = now
            self._claim(now)
        self.poll()

    def _leave_when_done(self, now: float) -> None:
        """Leave on the lifetime's terms: the store folder gone (at once, writing nothing to it), the starter
        ended (running jobs stop and checkpoint), idle too long (only with nothing running)."""
        label = self.identity.label
        if _identity(self.store.root / "db") != self._db_folder:
            self.store_gone = True
            print(f"{label}: the store folder {self.store.root} was deleted or replaced; leaving without "
                  f"recreating it", file=sys.stderr, flush=True)
            self.stop()
            return
        parent = self.lifetime.parent_pid
        if parent and process_state(parent) in ("gone", "zombie"):
            print(f"{label}: the process that started it ({parent}) has ended; leaving", flush=True)
            self.stop()
            return
        if self.launched():
            self._idle_since = now
        elif self.lifetime.idle_exit_s and now - self._idle_since >= self.lifetime.idle_exit_s:
            print(f"{label}: idle for {now - self._idle_since:.0f} s (it leaves after "
                  f"{self.lifetime.idle_exit_s:g} s); leaving", flush=True)
            self.leave()

    def _claim(self, now: float) -> None:
        """Claim and launch while there is capacity."""
        seq = self.store.queue_seq()
        if seq == self._empty_seq and now - self._last_claim < self.store.settings.full_claim_every_s:
            return  # nothing pushed since the queue was last seen empty: its lock is not taken
        while self.capacity() > 0:
            self._last_claim = now
            claim = self.store.claim(self.pid)
            if claim is None:
                self._empty_seq = seq
                return
            self.launch(claim)
            self.handled += 1
            # A launcher that runs the job in this thread (the worker) returns when it has ended, and no tick
            # saw it running: its idle time starts now, not when the loop last saw nothing launched.
            self._idle_since = time.time()

    # ---------------------------------------------------------------------------------- heartbeat
    def _beat_until_done(self) -> None:
        while not self._beats_done.wait(self.store.settings.heartbeat_every_s):
            try:
                self.beat()
            except Exception as exc:  # a busy disk must not end the heartbeat thread
                print(f"heartbeat failed: {exc!r}", file=sys.__stderr__)

    def beat(self) -> None:
        """Rewrite the process's heartbeat and each launched job's; a job whose beat is refused is lost."""
        if self.store_gone:
            return
        runs = self.launched()
        state = "stopping" if self.stop_reason else ("running" if runs else self.state)
        self.store.worker_heartbeat(self.pid, state=state, run=runs[0].claim.key if runs else None)
        self._last_beat = time.time()
        for run in runs:
            claim, sink = run.claim, run.sink
            if sink.fenced or not self.store.heartbeat(claim.key, claim.attempt, pid=self.pid, step=sink.step,
                                                       total_steps=sink.total_steps, loss=sink.loss):
                self.lost(run)  # resumed elsewhere after a false "dead": that attempt owns the job now
                continue
            sink.flush_if_due()


def _identity(folder: Path) -> tuple[int, int] | None:
    """The folder's device and inode (None once it is gone): a folder deleted and made again is another one."""
    try:
        found = os.stat(folder)
    except OSError:
        return None
    return found.st_dev, found.st_ino
