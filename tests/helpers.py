"""Small helpers shared by tests that start real server processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process_group(process: subprocess.Popen, timeout_s: float = 20) -> None:
    """SIGTERM the process's whole group (it was started with start_new_session), SIGKILL if it lingers."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for(what: str, predicate: Callable[[], object], timeout: float = 180.0, store=None):
    """Poll until predicate() is truthy; fail with `what` (and the store's jobs) after a long deadline."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    state = "" if store is None else "; jobs: " + ", ".join(f"{r.key[:8]} {r.status} {r.error}"
                                                             for r in store.jobs())
    raise AssertionError(f"timed out waiting for {what}{state}")


def share_assets(cache: Path) -> Path:
    """Link the test cache's fetched assets, built data sets and models into ``cache``, so an app or a store
    there finds them without fetching or building anything twice."""
    from labcore import paths

    shared = paths.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    for name in ("assets", "datasets", "models"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        if not (cache / name).exists():
            (cache / name).symlink_to(shared / name)
    return cache
