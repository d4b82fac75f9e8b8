"""The worker: a separate OS process that claims queued specs and runs them through the engine.

``python -m labcore worker`` (or ``python -m labcore.worker``) loops: claim one spec atomically, run it
with :func:`labcore.run.iter_run`, stream its events into the store, record the result, repeat.

Why a process and not a thread: Streamlit reruns interrupt the script thread, a page reload must not
stop training, and torch should live in one process that the pages never import.

While a run is going the worker

* rewrites the run's heartbeat (and its own) every ``heartbeat_every_s`` from a side thread, so a long
  model load or a slow step never looks like a crash;
* buffers step events and writes them every ``flush_every_s`` (other events at once), so the SQLite
  lock is not taken once per step;
* tees its own stdout and stderr (file-descriptor level, so C extensions and warnings are caught too)
  into the run's log in the store, so a failure is explained on the page;
* polls the store's cancel flag once per training step (``should_stop``), and turns SIGTERM/SIGINT into
  ``interrupted``: the engine finishes the step, writes a resume checkpoint and yields its result.

A SIGKILL leaves the run ``running`` with a heartbeat that stops; readers then see it ``dead`` (stale
heartbeat, or pid gone or a zombie) and ``resume`` continues it from its last checkpoint.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from labcore import paths
from labcore.errors import LabError
from labcore.spec import make_spec
from labcore.store import Claim, Store, StoreSettings, open_store, process_state

DEFAULT_ENGINE = "labcore.run"


class EventSink:
    """Buffers one run's events and writes them to the store in chunks, from any thread."""

    def __init__(self, store: Store, key: str, settings: StoreSettings) -> None:
        self.store = store
        self.key = key
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
        if kind == "step":
            self.step = int(event.get("step", self.step))
            self.loss = event.get("loss", self.loss)
        elif kind == "start":
            self.total_steps = int(event.get("total_steps") or 0)
        with self._lock:
            self._buffer.append(event)
            # Step events are many and cheap to delay; everything else (start, eval, checkpoint, log,
            # result) is rare and someone may be waiting for it.
            due = kind != "step" or time.time() - self._last_flush >= self.settings.flush_every_s
        if due:
            self.flush()

    def log(self, message: str, source: str = "worker") -> None:
        if self._log_cut:
            return
        self._log_chars += len(message)
        if self._log_chars > self.settings.log_limit_chars:
            self._log_cut = True
            message = f"(log cut here: over {self.settings.log_limit_chars} characters)"
        self.add({"type": "log", "source": source, "message": message})

    def flush(self) -> None:
        # Holding the lock while writing keeps chunks in event order when two threads flush at once.
        with self._lock:
            if not self._buffer:
                return
            events, self._buffer = self._buffer, []
            self.store.append_events(self.key, events)
            self._last_flush = time.time()
            if self.first_event_at is None:
                self.first_event_at = self._last_flush

    def flush_if_due(self) -> None:
        if time.time() - self._last_flush >= self.settings.flush_every_s:
            self.flush()


