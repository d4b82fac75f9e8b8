"""Archiving finished jobs into one file and bringing them into another lab (``store export`` / ``store import``).

An archive is a tar file (gzip-compressed where its name ends in ``.gz``). Its first member, ``manifest.json``,
lists every other member with its sha256 and size, the jobs (with their kinds and labels), the groups as the
archive holds them, and the uploads the jobs' data came from. Per job ``jobs/<key>/`` holds ``record.json``
(the store's record: spec, status, result), ``events.json`` (its event stream, chunk by chunk, so curves and
logs read the same) and ``files/`` (its folder; weights only with ``weights=True``). ``uploads/<name>/`` holds
the upload folder of every ``upload:<name>`` a job's discipline names, ``models/<folder>/`` every model made in the
lab that a job's spec names (``lab:NAME``, ``run:KEY``: :mod:`labcore.archive.models`).

Only finished jobs travel (a queued or running job is work, not a result), with every finished job they need
(``requires``: a body's source run, an analysed run; the pretraining that made a ``lab:`` model its spec names),
so what arrives can be read without what stayed behind.

Import checks the whole archive before it writes anything: every member must be a plain file listed in the
manifest with its sha256, and every listed member must be there; a damaged archive is refused whole. Keys the
lab already holds are skipped and named (a key is its spec: the same result), as are uploads already there and
model folders already here with the same files; a model folder here with other files refuses the whole archive.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from labcore import durable
from labcore.archive import models as archive_models
from labcore.archive.models import KEY_PATTERN
from labcore.data.upload import NAME_PATTERN, uploads_dir
from labcore.errors import LabError
from labcore.models import models_dir
from labcore.store import JobRecord, Store
from labcore.store.artifacts import RECORD_FILE
from labcore.store.job_record import job_record
from labcore.store.selection import Selection

FORMAT = "transferlab-archive/1"
MANIFEST = "manifest.json"
# Files that hold model weights: large, and rebuilt by running the spec again, so they travel on request only.
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".bin")
UPLOAD_PREFIX = "upload:"
# Folders of the store's root that are tables of their own, not jobs, and travel whole with every archive as
# ``side/<folder>/...``: lessons' sittings and predictions (labcore.lessons.sittings). Import adds the files the
# lab lacks and keeps those it has (a sitting here is never overwritten by an older copy).
SIDE_FOLDERS = ("lessons",)


class ArchiveDamaged(LabError):
    """The archive does not match its manifest (or has none): nothing of it was imported."""


@dataclass(frozen=True)
class Exported:
    path: Path
    keys: tuple[str, ...]
    uploads: tuple[str, ...]
    skipped: tuple[str, ...]  # selected jobs that are not finished
    bytes: int
    models: tuple[str, ...] = ()  # lab-made models the jobs name, carried whole
    absent_models: tuple[str, ...] = ()  # named but not on this machine: the archive goes without them


@dataclass(frozen=True)
class Imported:
    keys: tuple[str, ...]  # jobs added
    existing: tuple[str, ...]  # jobs the lab already held: skipped
    uploads: tuple[str, ...]
    existing_uploads: tuple[str, ...]
    models: tuple[str, ...] = ()
    existing_models: tuple[str, ...] = ()  # already here with the same files: kept


# -------------------------------------------------------------------------------------------------- export
def _with_inputs(store: Store, keys: list[str]) -> list[str]:
    """``keys`` and, before them, every job they need, transitively (each once, in store order): the jobs
    they require, and the jobs that made the lab models their specs name (where this store holds them)."""
    wanted: set[str] = set()
    todo = list(keys)
    while todo:
        key = todo.pop()
        if key in wanted:
            continue
        wanted.add(key)
        record = _stored(store, key)
        if record is None:
            continue
        needed = list(record.requires or [])
        needed += [archive_models.maker_key(name) for name in archive_models.named_models(record.spec)]
        todo += [k for k in needed if k and store.table.get(k)]
    return [k for k in store.table.keys() if k in wanted]


def _chosen(store: Store, selection: Selection) -> list[str]:
    if selection.empty:
        return store.table.keys()
    keys = selection.keys_in(store)
    for name in selection.groups_in(store):
        keys += store.group(name)["keys"]
    return list(dict.fromkeys(keys))


def _stored(store: Store, key: str) -> JobRecord | None:
    """A job's record as stored: an archive takes finished jobs only, so no running one is checked for life."""
    return job_record(store.table.get(key))


def _upload_of(record: JobRecord) -> str:
    discipline = (record.spec or {}).get("discipline", "")
    return discipline[len(UPLOAD_PREFIX):] if isinstance(discipline, str) and discipline.startswith(UPLOAD_PREFIX) else ""


