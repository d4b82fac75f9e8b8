"""A whole store read against its invariants (``python -m labcore store check``): every broken one is a
:class:`Finding` that names the job, what is wrong and the fix; :mod:`.repair` applies the safe fixes.

What a sound store keeps, and what each check reads:

* ``record``: a finished job has its record beside its files (``record.json``, what a rebuild reads), its
  result, and its event stream; every chunk of a stream is there.
* ``stream``: within one attempt, steps only go forward (a step repeated is a doubled curve point, one
  that goes back is out of order), and nothing follows the attempt's end; a new attempt may go back to its
  checkpoint's step (the designed skip readers make).
* ``alive``: a job recorded ``running`` has a live worker behind its heartbeat.
* ``queue``: every queue entry names a job, and every ``queued`` job has an entry (or nobody claims it).
* ``index``: the submission index and the running index agree with the records.
* ``checkpoint``: a checkpoint a resume would read loads (JSON parses, a zip's members pass their CRCs, a
  safetensors header is whole); no finished job keeps one.
* ``folder``: every job folder belongs to a job; no temporary file of an ended writer is left; the bytes
  under ``runs/`` are the bytes ``store du`` counts (a folder of no job is counted by nobody).

It imports no torch: a ``.pt`` checkpoint is a zip archive, checked member by member.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from labcore.events import ATTEMPT, RESULT, STEP
from labcore.store.artifacts import RECORD_FILE
from labcore.store.health import partial_files
from labcore.store.settings import FINISHED
from labcore.store.usage import folder_bytes

QUEUE_ENTRY = re.compile(r"^q\d")  # diskcache push keys: q<priority><requester>-<number>
LOST_AND_FOUND = "lost+found"  # in the store folder, beside runs/: folders of no job, kept rather than deleted


@dataclass(frozen=True)
class Finding:
    """One broken invariant: which, the job (or ""), what is wrong, and what fixes it."""

    invariant: str
    key: str
    problem: str
    fix: str
    action: str = ""  # what store repair does about it (a name in labcore.store.repair.ACTIONS); "" nothing safe
    target: str = ""  # what the action works on, where the key does not say it: a file's path, a queue entry

    def line(self) -> str:
        where = f"{self.key[:12]}: " if self.key else ""
        return f"[{self.invariant}] {where}{self.problem} (fix: {self.fix})"


def audit(store: Any) -> list[Finding]:
    """Every broken invariant of ``store`` (an open :class:`~labcore.store.Store`), read without changing it."""
    records = {key: store.table.get(key) for key in store.table.keys()}
    found: list[Finding] = []
    found += _index(store, records)
    for key, record in records.items():
        if record is not None:
            found += _finished(store, record)
            found += _stream(store, key)
            found += _alive(store, record)
            found += _checkpoint(store, record)
    found += _queue(store, records)
    found += _folders(store, records)
    return found


# ------------------------------------------------------------------------------------------- records
def _index(store: Any, records: dict[str, Any]) -> Iterator[Finding]:
    for key, record in records.items():
        if record is None:
            yield Finding("index", key, "the submission index lists a job that has no record",
                          "store repair drops it from the index", "drop-from-index")
    running = set(store.table.running.items())
    for key in running:
        record = records.get(key) or store.table.get(key)
        if record is None or record["status"] != "running":
            yield Finding("index", key, "the running index lists a job that is not running",
                          "store repair drops it from the running index", "drop-from-running")
    for key, record in records.items():
        if record is not None and record["status"] == "running" and key not in running:
            yield Finding("index", key, "a running job is missing from the running index",
                          "store repair adds it", "add-to-running")


def _finished(store: Any, record: dict[str, Any]) -> Iterator[Finding]:
    if record["status"] not in FINISHED:
        return
    key = record["key"]
    if not isinstance(record.get("result"), dict):
        yield Finding("record", key, f"a {record['status']} job has no result",
                      f"cannot be repaired: delete it (`python -m labcore delete {key[:12]} --yes`) and run it again")
    kept = store.workdir(key) / RECORD_FILE
    try:
        saved = json.loads(kept.read_text())
        if saved.get("status") != record["status"] or saved.get("attempt") != record.get("attempt"):
            yield Finding("record", key, f"{RECORD_FILE} is of another attempt than the database's record",
                          f"store repair writes {RECORD_FILE} again from the database", "write-record")
    except FileNotFoundError:
        yield Finding("record", key, f"a finished job has no {RECORD_FILE} beside its files",
                      f"store repair writes {RECORD_FILE} from the database", "write-record")
    except (OSError, ValueError, AttributeError):
        yield Finding("record", key, f"{RECORD_FILE} does not load", "store repair writes it again from the database",
                      "write-record")
    if store.streams.length(key) == 0 and not record.get("rebuilt"):
        yield Finding("record", key, "a finished job has no event stream (its live curves are gone)",
                      "cannot be repaired: the record's thinned curves still stand for it")


def _stream(store: Any, key: str) -> Iterator[Finding]:
    chunks = store.streams.length(key)
    missing = [i for i in range(chunks) if store.cache.get(f"ev/{key}/{i}") is None]
    if missing:
        yield Finding("stream", key, f"{len(missing)} of {chunks} event chunks are missing (first: {missing[0]})",
                      "cannot be repaired: the events are lost; resume or rerun the job for a whole stream")
    for problem in stream_problems(store.events(key)):
        yield Finding("stream", key, problem, "cannot be repaired in place: delete the job and run it again")


def stream_problems(events: list[dict[str, Any]]) -> list[str]:
    """What is wrong with one job's events: steps doubled or out of order within an attempt, events after
    an attempt's end. A new attempt going back to its checkpoint is the designed skip, not a problem."""
    problems: list[str] = []
    last_step, ended, attempt = -1, False, 0
    for event in events:
        kind = event.get("type")
        if kind == ATTEMPT:
            last_step, ended, attempt = -1, False, event.get("attempt", attempt + 1)
            continue
        if ended:
            problems.append(f"a {kind} event follows the end of attempt {attempt}")
            ended = False  # one finding an attempt is enough
        if kind == STEP:
            step = int(event["step"])
            if step == last_step:
                problems.append(f"step {step} is written twice in attempt {attempt}")
            elif step < last_step:
                problems.append(f"step {step} comes after step {last_step} in attempt {attempt}")
            last_step = max(last_step, step)
        elif kind == RESULT:
            ended = True  # the worker's outcome: the attempt's last event
    return problems


