"""What a soak proves at its end, from its own log and the store alone (pure functions, no processes).

* every job the soak submitted is accounted for: finished whole, waiting, cancelled with a reason, stopped
  (interrupted, failed) with its cause, or gone because the soak deleted it;
* the raw store agrees with the log: a job the log says was deleted is gone, every other one is there;
* no curve point lost or doubled among the finished jobs, as a reader sees them: each step event covers the
  steps ``step - steps + 1 .. step``; a resumed attempt starts again after its checkpoint, and the points an
  earlier attempt logged from there on are dropped (the stream's designed skip); what is left must cover
  ``1 .. steps_done`` once each.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

ACCOUNTED = {"done": "finished", "diverged": "finished", "queued": "waiting", "cancelled": "cancelled",
             "interrupted": "stopped", "failed": "failed"}


@dataclass
class Accounts:
    submitted: int = 0
    states: Counter = field(default_factory=Counter)  # how each submitted job ended (ACCOUNTED's words)
    unaccounted: list[str] = field(default_factory=list)  # a job with no acceptable end: key and why
    disagree: list[str] = field(default_factory=list)  # the store and the log say different things
    points_lost: int = 0
    points_doubled: int = 0
    curves_checked: int = 0
    curve_problems: list[str] = field(default_factory=list)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The soak's log: one JSON object a line (a line a kill cut short is skipped)."""
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def coverage(events: Iterable[dict[str, Any]]) -> tuple[list[tuple[int, int]], int]:
    """The step intervals a reader keeps, and the last step a train_end reported (0 if none)."""
    kept: list[tuple[int, int]] = []
    resumed = False
    done = 0
    for event in events:
        kind = event.get("type")
        if kind == "attempt":
            resumed = True  # the next step event may go back to the checkpoint
        elif kind == "step":
            first, last = int(event["step"]) - int(event.get("steps", 1)) + 1, int(event["step"])
            if resumed:
                kept = [(a, min(b, first - 1)) for a, b in kept if a < first]
                resumed = False
            kept.append((first, last))
        elif kind == "train_end":
            done = int(event.get("steps_done") or 0)
    return kept, done


def curve_faults(intervals: list[tuple[int, int]], steps_done: int) -> tuple[int, int]:
    """(steps missing from ``1 .. steps_done``, steps covered more than once)."""
    seen: Counter = Counter()
    for first, last in intervals:
        for step in range(first, last + 1):
            seen[step] += 1
    lost = sum(1 for step in range(1, steps_done + 1) if seen[step] == 0)
    doubled = sum(n - 1 for n in seen.values() if n > 1)
    return lost, doubled


def last_deleted(log: list[dict[str, Any]]) -> set[str]:
    """Keys whose last request in the log is a delete that succeeded: a key submitted again after its deletion
    (the same spec asked for once more) is the store's again."""
    last: dict[str, str] = {}
    for entry in sorted(log, key=lambda e: e.get("t", 0.0)):
        if entry.get("key") and entry.get("action") == "submit":
            last[entry["key"]] = "submit"
        elif entry.get("key") and entry.get("action") == "delete" and entry.get("rc") == 0:
            last[entry["key"]] = "delete"
    return {key for key, action in last.items() if action == "delete"}


def account(log: list[dict[str, Any]], records: dict[str, dict[str, Any] | None],
            streams: dict[str, list[dict[str, Any]]]) -> Accounts:
    """Check every submission of ``log`` against ``records`` (key -> the store's record, None where absent)
    and the finished runs' ``streams`` (key -> events)."""
    accounts = Accounts()
    submitted = {e["key"] for e in log if e.get("action") == "submit" and e.get("key")}
    deleted = last_deleted(log)
    accounts.submitted = len(submitted)
    for key in sorted(submitted):
        record = records.get(key)
        if key in deleted:
            if record is not None:
                accounts.disagree.append(f"{key[:12]}: the log deleted it (exit 0) and the store still has it")
            accounts.states["deleted"] += 1
            continue
        if record is None:
            accounts.unaccounted.append(f"{key[:12]}: submitted, never deleted, and not in the store")
            continue
        state = ACCOUNTED.get(record["status"])
        if state is None:
            accounts.unaccounted.append(f"{key[:12]}: ended {record['status']}")
            continue
        if state in ("cancelled", "stopped", "failed") and not (record.get("error") or record.get("cancelled_by")):
            accounts.unaccounted.append(f"{key[:12]}: {record['status']} without a reason")
        if state == "finished" and not isinstance(record.get("result"), dict):
            accounts.unaccounted.append(f"{key[:12]}: finished without a result")
        accounts.states[state] += 1
        if state == "finished" and key in streams:
            intervals, steps_done = coverage(streams[key])
            if steps_done or intervals:
                lost, doubled = curve_faults(intervals, steps_done or max(b for _, b in intervals))
                accounts.curves_checked += 1
                accounts.points_lost += lost
                accounts.points_doubled += doubled
                if lost or doubled:
                    accounts.curve_problems.append(f"{key[:12]}: {lost} step(s) lost, {doubled} doubled")
    return accounts
