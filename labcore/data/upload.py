"""A user's own discipline: an uploaded file of labelled sequences or images.

Formats, chosen by the file's extension (or by ``kind=``):

* ``csv`` (``.csv``): a header naming the columns ``sequence`` and ``label`` (other columns are
  ignored; ``label_field`` names another label column, ``split_field`` a column of split names). A sequence is a string of one-character symbols (``ACGGTA``), unless some sequence in
  the file contains whitespace: then *every* sequence is read as whitespace-separated symbols
  (``C4 E4 G4``). The label is the class name.
* ``fasta`` (``.fasta .fa .faa .fna .fas``): each record's header is ``>id|label``; the label is the
  text after the *last* ``|`` (so ids such as ``sp|P12345`` keep their own bars). A header without
  ``|`` is an error: a bare ``>label`` is not accepted, because most FASTA files carry only ids
  there and would silently become one class per record. ``label_field="field 2"`` reads the label
  from the header's second field instead (fields split on ``|`` and whitespace), and
  ``split_field="field 3"`` reads each record's split from its third (``>seq1|1|training``); see
  :mod:`labcore.data.fields`, whose preview suggests both. Sequence lines may be wrapped; every
  character is one symbol and case is kept as written (``a`` and ``A`` differ).
* ``midi`` (``.zip``): MIDI files (``.mid``, ``.midi``) inside class folders; the label is the name
  of the folder a file sits in (``composerA/piece1.mid`` -> ``composerA``). Each file becomes the
  pitches (0..127) of its non-drum notes sorted by onset, then pitch, cut into consecutive windows
  of ``max_length`` notes (128 by default, as Kao & Lee, appendix G.4; a last partial window is
  dropped unless it is the file's only one, as in :mod:`labcore.data.music`). The windows of one file
  share its path as ``group``: splits never cut a file and evaluation votes over its windows.
  Hidden entries (``.DS_Store``, ``__MACOSX/``) and files of other types are skipped and counted.
* ``npz`` (``.npz``): arrays ``images`` (N,H,W) or (N,H,W,C), numeric, and ``labels`` (N,) of ints
  or strings. ``uint8`` images are scaled to [0, 1]; other dtypes are kept as given. Each image is
  zero-padded to a multiple of ``patch_size`` and cut into patches in raster order; each patch,
  flattened (row, column, channel), is one input vector, as the frozen pretrained transformer's
  image tasks (Lu et al.) do.

Uploads are untrusted: the raw bytes are size-checked before parsing, zip members are read one at a
time (never extracted) after their paths, kinds and unpacked sizes are checked, ``.npy`` headers
are checked before any array is allocated, and ``np.load`` always runs with ``allow_pickle=False``.
What an upload may cost is bounded by :class:`UploadLimits` (bytes, examples, classes, symbols):
CSV and FASTA files are read line by line from disk into flat arrays of symbol ids, and a file is
refused as soon as it crosses a cap, with the cap named. Every class needs ``min_per_split``
examples (files, for MIDI) in each of train, validation and test.

The Data page never parses in the server: :func:`start_save` writes the bytes to disk and starts
``python -m labcore.data.upload FOLDER`` in a subprocess; the page polls the returned
:class:`SaveJob`. :func:`save_upload` does the same work in the calling process (scripts, tests).

Each upload lives in ``cache/uploads/NAME/``: the file as uploaded (``data.csv``, ``data.zip``, ...),
``examples.npz`` (the validated examples: symbol ids or vectors, labels, groups; plain arrays) and
``manifest.json`` (kind, alphabet, classes, counts, options, limits, sha256s, creation time). Saving
writes into a temporary folder and only then swaps it in, so a bad file never replaces a good
upload and a failed save leaves nothing behind.

The discipline ``upload:NAME`` builds its data set from ``examples.npz`` (never parsing the file
again) and splits it 80/10/10 (seeded, stratified by class; by file for MIDI), with at least
``min_per_split`` examples of every class in every split; or, with a split field, as the file says
(a split the file lacks is taken from train, a seeded ninth of each class). A save whose labels
are all split names (``training``/``testing``) is kept but carries a warning in its manifest. For data too small
for a fixed split, the parameters ``folds`` (k, 2 to 10) and ``fold`` (0 .. k-1) choose k-fold
cross-validation instead: k seeded, stratified folds, the run testing on fold ``fold``
(:func:`labcore.data.base.fold_split`); each fold is a run of its own key, and Compare counts the folds as
repeats of one condition. Its parameters carry the upload's
``fingerprint`` (a prefix of its sha256), so replacing the file gives new cache keys instead of
serving the old data.
"""

from __future__ import annotations

import array
import csv
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Iterator

from labcore import paths
from labcore.data import fields
from labcore.data.base import Discipline, DisciplineInfo, fold_split, stratified_split
from labcore.errors import DataValidationError, LabError, UnknownNameError

NAME_PATTERN = re.compile(r"[a-z0-9-]{1,40}")
KINDS = ("csv", "fasta", "midi", "npz")
EXTENSIONS = {".csv": "csv", ".fasta": "fasta", ".fa": "fasta", ".faa": "fasta", ".fna": "fasta",
              ".fas": "fasta", ".zip": "midi", ".npz": "npz"}
STORED_NAMES = {"csv": "data.csv", "fasta": "data.fasta", "midi": "data.zip", "npz": "data.npz"}
# Default max_length per kind: BERT-sized models have 512 positions (Kao & Lee truncate proteins to
# 512); music is cut into 128-note segments as in Kao & Lee appendix G.4; images count patches.
# csv/fasta: 510 symbols, so [CLS], a window and [SEP] fill the 512 positions of the BERT-sized models.
DEFAULT_MAX_LENGTH = {"csv": 510, "fasta": 510, "midi": 128, "npz": 512}
MIDI_SUFFIXES = (".mid", ".midi")
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
# k-fold cross-validation (the parameters folds and fold), for data too small for a fixed split: at least 2
# folds; at most 10, past which each test fold is smaller still and the runs multiply for little gain.
MIN_FOLDS, MAX_FOLDS = 2, 10
MANIFEST = "manifest.json"
EXAMPLES = "examples.npz"
# 2: examples.npz holds the validated examples (format 1 kept only the file and parsed it per build)
MANIFEST_FORMAT = 2
_MB = 2**20


@dataclass(frozen=True)
class UploadLimits:
    """What an upload may cost; every number is checked before (or while) the work it bounds is done.

    The defaults are the lab's caps, sized for a teaching lab on a 2-core machine with 24 GB that
    several people share: the Data page states them, and ``.streamlit/config.toml`` sets
    Streamlit's own upload limit to ``max_bytes`` (a test keeps the two equal).
    """

    # bytes: the uploaded file itself. 50 MB is far more labelled sequence data than a 2-core
    # machine can train on in a lab session; Streamlit holds the upload in memory before the lab
    # sees it, so its own limit (server.maxUploadSize) is set to the same number.
    max_bytes: int = 50 * _MB
    max_unpacked_bytes: int = 200 * _MB  # bytes: all members of a .zip/.npz, decompressed (zip bombs)
    max_zip_entries: int = 10_000  # entries of a .zip: a million empty entries is slow to list, not big
    max_symbols: int = 256  # distinct symbols of a token upload (each becomes a vocabulary slot)
    # examples (rows; MIDI: windows; npz: images). Each one costs a transformer's forward and
    # backward pass on 2 CPU cores every epoch, so 200,000 is already a long epoch; the built-in
    # disciplines are smaller (listops, for one, has 12,000).
    max_rows: int = 200_000
    # classes. The Data page draws a bar per class and split and lists every class by name: past
    # ~100 classes neither reads, and a teaching upload (genes, composers, families) has a handful.
    max_classes: int = 100
    # symbols (tokens) of all examples together, after truncation. A run keeps every symbol as an
    # int64 in the Arrow cache and again in its encoded splits: 160 MB each at 20 M, so a few runs
    # side by side still fit in 24 GB next to their models. 20 M is 100 symbols a row at the row cap.
    max_total_symbols: int = 20_000_000
    # examples (files, for MIDI) of each class in each of train, validation and test: a class with
    # fewer cannot be measured (one test example gives an accuracy of 0 or 1), so each class needs
    # 3 * min_per_split of them.
    min_per_split: int = 2

    def __post_init__(self) -> None:
        if not 1 <= self.max_symbols < 0xD800:  # ids are stored as 1 or 2 bytes (see _Examples)
            raise LabError(f"max_symbols must be between 1 and {0xD800 - 1}, not {self.max_symbols}")

    @property
    def min_per_class(self) -> int:
        """Examples (files, for MIDI) a class needs so every split gets ``min_per_split`` of them."""
        return 3 * self.min_per_split

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "UploadLimits":
        known = {f.name for f in dataclasses.fields(cls)}  # a retired cap in an old manifest is skipped
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class UploadOptions:
    """How the file is read; stored in the manifest so every later build reads it the same way."""

    max_length: int = 0  # symbols / notes per window / patches; 0 means the kind's default
    truncate: bool = False  # csv/fasta: cut over-long sequences instead of refusing them
    # csv/fasta: cut over-long sequences into windows of max_length (a record's windows share its split
    # and vote at evaluation) instead of refusing them; truncate wins where both are set. False in
    # manifests saved before windows existed.
    windows: bool = False
    patch_size: int = 4  # npz: side of the square patches
    # csv/fasta: the field holding the label (labcore.data.fields): a CSV column, or a FASTA header's
    # "field N"; "" is the default (the column 'label'; the text after the header's last '|')
    label_field: str = ""
    # csv/fasta: the field holding each record's split (train/valid/test names); "" for a seeded split
    split_field: str = ""
    skip_unreadable: bool = False  # midi: leave out files no MIDI reader can parse (listed) instead of refusing