class OutputCapture:
    """Tee file descriptors 1 and 2 into a sink while a run goes (what the process prints stays visible)."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []

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

    def __exit__(self, *exc: Any) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # closes our pipe's write end: the pump sees end of file
        for thread in self._threads:
            # A child process the engine started may still hold the pipe; do not wait for it forever.
            thread.join(timeout=2.0)
        for saved in self._saved.values():
            os.close(saved)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]


class Worker:
    """Claims and runs specs until stopped (SIGTERM/SIGINT), or until idle when ``exit_when_idle``."""

    def __init__(self, store: Store, *, engine: str = DEFAULT_ENGINE, checkpoint_every: int | None = None,
                 exit_when_idle: bool = False, max_runs: int = 0, threads: int = 0) -> None:
        self.store = store
        self.threads = threads  # torch threads per run; 0: the cores divided among this host's workers
        self.settings = store.settings
        self.engine_name = engine
        self.checkpoint_every = self.settings.checkpoint_every if checkpoint_every is None else checkpoint_every
        self.exit_when_idle = exit_when_idle
        self.max_runs = max_runs
        self.pid = os.getpid()
        self.stop_reason: str | None = None  # "interrupted" once SIGTERM/SIGINT arrived
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._current: tuple[Claim, EventSink] | None = None
        self._lost = False  # the run was taken from us (resumed elsewhere after a false "dead")
        self.engine: Any = None
        self.engine_error = ""
        self.state = "starting"  # "idle" once the engine and torch are imported (a warm worker)

    # ------------------------------------------------------------------------------------ signals
    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Finish the current step, checkpoint and record `interrupted` (the engine does that when
        # should_stop says so); an idle worker just leaves its loop.
        self.stop_reason = "interrupted"
        self._wake.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    # ---------------------------------------------------------------------------------- heartbeat
    def _heartbeat_loop(self) -> None:
        while not self._halt.wait(self.settings.heartbeat_every_s):
            try:
                self.beat()
            except Exception as exc:  # a busy disk must not kill the heartbeat thread
                print(f"heartbeat failed: {exc!r}", file=sys.__stderr__)

    def beat(self) -> None:
        current = self._current
        if current is None:
            self.store.worker_heartbeat(self.pid, state="stopping" if self.stop_reason else self.state)
            return
        claim, sink = current
        self.store.worker_heartbeat(self.pid, state="running", run=claim.key)
        if not self.store.heartbeat(claim.key, claim.attempt, pid=self.pid, step=sink.step,
                                    total_steps=sink.total_steps, loss=sink.loss):
            self._lost = True
        sink.flush_if_due()

    # ----------------------------------------------------------------------------------- the loop
    def serve(self) -> int:
        """Run until stopped; returns the number of runs handled."""
        self.store.worker_heartbeat(self.pid, state="starting")
        beat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        beat.start()
        handled = 0
        try:
            # Import the engine (and torch) before the first claim: a warm worker starts runs at once.
            try:
                self.engine = importlib.import_module(self.engine_name)
            except Exception:
                # Keep serving: each claimed run then fails with this traceback in its log, which the
                # page shows, instead of runs waiting forever for a worker that keeps dying.
                self.engine_error = traceback.format_exc()
                print(f"worker {self.pid}: cannot import the engine {self.engine_name}:\n"
                      f"{self.engine_error}", file=sys.stderr, flush=True)
            self._warm_up()
            self.state = "idle"
            self.store.worker_heartbeat(self.pid, state="idle")
            print(f"worker {self.pid}: ready (store {self.store.root})", flush=True)
            empty_seq: int | None = None
            last_reap = last_full_claim = 0.0
            while self.stop_reason is None:
                now = time.time()
                if now - last_reap >= self.settings.reap_every_s:
                    self.store.reap()
                    last_reap = now
                seq = self.store.queue_seq()
                # Only take the lock when something was pushed since the queue was last seen empty
                # (and now and then anyway, as a safety net).
                if seq != empty_seq or now - last_full_claim >= 5.0:
                    last_full_claim = now
                    job = self.store.claim_job(self.pid)
                    if job is not None:
                        self.run_job(job)
                        continue
                    claim = self.store.claim(self.pid)
                    if claim is not None:
                        self.run_claim(claim)
                        handled += 1
                        if self.max_runs and handled >= self.max_runs:
                            break
                        continue
                    empty_seq = seq
                if self.exit_when_idle:
                    break
                self._wake.wait(self.settings.poll_every_s)
        finally:
            self._halt.set()
            beat.join(timeout=5)
            self.store.unregister_worker(self.pid)
            print(f"worker {self.pid}: stopped after {handled} run(s)", flush=True)
        return handled

    def _warm_up(self) -> None:
        """Import what every run needs (torch, transformers) now, so a submitted run starts at once.

        The engine imports them lazily (its module stays light for the pages' spec resolution); a
        ``warm_up()`` of the engine's own, where it has one, says best what to load.
        """
        if self.engine is None:
            return
        hook = getattr(self.engine, "warm_up", None)
        names = () if hook else ("torch", "transformers", "labcore.train", "labcore.models", "labcore.protocols")
        try:
            if hook:
                hook()
            for name in names:
                importlib.import_module(name)
        except Exception:
            # Not fatal here: the first run meets the same error and records it in its log.
            print(f"worker {self.pid}: warm-up failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)

    def _engine_options(self) -> dict[str, Any]:
        """Threads for this run: the machine's cores shared by the workers alive on it.

        torch uses every core by default; two workers doing so on two cores run far slower than two
        workers with one thread each (oversubscription), so the cores are divided.
        """
        if "threads" not in inspect.signature(self.engine.iter_run).parameters:
            return {}
        if self.threads:
            return {"threads": self.threads}
        from labcore.store import HOST

        local = sum(1 for w in self.store.workers() if w.get("host") == HOST) or 1
        return {"threads": max(1, (os.cpu_count() or 1) // local)}

    def _should_stop(self, claim: Claim) -> str | None:
        if self.store.cancel_requested(claim.key, claim.attempt):
            return "cancelled"
        if self.stop_reason or self._lost:
            return "interrupted"
        return None

    def run_job(self, job: dict) -> str:
        """Run one analysis job (attention maps of a finished run); its errors land in the job record."""
        try:
            from labcore.analysis.attention import compute_attention

            compute_attention(self.store, job["key"], job["split"], job["index"])
            self.store.finish_job(job["id"], "done")
            return "done"
        except LabError as exc:
            self.store.finish_job(job["id"], "failed", str(exc))
        except Exception:
            self.store.finish_job(job["id"], "failed", traceback.format_exc())
        return "failed"

    def run_claim(self, claim: Claim) -> str:
        """Run one claimed spec to its end; returns the status recorded."""
        sink = EventSink(self.store, claim.key, self.settings)
        self._current = (claim, sink)
        self._lost = False
        status, result, error, trace = "failed", None, "", ""
        try:
            with OutputCapture(sink):
                try:
                    if self.engine is None:
                        raise RuntimeError(f"the engine {self.engine_name} could not be imported:\n"
                                           f"{self.engine_error}")
                    spec = make_spec(**claim.spec)
                    claim.workdir.mkdir(parents=True, exist_ok=True)
                    options = self._engine_options()
                    events = self.engine.iter_run(spec, workdir=claim.workdir,
                                                  should_stop=lambda: self._should_stop(claim),
                                                  resume=claim.resume, checkpoint_every=self.checkpoint_every,
                                                  **options)
                    for event in events:
                        if event.get("type") == "result":
                            result = event.get("record") or {}
                            status = result.get("status", "done")
                        else:
                            sink.add(event)
                    if result is None:
                        error = "the engine stopped without a result; the run's log may say why"
                except LabError as exc:
                    error = str(exc)
                    sink.log(error, "error")
                except Exception as exc:
                    trace = traceback.format_exc()
                    error = f"{type(exc).__name__}: {exc} (the traceback is in the run's log)"
                    sink.log(trace, "traceback")
        finally:
            if status not in ("done", "diverged", "cancelled", "interrupted", "failed"):
                error = error or f"the engine reported an unknown status {status!r}"
                status = "failed"
            metrics = (result or {}).get("metrics")
            sink.add({"type": "result", "status": status, "metrics": metrics, "error": error})
            sink.flush()
            if not self._lost:
                self.store.finish(claim.key, claim.attempt, status, result=result, error=error, traceback=trace)
            self._current = None
        print(f"worker {self.pid}: {claim.key} {status}" + (f" ({error})" if error else ""), flush=True)
        return status


# ------------------------------------------------------------------------------------- process control
def worker_command(store: Store, *extra: str) -> list[str]:
    """The argv that starts one worker process on ``store``."""
    return [sys.executable, "-m", "labcore.worker", "--store", str(store.root), *extra]


def start_worker(store: Store, *, new_session: bool = True, extra_args: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start a worker process in the background; its output goes to ``<store>/logs/worker-<pid>.log``.

    ``new_session`` (the app's choice) lets the worker outlive the page and the server that started it;
    whoever starts one must also stop it (:func:`stop_workers`).
    """
    store.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = store.logs_dir / f"worker-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(worker_command(store, *extra_args), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, cwd=str(paths.REPO_ROOT),
                                   start_new_session=new_session, env=_child_env())
    store.register_worker(process.pid, state="starting", command=" ".join(worker_command(store, *extra_args)))
    _CHILDREN.append(process)
    return process


