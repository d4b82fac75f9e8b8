"""Is the process behind a heartbeat still there? One answer for jobs and workers alike."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

HOST = socket.gethostname()


def process_state(pid: int | None) -> str:
    """``alive`` | ``zombie`` | ``gone`` | ``unknown`` for a local pid.

    ``os.kill(pid, 0)`` succeeds on a zombie (an exited child its parent has not reaped), so Linux's
    ``/proc/PID/stat`` state letter decides; ``unknown`` where there is no /proc (then the heartbeat
    alone decides).
    """
    if not pid or pid <= 0:
        return "gone"
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return "gone"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "unknown"
        return "unknown"
    except OSError:
        return "unknown"
    # "pid (comm) S ...": comm may hold spaces and parentheses, so split after the last ")".
    state = text.rsplit(")", 1)[-1].split()[0]
    return "zombie" if state in ("Z", "X", "x") else "alive"


def owner_gone(host: str | None, pid: int | None) -> bool:
    """True when the owner is a process on this host that has exited (a remote one cannot be checked)."""
    return host == HOST and process_state(pid) in ("gone", "zombie")


def why_dead(host: str | None, pid: int | None, last_beat: float, stale_after_s: float,
             now: float | None = None) -> str | None:
    """None while the owner counts as alive, else the reason it does not (for the record's error).

    Alive means: its last heartbeat is at most ``stale_after_s`` old and, on this host, its pid is a
    live, non-zombie process.
    """
    now = time.time() if now is None else now
    if host == HOST:
        state = process_state(pid)
        if state in ("gone", "zombie"):
            return f"worker pid {pid} is {state}"
    age = now - (last_beat or 0.0)
    if age > stale_after_s:
        return f"no heartbeat for {age:.0f} s"
    return None