def _members(store: Store, keys: list[str], uploads: list[str], models: list[str],
             weights: bool) -> Iterator[tuple[str, bytes | Path]]:
    """(archive name, bytes or a file to copy) of everything but the manifest."""
    for key in keys:
        record = _stored(store, key)
        yield f"jobs/{key}/{RECORD_FILE}", json.dumps(record.to_dict(), sort_keys=True).encode()
        yield f"jobs/{key}/events.json", json.dumps(store.streams.chunks(key)).encode()
        for name, path in store.artifacts(key).items():
            if name == RECORD_FILE or (not weights and path.suffix in WEIGHT_SUFFIXES):
                continue
            yield f"jobs/{key}/files/{name}", path
    for name in uploads:
        folder = uploads_dir() / name
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            yield f"uploads/{name}/{path.relative_to(folder).as_posix()}", path
    yield from archive_models.members(models)
    for side in SIDE_FOLDERS:
        folder = store.root / side
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".tmp")):
            yield f"side/{side}/{path.relative_to(folder).as_posix()}", path


def _place_side(store: Store, staging: Path) -> None:
    """The side tables' files the lab lacks, copied in (those it has are kept)."""
    for side in SIDE_FOLDERS:
        folder = staging / "side" / side
        for path in sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else ():
            target = store.root / side / path.relative_to(folder)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)


def _sha256(data: bytes | Path) -> tuple[str, int]:
    if isinstance(data, bytes):
        return hashlib.sha256(data).hexdigest(), len(data)
    return archive_models.file_sha256(data), data.stat().st_size


def _add(tar: tarfile.TarFile, name: str, data: bytes | Path) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = int(time.time())
    info.mode = 0o600
    if isinstance(data, bytes):
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        info.size = data.stat().st_size
        with open(data, "rb") as handle:
            tar.addfile(info, handle)


