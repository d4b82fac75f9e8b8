"""The folder and manifest store of uploads, and saving into it in this process.

Each upload lives in ``cache/uploads/NAME/``: the file as uploaded (``data.csv``, ``data.zip``, ...),
``examples.npz`` (the validated examples: symbol ids or vectors, labels, groups; plain arrays) and
``manifest.json`` (kind, alphabet, classes, counts, options, limits, sha256s, creation time). Saving
writes into a temporary folder and only then swaps it in, so a bad file never replaces a good upload and
a failed save leaves nothing behind. :func:`save_upload` parses in the calling process (scripts, tests);
the Data page saves through :func:`labcore.data.upload.save_job.start_save`, in a subprocess.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from labcore import paths
from labcore.data import fields
from labcore.data.upload import registry
from labcore.data.upload.manifest import (EXAMPLES, MANIFEST, MB, NAME_PATTERN, UploadInfo, UploadLimits,
                                          UploadOptions, bare_name, check_name, check_size, display_name)
from labcore.data.upload.parsed import numpy
from labcore.data.upload.splits import class_units, split_name_warnings
from labcore.errors import DataValidationError, LabError, UnknownNameError

INPUT = "input"  # the uploaded bytes inside a pending folder


def uploads_dir() -> Path:
    return paths.cache_dir() / "uploads"


def list_uploads() -> list[str]:
    """Names of the saved uploads, sorted (without the ``upload:`` prefix)."""
    root = uploads_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if NAME_PATTERN.fullmatch(p.name) and (p / MANIFEST).is_file())


def _unknown(name: str) -> UnknownNameError:
    saved = ", ".join(list_uploads()) or "(none yet)"
    return UnknownNameError(f"no upload named {name!r}; saved uploads: {saved}. Upload a file first "
                            f"(the Data page, or labcore.data.upload.save_upload(name, filename, data))")


def upload_info(name: str) -> UploadInfo:
    """The manifest of a saved upload (``NAME`` or ``upload:NAME``)."""
    name = check_name(bare_name(name))
    path = uploads_dir() / name / MANIFEST
    if not path.is_file():
        raise _unknown(name)
    try:
        return UploadInfo.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as error:
        raise DataValidationError(f"the manifest of upload {name!r} ({path}) is unreadable ({error}); "
                                  f"delete the upload and upload the file again") from None


def delete_upload(name: str) -> None:
    """Remove a saved upload and the data sets built from it."""
    name = check_name(bare_name(name))
    folder = uploads_dir() / name
    if not (folder / MANIFEST).is_file():
        raise _unknown(name)
    # Renamed away first so the upload disappears at once, even if removing the files is slow.
    doomed = Path(tempfile.mkdtemp(dir=uploads_dir(), prefix=".deleting-"))
    os.rename(folder, doomed / name)
    shutil.rmtree(doomed, ignore_errors=True)
    drop_built(name)


def drop_built(name: str) -> None:
    # Built Arrow copies are keyed by the old fingerprint: unreachable once the file changes.
    shutil.rmtree(paths.datasets_dir() / f"upload_{name}", ignore_errors=True)


@dataclass(frozen=True)
class SaveRequest:
    """What to save, checked before any byte is parsed; what ``save_job.start_save`` hands its subprocess."""

    name: str
    kind: str
    filename: str  # for display only (see manifest.display_name)
    options: UploadOptions
    limits: UploadLimits

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SaveRequest":
        return cls(name=data["name"], kind=data["kind"], filename=data["filename"],
                   options=UploadOptions(**data["options"]), limits=UploadLimits.from_dict(data["limits"]))


def save_request(name: str, filename: str, size: int, kind: str | None = None, *, max_length: int = 0,
                 truncate: bool = False, windows: bool = True, patch_size: int = 4, label_field: str = "",
                 split_field: str = "", skip_unreadable: bool = False, limits: UploadLimits = UploadLimits()) -> SaveRequest:
    """Check everything that needs no parsing (name, format, options, size); raise the refusal at once."""
    name = check_name(name)
    kind = registry.detect_kind(filename, kind)
    shown = display_name(filename)
    if max_length < 0:
        raise LabError(f"max_length must be positive (or 0 for the default), not {max_length}")
    if patch_size < 1:
        raise LabError(f"patch_size must be at least 1, not {patch_size}")
    check_size(size, shown, limits)
    label_field, split_field = _check_fields(kind, label_field.strip(), split_field.strip())
    options = UploadOptions(max_length=max_length or registry.DEFAULT_MAX_LENGTH[kind], truncate=truncate,
                            windows=windows and not truncate and registry.format_of(kind).records,
                            patch_size=patch_size, label_field=label_field, split_field=split_field,
                            skip_unreadable=skip_unreadable)
    return SaveRequest(name=name, kind=kind, filename=shown, options=options, limits=limits)


def _check_fields(kind: str, label_field: str, split_field: str) -> tuple[str, str]:
    if (label_field or split_field) and not registry.format_of(kind).records:
        raise LabError(f"a label field and a split field are chosen only for CSV and FASTA files, not {kind}")
    if kind == "csv":
        label_field = (label_field or fields.LABEL_COLUMN).lower()
        split_field = split_field.lower()
    for name in (label_field, split_field):
        if kind == "fasta" and name and fields.field_index(name) is None:
            raise LabError(f"{name!r} names no field of a FASTA header; choose 'field 1', 'field 2', ... (the "
                           f"header split on '|' and whitespace)")
    if split_field and split_field == label_field:
        raise LabError(f"the label and the split are both read from {fields.describe_field(kind, label_field)}; "
                       f"choose two different fields")
    return label_field, split_field


def as_bytes(data: Any, filename: str) -> bytes | bytearray | memoryview:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise LabError(f"{display_name(filename)}: the upload must be given as bytes, not {type(data).__name__}")
    return data


def save_upload(name: str, filename: str, data: bytes, kind: str | None = None, *,
                max_length: int = 0, truncate: bool = False, windows: bool = True, patch_size: int = 4,
                label_field: str = "",
                split_field: str = "", skip_unreadable: bool = False,
                limits: UploadLimits = UploadLimits()) -> UploadInfo:
    """Validate ``data`` and store it as upload ``name``, replacing an older upload of that name.

    ``filename`` gives the format by its extension unless ``kind`` names it. ``max_length`` (0: the
    kind's default) bounds symbols per sequence, notes per MIDI window or patches per image; with
    ``windows`` (the default) longer CSV/FASTA sequences are cut into windows of ``max_length`` whose
    votes make the record's prediction, with ``truncate=True`` they are cut to ``max_length``, with
    neither they are refused. ``label_field`` and
    ``split_field`` say which CSV column or FASTA header field (``field 2``) holds the label and the
    file's own split (see :mod:`labcore.data.fields`); given neither, the fields the Data page's preview
    suggests (:func:`labcore.data.fields.preview`). Raises
    :class:`DataValidationError` naming the line or file and the fix; then nothing is stored or changed.
    Parses in this process; the Data page uses ``start_save``, which parses in a subprocess.
    """
    data = as_bytes(data, filename)
    detected = registry.detect_kind(filename, kind)
    if not label_field and not split_field and registry.format_of(detected).records:
        # Without options, the fields the Data page's preview suggests (a >id|label|split FASTA: the label in
        # field 2, the split in field 3), so the library and the page read one file the same way.
        suggested = fields.preview(detected, data)
        label_field, split_field = suggested.label_field, suggested.split_field
    request = save_request(name, filename, len(data), kind, max_length=max_length, truncate=truncate, windows=windows,
                           patch_size=patch_size, label_field=label_field, split_field=split_field,
                           skip_unreadable=skip_unreadable, limits=limits)
    folder = pending_folder(data)
    try:
        return save_file(request, folder / INPUT)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pending_folder(data: bytes | bytearray | memoryview) -> Path:
    root = uploads_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=root, prefix=".pending-"))
    try:
        (folder / INPUT).write_bytes(data)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def save_file(request: SaveRequest, path: Path) -> UploadInfo:
    """Validate the uploaded file at ``path`` and store it as ``request.name``; ``path`` is moved away.

    ``path`` must lie in the uploads folder (a pending folder), so storing it is a rename.
    """
    shown, limits = request.filename, request.limits
    fmt = registry.format_of(request.kind)
    parsed = registry.parse_upload(request.kind, path, shown, request.options, limits)
    examples = path.with_name(EXAMPLES)
    np = numpy()
    np.savez(examples, **parsed.arrays())  # plain arrays, read back with allow_pickle=False
    counts = np.bincount(parsed.labels, minlength=len(parsed.class_names))
    info = UploadInfo(
        name=request.name, kind=request.kind, filename=shown, stored=fmt.stored_name,
        size_bytes=path.stat().st_size, sha256=file_sha256(path),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        input_kind=parsed.input_kind, alphabet=parsed.alphabet, vector_dim=parsed.vector_dim,
        class_names=parsed.class_names, class_counts=tuple(int(n) for n in counts),
        n_examples=len(parsed.labels),
        n_groups=len(parsed.group_names) if parsed.groups is not None else len(parsed.labels),
        max_length=parsed.longest, truncated=parsed.truncated, ignored_entries=parsed.ignored,
        options=request.options, limits=limits, examples_sha256=file_sha256(examples),
        split_counts=tuple(int(n) for n in np.bincount(parsed.splits, minlength=3)) if parsed.splits is not None
        else (),
        warnings=split_name_warnings(parsed, request.options, request.kind) if fmt.records else (),
        skipped=parsed.skipped,
        windowed=parsed.windowed, class_units=class_units(parsed),
        n_symbols=int(len(parsed.tokens)) if parsed.tokens is not None else 0,
    )
    _store(info, path, examples)
    return info


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(MB):
            digest.update(chunk)
    return digest.hexdigest()


def _store(info: UploadInfo, data: Path, examples: Path) -> None:
    root = uploads_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / info.name
    incoming = Path(tempfile.mkdtemp(dir=root, prefix=".incoming-"))
    replaced = None
    try:
        os.replace(data, incoming / info.stored)
        os.replace(examples, incoming / EXAMPLES)
        (incoming / MANIFEST).write_text(json.dumps(info.to_dict(), indent=1), encoding="utf-8")
        if target.exists():
            # Two renames: the old upload steps aside, the new one steps in; if the second fails the
            # old one is put back. Readers see the old folder or the new one, never a mixture (for an
            # instant, neither: a reader then gets "no upload named ...", not half a file).
            replaced = Path(tempfile.mkdtemp(dir=root, prefix=".replaced-"))
            os.rename(target, replaced / info.name)
            try:
                os.rename(incoming, target)
            except OSError:
                os.rename(replaced / info.name, target)
                raise
            drop_built(info.name)
        else:
            os.rename(incoming, target)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)
