"""The upload formats and the one place the rest of the package looks them up.

Each format is a module of this package (``format_csv``, ``format_fasta``, ``format_midi``,
``format_npz``) exposing ``parse(path, options, limits)`` and a ``FORMAT`` (:class:`UploadFormat`) that
says which extensions mean it, what its stored copy is called and its default max length. A new format
is a new module and one more entry in :data:`FORMATS`; everything else (the accepted extensions, the
Data page's choices, the saved file's name) follows from the registry.

:func:`parse_upload` is how a save reads a file of any format: the checks every format shares (size,
an empty file, enough classes for the splits) around the format's own ``parse``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import BinaryIO, Mapping

from labcore.data.upload import format_csv, format_fasta, format_midi, format_npz
from labcore.data.upload.manifest import MB, UploadLimits, UploadOptions, check_size, display_name
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.data.upload.splits import check_classes
from labcore.errors import DataValidationError, LabError


def _registry(*formats: UploadFormat) -> Mapping[str, UploadFormat]:
    by_kind: dict[str, UploadFormat] = {}
    claimed: dict[str, str] = {}
    for fmt in formats:
        if fmt.kind in by_kind:
            raise LabError(f"two upload formats are called {fmt.kind!r}")
        for extension in fmt.extensions:
            if extension in claimed:
                raise LabError(f"the extension {extension} is claimed by the upload formats {claimed[extension]} "
                               f"and {fmt.kind}")
            claimed[extension] = fmt.kind
        by_kind[fmt.kind] = fmt
    return MappingProxyType(by_kind)


# The order is the order the Data page offers the formats in and error messages list them in.
FORMATS = _registry(format_csv.FORMAT, format_fasta.FORMAT, format_midi.FORMAT, format_npz.FORMAT)
KINDS = tuple(FORMATS)
EXTENSIONS = {extension: fmt.kind for fmt in FORMATS.values() for extension in fmt.extensions}
STORED_NAMES = {kind: fmt.stored_name for kind, fmt in FORMATS.items()}
DEFAULT_MAX_LENGTH = {kind: fmt.default_max_length for kind, fmt in FORMATS.items()}


def format_of(kind: str) -> UploadFormat:
    """The format ``kind`` names; a :class:`LabError` listing the known ones if it names none."""
    if kind not in FORMATS:
        raise LabError(f"upload kind {kind!r} is not known; valid kinds: {', '.join(KINDS)}")
    return FORMATS[kind]


def detect_kind(filename: str, kind: str | None = None) -> str:
    if kind is not None:
        return format_of(kind).kind
    suffix = PurePosixPath(display_name(filename)).suffix.lower()
    if suffix not in EXTENSIONS:
        accepted = ", ".join(EXTENSIONS)
        raise DataValidationError(f"{display_name(filename)}: cannot tell the format from the extension "
                                  f"{suffix or '(none)'!r}; accepted extensions: {accepted}, "
                                  f"or name the format with kind= (one of {', '.join(KINDS)})")
    return EXTENSIONS[suffix]


def parse_upload(kind: str, path: Path, source: str, options: UploadOptions,
                 limits: UploadLimits = UploadLimits()) -> ParsedUpload:
    """Validate and read an uploaded file; ``source`` names the file in error messages."""
    fmt = format_of(kind)
    check_size(path.stat().st_size, source, limits)
    with open(path, "rb") as handle:
        if _blank(handle):
            raise DataValidationError(f"{source} is empty; upload a file that holds labelled examples "
                                      f"({fmt.hint})")
    parsed = fmt.parse(path, options, limits, source=source)
    check_classes(parsed, source, limits, kind)
    return parsed


def _blank(handle: BinaryIO) -> bool:
    """Whether the file holds nothing but whitespace (reads only up to its first other byte)."""
    handle.seek(0)
    while chunk := handle.read(MB):
        if chunk.strip():
            handle.seek(0)
            return False
    handle.seek(0)
    return True
