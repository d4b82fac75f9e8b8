"""The processes of a lab under soak, started and killed on demand: the app server, local workers, the Ray
executor (with its tasks), and the readings taken of them (resident memory, leftover processes).

Every process the soak starts carries ``TRANSFERLAB_CACHE=<the soak's cache>`` in its environment, so the
processes of this lab (and only those) are found again through ``/proc/PID/environ``, whoever started them
(the app server starts a worker of its own when jobs wait and none is alive).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from labcore.execution.lifetime import Lifetime  # noqa: E402
from labcore.execution.pool import start_worker, stop_workers  # noqa: E402
from labcore.store import Store, process_state  # noqa: E402

RAY_ROLE = "ray-executor"


def lab_pids(cache: Path) -> list[int]:
    """Every live process whose environment names this cache (the lab's own processes), but this one."""
    marker = f"TRANSFERLAB_CACHE={cache}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") and process_state(pid) == "alive":
                found.append(pid)
        except OSError:
            continue
    return found


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def memory_mb(pid: int) -> dict[str, float]:
    """The process's resident memory in MB (VmRSS) and its parts: anonymous (RssAnon: its own heap), file-backed
    (RssFile: libraries, mapped files) and shared (RssShmem: tmpfs files it maps, such as a store on a tmpfs). A
    page mapped twice counts twice. Empty where the process is gone."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[name] = int(value.split()[0]) / 1024
    except OSError:
        return {}
    return out


def kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


@dataclass
class Lab:
    """The lab's processes on one store; what is alive is read from the store and /proc, never assumed."""

    store: Store
    cache: Path
    port: int
    workers: int = 2
    ray: bool = True
    server: subprocess.Popen | None = None
    memory: dict[int, list[tuple[float, float, float]]] = field(default_factory=dict)  # pid -> (time, MB, anon MB)
    roles: dict[int, str] = field(default_factory=dict)  # pid -> "server" | "worker" | RAY_ROLE
    started_at: float = field(default_factory=time.time)

    # ---------------------------------------------------------------------------------------- starting
    def lifetime(self) -> Lifetime:
        return Lifetime(parent_pid=os.getpid())  # whatever happens to the soak, its workers go with it

    def start_server(self) -> None:
        env = dict(os.environ, TRANSFERLAB_CACHE=str(self.cache), PYTHONPATH=str(REPO))
        log = open(self.store.logs_dir / f"server-{time.strftime('%H%M%S')}.log", "ab")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(self.port),
             "--server.headless", "true"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.roles[self.server.pid] = "server"

    def alive_workers(self, role: str = "worker") -> list[int]:
        return [w["pid"] for w in self.store.workers(role=role) if process_state(w["pid"]) == "alive"]

    def keep_up(self) -> list[str]:
        """Start what is missing (two workers, the Ray executor, the server): what a lab's keeper does."""
        started = []
        self.store.logs_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(self.workers - len(self.alive_workers())):
            pid = start_worker(self.store, extra_args=("--checkpoint-every", "5"), lifetime=self.lifetime()).pid
            self.roles[pid] = "worker"
            started.append(f"worker {pid}")
        if self.ray and not self.alive_workers(RAY_ROLE):
            pid = start_worker(self.store, module="labcore.execution.ray_pump", role=RAY_ROLE,
                               extra_args=("--cpus", "1"), lifetime=self.lifetime()).pid
            self.roles[pid] = RAY_ROLE
            started.append(f"ray executor {pid}")
        if self.server is None or self.server.poll() is not None:
            self.start_server()
            started.append(f"server {self.server.pid}")
        return started

    # ----------------------------------------------------------------------------------------- stopping
    def stop_all(self) -> None:
        """Stop the claiming processes gently (their jobs checkpoint and end interrupted), then the server."""
        stop_workers(self.store, timeout_s=30)
        if self.server is not None and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGTERM)
            try:
                self.server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait()

    def leftovers(self, wait_s: float = 30.0) -> list[int]:
        """The lab's processes still alive after the stop (waited for a while: Ray's take a moment to go)."""
        deadline = time.time() + wait_s
        while True:
            left = lab_pids(self.cache)
            if not left or time.time() > deadline:
                return left
            time.sleep(1.0)

    # ------------------------------------------------------------------------------------------ readings
    def sample_memory(self) -> None:
        now = time.time() - self.started_at
        pids = set(self.alive_workers()) | set(self.alive_workers(RAY_ROLE))
        if self.server is not None and self.server.poll() is None:
            pids.add(self.server.pid)
        for pid in pids:
            mb = memory_mb(pid)
            if "VmRSS" in mb:
                self.memory.setdefault(pid, []).append((now, mb["VmRSS"], mb.get("RssAnon", mb["VmRSS"])))
                self.roles.setdefault(pid, "worker")

    def memory_growth(self, soak_s: float) -> list[tuple[str, int, float, float, float, float, float]]:
        """Per process sampled for at least a sixth of the soak (kills seldom let one live longer): (role, pid,
        minutes sampled, MB at a third of its samples, MB at the end, growth % over its last two thirds, growth %
        of its anonymous memory alone over the same time: what the process itself holds, without the pages of
        libraries and mapped files, which grow as a store it maps grows)."""
        rows = []
        for pid, series in self.memory.items():
            if len(series) < 6 or series[-1][0] - series[0][0] < soak_s / 6:
                continue
            _, third, anon_third = series[len(series) // 3]
            _, last, anon_last = series[-1]
            rows.append((self.roles.get(pid, "?"), pid, (series[-1][0] - series[0][0]) / 60, third, last,
                         100.0 * (last - third) / third, 100.0 * (anon_last - anon_third) / anon_third))
        return sorted(rows)
