"""The worker registry: ``worker/<pid>`` with its state and heartbeat, listed in ``index/workers``."""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Callable, ContextManager

import diskcache

from labcore.store.errors import StoreLocked
from labcore.store.liveness import HOST, why_dead
from labcore.store.settings import StoreSettings
from labcore.store.table import IndexList


class WorkerRegistry:
    def __init__(self, cache: diskcache.Cache, settings: StoreSettings,
                 transaction: Callable[..., ContextManager[None]]) -> None:
        self.cache = cache
        self.settings = settings
        self.transaction = transaction  # the store's write lock
        self.index = IndexList(cache, "workers")

    def register(self, pid: int, *, state: str = "starting", command: str = "", role: str = "worker",
                 gpu: str = "") -> None:
        """``gpu``: the CUDA_VISIBLE_DEVICES its supervisor gave it ("" where it inherited the machine's)."""
        now = time.time()
        with self.transaction():
            self.cache.set(f"worker/{pid}", {"pid": pid, "host": HOST, "state": state, "run": None,
                                             "started_at": now, "t": now, "command": command, "role": role,
                                             "gpu": gpu})
            self.index.add(pid)

    def heartbeat(self, pid: int, *, state: str, job: str | None = None, gpu: str | None = None) -> None:
        info = self.cache.get(f"worker/{pid}") or {"pid": pid, "host": HOST, "started_at": time.time(),
                                                   "command": ""}
        if gpu is not None:
            info = dict(info, gpu=gpu)
        if pid not in self.index.items():
            with self.transaction():
                self.index.add(pid)
        # "run" names the job it works on (the key kept its first name: pages read it).
        self.cache.set(f"worker/{pid}", dict(info, state=state, run=job, t=time.time()))

    def unregister(self, pid: int, *, wait_s: float | None = None) -> None:
        with self.transaction(wait_s):
            self.cache.delete(f"worker/{pid}")
            self.index.remove(pid)

    def alive(self, info: dict[str, Any]) -> bool:
        # A worker that is still importing torch has not heartbeated yet: it gets a longer grace.
        stale = self.settings.worker_start_grace_s if info.get("state") == "starting" else self.settings.stale_after_s
        return why_dead(info.get("host"), info.get("pid"), info.get("t", 0.0), stale) is None

    def list(self, *, alive_only: bool = True) -> list[dict[str, Any]]:
        """Registered workers (each with ``alive``); dead registrations are dropped on the way."""
        out = []
        for pid in self.index.items():
            info = self.cache.get(f"worker/{pid}")
            alive = info is not None and self.alive(info)
            if not alive:
                try:
                    self.unregister(pid, wait_s=self.settings.reap_wait_s)
                except (OSError, sqlite3.OperationalError, StoreLocked):
                    pass  # a full disk, or a writer holding the lock: tidy up on a later read
            if info is not None and (alive or not alive_only):
                out.append(dict(info, alive=alive))
        return out