_CHILDREN: list[subprocess.Popen] = []


def reap_children() -> None:
    """Collect exit codes of workers this process started, so they do not linger as zombies."""
    for process in list(_CHILDREN):
        if process.poll() is not None:
            _CHILDREN.remove(process)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # The worker must find this checkout's labcore whatever the caller's working directory was.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TRANSFERLAB_CACHE", str(paths.cache_dir()))
    return env


def _is_worker_process(pid: int) -> bool:
    # A pid can be reused by an unrelated process after the worker died: only signal ours.
    try:
        return b"labcore" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()  # no /proc: trust the registration


def stop_workers(store: Store, *, timeout_s: float = 30.0) -> list[int]:
    """SIGTERM every registered worker on this host, wait for them, SIGKILL the ones still there.

    A worker in the middle of a run finishes its step, checkpoints and records ``interrupted`` first;
    ``timeout_s`` bounds that wait. Returns the pids that were signalled.
    """
    from labcore.store import HOST

    pids = [w["pid"] for w in store.workers(alive_only=True)
            if w.get("host") == HOST and _is_worker_process(w["pid"])]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        reap_children()
        if all(process_state(pid) in ("gone", "zombie") for pid in pids):
            break
        time.sleep(0.1)
    for pid in pids:
        if process_state(pid) == "alive":
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    reap_children()
    for pid in pids:
        store.unregister_worker(pid)
    store.reap()
    return pids


