"""Worker processes on this machine: start them in the background, stop them, supervise a few in the
foreground, and the ``python -m labcore worker`` command that does each. The claim loop itself is
:mod:`labcore.execution.worker`; this module only manages processes (and imports no torch).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from labcore.execution import lifetime as lifetimes
from labcore.execution.lifetime import FOR_SOMEONE, Lifetime
from labcore.machine import device as devices
from labcore import paths
from labcore.store import HOST, Store, StoreSettings, process_state


def worker_command(store: Store, *extra: str, module: str = "labcore.execution.worker") -> list[str]:
    """The argv that starts one worker process (or another claiming process, ``module``) on ``store``."""
    return [sys.executable, "-m", module, "--store", str(store.root), *extra]


def start_worker(store: Store, *, new_session: bool = True, extra_args: tuple[str, ...] = (),
                 module: str = "labcore.execution.worker", role: str = "worker",
                 lifetime: Lifetime = FOR_SOMEONE) -> subprocess.Popen:
    """Start a worker process in the background; its output goes to ``<store>/logs/<role>-<pid>.log``.

    ``new_session`` (the app's choice) lets the worker outlive the page and the server that started it;
    whoever starts one must also stop it (:func:`stop_workers`), or give it a ``lifetime`` that ends it (by
    default it leaves after half an hour without a job). ``module`` and ``role`` start another kind of
    claiming process the same way (the Ray executor: ``labcore.execution.ray_pump``, ``ray-executor``).
    """
    store.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = store.logs_dir / f"{role}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}.log"
    command = worker_command(store, *extra_args, *lifetime.arguments(), module=module)
    gpu = next_gpu(store) if role == "worker" else None
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, cwd=str(paths.REPO_ROOT),
                                   start_new_session=new_session, env=_child_env(gpu))
    store.register_worker(process.pid, state="starting", command=" ".join(command), role=role, gpu=gpu or "")
    _CHILDREN.append(process)
    return process


_CHILDREN: list[subprocess.Popen] = []


def next_gpu(store: Store) -> str | None:
    """The GPU (a ``CUDA_VISIBLE_DEVICES`` name) for one more worker here: with several GPUs, the one the fewest
    alive workers on this host hold; None (it sees what this process sees) with one GPU or none."""
    held = [w.get("gpu", "") for w in store.workers(role="worker") if w.get("host") == HOST]
    return devices.least_used_gpu(held)


def reap_children() -> None:
    """Collect exit codes of workers this process started, so they do not linger as zombies."""
    for process in list(_CHILDREN):
        if process.poll() is not None:
            _CHILDREN.remove(process)


def _child_env(gpu: str | None = None) -> dict[str, str]:
    """The environment of a worker process; ``gpu`` (a CUDA_VISIBLE_DEVICES name) gives it that GPU alone."""
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    # The worker must find this checkout's labcore whatever the caller's working directory was.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TRANSFERLAB_CACHE", str(paths.cache_dir()))
    return env


def _processes_on(store: Store) -> list[int]:
    """The pids of this host's worker processes (``labcore.execution.worker``, ``labcore worker``) on ``store``
    (``--store ROOT`` in their command line), whoever started them and whatever the registry says: read from
    /proc, empty where there is none."""
    wanted = ["--store", str(store.root)]
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        claiming = argv[1:3] == ["-m", "labcore.execution.worker"] or (
            argv[1:4] == ["-m", "labcore", "worker"] and "--stop" not in argv)
        if claiming and any(argv[i:i + 2] == wanted for i in range(len(argv) - 1)):
            found.append(int(entry.name))
    return [pid for pid in found if pid != os.getpid()]


def _is_worker_process(pid: int) -> bool:
    # A pid can be reused by an unrelated process after the worker died: only signal ours.
    try:
        return b"labcore" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()  # no /proc: trust the registration


def stop_workers(store: Store, *, timeout_s: float = StoreSettings.stop_timeout_s) -> list[int]:
    """SIGTERM every registered worker on this host, wait for them, SIGKILL the ones still there.

    A worker in the middle of a run finishes its step, checkpoints and records ``interrupted`` first;
    ``timeout_s`` bounds that wait. Returns the pids that were signalled.
    """
    # Every worker process of this store on this host: the registered ones, even those whose registration looks
    # stale (a frozen one, one slow to start), the ones this process started, and any other worker process on
    # this store (started by the app's server, say) whose registration is gone. One missed would go on claiming
    # jobs after the stop.
    registered = [w["pid"] for w in store.workers(alive_only=False) if w.get("host") == HOST]
    started_here = [p.pid for p in _CHILDREN if p.poll() is None and str(store.root) in p.args]
    pids = sorted({pid for pid in registered + started_here + _processes_on(store)
                   if process_state(pid) in ("alive", "unknown") and _is_worker_process(pid)})
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
    """Run ``count`` worker processes in this process group until they exit; forward SIGTERM/SIGINT.

    With several GPUs each worker gets one (``CUDA_VISIBLE_DEVICES``), in turn
    (:func:`labcore.machine.device.worker_gpus`)."""
    children = [subprocess.Popen(worker_command(store, *extra_args), env=_child_env(gpu))
                for gpu in devices.worker_gpus(count)]

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
    parser.add_argument("--timeout", type=float, default=StoreSettings.stop_timeout_s,
                        help=f"with --stop: seconds to let a run checkpoint before SIGKILL "
                             f"(default {StoreSettings.stop_timeout_s:g})")
    parser.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")
    parser.add_argument("--checkpoint-every", type=int, default=None, metavar="STEPS",
                        help=f"steps between resume checkpoints (default {StoreSettings.checkpoint_every})")
    parser.add_argument("--threads", type=int, default=0, metavar="N",
                        help="torch threads per run (default: the cores divided among the workers alive here)")
    parser.add_argument("--exit-when-idle", action="store_true", help="exit once the queue is empty")
    parser.add_argument("--max-runs", type=int, default=0, help="exit after this many runs (0: no limit)")
    lifetimes.add_arguments(parser)
