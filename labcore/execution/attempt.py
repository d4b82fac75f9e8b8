"""One attempt of one job, wherever it runs: drive the kind's handler to its end and say how it ended.

The local worker (:mod:`labcore.execution.worker`) and a Ray task (:mod:`labcore.execution.ray_pump`) both run a
claimed job through :func:`run_attempt`: it looks the kind up, checks the disk, runs the handler, honours
``should_stop`` for kinds that do not stop themselves, turns every failure into a status and a message
for the page, and ends with an :class:`Outcome`. Where the events go is the caller's business: the
worker hands them to an :class:`EventSink` over the store; a Ray task yields them to the executor
process, which hands them to its own sink. :class:`OutputCapture` tees a process's stdout and stderr
into a job's log. This module imports no torch (handlers import it inside their bodies).
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Protocol

from labcore import jobs
from labcore.errors import LabError
from labcore.events import FREQUENT, RESULT, START, STEP, LogEvent, OutcomeEvent, ResultEvent
from labcore.jobs import JobContext
from labcore.store import Fenced, Store, StoreSettings, health

ENDINGS = ("done", "diverged", "cancelled", "interrupted", "failed")  # how a handler's attempt can end


class EventSink:
    """Buffers one job's events and writes them to the store in chunks, from any thread.

    Every chunk carries the attempt it belongs to; once the store refuses one (the job was resumed
    elsewhere), the sink is ``fenced`` and drops whatever else comes.
    """

    def __init__(self, store: Store, key: str, settings: StoreSettings, attempt: int | None = None) -> None:
        self.store = store
        self.key = key
        self.attempt = attempt
        self.fenced = False
        self.write_error = ""  # why the store refused to take events (a full disk): the job must stop
        self.settings = settings
        self._lock = threading.Lock()
        self._buffer: list[dict[str, Any]] = []
        self._last_flush = 0.0
        self._log_chars = 0
        self._log_cut = False
        self.step = 0
        self.total_steps = 0
        self.loss: float | None = None
        self.first_event_at: float | None = None

    def add(self, event: dict[str, Any]) -> None:
        event = dict(event)
        event.setdefault("t", time.time())
        kind = event.get("type")
        if kind == STEP:
            self.step = int(event.get("step", self.step))
            self.loss = event.get("loss", self.loss)
        elif kind == START:
            self.total_steps = int(event.get("total_steps") or 0)
        with self._lock:
            self._buffer.append(event)
            # Step events (training's and a stage's) are many and cheap to delay; everything else (start, eval, checkpoint, log,
            # result) is rare and someone may be waiting for it.
            due = kind not in FREQUENT or time.time() - self._last_flush >= self.settings.flush_every_s
        if due:
            self.flush()

    def log(self, message: str, source: str = "worker") -> None:
        if self._log_cut:
            return
        self._log_chars += len(message)
        if self._log_chars > self.settings.log_limit_chars:
            self._log_cut = True
            message = f"(log cut here: over {self.settings.log_limit_chars} characters)"
        self.add(LogEvent(source=source, message=message).to_dict())

    def flush(self) -> None:
        # Holding the lock while writing keeps chunks in event order when two threads flush at once.
        with self._lock:
            if not self._buffer:
                return
            events, self._buffer = self._buffer, []
            if self.fenced:
                return
            try:
                self.store.append_events(self.key, events, attempt=self.attempt)
            except Fenced:
                self.fenced = True
                return
            except (OSError, sqlite3.OperationalError) as exc:
                if not health.is_disk_full(exc):
                    raise
                self.write_error = health.disk_full_message(self.store.root)
                return
            self._last_flush = time.time()
            if self.first_event_at is None:
                self.first_event_at = self._last_flush

    def flush_if_due(self) -> None:
        if time.time() - self._last_flush >= self.settings.flush_every_s:
            self.flush()


class LogTarget(Protocol):
    def log(self, message: str, source: str = "worker") -> None: ...


class OutputCapture:
    """Tee file descriptors 1 and 2 into a sink while a run goes (what the process prints stays visible)."""

    def __init__(self, sink: "LogTarget", join_s: float = 2.0) -> None:
        self.sink = sink
        self.join_s = join_s  # how long to wait for the pumps once the job is over
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        # A saved descriptor is closed by whichever ends last, the capture or its pump: a pump still running after
        # the capture (a child the engine started holds its pipe) writes to it, and closed under it, its number
        # would go to the next file opened, which would then receive that child's output.
        self._close_lock = threading.Lock()
        self._released: set[int] = set()  # saved descriptors one of the two is done with

    def __enter__(self) -> "OutputCapture":
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, source in ((1, "stdout"), (2, "stderr")):
            read_end, write_end = os.pipe()
            self._saved[fd] = os.dup(fd)
            os.dup2(write_end, fd)
            os.close(write_end)
            thread = threading.Thread(target=self._pump, args=(read_end, self._saved[fd], source),
                                      name=f"capture-{source}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _pump(self, read_end: int, original: int, source: str) -> None:
        pending = b""
        try:
            while True:
                data = os.read(read_end, 65536)
                if not data:
                    break
                try:
                    _write_all(original, data)
                except OSError:
                    pass  # the terminal went away; the store still gets the text
                pending += data
                *lines, pending = pending.replace(b"\r", b"\n").split(b"\n")
                for line in lines:
                    if line.strip():
                        self.sink.log(line.decode(errors="replace"), source)
            if pending.strip():
                self.sink.log(pending.decode(errors="replace"), source)
        finally:
            os.close(read_end)
            self._release(original)

    def __exit__(self, *exc: Any) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # closes our pipe's write end: the pump sees end of file
        for thread in self._threads:
            # A child process the engine started may still hold the pipe; do not wait for it forever.
            thread.join(timeout=self.join_s)
        for saved in self._saved.values():
            self._release(saved)

    def _release(self, saved: int) -> None:
        """The capture or a pump is done with ``saved``: the second of the two to say so closes it."""
        with self._close_lock:
            if saved in self._released:
                os.close(saved)
            else:
                self._released.add(saved)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]


@dataclass
class Outcome:
    """How an attempt ended: the status to record, the kind's result record, the error and traceback.

    ``lost``: the job was resumed elsewhere while this attempt ran (a fenced write); nothing more of it may
    be recorded.
    """

    status: str
    result: dict[str, Any] | None = None
    error: str = ""
    traceback: str = ""
    lost: bool = False

    def event(self) -> dict[str, Any]:
        """The stream's last event: what a page shows when the job ends."""
        return OutcomeEvent(status=self.status, metrics=(self.result or {}).get("metrics"), error=self.error).to_dict()


