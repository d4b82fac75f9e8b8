"""What a saved upload is: the rules for its name, the caps on what it may cost (:class:`UploadLimits`),
how its file is read (:class:`UploadOptions`) and its manifest (:class:`UploadInfo`)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from labcore.errors import DataValidationError, LabError

NAME_PATTERN = re.compile(r"[a-z0-9-]{1,40}")
MANIFEST = "manifest.json"
EXAMPLES = "examples.npz"
# 2: examples.npz holds the validated examples (format 1 kept only the file and parsed it per build)
MANIFEST_FORMAT = 2
MB = 2**20


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
    max_bytes: int = 50 * MB
    max_unpacked_bytes: int = 200 * MB  # bytes: all members of a .zip/.npz, decompressed (zip bombs)
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
        if not 1 <= self.max_symbols < 0xD800:  # ids are stored as 1 or 2 bytes (see tokens.TokenExamples)
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
    kind: str  # one of registry.KINDS
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


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise LabError(f"upload name {name!r} is not allowed: use 1 to 40 characters of a-z, 0-9 and '-' "
                       f"(for example 'my-genes')")
    return name


def bare_name(name: str) -> str:
    return name[len("upload:"):] if name.startswith("upload:") else name


def display_name(filename: str) -> str:
    # The browser sends whatever name it likes: keep only the last path part, printable, bounded.
    base = str(filename).replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable())[:200]
    return base or "upload"


def check_size(size: int, source: str, limits: UploadLimits) -> None:
    if size > limits.max_bytes:
        raise DataValidationError(f"{source} is {mb(size)}, more than the upload limit of "
                                  f"{mb(limits.max_bytes)}; upload fewer examples, or raise the limit "
                                  f"(save_upload(..., limits=UploadLimits(max_bytes=...)))")


def mb(n: int) -> str:
    return f"{n / MB:.1f} MB"

