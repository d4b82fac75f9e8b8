"""The soak's requesters: people who keep asking the lab for work, through its Python API and its command line.

Each requester (a thread with its own store handle and its own seeded generator) submits a mix of tiny
training runs, attention maps of its finished runs, analyses and MLM pretrainings, resumes its jobs that a
kill left dead or interrupted, and now and then deletes one of its finished leaves (an attention or an
analysis job nothing depends on) with ``python -m labcore delete --yes``. Some runs are submitted through
``python -m labcore submit`` too: those command-line processes are what a fault may kill half-way through.
Every request and every answer goes into the soak's log, one JSON line each; the log is what the store is
checked against at the end.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labcore import jobs
from labcore.errors import LabError
from labcore.jobs.analyses import ModelRef, SimilaritySpec
from labcore.jobs.attention import AttentionSpec
from labcore.pretrain.spec import PretrainSpec
from labcore.runspec import make_spec
from labcore.store import STOPPED, Store, health

REPO = Path(__file__).resolve().parent.parent
BITS = (("n_train", 64), ("n_validation", 32), ("n_test", 32))
LISTOPS = (("n_train", 48), ("n_validation", 16), ("n_test", 16), ("max_length", 24))
MIX = (("run", 0.40), ("cli-run", 0.15), ("attention", 0.15), ("analysis", 0.15), ("pretrain", 0.10),
       ("delete", 0.05))
MAX_WAITING = 10  # a requester holds back while this many of its jobs wait: the queue must drain between kills


class Log:
    """The soak's log: appended from every thread, one JSON object a line, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1)

    def write(self, **entry: Any) -> None:
        with self._lock:
            self._file.write(json.dumps(dict(entry, t=round(time.time(), 3)), default=str) + "\n")