def _alive(store: Any, record: dict[str, Any]) -> Iterator[Finding]:
    if record["status"] == "running":
        reason = store._why_dead(record)
        if reason:
            yield Finding("alive", record["key"], f"recorded running, but nobody runs it ({reason})",
                          "store repair marks it dead; resume it to continue from its checkpoint", "mark-dead")


# ------------------------------------------------------------------------------------------- the queue
def queue_entries(store: Any) -> list[tuple[str, str]]:
    """Every queue entry as (its cache key, the job key it names)."""
    return [(entry, store.cache.get(entry)) for entry in store.cache.iterkeys()
            if isinstance(entry, str) and QUEUE_ENTRY.match(entry)]


def _queue(store: Any, records: dict[str, Any]) -> Iterator[Finding]:
    named = set()
    for entry, key in queue_entries(store):
        named.add(key)
        if records.get(key) is None:
            yield Finding("queue", str(key), f"queue entry {entry} names a job that does not exist",
                          "store repair removes the entry", "drop-entry", entry)
    for key, record in records.items():
        if record is not None and record["status"] == "queued" and key not in named:
            yield Finding("queue", key, "a queued job has no queue entry, so no worker will ever claim it",
                          "store repair queues it again", "queue-again")


# ------------------------------------------------------------------------------------------ files
def _checkpoint(store: Any, record: dict[str, Any]) -> Iterator[Finding]:
    name = record.get("checkpoint")
    path = store.workdir(record["key"]) / name if name else None
    if path is None or not path.is_file():
        return
    if record["status"] in FINISHED:
        yield Finding("checkpoint", record["key"], f"a finished job still keeps its resume checkpoint {name}",
                      "store repair deletes it (a result is never resumed)", "delete-file", str(path))
        return
    why = unloadable(path)
    if why:
        yield Finding("checkpoint", record["key"], f"checkpoint {name} does not load ({why})",
                      "store repair moves it aside; the job then resumes from the start", "set-aside", str(path))


def unloadable(path: Path) -> str:
    """Why the file at ``path`` would not load ("" when it would), by its format, without torch."""
    try:
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix in (".pt", ".npz", ".zip"):
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            if bad:
                return f"member {bad} fails its checksum"
        elif path.suffix == ".safetensors":
            with open(path, "rb") as handle:
                (size,) = struct.unpack("<Q", handle.read(8))
                header = json.loads(handle.read(size))
            end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
            if path.stat().st_size < 8 + size + end:
                return "its tensors are cut short"
        elif path.stat().st_size == 0:
            return "it is empty"
    except (OSError, ValueError, KeyError, struct.error, zipfile.BadZipFile) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _folders(store: Any, records: dict[str, Any]) -> Iterator[Finding]:
    runs = store.runs_dir
    if not runs.is_dir():
        return
    for folder in sorted(p for p in runs.iterdir() if p.is_dir()):
        if records.get(folder.name) is None:
            # store du counts the folders of jobs only: these bytes are on the disk and in no table
            kept = "it holds a finished record, so store repair adds the job back" if (
                folder / RECORD_FILE).is_file() else f"store repair moves it to {LOST_AND_FOUND}/ in the store"
            yield Finding("folder", folder.name, f"a job folder belongs to no job ({folder_bytes(folder):,} bytes "
                                                 f"that store du does not count)", kept,
                          "rebuild" if (folder / RECORD_FILE).is_file() else "lost-and-found", str(folder))
            continue
        for tmp in partial_files(folder):
            yield Finding("folder", folder.name, f"{tmp.name} is left from a write that was cut short",
                          "store repair deletes it", "delete-file", str(tmp))