@dataclass(frozen=True)
class UploadInfo:
    """The manifest of one saved upload."""

    name: str
    kind: str  # one of KINDS
    filename: str  # the user's file name, for display only (folders stripped)
    stored: str  # the copy's file name inside the upload folder
    size_bytes: int
    sha256: str
    created: str  # UTC, ISO 8601
    input_kind: str  # "tokens" or "vectors"
    alphabet: tuple[str, ...]
    vector_dim: int
    class_names: tuple[str, ...]
    class_counts: tuple[int, ...]  # examples per class (windows for MIDI), aligned with class_names
    n_examples: int
    n_groups: int  # MIDI: files; otherwise equal to n_examples
    max_length: int  # longest sequence emitted (symbols, notes or patches)
    truncated: int  # sequences cut to options.max_length
    ignored_entries: int  # zip entries skipped (hidden files, other file types)
    options: UploadOptions
    limits: UploadLimits
    examples_sha256: str = ""  # of examples.npz; empty in format 1 manifests (no examples.npz)
    format: int = MANIFEST_FORMAT
    # examples per split when the file gives its own (options.split_field), train/validation/test
    split_counts: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()  # what the save found suspicious (labels that are split names, ...)
    skipped: tuple[str, ...] = ()  # midi: zip entries left out as unreadable (options.skip_unreadable)
    windowed: int = 0  # csv/fasta: records longer than max length cut into windows (options.windows)
    class_units: tuple[int, ...] = ()  # records (MIDI: files) per class, where windows make them differ
    n_symbols: int = 0  # symbols of all examples together (tokens uploads; 0 in older manifests)

    @property
    def fingerprint(self) -> str:
        return self.sha256[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "UploadInfo":
        values = dict(data)
        for key in ("alphabet", "class_names", "class_counts", "split_counts", "warnings", "skipped", "class_units"):
            if key in values:
                values[key] = tuple(values[key])
        values["options"] = UploadOptions(**values["options"])
        values["limits"] = UploadLimits.from_dict(values["limits"])
        return cls(**values)


# ----------------------------------------------------------------------------------------- store


def uploads_dir() -> Path:
    return paths.cache_dir() / "uploads"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise LabError(f"upload name {name!r} is not allowed: use 1 to 40 characters of a-z, 0-9 and '-' "
                       f"(for example 'my-genes')")
    return name


def _bare_name(name: str) -> str:
    return name[len("upload:"):] if name.startswith("upload:") else name


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
    name = _check_name(_bare_name(name))
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
    name = _check_name(_bare_name(name))
    folder = uploads_dir() / name
    if not (folder / MANIFEST).is_file():
        raise _unknown(name)
    # Renamed away first so the upload disappears at once, even if removing the files is slow.
    doomed = Path(tempfile.mkdtemp(dir=uploads_dir(), prefix=".deleting-"))
    os.rename(folder, doomed / name)
    shutil.rmtree(doomed, ignore_errors=True)
    _drop_built(name)


def _drop_built(name: str) -> None:
    # Built Arrow copies are keyed by the old fingerprint: unreachable once the file changes.
    shutil.rmtree(paths.datasets_dir() / f"upload_{name}", ignore_errors=True)


def detect_kind(filename: str, kind: str | None = None) -> str:
    if kind is not None:
        if kind not in KINDS:
            raise LabError(f"upload kind {kind!r} is not known; valid kinds: {', '.join(KINDS)}")
        return kind
    suffix = PurePosixPath(_display_name(filename)).suffix.lower()
    if suffix not in EXTENSIONS:
        accepted = ", ".join(EXTENSIONS)
        raise DataValidationError(f"{_display_name(filename)}: cannot tell the format from the extension "
                                  f"{suffix or '(none)'!r}; accepted extensions: {accepted}, "
                                  f"or name the format with kind= (one of {', '.join(KINDS)})")
    return EXTENSIONS[suffix]


def _display_name(filename: str) -> str:
    # The browser sends whatever name it likes: keep only the last path part, printable, bounded.
    base = str(filename).replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable())[:200]
    return base or "upload"


@dataclass(frozen=True)
class SaveRequest:
    """What to save, checked before any byte is parsed; what :func:`start_save` hands its subprocess."""

    name: str
    kind: str
    filename: str  # for display only (see _display_name)
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
    name = _check_name(name)
    kind = detect_kind(filename, kind)
    shown = _display_name(filename)
    if max_length < 0:
        raise LabError(f"max_length must be positive (or 0 for the default), not {max_length}")
    if patch_size < 1:
        raise LabError(f"patch_size must be at least 1, not {patch_size}")
    _check_size(size, shown, limits)
    label_field, split_field = _check_fields(kind, label_field.strip(), split_field.strip())
    options = UploadOptions(max_length=max_length or DEFAULT_MAX_LENGTH[kind], truncate=truncate,
                            windows=windows and not truncate and kind in ("csv", "fasta"),
                            patch_size=patch_size, label_field=label_field, split_field=split_field,
                            skip_unreadable=skip_unreadable)
    return SaveRequest(name=name, kind=kind, filename=shown, options=options, limits=limits)


def _check_fields(kind: str, label_field: str, split_field: str) -> tuple[str, str]:
    if (label_field or split_field) and kind not in ("csv", "fasta"):
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


def _check_size(size: int, source: str, limits: UploadLimits) -> None:
    if size > limits.max_bytes:
        raise DataValidationError(f"{source} is {_mb(size)}, more than the upload limit of "
                                  f"{_mb(limits.max_bytes)}; upload fewer examples, or raise the limit "
                                  f"(save_upload(..., limits=UploadLimits(max_bytes=...)))")