@dataclass
class CliTarget:
    """A requester's command-line process now running, for a fault to kill half-way."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    process: subprocess.Popen | None = None
    what: str = ""


class Requester(threading.Thread):
    def __init__(self, index: int, root: Path, log: Log, stop: threading.Event, seed: int) -> None:
        super().__init__(name=f"requester-{index}", daemon=True)
        self.who = f"requester-{index}"
        self.root = root  # the store folder
        self.log = log
        self.halt = stop
        self.rng = random.Random(seed * 1000 + index)
        self.counter = index * 100_000  # fresh seeds: every submission is a new job
        self.cli = CliTarget()
        self.mine: list[tuple[str, str]] = []  # (key, kind) of what it submitted
        self.errors = 0

    # --------------------------------------------------------------------------------------------- loop
    def run(self) -> None:
        store = Store(self.root)
        try:
            while not self.halt.wait(self.rng.uniform(1.0, 4.0)):
                try:
                    self._resume_stopped(store)
                    if self._waiting(store) < MAX_WAITING:
                        self._act(store, self._choose())
                except (LabError, OSError) as exc:  # the store under a fault: say it, go on as a person would
                    self.errors += 1
                    self.log.write(who=self.who, action="error", error=f"{type(exc).__name__}: {exc}"[:300])
        finally:
            store.close()

    def _choose(self) -> str:
        names, weights = zip(*MIX)
        return self.rng.choices(names, weights)[0]

    def _waiting(self, store: Store) -> int:
        records = store.table.get_many([k for k, _ in self.mine])
        return sum(1 for r in records.values() if r and r["status"] in ("queued", "running"))

    def _resume_stopped(self, store: Store) -> None:
        """Resume what a kill stopped, and what a full disk failed once there is room again (as its error says)."""
        records = store.table.get_many([k for k, _ in self.mine])
        room = health.free_mb(store.root) > 4 * store.settings.min_free_mb
        for key, record in records.items():
            if not record:
                continue
            now = store.get(key)
            if now.status in ("dead", "interrupted") or (
                    room and now.status == "failed" and now.error.startswith(health.DISK_FULL)):
                answer = store.resume(key, self.who)
                self.log.write(who=self.who, action="resume", key=key, answer=answer.outcome)

    def _act(self, store: Store, action: str) -> None:
        self.counter += 1
        n = self.counter
        if action == "cli-run":
            self._cli_submit(n)
            return
        if action == "delete":
            self._cli_delete(store)
            return
        spec = self._spec(action, n, store)
        if spec is None:
            return
        submission = store.submit(jobs.new_job(spec), who=self.who)
        self.mine.append((submission.key, action))
        self.log.write(who=self.who, action="submit", kind=action, key=submission.key, answer=submission.outcome)

    def _spec(self, action: str, n: int, store: Store) -> Any:
        if action == "run":
            return make_spec(model="tiny:bert", discipline="bits-xor", discipline_params=BITS, seed=n,
                             batch_size=16, eval_every=10, max_steps=self.rng.choice((30, 60, 90)),
                             precision="fp32")
        if action == "attention":
            finished = [k for k, kind in self.mine if kind in ("run", "cli-run") and (r := store.get(k)) is not None
                        and r.status == "done"]
            return AttentionSpec(run=self.rng.choice(finished), index=n % 4) if finished else None
        if action == "analysis":
            return SimilaritySpec(models=(ModelRef(model="tiny:bert"), ModelRef(model="tiny:bert", init="random",
                                                                                 seed=n)),
                                  examples=16, discipline="listops", discipline_params=LISTOPS)
        return PretrainSpec(corpus="flat", size="tiny", steps=self.rng.choice((20, 40)), batch_size=8,
                            sequences=64, precision="fp32", seed=n, name=f"soak-{n}")

    # ------------------------------------------------------------------------------------ command line
    def _command(self, what: str, args: list[str]) -> tuple[int, str]:
        process = subprocess.Popen([sys.executable, "-m", "labcore", *args, "--store", str(self.root)], cwd=REPO,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with self.cli.lock:
            self.cli.process, self.cli.what = process, what
        try:
            out, _ = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        with self.cli.lock:
            self.cli.process = None
        return process.returncode, out

    def _cli_submit(self, n: int) -> None:
        rc, out = self._command("submit", [
            "submit", "--model", "tiny:bert", "--discipline", "bits-xor", *sum((["--dparam", f"{k}={v}"]
                                                                                 for k, v in BITS), []),
            "--seed", str(n), "--batch-size", "16", "--eval-every", "10", "--max-steps", "60",
            "--precision", "fp32", "--json"])
        key = ""
        if rc == 0:
            try:
                key = json.loads(out.strip().splitlines()[-1])["key"]
            except (ValueError, KeyError, IndexError):
                key = ""
        if key:
            self.mine.append((key, "cli-run"))
        # A killed submit (rc < 0) may or may not have queued its job: the log says so and names no key.
        self.log.write(who=self.who, action="submit" if key else "cli-submit", kind="cli-run", key=key, rc=rc,
                       seed=n, output=out[-300:])

    def _cli_delete(self, store: Store) -> None:
        leaves = [(k, kind) for k, kind in self.mine if kind in ("attention", "analysis")
                  and (r := store.get(k)) is not None and r.status == "done"]
        if not leaves:
            return
        key, kind = self.rng.choice(leaves)
        rc, out = self._command("delete", ["delete", key, "--yes"])
        if rc == 0:
            self.mine.remove((key, kind))
        self.log.write(who=self.who, action="delete", key=key, rc=rc, output=out[-300:])


def killed_submits(log: list[dict[str, Any]], store: Store) -> list[str]:
    """Keys a killed ``submit`` command left queued (found by its seed): they are the soak's jobs too."""
    out = []
    for entry in log:
        if entry.get("action") == "cli-submit" and entry.get("rc", 0) != 0:
            spec = make_spec(model="tiny:bert", discipline="bits-xor", discipline_params=BITS, seed=entry["seed"],
                             batch_size=16, eval_every=10, max_steps=60, precision="fp32")
            key = jobs.key_of(spec)
            if store.get(key) is not None:
                out.append(key)
    return out


__all__ = ["Log", "Requester", "STOPPED", "killed_submits"]
