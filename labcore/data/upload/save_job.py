"""Saving an upload in a subprocess, so the Data page never parses in the server.

:func:`start_save` checks what needs no parsing, writes the bytes to a pending folder and starts
``python -m labcore.data.upload FOLDER`` (:func:`main`), which saves as
:func:`labcore.data.upload.store.save_file` does, within bounds of its own on memory and CPU; the page
polls the returned :class:`SaveJob`. A large file costs the subprocess its time and memory, never the
Streamlit server.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcore import paths
from labcore.data.upload.manifest import UploadInfo, UploadLimits
from labcore.data.upload.store import (INPUT, SaveRequest, as_bytes, pending_folder, save_file, save_request,
                                       uploads_dir)
from labcore.errors import LabError

# files of a pending folder, next to INPUT (the uploaded bytes)
_REQUEST = "request.json"
_RESULT = "result.json"
_LOG = "log.txt"

SAVE_TIMEOUT_S = 120  # seconds a save may run before the page stops it (a capped upload needs < 15)
# bytes of address space the parsing subprocess may map: a parser that ran away fails with an error
# in its own process instead of pushing the shared machine into swap (a capped upload peaks < 1 GB).
SAVE_MEMORY_LIMIT = 4 * 2**30
# seconds after which a pending folder no page polls any more, or the incoming folder of a save
# stopped half-way, is removed
_STALE_S = 3600


@dataclass(frozen=True)
class SaveResult:
    """How a save in a subprocess ended: ``info`` when saved, else ``error`` (the refusal)."""

    info: UploadInfo | None
    error: str
    seconds: float  # wall time from start_save to the end of the subprocess
    peak_rss_bytes: int  # the subprocess's peak resident memory (0 if unknown)
    pid: int  # the process that parsed the file


class SaveJob:
    """An upload being checked and saved by ``python -m labcore.data.upload`` in a subprocess."""

    def __init__(self, request: SaveRequest, folder: Path, process: subprocess.Popen) -> None:
        self.request, self.folder, self.process = request, folder, process
        self.started = time.time()
        self.result: SaveResult | None = None

    def poll(self) -> SaveResult | None:
        """The result once the subprocess has ended, else None; stops it after SAVE_TIMEOUT_S."""
        if self.result is not None:
            return self.result
        peak = 0
        try:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: the result file still says how it went
            pid, status, usage = self.process.pid, 0, None
        if pid == 0:
            if time.time() - self.started <= SAVE_TIMEOUT_S:
                return None
            self.process.kill()
            pid, status, usage = os.wait4(self.process.pid, 0)
        if usage is not None:
            self.process.returncode = os.waitstatus_to_exitcode(status)
            peak = usage.ru_maxrss * 1024  # kilobytes on Linux
        self.result = self._read(peak)
        shutil.rmtree(self.folder, ignore_errors=True)
        return self.result

    def wait(self, poll_s: float = 0.05) -> SaveResult:
        while (result := self.poll()) is None:
            time.sleep(poll_s)
        return result

    def _read(self, peak: int) -> SaveResult:
        seconds = time.time() - self.started
        shown = self.request.filename
        try:
            outcome = json.loads((self.folder / _RESULT).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            if seconds > SAVE_TIMEOUT_S:
                error = (f"{shown}: checking the file took longer than {SAVE_TIMEOUT_S} s and was stopped; "
                         f"upload a smaller file")
            else:
                log = _tail(self.folder / _LOG)
                error = (f"{shown}: the process checking the file ended without a result (exit status "
                         f"{self.process.returncode}){': ' + log if log else ''}")
            return SaveResult(info=None, error=error, seconds=seconds, peak_rss_bytes=peak, pid=self.process.pid)
        info = UploadInfo.from_dict(outcome["info"]) if outcome.get("info") else None
        return SaveResult(info=info, error=outcome.get("error", ""), seconds=seconds,
                          peak_rss_bytes=int(outcome.get("peak_rss_bytes") or peak), pid=outcome.get("pid", self.process.pid))


def _tail(path: Path, limit: int = 400) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text[-limit:]


def start_save(name: str, filename: str, data: bytes, kind: str | None = None, *, max_length: int = 0,
               truncate: bool = False, windows: bool = True, patch_size: int = 4, label_field: str = "",
               split_field: str = "", skip_unreadable: bool = False, limits: UploadLimits = UploadLimits()) -> SaveJob:
    """Start checking and saving an upload in a subprocess; poll the returned job for its result.

    What needs no parsing (name, format, options, size) is checked here and refused at once with a
    :class:`LabError`; the bytes are written to a pending folder under the uploads folder and
    ``python -m labcore.data.upload FOLDER`` parses them, so a large file costs the subprocess its
    time and memory, never the caller (the Streamlit server).
    """
    data = as_bytes(data, filename)
    request = save_request(name, filename, len(data), kind, max_length=max_length, truncate=truncate, windows=windows,
                           patch_size=patch_size, label_field=label_field, split_field=split_field,
                           skip_unreadable=skip_unreadable, limits=limits)
    _remove_stale_pending()
    folder = pending_folder(data)
    try:
        (folder / _REQUEST).write_text(json.dumps(request.to_dict()), encoding="utf-8")
        env = {**os.environ, "TRANSFERLAB_CACHE": str(paths.cache_dir().resolve())}
        with open(folder / _LOG, "wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "labcore.data.upload", str(folder)],
                                       cwd=paths.REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return SaveJob(request, folder, process)


def _remove_stale_pending() -> None:
    root = uploads_dir()
    if not root.is_dir():
        return
    for folder in [*root.glob(".pending-*"), *root.glob(".incoming-*")]:
        try:
            if time.time() - folder.stat().st_mtime > _STALE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    """``python -m labcore.data.upload FOLDER``: save FOLDER/input as FOLDER/request.json asks."""
    if len(argv) != 1:
        print("usage: python -m labcore.data.upload PENDING_FOLDER (started by the Data page)", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    # Bounds of its own, should the page that polls it be gone: memory, and CPU past the time limit.
    for which, most in ((resource.RLIMIT_AS, SAVE_MEMORY_LIMIT), (resource.RLIMIT_CPU, SAVE_TIMEOUT_S + 10)):
        _soft, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY or hard > most:
            resource.setrlimit(which, (most, hard))
    outcome: dict[str, Any] = {"pid": os.getpid()}
    try:
        request = SaveRequest.from_dict(json.loads((folder / _REQUEST).read_text(encoding="utf-8")))
        try:
            outcome["info"] = save_file(request, folder / INPUT).to_dict()
        except LabError as error:
            outcome["error"] = str(error)
        except MemoryError:
            outcome["error"] = (f"{request.filename}: checking the file needed more than "
                                f"{SAVE_MEMORY_LIMIT // 2**30} GB of memory; upload a smaller file")
    except Exception as error:  # noqa: BLE001 - the page shows it; the log keeps the traceback
        traceback.print_exc()
        outcome["error"] = f"the upload could not be saved: {type(error).__name__}: {error}"
    outcome["peak_rss_bytes"] = _own_peak_rss()
    scratch = folder / (_RESULT + ".tmp")
    scratch.write_text(json.dumps(outcome), encoding="utf-8")
    os.replace(scratch, folder / _RESULT)  # the page never reads half a result
    return 0


def _own_peak_rss() -> int:
    """This process's peak resident memory since its exec (Linux ``VmHWM``; 0 elsewhere). The parent's
    ``wait4`` figure is no use for that: Linux carries the forking process's peak over fork and exec, so a
    large server (or test process) would be reported as the child's size."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return 0