def _as_bytes(data: Any, filename: str) -> bytes | bytearray | memoryview:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise LabError(f"{_display_name(filename)}: the upload must be given as bytes, not {type(data).__name__}")
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
    Parses in this process; the Data page uses :func:`start_save`, which parses in a subprocess.
    """
    data = _as_bytes(data, filename)
    if not label_field and not split_field and detect_kind(filename, kind) in ("csv", "fasta"):
        # Without options, the fields the Data page's preview suggests (a >id|label|split FASTA: the label in
        # field 2, the split in field 3), so the library and the page read one file the same way.
        suggested = fields.preview(detect_kind(filename, kind), data)
        label_field, split_field = suggested.label_field, suggested.split_field
    request = save_request(name, filename, len(data), kind, max_length=max_length, truncate=truncate, windows=windows,
                           patch_size=patch_size, label_field=label_field, split_field=split_field,
                           skip_unreadable=skip_unreadable, limits=limits)
    folder = _pending_folder(data)
    try:
        return save_file(request, folder / _INPUT)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_INPUT = "input"  # the uploaded bytes inside a pending folder
_REQUEST = "request.json"
_RESULT = "result.json"
_LOG = "log.txt"


def _pending_folder(data: bytes | bytearray | memoryview) -> Path:
    root = uploads_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=root, prefix=".pending-"))
    try:
        (folder / _INPUT).write_bytes(data)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def save_file(request: SaveRequest, path: Path) -> UploadInfo:
    """Validate the uploaded file at ``path`` and store it as ``request.name``; ``path`` is moved away.

    ``path`` must lie in the uploads folder (a pending folder), so storing it is a rename.
    """
    shown, limits = request.filename, request.limits
    parsed = parse_upload(request.kind, path, shown, request.options, limits)
    examples = path.with_name(EXAMPLES)
    np = _numpy()
    np.savez(examples, **parsed.arrays())  # plain arrays, read back with allow_pickle=False
    counts = np.bincount(parsed.labels, minlength=len(parsed.class_names))
    info = UploadInfo(
        name=request.name, kind=request.kind, filename=shown, stored=STORED_NAMES[request.kind],
        size_bytes=path.stat().st_size, sha256=_sha256(path),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        input_kind=parsed.input_kind, alphabet=parsed.alphabet, vector_dim=parsed.vector_dim,
        class_names=parsed.class_names, class_counts=tuple(int(n) for n in counts),
        n_examples=len(parsed.labels),
        n_groups=len(parsed.group_names) if parsed.groups is not None else len(parsed.labels),
        max_length=parsed.longest, truncated=parsed.truncated, ignored_entries=parsed.ignored,
        options=request.options, limits=limits, examples_sha256=_sha256(examples),
        split_counts=tuple(int(n) for n in np.bincount(parsed.splits, minlength=3)) if parsed.splits is not None
        else (),
        warnings=_warnings(parsed, request.options, request.kind), skipped=parsed.skipped,
        windowed=parsed.windowed, class_units=_class_units(parsed),
        n_symbols=int(len(parsed.tokens)) if parsed.tokens is not None else 0,
    )
    _store(info, path, examples)
    return info


def _numpy():
    import numpy

    return numpy


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_MB):
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
            _drop_built(info.name)
        else:
            os.rename(incoming, target)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)


# ---------------------------------------------------------------------------- saving in a subprocess

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
    data = _as_bytes(data, filename)
    request = save_request(name, filename, len(data), kind, max_length=max_length, truncate=truncate, windows=windows,
                           patch_size=patch_size, label_field=label_field, split_field=split_field,
                           skip_unreadable=skip_unreadable, limits=limits)
    _remove_stale_pending()
    folder = _pending_folder(data)
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


def _main(argv: list[str]) -> int:
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
            outcome["info"] = save_file(request, folder / _INPUT).to_dict()
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


# ---------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ParsedUpload:
    """A validated upload as flat arrays: one entry per example (a window, for MIDI)."""

    input_kind: str
    class_names: tuple[str, ...]
    labels: Any  # int32 [N]: index into class_names
    tokens: Any = None  # input_kind "tokens": symbol ids (uint8 or uint16), all examples end to end
    offsets: Any = None  # int64 [N + 1]: example i is tokens[offsets[i]:offsets[i + 1]]
    vectors: Any = None  # input_kind "vectors": float32 array [N, patches, vector_dim]
    groups: Any = None  # MIDI: int32 [N], index into group_names (the file each window comes from)
    group_names: tuple[str, ...] = ()
    splits: Any = None  # int8 [N] when the file gives its own split: 0 train, 1 validation, 2 test
    alphabet: tuple[str, ...] = ()
    vector_dim: int = 0
    longest: int = 0
    truncated: int = 0
    ignored: int = 0
    skipped: tuple[str, ...] = ()  # MIDI entries left out as unreadable
    windowed: int = 0  # records cut into windows

    def arrays(self) -> dict[str, Any]:
        """The arrays saved as examples.npz (no object arrays: they load with allow_pickle=False)."""
        np = _numpy()
        out = {"labels": self.labels}
        if self.input_kind == "tokens":
            out.update(tokens=self.tokens, offsets=self.offsets)
        else:
            out["vectors"] = self.vectors
        if self.groups is not None:
            out.update(groups=self.groups, group_names=np.array(self.group_names, dtype=str))
        if self.splits is not None:
            out["splits"] = self.splits
        return out


def parse_upload(kind: str, path: Path, source: str, options: UploadOptions,
                 limits: UploadLimits = UploadLimits()) -> ParsedUpload:
    """Validate and read an uploaded file; ``source`` names the file in error messages."""
    _check_size(path.stat().st_size, source, limits)
    with open(path, "rb") as handle:
        if _blank(handle):
            raise DataValidationError(f"{source} is empty; upload a file that holds labelled examples "
                                      f"({_format_hint(kind)})")
        reader = {"csv": _parse_csv, "fasta": _parse_fasta, "midi": _parse_midi_zip, "npz": _parse_npz}[kind]
        parsed = reader(handle, source, options, limits)
    _check_classes(parsed, source, limits, kind)
    return parsed


def _blank(handle: BinaryIO) -> bool:
    """Whether the file holds nothing but whitespace (reads only up to its first other byte)."""
    handle.seek(0)
    while chunk := handle.read(_MB):
        if chunk.strip():
            handle.seek(0)
            return False
    handle.seek(0)
    return True


def _format_hint(kind: str) -> str:
    return {"csv": "a header line sequence,label and one example per line",
            "fasta": "records with headers >id|label",
            "midi": "a zip of class folders holding .mid files, e.g. composerA/piece1.mid",
            "npz": "arrays images (N,H,W) or (N,H,W,C) and labels (N,)"}[kind]


def _mb(n: int) -> str:
    return f"{n / _MB:.1f} MB"


def _lines(handle: BinaryIO, source: str) -> Iterator[str]:
    """The file's lines as text, ends kept, decoded one at a time (the line of a bad byte is known)."""
    handle.seek(0)
    number = 0
    for chunk in handle:
        # A file reads by b"\n"; lines that end in a lone b"\r" (old Mac files) are split here.
        for raw in (chunk,) if b"\r" not in chunk else chunk.splitlines(keepends=True):
            number += 1
            try:
                # -sig: spreadsheet programs start CSVs with a byte-order mark
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise DataValidationError(f"{source}: line {number}: not UTF-8 text (byte "
                                          f"{raw[error.start]:#04x}); save the file as UTF-8 text") from None


_WHITESPACE = re.compile(r"\s")


class _Spaced(Exception):
    """A sequence with whitespace turned up: the whole file is read again as space-separated symbols."""


