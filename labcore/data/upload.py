"""A user's own discipline: an uploaded file of labelled sequences or images.

Formats, chosen by the file's extension (or by ``kind=``):

* ``csv`` (``.csv``): a header naming the columns ``sequence`` and ``label`` (other columns are
  ignored). A sequence is a string of one-character symbols (``ACGGTA``), unless some sequence in
  the file contains whitespace: then *every* sequence is read as whitespace-separated symbols
  (``C4 E4 G4``). The label is the class name.
* ``fasta`` (``.fasta .fa .faa .fna .fas``): each record's header is ``>id|label``; the label is the
  text after the *last* ``|`` (so ids such as ``sp|P12345`` keep their own bars). A header without
  ``|`` is an error: a bare ``>label`` is not accepted, because most FASTA files carry only ids
  there and would silently become one class per record. Sequence lines may be wrapped; every
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

Uploads are untrusted: the raw bytes are size-checked before parsing, zip members are read in
memory (never extracted) after their paths, kinds and unpacked sizes are checked, ``.npy`` headers
are checked before any array is allocated, and ``np.load`` always runs with ``allow_pickle=False``.

Each upload lives in ``cache/uploads/NAME/``: the file as uploaded (``data.csv``, ``data.zip``, ...)
and ``manifest.json`` (kind, alphabet, classes, counts, options, sha256, creation time). Saving
validates the whole file in memory, writes into a temporary folder and only then swaps it in, so a
bad file never replaces a good upload and a failed save leaves nothing behind.

The discipline ``upload:NAME`` reads the stored file again and splits it 80/10/10 (seeded,
stratified by class; by file for MIDI). Its parameters carry the upload's ``fingerprint`` (a prefix
of its sha256), so replacing the file gives new cache keys instead of serving the old data.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Sequence

from labcore import paths
from labcore.data.base import Discipline, DisciplineInfo, stratified_split
from labcore.errors import DataValidationError, LabError, UnknownNameError

NAME_PATTERN = re.compile(r"[a-z0-9-]{1,40}")
KINDS = ("csv", "fasta", "midi", "npz")
EXTENSIONS = {".csv": "csv", ".fasta": "fasta", ".fa": "fasta", ".faa": "fasta", ".fna": "fasta",
              ".fas": "fasta", ".zip": "midi", ".npz": "npz"}
STORED_NAMES = {"csv": "data.csv", "fasta": "data.fasta", "midi": "data.zip", "npz": "data.npz"}
# Default max_length per kind: BERT-sized models have 512 positions (Kao & Lee truncate proteins to
# 512); music is cut into 128-note segments as in Kao & Lee appendix G.4; images count patches.
DEFAULT_MAX_LENGTH = {"csv": 512, "fasta": 512, "midi": 128, "npz": 512}
MIDI_SUFFIXES = (".mid", ".midi")
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
_MB = 2**20


@dataclass(frozen=True)
class UploadLimits:
    """What an upload may cost; every number is checked before the work it bounds is done."""

    max_bytes: int = 50 * _MB  # the uploaded file itself
    max_unpacked_bytes: int = 200 * _MB  # all members of a .zip/.npz, decompressed (zip bombs)
    max_zip_entries: int = 10_000  # a million empty entries is slow to list, not big
    max_symbols: int = 256  # distinct symbols of a token upload (each becomes a vocabulary slot)
    min_examples: int = 10  # rows (files for MIDI): with 80/10/10, fewer leaves a split empty


@dataclass(frozen=True)
class UploadOptions:
    """How the file is read; stored in the manifest so every later build reads it the same way."""

    max_length: int = 0  # symbols / notes per window / patches; 0 means the kind's default
    truncate: bool = False  # csv/fasta: cut over-long sequences instead of refusing them
    patch_size: int = 4  # npz: side of the square patches


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

    @property
    def fingerprint(self) -> str:
        return self.sha256[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"format": MANIFEST_FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "UploadInfo":
        values = {k: v for k, v in data.items() if k != "format"}
        for key in ("alphabet", "class_names", "class_counts"):
            values[key] = tuple(values[key])
        values["options"] = UploadOptions(**values["options"])
        values["limits"] = UploadLimits(**values["limits"])
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


def save_upload(name: str, filename: str, data: bytes, kind: str | None = None, *,
                max_length: int = 0, truncate: bool = False, patch_size: int = 4,
                limits: UploadLimits = UploadLimits()) -> UploadInfo:
    """Validate ``data`` and store it as upload ``name``, replacing an older upload of that name.

    ``filename`` gives the format by its extension unless ``kind`` names it. ``max_length`` (0: the
    kind's default) bounds symbols per sequence, notes per MIDI window or patches per image; with
    ``truncate=True`` longer CSV/FASTA sequences are cut instead of refused. Raises
    :class:`DataValidationError` naming the line or file and the fix; then nothing is stored or changed.
    """
    name = _check_name(name)
    kind = detect_kind(filename, kind)
    shown = _display_name(filename)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise LabError(f"{shown}: the upload must be given as bytes, not {type(data).__name__}")
    data = bytes(data)
    if max_length < 0:
        raise LabError(f"max_length must be positive (or 0 for the default), not {max_length}")
    if patch_size < 1:
        raise LabError(f"patch_size must be at least 1, not {patch_size}")
    options = UploadOptions(max_length=max_length or DEFAULT_MAX_LENGTH[kind], truncate=truncate,
                            patch_size=patch_size)
    parsed = parse_upload(kind, data, shown, options, limits)

    counts = [0] * len(parsed.class_names)
    for label in parsed.labels:
        counts[label] += 1
    info = UploadInfo(
        name=name, kind=kind, filename=shown, stored=STORED_NAMES[kind], size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        input_kind=parsed.input_kind, alphabet=parsed.alphabet, vector_dim=parsed.vector_dim,
        class_names=parsed.class_names, class_counts=tuple(counts), n_examples=len(parsed.labels),
        n_groups=len(set(parsed.groups)) if parsed.groups is not None else len(parsed.labels),
        max_length=parsed.longest, truncated=parsed.truncated, ignored_entries=parsed.ignored,
        options=options, limits=limits,
    )
    _store(info, data)
    return info


def _store(info: UploadInfo, data: bytes) -> None:
    root = uploads_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / info.name
    incoming = Path(tempfile.mkdtemp(dir=root, prefix=".incoming-"))
    replaced = None
    try:
        (incoming / info.stored).write_bytes(data)
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


# ---------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ParsedUpload:
    """A validated upload in memory: one entry per example (a window, for MIDI)."""

    input_kind: str
    class_names: tuple[str, ...]
    labels: list[int]  # index into class_names
    tokens: list[list[int]] | None = None  # input_kind "tokens": indices into alphabet
    vectors: Any = None  # input_kind "vectors": float32 array [N, patches, vector_dim]
    groups: list[str] | None = None  # MIDI: the file each window comes from
    alphabet: tuple[str, ...] = ()
    vector_dim: int = 0
    longest: int = 0
    truncated: int = 0
    ignored: int = 0


def parse_upload(kind: str, data: bytes, source: str, options: UploadOptions,
                 limits: UploadLimits = UploadLimits()) -> ParsedUpload:
    """Validate and read an upload's bytes; ``source`` names the file in error messages."""
    if len(data) > limits.max_bytes:
        raise DataValidationError(f"{source} is {_mb(len(data))}, more than the upload limit of "
                                  f"{_mb(limits.max_bytes)}; upload fewer examples, or raise the limit "
                                  f"(save_upload(..., limits=UploadLimits(max_bytes=...)))")
    if not data.strip():
        raise DataValidationError(f"{source} is empty; upload a file that holds labelled examples "
                                  f"({_format_hint(kind)})")
    reader = {"csv": _parse_csv, "fasta": _parse_fasta, "midi": _parse_midi_zip, "npz": _parse_npz}[kind]
    parsed = reader(data, source, options, limits)
    _check_classes(parsed, source, limits, kind)
    return parsed


def _format_hint(kind: str) -> str:
    return {"csv": "a header line sequence,label and one example per line",
            "fasta": "records with headers >id|label",
            "midi": "a zip of class folders holding .mid files, e.g. composerA/piece1.mid",
            "npz": "arrays images (N,H,W) or (N,H,W,C) and labels (N,)"}[kind]


def _mb(n: int) -> str:
    return f"{n / _MB:.1f} MB"


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")  # -sig: spreadsheet programs start CSVs with a byte-order mark
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise DataValidationError(f"{source}: line {line}: not UTF-8 text (byte {data[error.start]:#04x}); "
                                  f"save the file as UTF-8 text") from None


def _parse_csv(data: bytes, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    reader = csv.reader(io.StringIO(_decode(data, source), newline=""))
    sequences: list[str] = []
    labels: list[str] = []
    lines: list[int] = []
    try:
        header = next(reader, None)
        while header is not None and not any(cell.strip() for cell in header):
            header = next(reader, None)  # leading blank lines
        columns = [cell.strip().lower() for cell in header or []]
        if "sequence" not in columns or "label" not in columns:
            found = ", ".join(repr(c) for c in (header or [])[:5]) or "nothing"
            raise DataValidationError(f"{source}: line {reader.line_num or 1}: the header must name the "
                                      f"columns 'sequence' and 'label' (found {found}); add a first line "
                                      f"sequence,label above the examples")
        i_seq, i_label = columns.index("sequence"), columns.index("label")
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
            sequences.append(sequence)
            labels.append(label)
            lines.append(number)
    except csv.Error as error:
        raise DataValidationError(f"{source}: line {reader.line_num}: not valid CSV ({error}); save the "
                                  f"file as comma-separated text with a sequence,label header") from None
    if not sequences:
        raise DataValidationError(f"{source} has a header but no examples; add lines sequence,label below it")
    # One rule for the whole file, so "AB" never means two symbols on one line and one on another.
    spaced = any(any(ch.isspace() for ch in s) for s in sequences)
    symbols = [s.split() if spaced else list(s) for s in sequences]
    where = [f"line {n}" for n in lines]
    return _token_upload(symbols, labels, where, source, options, limits)


def _parse_fasta(data: bytes, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    records: list[tuple[int, str, list[str]]] = []  # header line, label, sequence parts
    for number, raw in enumerate(_decode(data, source).splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(";"):  # ';' starts a comment in classic FASTA
            continue
        if line.startswith(">"):
            header = line[1:].strip()
            if "|" not in header:
                raise DataValidationError(f"{source}: line {number}: header {line[:60]!r} has no label; "
                                          f"write every header as >id|label (the label is the text after "
                                          f"the last '|')")
            label = header.rsplit("|", 1)[1].strip()
            if not label:
                raise DataValidationError(f"{source}: line {number}: missing label after '|'; write the "
                                          f"header as >id|label")
            records.append((number, label, []))
        else:
            if not records:
                raise DataValidationError(f"{source}: line {number}: sequence before the first header; "
                                          f"start every record with a header line >id|label")
            records[-1][2].append("".join(line.split()))
    if not records:
        raise DataValidationError(f"{source} holds no FASTA records; start each with a header >id|label")
    for number, _label, parts in records:
        if not "".join(parts):
            raise DataValidationError(f"{source}: line {number}: empty sequence (the record has a header "
                                      f"but no sequence lines); add its sequence or remove the record")
    return _token_upload([list("".join(parts)) for _, _, parts in records], [r[1] for r in records],
                         [f"line {r[0]}" for r in records], source, options, limits)


def _token_upload(symbols: list[list[str]], labels: list[str], where: list[str], source: str,
                  options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    limit = options.max_length
    too_long = [i for i, s in enumerate(symbols) if len(s) > limit]
    if too_long and not options.truncate:
        first, longest = too_long[0], max(len(symbols[i]) for i in too_long)
        raise DataValidationError(
            f"{source}: {where[first]}: sequence of length {len(symbols[first])} > max_length {limit} "
            f"({len(too_long)} sequence(s) are longer, the longest has {longest}); upload again with "
            f"max_length={longest}, or with truncate=True to cut sequences to {limit} symbols")
    symbols = [s[:limit] for s in symbols]
    alphabet = tuple(sorted({sym for seq in symbols for sym in seq}))
    if len(alphabet) > limits.max_symbols:
        few = ", ".join(repr(a) for a in alphabet[:8])
        raise DataValidationError(
            f"{source}: {len(alphabet)} distinct symbols, more than the {limits.max_symbols} a token upload "
            f"may have (first few: {few}, ...); check that the sequence column holds symbols, not free "
            f"text (a sequence with a space makes every sequence space-separated), or merge rare symbols")
    index = {sym: i for i, sym in enumerate(alphabet)}
    class_names = tuple(sorted(set(labels)))
    class_index = {c: i for i, c in enumerate(class_names)}
    return ParsedUpload(
        input_kind="tokens", class_names=class_names, labels=[class_index[c] for c in labels],
        tokens=[[index[sym] for sym in seq] for seq in symbols], alphabet=alphabet,
        longest=max(len(s) for s in symbols), truncated=len(too_long))


def _check_classes(parsed: ParsedUpload, source: str, limits: UploadLimits, kind: str) -> None:
    if len(parsed.class_names) < 2:
        only = parsed.class_names[0] if parsed.class_names else "(none)"
        raise DataValidationError(f"{source}: every example has the label {only!r}; a classifier needs at "
                                  f"least 2 classes: add examples of another class")
    units = len(set(parsed.groups)) if parsed.groups is not None else len(parsed.labels)
    if units < limits.min_examples:
        what = "MIDI files" if kind == "midi" else "examples"
        raise DataValidationError(f"{source}: only {units} {what}; at least {limits.min_examples} are needed "
                                  f"so that the 80/10/10 split gives validation and test examples: add more")


# ------------------------------------------------------------------------------------ zip archives


def _open_zip(data: bytes, source: str, limits: UploadLimits) -> zipfile.ZipFile:
    """Open an untrusted zip (or .npz) after checking every entry's path, kind and declared size."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
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


def _parse_midi_zip(data: bytes, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    from labcore.data.music import UnreadableMidiError, note_names, pitches_from_midi, windows

    archive = _open_zip(data, source, limits)
    budget = _ReadBudget(source, limits.max_unpacked_bytes)
    window = options.max_length
    tokens: list[list[int]] = []
    labels: list[str] = []
    groups: list[str] = []
    ignored = 0
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
                raise DataValidationError(f"{source}: {entry.filename}: not a readable MIDI file ({error.why}); "
                                          f"export it again as a standard MIDI file or remove it from the "
                                          f"zip") from None
            if not pitches:
                raise DataValidationError(f"{source}: {entry.filename}: no notes outside drum tracks; remove "
                                          f"the file from the zip")
            # Full windows only, as the music discipline cuts them (equal-length examples, so no
            # short tail gets a full vote); a piece shorter than one window is kept whole.
            for cut in windows(pitches, window):
                tokens.append(cut)
                labels.append(parts[-2])
                groups.append("/".join(parts))
    if not tokens:
        raise DataValidationError(f"{source} holds no .mid or .midi files; zip class folders of MIDI files "
                                  f"(composerA/piece1.mid)")
    class_names = tuple(sorted(set(labels)))
    return ParsedUpload(
        input_kind="tokens", class_names=class_names, labels=[class_names.index(c) for c in labels],
        tokens=tokens, groups=groups, alphabet=note_names(), longest=max(len(t) for t in tokens),
        ignored=ignored)


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


def _parse_npz(data: bytes, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    import numpy as np

    archive = _open_zip(data, source, limits)
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

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:  # never pickle: the file is untrusted
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
    index = {c: i for i, c in enumerate(class_names)}
    return ParsedUpload(
        input_kind="vectors", class_names=class_names, labels=[index[n] for n in names], vectors=patches,
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
        [("seed", int, dataclasses.field(default=0)),  # seed of the 80/10/10 split
         ("fingerprint", str, dataclasses.field(default=fingerprint))],  # sha256 prefix of the file
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
        how = "by file (windows of a file vote)" if up.kind == "midi" else "by class"
        counts = ", ".join(f"{c} {n}" for c, n in zip(up.class_names, up.class_counts))
        extra = ""
        if up.truncated:
            extra += f" {up.truncated} sequence(s) truncated to {up.options.max_length}."
        if up.kind == "npz":
            extra += f" Patches of {up.options.patch_size}x{up.options.patch_size}, zero-padded."
        if up.ignored_entries:
            extra += f" {up.ignored_entries} zip entr(y/ies) skipped (hidden or not MIDI)."
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind=up.input_kind, output_kind="class",
            metric="accuracy", citation="User upload", source=up.filename, licence="as provided by the user",
            alphabet=up.alphabet, vector_dim=up.vector_dim, class_names=up.class_names,
            max_length=up.max_length, vote_by_group=up.kind == "midi", vectors_are_patches=up.kind == "npz",
            notes=f"Uploaded {up.created} ({up.kind}, sha256 {up.fingerprint}). {up.n_examples} examples: "
                  f"{counts}. Seeded 80/10/10 split, stratified {how}.{extra}",
        )

    def available(self) -> tuple[bool, str]:
        if not (uploads_dir() / self.upload.name / self.upload.stored).is_file():
            return False, f"the file of upload {self.upload.name!r} is gone: upload it again"
        return True, ""

    def build(self, params: Any, progress):
        import datasets

        up = self.upload
        if params.fingerprint != up.fingerprint:
            raise DataValidationError(f"upload {up.name!r} has changed since these parameters were made "
                                      f"(fingerprint {params.fingerprint}, now {up.fingerprint}); set the run "
                                      f"up again on the current upload")
        path = uploads_dir() / up.name / up.stored
        progress(f"reading {up.filename}")
        try:
            data = path.read_bytes()
        except OSError as error:
            raise DataValidationError(f"upload {up.name!r}: cannot read {path} ({error}); upload the file "
                                      f"again") from None
        if hashlib.sha256(data).hexdigest() != up.sha256:
            raise DataValidationError(f"upload {up.name!r}: {path} no longer matches its manifest (sha256); "
                                      f"delete the upload and upload the file again")
        parsed = parse_upload(up.kind, data, up.filename, up.options, up.limits)
        columns: dict[str, Any] = {"label": parsed.labels}
        if parsed.input_kind == "tokens":
            columns["tokens"] = parsed.tokens
        else:
            columns["vectors"] = parsed.vectors
        if parsed.groups is not None:
            columns["group"] = parsed.groups
        full = datasets.Dataset.from_dict(columns)
        train, val, test = stratified_split(parsed.labels, SPLIT_FRACTIONS, params.seed, groups=parsed.groups,
                                            dealt=True)
        return datasets.DatasetDict(train=full.select(train), validation=full.select(val),
                                    test=full.select(test))


def uploaded_discipline(name: str) -> UploadedDiscipline:
    """The discipline of saved upload ``name`` (``upload:NAME`` or ``NAME``)."""
    return UploadedDiscipline(upload_info(name))