def export(store: Store, path: Path | str, selection: Selection = Selection(), *, weights: bool = False) -> Exported:
    """Write the selected finished jobs (all of the lab's, with an empty selection) into one archive file."""
    path = Path(path)
    chosen = _chosen(store, selection)
    finished = [k for k in chosen if (r := _stored(store, k)) is not None and r.finished]
    if not finished:
        raise LabError(f"nothing to archive: none of the {len(chosen)} selected job(s) is finished")
    keys = _with_inputs(store, finished)
    records = {k: r for k in keys if (r := _stored(store, k)).finished}
    keys = list(records)
    uploads = sorted({u for r in records.values() if (u := _upload_of(r)) and (uploads_dir() / u).is_dir()})
    models, absent = archive_models.present(
        sorted({name for r in records.values() for name in archive_models.named_models(r.spec)}))
    members = list(_members(store, keys, uploads, models, weights))
    sums = {name: _sha256(data) for name, data in members}
    groups = {}
    for name in store.groups():
        inside = [k for k in store.group(name)["keys"] if k in records]
        if inside:
            groups[name] = inside
    manifest = {
        "format": FORMAT, "created_at": time.time(), "weights": weights,
        "jobs": [{"key": k, "kind": r.kind, "label": r.label} for k, r in records.items()],
        "groups": groups, "uploads": uploads, "models": models,
        "members": {name: {"sha256": digest, "size": size} for name, (digest, size) in sums.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz" if path.name.endswith(".gz") else "w") as tar:
            _add(tar, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
            for name, data in members:
                _add(tar, name, data)

    durable.write_file(path, write)  # whole or not at all, whoever else writes the same path at the same time
    return Exported(path=path, keys=tuple(keys), uploads=tuple(uploads),
                    skipped=tuple(k for k in chosen if k not in records), bytes=path.stat().st_size,
                    models=tuple(models), absent_models=tuple(absent))


# -------------------------------------------------------------------------------------------------- import
def _damaged(path: Path, problem: str) -> ArchiveDamaged:
    return ArchiveDamaged(f"the archive {path} is damaged ({problem}); nothing of it was imported: export it again "
                          f"from the lab it came from (`python -m labcore store export`)")


def _safe(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not name.startswith("/") and ".." not in parts


def verify(path: Path | str) -> dict[str, Any]:
    """Read the whole archive once and return its manifest; :class:`ArchiveDamaged` if anything differs."""
    path = Path(path)
    if not path.is_file():
        raise LabError(f"no archive at {path}")
    try:
        with tarfile.open(path, "r:*") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise _damaged(path, f"its first member is not {MANIFEST}")
            manifest = json.loads(tar.extractfile(first).read())
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise _damaged(path, f"its manifest is not of the format {FORMAT}")
            listed = manifest.get("members") or {}
            bad = [j.get("key") for j in manifest.get("jobs") or [] if not KEY_PATTERN.fullmatch(str(j.get("key")))]
            bad += [u for u in manifest.get("uploads") or [] if not NAME_PATTERN.fullmatch(str(u))]
            bad += [m for m in manifest.get("models") or [] if not archive_models.made_here(m)
                    or not any(n.startswith(archive_models.member_folder(m)) for n in listed)]
            if bad:
                raise _damaged(path, f"it names a job, upload or model {bad[0]!r} that is no key, upload name or "
                                     f"lab:/run: model")
            seen: set[str] = set()
            while (member := tar.next()) is not None:  # on from the manifest (iterating restarts at the first)
                name = member.name
                if not member.isfile() or not _safe(name) or name not in listed or name in seen:
                    raise _damaged(path, f"member {name!r} is not a plain file the manifest lists once")
                seen.add(name)
                digest = hashlib.sha256()
                handle = tar.extractfile(member)
                for block in iter(lambda: handle.read(2**20), b""):
                    digest.update(block)
                if digest.hexdigest() != listed[name]["sha256"]:
                    raise _damaged(path, f"{name} does not match its sha256")
    except ArchiveDamaged:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError, KeyError, TypeError) as exc:
        raise _damaged(path, f"{type(exc).__name__}: {exc}") from None
    missing = sorted(set(listed) - seen)
    if missing:
        raise _damaged(path, f"{len(missing)} listed member(s) are missing, e.g. {missing[0]}")
    return manifest


def _place(store: Store, staging: Path, records: dict[str, dict[str, Any]], uploads: list[str],
           models: list[str]) -> None:
    """Move the staged model folders, job folders and uploads into place (before the records: a record never
    names a folder or a model that is not there)."""
    for name in models:
        models_dir().mkdir(parents=True, exist_ok=True)
        # os.replace fails rather than replace a folder made here meanwhile
        os.replace(staging / archive_models.member_folder(name), models_dir() / archive_models.folder_name(name))
    for key, record in records.items():
        shutil.rmtree(store.workdir(key), ignore_errors=True)  # a folder with no record: nobody's
        store.workdir(key).parent.mkdir(parents=True, exist_ok=True)
        files = staging / "jobs" / key / "files"
        if files.is_dir():
            os.replace(files, store.workdir(key))
        store.files.write_record(record)
    for name in uploads:
        uploads_dir().mkdir(parents=True, exist_ok=True)
        os.replace(staging / "uploads" / name, uploads_dir() / name)


def import_archive(store: Store, path: Path | str) -> Imported:
    """Bring an archive's jobs into ``store``: verified whole first; keys the lab holds are skipped."""
    path = Path(path)
    manifest = verify(path)
    keys = [j["key"] for j in manifest["jobs"]]
    existing = [k for k in keys if store.table.get(k) is not None]
    new = [k for k in keys if k not in existing]
    uploads = [u for u in manifest.get("uploads") or [] if not (uploads_dir() / u).exists()]
    models, same_models = archive_models.arriving(manifest)  # a different folder here: refused before writing
    staging = Path(tempfile.mkdtemp(dir=store.root, prefix=".import-"))
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                if member.name != MANIFEST:
                    target = staging / member.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(member) as source, open(target, "wb") as out:
                        shutil.copyfileobj(source, out)
        records = {k: json.loads((staging / "jobs" / k / RECORD_FILE).read_text()) for k in new}
        try:
            _place(store, staging, records, uploads, models)
            with store.transaction():
                for key in new:
                    store.table.put(records[key])
                    for chunk in json.loads((staging / "jobs" / key / "events.json").read_text()):
                        store.streams.append(key, chunk)
                store.table.all.extend(new)
                for name, members in (manifest.get("groups") or {}).items():
                    store.table.add_to_group(name, members)  # every member is in the lab now, new or not
            _place_side(store, staging)
        except BaseException:
            # A failure part-way (a full disk) takes back the files placed so far: no half-imported job stays.
            for key in new:
                shutil.rmtree(store.workdir(key), ignore_errors=True)
            for name in uploads:
                shutil.rmtree(uploads_dir() / name, ignore_errors=True)
            for name in models:  # only those placed: a folder made here meanwhile stays
                if not (staging / archive_models.member_folder(name)).exists():
                    shutil.rmtree(models_dir() / archive_models.folder_name(name), ignore_errors=True)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Imported(keys=tuple(new), existing=tuple(existing), uploads=tuple(uploads),
                    existing_uploads=tuple(u for u in manifest.get("uploads") or [] if u not in uploads),
                    models=tuple(models), existing_models=tuple(same_models))
