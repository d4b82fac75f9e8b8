"""What the lab holds on disk, by kind, group and requester (``python -m labcore store du``, the Runs page).

Each job's bytes are its folder's files (weights, checkpoints, maps, cached features). A job listed by two
groups counts in both groups' rows, so the group rows may add up to more than the total; kinds and requesters
partition the jobs. The database (records, queue, event streams) is one more line: its bytes belong to no
single job. A resume checkpoint left in a finished job's folder (written before finished jobs dropped theirs)
is counted apart as ``stale``: :func:`drop_stale_checkpoints` frees it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcore.store.job_record import stored_kind
from labcore.store.settings import FINISHED

COMMAND_LINE = "(command line)"  # the requester of jobs submitted without one


@dataclass(frozen=True)
class Row:
    name: str
    jobs: int
    bytes: int


@dataclass(frozen=True)
class Usage:
    total: int  # bytes in job folders
    jobs: int
    database: int  # bytes of the database files (with SQLite's write-ahead log)
    stale: int  # bytes of resume checkpoints in finished jobs' folders
    by_kind: tuple[Row, ...]
    by_group: tuple[Row, ...]
    by_requester: tuple[Row, ...]

    def lines(self) -> list[str]:
        """The figures as the CLI prints them, largest first in each table."""
        out = [f"{_mib(self.total)} in {self.jobs} job folder(s); database {_mib(self.database)}"
               + (f"; {_mib(self.stale)} of it stale resume checkpoints of finished jobs "
                  f"(`python -m labcore store du --drop-stale` frees them)" if self.stale else "")]
        for title, rows in (("kind", self.by_kind), ("group", self.by_group), ("requester", self.by_requester)):
            out.append(f"by {title}:")
            out += [f"  {_mib(r.bytes):>12}  {r.jobs:>6} job(s)  {r.name}" for r in rows]
        return out


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder`` (0 where there is none)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _rows(sizes: dict[str, list[int]]) -> tuple[Row, ...]:
    rows = [Row(name, len(b), sum(b)) for name, b in sizes.items()]
    return tuple(sorted(rows, key=lambda r: (-r.bytes, r.name)))


def _stale(store: Any, record: dict[str, Any]) -> Path | None:
    checkpoint = record.get("checkpoint")
    if record["status"] not in FINISHED or not checkpoint:
        return None
    path = store.workdir(record["key"]) / checkpoint
    return path if path.is_file() else None


def disk_usage(store: Any) -> Usage:
    """Walk every job's folder once (a few seconds for 10,000 jobs with files: the pages call it on request)."""
    groups_of: dict[str, list[str]] = defaultdict(list)
    for name in store.groups():
        for key in store.group(name)["keys"]:
            groups_of[key].append(name)
    kinds: dict[str, list[int]] = defaultdict(list)
    groups: dict[str, list[int]] = defaultdict(list)
    requesters: dict[str, list[int]] = defaultdict(list)
    total = stale = jobs = 0
    for key in store.table.keys():
        record = store.table.get(key)
        if record is None:
            continue
        size = folder_bytes(store.workdir(key))
        jobs += 1
        total += size
        kinds[stored_kind(record)].append(size)
        for name in groups_of.get(key, []):
            groups[name].append(size)
        requesters[record.get("started_by") or COMMAND_LINE].append(size)
        checkpoint = _stale(store, record)
        stale += checkpoint.stat().st_size if checkpoint else 0
    database = sum(p.stat().st_size for p in (store.root / "db").glob("cache.db*") if p.is_file())
    return Usage(total=total, jobs=jobs, database=database, stale=stale, by_kind=_rows(kinds),
                 by_group=_rows(groups), by_requester=_rows(requesters))


def drop_stale_checkpoints(store: Any) -> int:
    """Delete the resume checkpoints of finished jobs (never resumed again); the bytes freed."""
    freed = 0
    for key in store.table.keys():
        record = store.table.get(key)
        checkpoint = _stale(store, record) if record else None
        if checkpoint is not None:
            freed += checkpoint.stat().st_size
            checkpoint.unlink(missing_ok=True)
    return freed


def requester_bytes(store: Any, who: str) -> int:
    """What the folders of the jobs ``who`` started hold (a student's disk quota)."""
    return sum(folder_bytes(store.workdir(r.key)) for r in store.jobs() if r.started_by == who)
