"""Files that a kill cannot tear: every file the lab writes next to a job goes through :func:`write_file`.

A reader (a resumed attempt, a page, ``store check``) must never see half a file. ``write_text`` in
place does not give that: a SIGKILL inside it leaves an empty or cut file under the final name. So a
file is written under a temporary name beside its target (the writer's thread and pid in it, so two
attempts of one job, or two threads of one process, never share one), flushed to the disk with
``fsync``, and only then renamed over the target by ``commit`` (``os.replace``, or a job's fenced
rename that refuses once its attempt was superseded);
the folder is synced too, so the rename itself survives a power cut. A kill at any moment leaves
either the old file or the new one, and at most a ``.NAME.THREAD.PID.tmp`` that
:func:`labcore.store.health.remove_partial_files` or ``store repair`` deletes.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable

CommitFn = Callable[[Path, Path], None]  # (finished temporary file, final path): move it into place
FULL_BELOW_BYTES = 16 * 2**20  # a disk with less free than this, after a write failed on it, was full


def temp_beside(path: Path) -> Path:
    """A temporary name next to ``path`` that no other writer uses: the writing thread's id and its process's pid
    are in it (the app writes from a thread per browser, and two tabs can write one file at the same moment)."""
    return path.with_name(f".{path.name}.{threading.get_native_id()}.{os.getpid()}.tmp")


def write_file(path: Path | str, write: Callable[[Path], Any], commit: CommitFn = os.replace) -> Path:
    """Write ``path`` whole or not at all: ``write(tmp)`` fills a temporary file, which is synced and renamed."""
    path = Path(path)
    tmp = temp_beside(path)
    try:
        try:
            write(tmp)
        except OSError:
            raise
        except Exception as exc:
            # Some writers do not say "no space" when the disk fills: torch.save raises RuntimeError ("unexpected
            # pos ...") from its zip writer. Said as the OS would say it, the job fails as a full disk (and is
            # resumed once there is room) instead of with a riddle.
            if _free_bytes(tmp.parent) < FULL_BELOW_BYTES:
                raise OSError(errno.ENOSPC, f"no space left on the device while writing {path.name} ({exc})") from exc
            raise
        _sync(tmp)
        commit(tmp, path)
        _sync_folder(path.parent)
    finally:
        tmp.unlink(missing_ok=True)  # a failed or refused write leaves nothing half-written
    return path


def write_text(path: Path | str, text: str, commit: CommitFn = os.replace) -> Path:
    return write_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), commit)


def write_json(path: Path | str, value: Any, commit: CommitFn = os.replace, *, indent: int | None = None,
               sort_keys: bool = False, default: Callable[[Any], Any] | None = None) -> Path:
    """``value`` as JSON (the options are :func:`json.dumps`'s)."""
    return write_text(path, json.dumps(value, indent=indent, sort_keys=sort_keys, default=default), commit)


def _free_bytes(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return FULL_BELOW_BYTES  # cannot tell: not taken for a full disk


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a platform whose folders cannot be opened (Windows): the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a folder; the file itself is already on disk
    finally:
        os.close(fd)