class _Examples:
    """Examples gathered while a file streams by, with every cap checked as it is crossed.

    Symbol ids go end to end into one byte buffer (1 byte per symbol, 2 when ``max_symbols`` > 256),
    with a row end and a label per example: no Python object per symbol or per example survives a
    line. Ids are given in order of first appearance and renumbered (sorted alphabet, sorted
    classes) once at the end.
    """

    def __init__(self, source: str, options: UploadOptions, limits: UploadLimits, *, spaced: bool = False,
                 alphabet: tuple[str, ...] = ()) -> None:
        self.source, self.options, self.limits, self.spaced = source, options, limits, spaced
        self.width = 1 if limits.max_symbols <= 256 else 2
        self.encoding = "latin-1" if self.width == 1 else "utf-16-le"
        self.ids = bytearray()
        self.ends = array.array("q")
        self.labels = array.array("i")
        self.groups = array.array("i")
        self.group_names: dict[str, int] = {}
        self.splits = array.array("b")  # the file's own split per example (0, 1, 2), when it gives one
        self.symbols: dict[str, int] = {s: i for i, s in enumerate(alphabet)}
        self.fixed = bool(alphabet)  # MIDI: the alphabet is all 128 pitches, ids given
        self.known = set(self.symbols)
        self.table: dict[int, str] = {}  # ord(symbol) -> chr(id), for str.translate
        self.classes: dict[str, int] = {}
        self.longest = 0
        self.too_long = 0
        self.windowed = 0  # records cut into windows (options.windows)
        self.first_too_long: tuple[str, int] | None = None  # where, length
        self.longest_too_long = 0

    def __len__(self) -> int:
        return len(self.ends)

    def _klass(self, label: str, where: str) -> int:
        klass = self.classes.get(label)
        if klass is None:
            if len(self.classes) >= self.limits.max_classes:
                raise DataValidationError(
                    f"{self.source}: {where}: label {label[:40]!r} would be class {len(self.classes) + 1:,}, more "
                    f"than the lab's cap of {self.limits.max_classes} classes; merge related classes or drop "
                    f"the rows of classes you do not need")
            klass = self.classes[label] = len(self.classes)
        return klass

    def _room(self, length: int, where: str) -> int:
        """Check the row and symbol caps for one more example of ``length`` symbols; its kept length."""
        limits = self.limits
        if len(self.ends) >= limits.max_rows:
            raise DataValidationError(
                f"{self.source}: {where}: more than {limits.max_rows:,} examples, the lab's cap on rows; "
                f"upload at most {limits.max_rows:,} (a random sample of each class keeps their shares)")
        if length > self.options.max_length:
            self.too_long += 1
            self.longest_too_long = max(self.longest_too_long, length)
            if self.first_too_long is None:
                self.first_too_long = (where, length)
            length = self.options.max_length
        total = len(self.ids) // self.width + length
        if total > limits.max_total_symbols:
            raise DataValidationError(
                f"{self.source}: {where}: more than {limits.max_total_symbols:,} symbols in all, the lab's cap "
                f"on total symbols; upload fewer or shorter sequences (a smaller max length with "
                f"'cut to max length' cuts every sequence)")
        return length

    def _new_symbol(self, symbol: str, where: str) -> int:
        if len(self.symbols) >= self.limits.max_symbols:
            few = ", ".join(repr(a) for a in list(self.symbols)[:8])
            raise DataValidationError(
                f"{self.source}: {where}: more than {self.limits.max_symbols} distinct symbols, the most a token "
                f"upload may have (first few: {few}, ...); check that the sequence column holds symbols, not "
                f"free text (a sequence with a space makes every sequence space-separated), or merge rare "
                f"symbols")
        new = self.symbols[symbol] = len(self.symbols)
        self.known.add(symbol)
        if len(symbol) == 1:
            self.table[ord(symbol)] = chr(new)
        return new

    def add(self, sequence: str, label: str, where: str, split: str = "") -> None:
        """One example: a stripped, non-empty sequence (characters, or whitespace-separated symbols).

        ``split`` is the value of the file's split field, when one is chosen."""
        if not self.spaced and _WHITESPACE.search(sequence):
            raise _Spaced
        klass = self._klass(label, where)
        parts: Any = sequence.split() if self.spaced else sequence
        split_id = self._split(split, where) if self.options.split_field else -1
        limit = self.options.max_length
        if self.options.windows and not self.options.truncate:
            # Every record is a group (its windows vote together and share a split); a record longer
            # than max length is cut into windows of max length covering it, the last one ending at
            # its end (overlapping the one before where the length is not a multiple).
            starts = [0] if len(parts) <= limit else window_starts(len(parts), limit)
            self.windowed += len(starts) > 1
            for start in starts:
                self._add(parts[start:start + limit], klass, where, split_id, group=where)
        else:
            self._add(parts, klass, where, split_id)

    def _add(self, parts: Any, klass: int, where: str, split_id: int, group: str | None = None) -> None:
        keep = self._room(len(parts), where)
        parts = parts[:keep]
        if self.spaced:
            ids = [self.symbols.get(p) if p in self.known else self._new_symbol(p, where) for p in parts]
            self.ids += bytes(ids) if self.width == 1 else array.array("H", ids).tobytes()
        else:
            if not self.known.issuperset(parts):
                for symbol in sorted(set(parts) - self.known):
                    self._new_symbol(symbol, where)
            self.ids += parts.translate(self.table).encode(self.encoding)
        if split_id >= 0:
            self.splits.append(split_id)
        if group is not None:
            self.groups.append(self.group_names.setdefault(group, len(self.group_names)))
        self._end(keep, klass)

    def _split(self, value: str, where: str) -> int:
        named = fields.split_of(value)
        if named is None:
            field = fields.describe_field("fasta" if self.options.split_field.startswith("field ") else "csv",
                                          self.options.split_field)
            raise DataValidationError(
                f"{self.source}: {where}: the split field ({field}) says {value[:40]!r}, which names no split; "
                f"every record needs train/training, valid/validation/dev or test/testing there, or choose "
                f"no split field (a seeded 80/10/10 split)")
        return fields.SPLITS.index(named)

    def add_ids(self, ids: list[int], label: str, group: str, where: str) -> None:
        """One example of ids into the fixed alphabet (MIDI pitches), from the file ``group``."""
        klass = self._klass(label, where)
        keep = self._room(len(ids), where)
        self.ids += bytes(ids[:keep])
        self.groups.append(self.group_names.setdefault(group, len(self.group_names)))
        self._end(keep, klass)

    def _end(self, length: int, klass: int) -> None:
        self.ends.append(len(self.ids) // self.width)
        self.labels.append(klass)
        self.longest = max(self.longest, length)

    def finish(self) -> ParsedUpload:
        np = _numpy()
        limit = self.options.max_length
        if self.too_long and not self.options.truncate:
            where, length = self.first_too_long
            raise DataValidationError(
                f"{self.source}: {where}: a sequence of {length} symbols is longer than the max length of {limit} "
                f"({self.too_long} sequence(s) are longer, the longest has {self.longest_too_long}); upload "
                f"again choosing 'cut into windows' (evaluation votes over a record's windows) or 'cut to max "
                f"length' for longer sequences, or a max length of {self.longest_too_long} (a model cuts its "
                f"inputs to its own positions: 512 for the BERT-sized ones)")
        ids = np.frombuffer(self.ids, dtype=np.uint8 if self.width == 1 else np.uint16)
        if self.fixed:
            alphabet = tuple(self.symbols)
        else:
            alphabet = tuple(sorted(self.symbols))
            renumber = np.empty(max(len(alphabet), 1), dtype=ids.dtype)
            renumber[[self.symbols[s] for s in alphabet]] = np.arange(len(alphabet), dtype=ids.dtype)
            ids = renumber[ids]
        class_names = tuple(sorted(self.classes))
        relabel = np.empty(max(len(class_names), 1), dtype=np.int32)
        relabel[[self.classes[c] for c in class_names]] = np.arange(len(class_names), dtype=np.int32)
        offsets = np.zeros(len(self.ends) + 1, dtype=np.int64)
        offsets[1:] = np.frombuffer(self.ends, dtype=np.int64)
        # Records as groups only where some record was cut into windows (or MIDI, where files are).
        keep_groups = self.group_names and (self.fixed or self.windowed)
        groups = np.frombuffer(self.groups, dtype=np.int32).copy() if keep_groups else None
        splits = np.frombuffer(self.splits, dtype=np.int8).copy() if self.options.split_field else None
        return ParsedUpload(
            input_kind="tokens", class_names=class_names,
            labels=relabel[np.frombuffer(self.labels, dtype=np.int32)], tokens=ids, offsets=offsets,
            groups=groups, group_names=tuple(self.group_names) if keep_groups else (), splits=splits,
            alphabet=alphabet, longest=self.longest, truncated=self.too_long, windowed=self.windowed)


def _parse_csv(handle: BinaryIO, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    # One rule for the whole file, so "AB" never means two symbols on one line and one on another:
    # read as characters until a sequence holds whitespace, then read the file again, space-separated.
    try:
        return _read_csv(handle, _Examples(source, options, limits), source)
    except _Spaced:
        return _read_csv(handle, _Examples(source, options, limits, spaced=True), source)


def _read_csv(handle: BinaryIO, examples: _Examples, source: str) -> ParsedUpload:
    reader = csv.reader(_lines(handle, source))
    try:
        header = next(reader, None)
        while header is not None and not any(cell.strip() for cell in header):
            header = next(reader, None)  # leading blank lines
        columns = [cell.strip().lower() for cell in header or []]
        options = examples.options
        label_column = options.label_field or fields.LABEL_COLUMN
        if "sequence" not in columns or label_column not in columns:
            found = ", ".join(repr(c) for c in (header or [])[:5]) or "nothing"
            which = "'label'" if label_column == fields.LABEL_COLUMN else f"{label_column!r} (the label field chosen)"
            raise DataValidationError(f"{source}: line {reader.line_num or 1}: the header must name the "
                                      f"columns 'sequence' and {which} (found {found}); add a first line "
                                      f"sequence,label above the examples, or choose the label column")
        if options.split_field and options.split_field not in columns:
            raise DataValidationError(f"{source}: line {reader.line_num or 1}: no column "
                                      f"{options.split_field!r} (the split field chosen); choose one of "
                                      f"{', '.join(columns)}")
        i_seq, i_label = columns.index("sequence"), columns.index(label_column)
        i_split = columns.index(options.split_field) if options.split_field else None
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            number = reader.line_num
            if len(row) > len(columns):
                raise DataValidationError(f"{source}: line {number}: expected {len(columns)} fields "
                                          f"({', '.join(columns)}), found {len(row)}; quote fields that hold "
                                          f"commas")
            row = row + [""] * (len(columns) - len(row))  # a short row reads as missing fields
            sequence, label = row[i_seq].strip(), row[i_label].strip()
            if not sequence:
                raise DataValidationError(f"{source}: line {number}: empty sequence; fill it in or remove "
                                          f"the line")
            if not label:
                raise DataValidationError(f"{source}: line {number}: missing label; every example needs "
                                          f"its class name in the label column")
            examples.add(sequence, label, f"line {number}", row[i_split].strip() if i_split is not None else "")
    except csv.Error as error:
        raise DataValidationError(f"{source}: line {reader.line_num}: not valid CSV ({error}); save the "
                                  f"file as comma-separated text with a sequence,label header") from None
    if not len(examples):
        raise DataValidationError(f"{source} has a header but no examples; add lines sequence,label below it")
    return examples.finish()


def _parse_fasta(handle: BinaryIO, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    examples = _Examples(source, options, limits)
    record: tuple[int, str, str, list[str]] | None = None  # header line, label, split, sequence parts
    label_at = fields.field_index(options.label_field) if options.label_field else None
    split_at = fields.field_index(options.split_field) if options.split_field else None

    def finish(record: tuple[int, str, str, list[str]]) -> None:
        number, label, split, parts = record
        sequence = "".join(parts)
        if not sequence:
            raise DataValidationError(f"{source}: line {number}: empty sequence (the record has a header "
                                      f"but no sequence lines); add its sequence or remove the record")
        examples.add(sequence, label, f"line {number}", split)

    def field(header: str, at: int, number: int, what: str) -> str:
        parts = fields.header_fields(header)
        if at >= len(parts):
            raise DataValidationError(f"{source}: line {number}: header {header[:60]!r} has {len(parts)} "
                                      f"field(s), so no {fields.field_name(at)} for the {what}; give every "
                                      f"header the same fields (split on '|' and spaces), or choose another "
                                      f"field")
        return parts[at]

    for number, raw in enumerate(_lines(handle, source), 1):
        line = raw.strip()
        if not line or line.startswith(";"):  # ';' starts a comment in classic FASTA
            continue
        if line.startswith(">"):
            header = line[1:].strip()
            if label_at is not None:
                label = field(header, label_at, number, "label")
            elif "|" not in header:
                raise DataValidationError(f"{source}: line {number}: header {line[:60]!r} has no label; "
                                          f"write every header as >id|label (the label is the text after "
                                          f"the last '|'), or choose the field that holds the label")
            else:
                label = fields.after_last_bar(header)
            if not label:
                raise DataValidationError(f"{source}: line {number}: missing label after '|'; write the "
                                          f"header as >id|label")
            split = field(header, split_at, number, "split") if split_at is not None else ""
            if record is not None:
                finish(record)
            record = (number, label, split, [])
        else:
            if record is None:
                raise DataValidationError(f"{source}: line {number}: sequence before the first header; "
                                          f"start every record with a header line >id|label")
            record[3].append("".join(line.split()))
    if record is None:
        raise DataValidationError(f"{source} holds no FASTA records; start each with a header >id|label")
    finish(record)
    return examples.finish()


def _check_classes(parsed: ParsedUpload, source: str, limits: UploadLimits, kind: str) -> None:
    if len(parsed.class_names) < 2:
        only = parsed.class_names[0] if parsed.class_names else "(none)"
        raise DataValidationError(f"{source}: every example has the label {only!r}; a classifier needs at "
                                  f"least 2 classes: add examples of another class")
    np = _numpy()
    if parsed.groups is not None:  # MIDI: a file's windows share its class and its split
        first = np.unique(parsed.groups, return_index=True)[1]
        units, what = parsed.labels[first], "MIDI files" if kind == "midi" else "records"
    else:
        units, what = parsed.labels, "examples"
    if parsed.splits is not None:
        _check_own_split(parsed, source, limits)
        return
    counts = np.bincount(units, minlength=len(parsed.class_names))
    need = limits.min_per_class
    small = [(parsed.class_names[i], int(counts[i])) for i in np.flatnonzero(counts < need)]
    if small:
        shown = ", ".join(f"{name!r} ({n})" for name, n in small[:10])
        more = f" and {len(small) - 10} more" if len(small) > 10 else ""
        raise DataValidationError(
            f"{source}: {len(small)} of {len(parsed.class_names)} classes have fewer than {need} {what}: "
            f"{shown}{more}. Each class needs {need} so that train, validation and test each hold "
            f"{limits.min_per_split} of it; add {what} to these classes, merge them into related ones, "
            f"or drop their rows")


def _check_own_split(parsed: ParsedUpload, source: str, limits: UploadLimits) -> None:
    """The file's own split: every class needs ``min_per_split`` examples in each split it gives, and
    train enough more to give the splits it lacks (taken from train, see :func:`own_split`)."""
    np = _numpy()
    present = [i for i in range(3) if (parsed.splits == i).any()]
    if 0 not in present:
        raise DataValidationError(f"{source}: the split field names no training records; mark the records to "
                                  f"train on with train or training")
    missing = 3 - len(present)
    short = []
    for i in present:
        counts = np.bincount(parsed.labels[parsed.splits == i], minlength=len(parsed.class_names))
        need = limits.min_per_split * (1 + missing if i == 0 else 1)
        short += [f"{parsed.class_names[c]!r} has {int(counts[c])} in {fields.SPLITS[i]}"
                  for c in np.flatnonzero(counts < need)]
    if short:
        taken = (f" ({' and '.join(fields.SPLITS[i] for i in range(3) if i not in present)} are taken from "
                 f"train, so train needs {limits.min_per_split * (1 + missing)})") if missing else ""
        raise DataValidationError(
            f"{source}: the file's own split leaves classes too small to measure: {'; '.join(short[:6])}"
            f"{' ...' if len(short) > 6 else ''}. Every class needs {limits.min_per_split} examples in each of "
            f"train, validation and test{taken}; add examples, or choose no split field (a seeded 80/10/10 "
            f"split)")


def own_split(labels, splits, seed: int, min_per_split: int) -> tuple[list[int], list[int], list[int]]:
    """Rows of train, validation and test as the file's split says; a split the file lacks is taken
    from train: of each class, a seeded ninth of its training rows (at least ``min_per_split``)."""
    import numpy as np

    labels, splits = np.asarray(labels), np.asarray(splits).copy()
    rng = np.random.default_rng(seed)
    for lacking in [i for i in (1, 2) if not (splits == i).any()]:
        for klass in np.unique(labels):
            rows = np.flatnonzero((splits == 0) & (labels == klass))
            take = max(min_per_split, int(round(len(rows) / 9)))
            splits[rng.permutation(rows)[:take]] = lacking
    return tuple(np.flatnonzero(splits == i).tolist() for i in range(3))  # type: ignore[return-value]


def _class_units(parsed: ParsedUpload) -> tuple[int, ...]:
    if parsed.groups is None:
        return ()
    np = _numpy()
    first = np.unique(parsed.groups, return_index=True)[1]
    return tuple(int(n) for n in np.bincount(parsed.labels[first], minlength=len(parsed.class_names)))


def expected_test_size(up: UploadInfo, folds: int = 0) -> tuple[int, int]:
    """How many units (records; MIDI files) the test split of ``upload:NAME`` holds, and of how many
    classes, by the rules of :meth:`UploadedDiscipline.build` (the file's own split is counted in
    examples, and a test split it lacks is estimated as a ninth of train). With ``folds``, a test fold:
    a k-th of the units, with every class that has a unit in each fold."""
    classes = len(up.class_names)
    if folds:
        units = up.class_units or up.class_counts
        return round(sum(units) / folds), sum(1 for u in units if u >= folds)
    if up.split_counts:
        test = up.split_counts[2] or max(classes * up.limits.min_per_split, round(up.split_counts[0] / 9))
        return test, classes
    units = up.class_units or up.class_counts
    return sum(max(up.limits.min_per_split, int(round(u * SPLIT_FRACTIONS[2]))) for u in units), classes


def expected_sizes(up: UploadInfo, folds: int = 0) -> tuple[int, int, int]:
    """About how many examples (windows count one each) train, validation and test of ``upload:NAME`` hold
    (with ``folds``: of one fold's run, see :func:`labcore.data.base.fold_split`)."""
    if folds:
        test = round(up.n_examples / folds)
        validation = round((up.n_examples - test) / 9)
        return up.n_examples - test - validation, validation, test
    if up.split_counts:
        train, validation, test = up.split_counts
        carved = max(len(up.class_names) * up.limits.min_per_split, round(train / 9))
        validation, test = validation or carved, test or carved
        return up.n_examples - validation - test, validation, test
    per_unit = up.n_examples / max(1, up.n_groups)
    test = round(expected_test_size(up)[0] * per_unit)
    return up.n_examples - 2 * test, test, test


def window_starts(length: int, window: int) -> list[int]:
    """Starts of windows of ``window`` symbols covering ``length``: consecutive, the last one ending at
    the end (so it overlaps the one before when ``length`` is not a multiple).

    >>> window_starts(1000, 510)
    [0, 490]
    >>> window_starts(1020, 510)
    [0, 510]
    """
    starts = list(range(0, length - window + 1, window))
    if starts[-1] + window < length:
        starts.append(length - window)
    return starts


def _warnings(parsed: ParsedUpload, options: UploadOptions, kind: str) -> tuple[str, ...]:
    out = []
    if kind in ("csv", "fasta") and all(fields.split_of(c) for c in parsed.class_names):
        out.append(f"the labels ({', '.join(parsed.class_names)}) are split names, not classes: the label was "
                   f"read from {fields.describe_field(kind, options.label_field or (fields.LABEL_COLUMN if kind == 'csv' else ''))}; "
                   f"upload again choosing the field that holds the class as the label and this one as the split")
    return tuple(out)


# ------------------------------------------------------------------------------------ zip archives


def _open_zip(handle: BinaryIO, source: str, limits: UploadLimits) -> zipfile.ZipFile:
    """Open an untrusted zip (or .npz) after checking every entry's path, kind and declared size."""
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise DataValidationError(f"{source} is not a readable zip archive ({error}); create it again "
                                  f"with a zip tool (or np.savez for .npz)") from None
    entries = archive.infolist()
    if len(entries) > limits.max_zip_entries:
        raise DataValidationError(f"{source} holds {len(entries)} entries, more than the limit of "
                                  f"{limits.max_zip_entries}; upload fewer files")
    for entry in entries:
        name = entry.filename
        normal = name.replace("\\", "/")
        if (entry.external_attr >> 16) & 0o170000 == 0o120000:
            raise DataValidationError(f"{source}: entry {name!r} is a symbolic link; links are refused in "
                                      f"uploads: zip the files themselves")
        if normal.startswith("/") or re.match(r"[A-Za-z]:", normal):
            raise DataValidationError(f"{source}: entry {name!r} has an absolute path and would land outside "
                                      f"its folder; zip with relative paths (class/piece.mid)")
        if ".." in normal.split("/"):
            raise DataValidationError(f"{source}: entry {name!r} has a '..' component and would land outside "
                                      f"its folder; zip with plain relative paths (class/piece.mid)")
        if entry.flag_bits & 0x1:
            raise DataValidationError(f"{source}: entry {name!r} is encrypted; zip it without a password")
    declared = sum(entry.file_size for entry in entries)
    if declared > limits.max_unpacked_bytes:
        raise DataValidationError(f"{source} would unpack to {_mb(declared)}, more than the limit of "
                                  f"{_mb(limits.max_unpacked_bytes)}; upload fewer or smaller files")
    return archive


class _ReadBudget:
    """Counts decompressed bytes as they are read, in case an archive's declared sizes lie."""

    def __init__(self, source: str, limit: int) -> None:
        self.source, self.limit, self.used = source, limit, 0

    def read(self, archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> bytes:
        chunks = []
        try:
            with archive.open(entry) as handle:
                while chunk := handle.read(_MB):
                    self.used += len(chunk)
                    if self.used > self.limit:
                        raise DataValidationError(f"{self.source} unpacks to more than {_mb(self.limit)} "
                                                  f"(reading {entry.filename!r}); upload fewer or smaller files")
                    chunks.append(chunk)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
            raise DataValidationError(f"{self.source}: entry {entry.filename!r} cannot be unpacked ({error}); "
                                      f"create the zip again with a standard zip tool") from None
        return b"".join(chunks)


def _parse_midi_zip(handle: BinaryIO, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    from labcore.data.music import UnreadableMidiError, note_names, pitches_from_midi, windows

    archive = _open_zip(handle, source, limits)
    budget = _ReadBudget(source, limits.max_unpacked_bytes)
    window = options.max_length
    # Pitches 0..127 are the ids; windows are never longer than max_length, so none is "too long".
    examples = _Examples(source, options, limits, alphabet=note_names())
    ignored = 0
    unreadable: list[tuple[str, str]] = []  # entry, why
    with archive:
        for entry in sorted(archive.infolist(), key=lambda e: e.filename):
            if entry.is_dir():
                continue
            parts = PurePosixPath(entry.filename.replace("\\", "/")).parts
            if any(p.startswith(".") or p == "__MACOSX" for p in parts) or \
                    not parts[-1].lower().endswith(MIDI_SUFFIXES):
                ignored += 1
                continue
            if len(parts) < 2:
                raise DataValidationError(f"{source}: {entry.filename!r} is not inside a class folder; put "
                                          f"each MIDI file in a folder named after its class "
                                          f"(composerA/piece1.mid)")
            try:
                pitches = pitches_from_midi(budget.read(archive, entry))
            except UnreadableMidiError as error:
                unreadable.append((entry.filename, error.why))
                continue
            if not pitches:
                unreadable.append((entry.filename, "no notes outside drum tracks"))
                continue
            # Full windows only, as the music discipline cuts them (equal-length examples, so no
            # short tail gets a full vote); a piece shorter than one window is kept whole.
            for cut in windows(pitches, window):
                examples.add_ids(cut, parts[-2], "/".join(parts), entry.filename)
    if unreadable and not options.skip_unreadable:
        # Every unreadable file at once, so one upload (or one re-zip) deals with all of them.
        listed = "; ".join(f"{name} ({why})" for name, why in unreadable[:20])
        more = f"; and {len(unreadable) - 20} more" if len(unreadable) > 20 else ""
        raise DataValidationError(f"{source}: {len(unreadable)} file(s) cannot be read as MIDI with notes: "
                                  f"{listed}{more}. Skip them and save the rest (the option 'skip unreadable "
                                  f"MIDI files', skip_unreadable=True), or export them again as standard MIDI "
                                  f"files")
    if not len(examples):
        raise DataValidationError(f"{source} holds no readable .mid or .midi files; zip class folders of MIDI "
                                  f"files (composerA/piece1.mid)")
    return dataclasses.replace(examples.finish(), ignored=ignored,
                               skipped=tuple(f"{name} ({why})" for name, why in unreadable))


# ----------------------------------------------------------------------------------------- images


def _npy_header(archive: zipfile.ZipFile, member: str, source: str):
    """Shape and dtype from an .npy header, read before any array memory is allocated."""
    import numpy as np

    try:
        with archive.open(member) as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(handle)
            elif version == (2, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(handle)
            else:
                raise ValueError(f"format version {version} is not supported")
    except (ValueError, zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
        raise DataValidationError(f"{source}: array {member!r} is not a readable .npy array ({error}); "
                                  f"save the arrays with np.savez") from None
    return shape, dtype


_NUMERIC_HINT = {"images": "numbers, e.g. images.astype(np.float32)",
                 "labels": "integers or fixed-width strings, e.g. np.asarray(labels, dtype=str)"}


def _parse_npz(handle: BinaryIO, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    import numpy as np

    archive = _open_zip(handle, source, limits)
    with archive:
        members = set(archive.namelist())
        missing = [k for k in ("images", "labels") if f"{k}.npy" not in members]
        if missing:
            found = ", ".join(sorted(m.removesuffix(".npy") for m in members)) or "none"
            raise DataValidationError(f"{source}: no array named {' or '.join(missing)} (found: {found}); "
                                      f"save with np.savez(file, images=images, labels=labels)")
        headers = {k: _npy_header(archive, f"{k}.npy", source) for k in ("images", "labels")}
    for key, (shape, dtype) in headers.items():
        if dtype.hasobject:
            raise DataValidationError(f"{source}: array {key!r} holds Python objects (dtype object), which "
                                      f"are refused because loading them would run pickled code; save "
                                      f"{_NUMERIC_HINT[key]}")
        size = math.prod(shape) * dtype.itemsize  # Python ints: a crafted shape cannot overflow
        if size > limits.max_unpacked_bytes:
            raise DataValidationError(f"{source}: array {key!r} of shape {shape} needs {_mb(size)}, more than "
                                      f"the limit of {_mb(limits.max_unpacked_bytes)}; upload fewer images")
    (image_shape, image_dtype), (label_shape, label_dtype) = headers["images"], headers["labels"]
    if len(image_shape) not in (3, 4):
        raise DataValidationError(f"{source}: images has shape {image_shape}; expected (N,H,W) or (N,H,W,C)")
    if image_dtype.kind not in "biuf":
        raise DataValidationError(f"{source}: images has dtype {image_dtype}; save numbers (uint8 0..255 or "
                                  f"float32)")
    if len(label_shape) != 1 or label_shape[0] != image_shape[0]:
        raise DataValidationError(f"{source}: labels has shape {label_shape} but there are {image_shape[0]} "
                                  f"images; save one label per image, shape ({image_shape[0]},)")
    if label_dtype.kind not in "biuUS":
        raise DataValidationError(f"{source}: labels has dtype {label_dtype}; save class numbers as integers "
                                  f"or class names as strings")
    if image_shape[0] == 0 or 0 in image_shape[1:]:
        raise DataValidationError(f"{source}: images has shape {image_shape}, which holds no pixels; save at "
                                  f"least one non-empty image per example")
    if image_shape[0] > limits.max_rows:
        raise DataValidationError(f"{source}: {image_shape[0]:,} images, more than {limits.max_rows:,}, the lab's "
                                  f"cap on examples; upload at most {limits.max_rows:,} (a random sample of "
                                  f"each class keeps their shares)")

    handle.seek(0)
    try:
        with np.load(handle, allow_pickle=False) as arrays:  # never pickle: the file is untrusted
            images, raw_labels = arrays["images"], arrays["labels"]
    except (ValueError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise DataValidationError(f"{source}: the arrays cannot be read ({error}); save them again with "
                                  f"np.savez(file, images=images, labels=labels)") from None
    if images.ndim == 3:
        images = images[..., None]
    if images.dtype == np.uint8:
        images = images.astype(np.float32) / 255.0
    else:
        images = images.astype(np.float32)
    if not np.isfinite(images).all():
        bad = int(np.flatnonzero(~np.isfinite(images).reshape(len(images), -1).all(axis=1))[0])
        raise DataValidationError(f"{source}: image {bad} holds NaN or infinite values; replace them "
                                  f"(e.g. np.nan_to_num) before saving")
    patches = _patches(images, options.patch_size, options.max_length, source)

    if raw_labels.dtype.kind in "US":
        names = [str(x.decode("utf-8", "replace") if isinstance(x, bytes) else x).strip() for x in raw_labels]
        empty = [i for i, n in enumerate(names) if not n]
        if empty:
            raise DataValidationError(f"{source}: label {empty[0]} is empty; give every image a class name")
        class_names = tuple(sorted(set(names)))
    else:
        values = raw_labels.astype(np.int64).tolist()
        names = [str(v) for v in values]
        class_names = tuple(str(v) for v in sorted(set(values)))
    if len(class_names) > limits.max_classes:
        raise DataValidationError(f"{source}: {len(class_names):,} classes, more than the lab's cap of "
                                  f"{limits.max_classes} classes; merge related classes or drop the images of "
                                  f"classes you do not need")
    index = {c: i for i, c in enumerate(class_names)}
    return ParsedUpload(
        input_kind="vectors", class_names=class_names,
        labels=np.array([index[n] for n in names], dtype=np.int32), vectors=patches,
        vector_dim=int(patches.shape[2]), longest=int(patches.shape[1]))


def _patches(images, patch: int, max_patches: int, source: str):
    """[N,H,W,C] -> [N, patches, patch*patch*C], zero-padding H and W up to a multiple of ``patch``."""
    from labcore.data.images import cut_patches

    _, height, width, _ = images.shape
    rows, cols = -(-height // patch), -(-width // patch)
    if rows * cols > max_patches:
        better = next(p for p in range(patch, max(height, width) + 1)
                      if -(-height // p) * -(-width // p) <= max_patches)
        raise DataValidationError(f"{source}: images of {height}x{width} give {rows * cols} patches of "
                                  f"{patch}x{patch}, more than max_length {max_patches}; upload again with "
                                  f"patch_size={better}, a larger max_length, or smaller images")
    return cut_patches(images, patch)


# ------------------------------------------------------------------------------------- discipline


@functools.lru_cache(maxsize=None)
def _params_class(fingerprint: str) -> type:
    # One Params class per upload content: the fingerprint default puts the content into every cache
    # key and run spec built from the defaults, so a replaced file never serves the old data set.
    params = dataclasses.make_dataclass(
        "UploadParams",
        [("seed", int, dataclasses.field(default=0)),  # seed of the 80/10/10 split, or of the folds
         ("fingerprint", str, dataclasses.field(default=fingerprint)),  # sha256 prefix of the file
         # k-fold cross-validation: 0 for the fixed split; k cuts the data into k folds, and a run tests on
         # fold `fold` (0 .. k-1). Each fold is a parameter, so each has its own data set and result key.
         ("folds", int, dataclasses.field(default=0)),
         ("fold", int, dataclasses.field(default=0))],
        frozen=True)
    params.__module__ = __name__
    return params


class UploadedDiscipline(Discipline):
    """The discipline ``upload:NAME`` over one saved upload."""

    def __init__(self, upload: UploadInfo) -> None:
        self.upload = upload
        self.name = f"upload:{upload.name}"
        self.title = f"Upload: {upload.name} ({upload.filename})"
        self.Params = _params_class(upload.fingerprint)

    def info(self, params: Any) -> DisciplineInfo:
        up = self.upload
        params = params if params is not None else self.Params()  # None: the upload as such, its fixed split
        check_folds(up, params.folds, params.fold)
        how = ("by file (windows of a file vote)" if up.kind == "midi" else
               "by record (windows of a record vote)" if up.windowed else "by class")
        counts = ", ".join(f"{c} {n}" for c, n in zip(up.class_names, up.class_counts))
        run_notes = []
        if up.truncated:
            run_notes.append(f"{up.truncated} sequence(s) of the upload cut to its max length of "
                             f"{up.options.max_length} symbols (the rest of each is not seen)")
        if up.windowed:
            run_notes.append(f"{up.windowed} sequence(s) of the upload longer than {up.options.max_length} symbols cut "
                             f"into windows of {up.options.max_length}; a record's windows share its split and "
                             f"evaluation votes over them")
        if up.skipped:
            run_notes.append(f"{len(up.skipped)} unreadable MIDI file(s) left out of the upload")
        if params.folds:
            run_notes.insert(0, f"k-fold cross-validation: tested on fold {params.fold} of {params.folds} "
                                f"(folds 0-{params.folds - 1}, about {expected_test_size(up, params.folds)[0]} "
                                f"{'files' if up.kind == 'midi' else 'records'} each); the {params.folds} folds' "
                                f"runs together test every {'file' if up.kind == 'midi' else 'record'} once")
        extra = "".join(f" {note[0].upper()}{note[1:]}." for note in run_notes[:2])
        if up.kind == "npz":
            extra += f" Patches of {up.options.patch_size}x{up.options.patch_size}, zero-padded."
        if up.ignored_entries:
            extra += f" {up.ignored_entries} zip entr(y/ies) skipped (hidden or not MIDI)."
        if up.skipped:
            extra += f" Unreadable MIDI file(s) left out: {'; '.join(up.skipped[:5])}."
        split = f"Seeded 80/10/10 split, stratified {how}."
        if params.folds:
            split = (f"Fold {params.fold} of a seeded {params.folds}-fold cross-validation, stratified {how}: test "
                     f"is this fold, validation a seeded ninth of each class of the other folds, train the rest.")
        elif up.options.split_field:
            given = ", ".join(f"{s} {n}" for s, n in zip(fields.SPLITS, up.split_counts) if n)
            split = (f"The file's own split ({given}; from {fields.describe_field(up.kind, up.options.split_field)})"
                     + (", a split it lacks taken from train by a seeded ninth of each class." if 0 in up.split_counts
                        else "."))
        for warning in up.warnings:
            extra += f" Warning: {warning}."
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind=up.input_kind, output_kind="class",
            metric="accuracy", citation="User upload", source=up.filename, licence="as provided by the user",
            alphabet=up.alphabet, vector_dim=up.vector_dim, class_names=up.class_names,
            max_length=up.max_length, vote_by_group=up.kind == "midi" or up.windowed > 0, vectors_are_patches=up.kind == "npz",
            notes=f"Uploaded {up.created} ({up.kind}, sha256 {up.fingerprint}). {up.n_examples} examples: "
                  f"{counts}. {split}{extra}", run_notes=tuple(run_notes),
        )

    def available(self) -> tuple[bool, str]:
        up = self.upload
        if up.format < 2:
            return False, (f"upload {up.name!r} was saved by an older version of the lab, which kept no "
                           f"checked examples: upload the file again")
        if not (uploads_dir() / up.name / EXAMPLES).is_file():
            return False, f"the examples of upload {up.name!r} are gone: upload the file again"
        return True, ""

    def build(self, params: Any, progress):
        import datasets
        import numpy as np
        import pyarrow as pa

        up = self.upload
        if params.fingerprint != up.fingerprint:
            raise DataValidationError(f"upload {up.name!r} has changed since these parameters were made "
                                      f"(fingerprint {params.fingerprint}, now {up.fingerprint}); set the run "
                                      f"up again on the current upload")
        ok, why = self.available()
        if not ok:
            raise DataValidationError(why)
        path = uploads_dir() / up.name / EXAMPLES
        progress(f"reading the checked examples of {up.filename}")
        try:
            if _sha256(path) != up.examples_sha256:
                raise DataValidationError(f"upload {up.name!r}: {path} no longer matches its manifest "
                                          f"(sha256); delete the upload and upload the file again")
            with np.load(path, allow_pickle=False) as stored:  # plain arrays: never pickled objects
                arrays = {key: stored[key] for key in stored.files}
        except (OSError, ValueError, zipfile.BadZipFile) as error:
            raise DataValidationError(f"upload {up.name!r}: cannot read {path} ({error}); delete the upload "
                                      f"and upload the file again") from None
        labels = arrays["labels"].astype(np.int64)
        groups = arrays["group_names"][arrays["groups"]].tolist() if "groups" in arrays else None
        own = arrays.get("splits")
        if up.input_kind == "tokens":
            # Arrow straight from the flat arrays: one list<int64> column, no Python object per symbol.
            columns = {"label": pa.array(labels), "tokens": pa.ListArray.from_arrays(
                pa.array(arrays["offsets"]), pa.array(arrays["tokens"].astype(np.int64)))}
            if groups is not None:
                columns["group"] = pa.array(groups, type=pa.string())
            table = pa.table(columns)
        else:
            table = datasets.Dataset.from_dict({"label": labels, "vectors": arrays["vectors"]}).data.table
        del arrays
        if params.folds:
            parts = fold_split(labels.tolist(), params.folds, params.fold, params.seed, groups=groups,
                               min_per_split=up.limits.min_per_split)
        elif own is not None:
            parts = own_split(labels, own, params.seed, up.limits.min_per_split)
        else:
            parts = stratified_split(labels.tolist(), SPLIT_FRACTIONS, params.seed, groups=groups,
                                     min_per_split=up.limits.min_per_split)
        # Each split is taken out of the table in Arrow; the fingerprints are given (the upload's
        # sha256 prefix and the seed), where datasets would otherwise hash every row to make them.
        return datasets.DatasetDict({
            split: datasets.Dataset(table.take(pa.array(rows, type=pa.int64())),
                                    fingerprint=f"upload-{up.fingerprint}-{params.seed}-"
                                                f"{params.fold}of{params.folds}-{split}")
            for split, rows in zip(("train", "validation", "test"), parts)})


def check_folds(up: UploadInfo, folds: Any, fold: Any) -> None:
    """The k-fold parameters of a run on ``up``: ``folds`` 0 (the fixed split) or MIN_FOLDS..MAX_FOLDS, and
    ``fold`` one of its folds; refused on a file that gives its own split, which the folds would ignore."""
    for name, value in (("folds", folds), ("fold", fold)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise LabError(f"the discipline parameter {name} must be a whole number, got {value!r}")
    if folds == 0:
        if fold:
            raise LabError(f"fold {fold} is given without folds: set folds ({MIN_FOLDS} to {MAX_FOLDS}) for k-fold "
                           f"cross-validation, or leave fold at 0 for the fixed split")
        return
    if not MIN_FOLDS <= folds <= MAX_FOLDS:
        raise LabError(f"folds must be 0 (the fixed 80/10/10 split) or from {MIN_FOLDS} to {MAX_FOLDS}, got {folds}")
    if not 0 <= fold < folds:
        raise LabError(f"fold must be one of 0 to {folds - 1} for {folds} folds, got {fold}")
    if up.options.split_field:
        raise LabError(f"upload {up.name!r} gives its own split (from "
                       f"{fields.describe_field(up.kind, up.options.split_field)}), which k-fold cross-validation "
                       f"would ignore: leave folds at 0, or upload the file again with no split field")


def fold_specs(spec: Any, folds: int) -> list[Any]:
    """One spec per fold of a ``folds``-fold cross-validation of ``spec`` (a RunSpec on an upload): the
    runs of one condition, which Compare counts as its repeats (see :data:`labcore.compare.REPEAT_FIELDS`)."""
    own = dict(spec.discipline_params)
    return [spec.replace(discipline_params={**own, "folds": folds, "fold": fold}) for fold in range(folds)]


def uploaded_discipline(name: str) -> UploadedDiscipline:
    """The discipline of saved upload ``name`` (``upload:NAME`` or ``NAME``)."""
    return UploadedDiscipline(upload_info(name))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