def failure(exc: BaseException, store_root: Path) -> tuple[Outcome, dict[str, Any]]:
    """An unexpected exception as an outcome and the log event that explains it (a full disk says so)."""
    if health.is_disk_full(exc):
        message = health.disk_full_message(store_root)
        return Outcome("failed", error=message), LogEvent(source="error", message=message).to_dict()
    trace = traceback.format_exc()
    return (Outcome("failed", error=f"{type(exc).__name__}: {exc} (the traceback is in the run's log)", traceback=trace),
            LogEvent(source="traceback", message=trace).to_dict())


def run_attempt(kind_name: str, spec: dict[str, Any], ctx: JobContext, *, store_root: Path, min_free_mb: float,
                load_error: str = "") -> Iterator[dict[str, Any] | Outcome]:
    """Run one attempt's handler: yields its events (not its result event), then one :class:`Outcome`.

    For a kind that does not stop itself, ``ctx.should_stop`` is read after every event and the handler
    is closed (its ``finally`` blocks run) when it says so. Files a failed write left half-done in the
    job's folder are removed before the outcome is yielded.
    """
    outcome = Outcome("failed")
    try:
        if load_error:
            raise RuntimeError(f"the job kinds could not be imported:\n{load_error}")
        kind = jobs.get_kind(kind_name)
        ctx = dataclasses.replace(ctx, checkpoint=kind.checkpoint)  # the kind names its file, once
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        # Writes an earlier attempt's kill cut short (their writers are gone): this attempt holds the job now,
        # and a writer that is only stalled could not commit its file anyway (its rename is fenced).
        health.remove_partial_files(ctx.workdir)
        if health.free_mb(ctx.workdir) < min_free_mb:
            # Checkpoints and weights need room; failing now beats failing at the first checkpoint.
            raise LabError(health.disk_full_message(store_root)
                           + f" (a job starts with at least {min_free_mb:g} MB free)")
        events = kind.handler(kind.from_dict(spec), ctx)
        for event in events:
            if event.get("type") == RESULT:
                done = ResultEvent.from_dict(event)
                outcome = Outcome(done.status or "done", result=done.record or {})
                continue
            yield event
            reason = None if kind.stops_itself else ctx.should_stop()
            if reason:
                events.close()  # the handler's finally blocks run; nothing is half-written
                outcome = Outcome(reason)
                break
        if outcome.result is None and outcome.status not in ("cancelled", "interrupted"):
            outcome.error = "the job stopped without a result; its log may say why"
    except Fenced:
        outcome = Outcome("failed", lost=True)  # resumed elsewhere: the other attempt owns the job and its files
    except LabError as exc:
        outcome = Outcome("failed", error=str(exc))
        yield LogEvent(source="error", message=str(exc)).to_dict()
    except Exception as exc:
        outcome, explained = failure(exc, store_root)
        yield explained
    # e.g. where and why a run diverged; a record's "error" may be None (a pretraining stopped cleanly says so),
    # and the outcome's error is always a string: the worker reads it after the job, whatever the job was.
    outcome.error = outcome.error or (outcome.result or {}).get("error") or ""
    if outcome.status not in ENDINGS:
        outcome.error = outcome.error or f"the job reported an unknown status {outcome.status!r}"
        outcome.status = "failed"
    health.remove_partial_files(ctx.workdir, os.getpid())  # what a failed or refused write left behind
    yield outcome
