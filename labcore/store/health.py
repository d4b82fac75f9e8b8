"""Opening the store safely, rebuilding it from its folders, and living with a full disk
(:mod:`.repair` checks and repairs a damaged database).

* The store folder is created ``0700`` and its database files ``0600``: runs, uploads' fingerprints and
  logs are the user's own.
* A database SQLite cannot read (truncated, overwritten) is reported with the repair command instead of
  a raw ``DatabaseError`` on every page.
* Every finished job also writes its record as ``record.json`` in its folder (:meth:`Artifacts.write_record`),
  so :func:`rebuild` can make a new database from the folders alone; a missing or 0-byte database next to
  job folders is rebuilt on open rather than shown as an empty lab.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import diskcache

from labcore.store.disk import JSONDisk
from labcore.store.errors import REPAIR_HINT, StoreDamaged, UnsafeValue
from labcore.store.liveness import process_state

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def damaged(root: Path, exc: BaseException) -> StoreDamaged:
    return StoreDamaged(f"the lab's store at {root} cannot be read ({type(exc).__name__}: {exc}); run "
                        f"`{REPAIR_HINT}` (it checks the database, and if it must, rebuilds it from the "
                        f"job folders in {root / 'runs'}, which hold every finished result)")


def open_cache(root: Path, timeout_s: float, settings: dict[str, Any]) -> diskcache.Cache:
    """The store's diskcache ``Cache`` (JSON values), its folders private to the user."""
    folder = root / "db"
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    for path in (root, folder):
        os.chmod(path, FOLDER_MODE)
    try:
        cache = diskcache.Cache(str(folder), timeout=timeout_s, disk=JSONDisk, **settings)
    except (sqlite3.DatabaseError, UnsafeValue) as exc:
        raise damaged(root, exc) from None
    for name in os.listdir(folder):  # cache.db and SQLite's -wal and -shm beside it
        if name.startswith("cache.db"):
            os.chmod(folder / name, FILE_MODE)
    return cache


def is_blank(cache: diskcache.Cache) -> bool:
    """A database with nothing in it at all (new, or recreated from a 0-byte or missing file); a count
    of rows, so nothing is read that an older format may have pickled."""
    return len(cache) == 0


def rebuild(store: Any) -> int:
    """Add every job whose folder holds a ``record.json`` (its finished record) to the store's tables."""
    added: list[str] = []
    groups: dict[str, list[str]] = {}
    with store.transaction():
        for key, record in sorted(store.files.records().items(), key=lambda kv: kv[1].get("submitted_at") or 0):
            if store.table.get(key) is not None:
                continue
            # Its event stream was in the lost database: said on the record, so nobody takes it for a job whose
            # stream a bug dropped (store check accepts a rebuilt job without one).
            store.table.put(dict(record, rebuilt=True))
            added.append(key)
            for group in record.get("groups") or []:
                groups.setdefault(group, []).append(key)
        # Each index written once (per job, a rebuild of 10,000 folders rewrote the whole index 10,000 times).
        store.table.all.extend(added)
        for group, keys in groups.items():
            store.table.add_to_group(group, keys)
    return len(added)


# ------------------------------------------------------------------------------------------ a full disk
def is_disk_full(exc: BaseException) -> bool:
    """Did this error come from a full disk (or quota), whether the OS or SQLite said it?"""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()


def free_mb(path: Path) -> float:
    """Free space on the disk holding ``path`` (its nearest existing parent), in MB."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free / 2**20


DISK_FULL = "the disk holding the lab's store is full"


def disk_full_message(path: Path) -> str:
    return (f"{DISK_FULL} (free space at {path}: {free_mb(path):.1f} MB); free some "
            f"space there (old job folders under its runs/ can go) or move the store with TRANSFERLAB_CACHE, "
            f"then resume the job")


# labcore.durable.temp_beside names a file being written ``.NAME.THREAD.PID.tmp``, PID its writer (an older
# lab's ``.NAME.PID.tmp`` reads the same: the name's last number is the pid).
TEMPORARY = re.compile(r"^\.(.+)\.(\d+)\.tmp$")


def partial_files(folder: Path, writer: int | None = None) -> list[Path]:
    """The temporaries of a job's folder that no write will commit: process ``writer``'s own (it stopped), or,
    where ``writer`` is None, those whose writer is no longer running (a kill cut the write short).

    Never a live writer's other than ``writer``: another attempt of the same job (resumed elsewhere while one
    stalled) may be writing its checkpoint in the same folder right now."""
    found = []
    for path in Path(folder).glob(".*.tmp"):
        match = TEMPORARY.match(path.name)
        if not match or not path.is_file():
            continue
        pid = int(match.group(2))
        if pid == writer if writer is not None else process_state(pid) in ("gone", "zombie"):
            found.append(path)
    return found


def remove_partial_files(folder: Path, writer: int | None = None) -> list[Path]:
    """Delete :func:`partial_files` (``writer``'s, or those of dead writers); the ones removed."""
    removed = []
    for path in partial_files(folder, writer):
        try:
            path.unlink()
            removed.append(path)
        except OSError:
            pass
    return removed


# A ballast file in the store folder (not in db/, which diskcache checks for files of its own): when the
# disk fills up, deleting it gives SQLite the room to record
# why the job failed (a full disk would otherwise swallow its own error message).
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 2 * 2**20


def keep_reserve(root: Path) -> None:
    """Create the reserve if it is missing and the disk has room for it twice over."""
    path = Path(root) / RESERVE_FILE
    if path.exists() or free_mb(path.parent) * 2**20 < 2 * RESERVE_BYTES:
        return
    try:
        with open(path, "wb") as handle:
            os.posix_fallocate(handle.fileno(), 0, RESERVE_BYTES)  # real blocks, not a sparse file
    except OSError:
        path.unlink(missing_ok=True)


def release_reserve(root: Path) -> bool:
    """Delete the reserve (the disk is full and an error must be recorded); True if there was one."""
    path = Path(root) / RESERVE_FILE
    if not path.exists():
        return False
    path.unlink()
    return True