def supervise(store: Store, count: int, extra_args: tuple[str, ...] = ()) -> int:
    """Run ``count`` worker processes in this process group until they exit; forward SIGTERM/SIGINT."""
    children = [subprocess.Popen(worker_command(store, *extra_args), env=_child_env()) for _ in range(count)]

    def forward(signum: int, _frame: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return max(child.wait() for child in children)


# ------------------------------------------------------------------------------------------ command line
def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="run N worker processes (each claims its own specs)")
    parser.add_argument("--stop", action="store_true", help="stop the running workers (by pid) and exit")
    parser.add_argument("--detach", action="store_true",
                        help="start the worker(s) in the background, in their own session, and return")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="with --stop: seconds to let a run checkpoint before SIGKILL (default 30)")
    parser.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    parser.add_argument("--checkpoint-every", type=int, default=None, metavar="STEPS",
                        help=f"steps between resume checkpoints (default {StoreSettings.checkpoint_every})")
    parser.add_argument("--threads", type=int, default=0, metavar="N",
                        help="torch threads per run (default: the cores divided among the workers alive here)")
    parser.add_argument("--exit-when-idle", action="store_true", help="exit once the queue is empty")
    parser.add_argument("--max-runs", type=int, default=0, help="exit after this many runs (0: no limit)")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, help=argparse.SUPPRESS)  # module with iter_run


def run_worker_command(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    if args.stop:
        pids = stop_workers(store, timeout_s=args.timeout)
        print(f"stopped {len(pids)} worker(s)" + (f": {', '.join(map(str, pids))}" if pids else ""))
        return 0
    extra: list[str] = []
    if args.checkpoint_every is not None:
        extra += ["--checkpoint-every", str(args.checkpoint_every)]
    if args.exit_when_idle:
        extra.append("--exit-when-idle")
    if args.max_runs:
        extra += ["--max-runs", str(args.max_runs)]
    if args.threads:
        extra += ["--threads", str(args.threads)]
    if args.engine != DEFAULT_ENGINE:
        extra += ["--engine", args.engine]
    if args.workers < 1:
        raise LabError(f"--workers must be at least 1, got {args.workers}")
    if args.detach:
        started = [start_worker(store, extra_args=tuple(extra)).pid for _ in range(args.workers)]
        print(f"started {len(started)} worker(s): {', '.join(map(str, started))}; "
              f"stop them with `python -m labcore worker --stop`")
        return 0
    if args.workers > 1:
        return supervise(store, args.workers, tuple(extra))
    worker = Worker(store, engine=args.engine, checkpoint_every=args.checkpoint_every,
                    exit_when_idle=args.exit_when_idle, max_runs=args.max_runs, threads=args.threads)
    worker.install_signal_handlers()
    worker.serve()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labcore.worker", description=__doc__.split("\n")[0])
    add_worker_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_worker_command(args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
