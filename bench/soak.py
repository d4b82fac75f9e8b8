"""A term of faults, compressed: the lab under mixed work while every one of its processes is killed at random.

For ``--minutes`` (default 30) three requesters (:mod:`soak_work`) keep submitting tiny runs, attention maps,
analyses and pretrainings to two local workers and a Ray executor on one store, with the app server up and
``--students`` (default 30) students watching its Home page through clients that speak Streamlit's protocol
(:mod:`st_clients`, no browsers). Every 10-40 s (seeded) one process is SIGKILLed: a worker (idle or in the
middle of a job), the app server, a Ray task, the Ray executor, or a command-line process in the middle of a
submit or a delete. Once the disk under the store is filled for a minute (where the store can sit on a
filesystem of its own: a tmpfs, as root); once a finished job's record file is cut short; once everything is
killed and started again. A keeper starts what is missing after each kill, and the requesters resume their
jobs that a kill left dead, as people would.

At the end the work is drained (stopped jobs resumed), what is left is cancelled with a reason, every process
is stopped, and the soak checks: ``store check`` clean (or ``store repair``, each repair named); every job it
submitted accounted for against its own log; no curve point lost or doubled among the finished jobs; the
server's and the workers' memory over the soak; and no lab process left running. It prints the figures and
ends non-zero if anything was lost.

    python bench/soak.py --minutes 30
    python bench/soak.py --minutes 30 --no-faults   # nothing killed: memory over each process's whole life
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

FAULTS = ("worker", "busy worker", "server", "ray task", "ray executor", "cli")
FILL_S = 60.0  # how long the disk stays full


def _prepare(root: Path) -> tuple[Path, str]:
    """The soak's cache (assets and built data sets shared from the lab's own cache, models its own, so its
    pretrainings write no model into the lab) and its store, on a tmpfs of its own where one can be mounted."""
    from labcore import paths

    shared = paths.cache_dir()
    cache = root / "cache"
    (cache / "store").mkdir(parents=True, exist_ok=True)
    for name in ("assets", "datasets"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(shared / name)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536m,mode=0700", "tmpfs", str(cache / "store")],
                             capture_output=True, text=True)
    return cache, "" if mounted.returncode == 0 else (mounted.stderr.strip() or "mount refused")


class Soak:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        from soak_lab import Lab
        from soak_work import Log

        from labcore.store import Store

        self.args = args
        self.root = root
        self.rng = random.Random(args.seed)
        self.cache, self.no_mount = _prepare(root)
        os.environ["TRANSFERLAB_CACHE"] = str(self.cache)
        self.store = Store(self.cache / "store")
        self.lab = Lab(self.store, self.cache, port=args.port, ray=not args.no_ray)
        self.log = Log(root / "soak-log.jsonl")
        self.kills: dict[str, int] = {}
        self.halt = threading.Event()
        self.requesters: list = []
        self.room: list = []  # the students' stats, once they are done
        self.special = ["fill disk", "cut a record", "restart everything"]
        self.rng.shuffle(self.special)

    # -------------------------------------------------------------------------------------------- faults
    def fault(self, name: str) -> str:
        """Carry out one fault; what it hit ("" when there was nothing of that kind to hit)."""
        from soak_lab import RAY_ROLE, kill

        lab, store = self.lab, self.store
        if name in ("worker", "busy worker"):
            workers = store.workers(role="worker")
            if name == "busy worker":
                workers = [w for w in workers if w.get("run")]
            return f"worker {w['pid']}" if workers and kill((w := self.rng.choice(workers))["pid"]) else ""
        if name == "server":
            return f"server {lab.server.pid}" if lab.server and kill(lab.server.pid) else ""
        if name == "ray executor":
            pumps = lab.alive_workers(RAY_ROLE)
            return f"ray executor {pumps[0]}" if pumps and kill(pumps[0]) else ""
        if name == "ray task":
            tasks = [r for r in store.jobs(status="running") if r.task_pid]
            return f"ray task {r.task_pid} of {r.key[:8]}" if tasks and kill(
                (r := self.rng.choice(tasks)).task_pid) else ""
        if name == "cli":
            return self._kill_cli()
        if name == "fill disk":
            return self._fill_disk()
        if name == "cut a record":
            done = [r for r in store.jobs(status="done") if (store.workdir(r.key) / "record.json").exists()]
            if not done:
                return ""
            path = store.workdir(self.rng.choice(done).key) / "record.json"
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
            return f"cut {path.parent.name[:8]}/record.json to half"
        if name == "restart everything":
            from soak_lab import lab_pids

            hit = [pid for pid in lab_pids(self.cache) if kill(pid)]
            return f"killed {len(hit)} processes"
        raise ValueError(name)

    def _kill_cli(self) -> str:
        """Kill the next command-line process a requester starts, 0.2-2 s in: inside its submit or delete."""
        deadline = time.time() + 60
        while time.time() < deadline and not self.halt.is_set():
            for requester in self.requesters:
                with requester.cli.lock:
                    process, what = requester.cli.process, requester.cli.what
                if process is not None and process.poll() is None:
                    time.sleep(self.rng.uniform(0.2, 2.0))
                    if process.poll() is None:
                        process.kill()
                        return f"{what} command {process.pid} of {requester.who}"
            time.sleep(0.05)
        return ""

    def _fill_disk(self) -> str:
        if self.no_mount:
            return ""
        ballast = self.store.root / "ballast.bin"
        block = b"\0" * 2**20
        with open(ballast, "wb") as out:
            try:
                while True:
                    out.write(block)
                    out.flush()
            except OSError:
                pass
        self.log.write(action="fault", fault="disk full", mb=ballast.stat().st_size // 2**20)
        time.sleep(FILL_S)
        ballast.unlink()
        return f"filled the store's disk for {FILL_S:.0f} s"

    # ---------------------------------------------------------------------------------------------- run
    def run(self) -> int:
        from soak_work import Requester
        from st_clients import StudentClient

        args = self.args
        self.log.write(action="start", minutes=args.minutes, seed=args.seed, no_mount=self.no_mount)
        self.lab.keep_up()
        self.requesters = [Requester(i, self.store.root, self.log, self.halt, args.seed) for i in range(3)]
        for requester in self.requesters:
            requester.start()
        end = time.time() + 60 * args.minutes
        room = [StudentClient(f"http://127.0.0.1:{args.port}") for _ in range(args.students)]
        students = threading.Thread(target=self._watch, args=(room, end), name="students", daemon=True)
        students.start()
        specials_at = sorted(self.rng.uniform(0.15, 0.8) * 60 * args.minutes + time.time() for _ in self.special)
        # --no-faults: the same work and students with nothing killed, so that each process lives the whole soak and
        # its memory is read over all of it (a fault's restart resets what a process has grown).
        next_fault = math.inf if args.no_faults else time.time() + self.rng.uniform(10, 40)
        while time.time() < end:
            time.sleep(1.0)
            self.lab.sample_memory()
            started = self.lab.keep_up()
            if started:
                self.log.write(action="keeper", started=started)
            if time.time() >= next_fault:
                name = self.special.pop(0) if specials_at and time.time() >= specials_at[0] else self.rng.choice(FAULTS)
                if specials_at and name in ("fill disk", "cut a record", "restart everything"):
                    specials_at.pop(0)
                hit = self.fault(name)
                if hit:
                    self.kills[name] = self.kills.get(name, 0) + 1
                self.log.write(action="fault", fault=name, hit=hit)
                print(f"{time.strftime('%H:%M:%S')} {name}: {hit or 'nothing to hit'}", flush=True)
                next_fault = time.time() + self.rng.uniform(10, 40)
        self.halt.set()
        for requester in self.requesters:
            requester.join(timeout=300)
        students.join(timeout=180)
        return self.finish(room)

    def _watch(self, room: list, end: float) -> None:
        """The students, on their own event loop, until the end (their clients reconnect through kills)."""
        self.room = asyncio.run(self._gather(room, end))

    @staticmethod
    async def _gather(room: list, end: float) -> list:
        return list(await asyncio.gather(*(client.run(end) for client in room)))

    def finish(self, room: list) -> int:
        from soak_report import close_out

        return close_out(self, room)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--port", type=int, default=8631)
    parser.add_argument("--no-ray", action="store_true", help="local workers only (where Ray is not installed)")
    parser.add_argument("--keep", action="store_true", help="keep the soak's folder (its store and log) at the end")
    parser.add_argument("--no-faults", action="store_true",
                        help="kill nothing: the same work, to read each process's memory over the whole soak")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="transferlab-soak-"))
    print(f"soak folder {root}; {args.minutes:g} minutes, seed {args.seed}", flush=True)
    try:
        return Soak(args, root).run()
    finally:
        store = root / "cache" / "store"
        if args.keep:  # the store sits on a tmpfs that goes with the unmount: keep a copy beside the log
            shutil.copytree(store, root / "store", symlinks=True, dirs_exist_ok=True)
        subprocess.run(["umount", "-l", str(store)], capture_output=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
