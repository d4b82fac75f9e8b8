"""Opening untrusted zip archives (MIDI uploads, ``.npz`` arrays): every entry's path, kind and declared
size is checked before anything is read, and members are read one at a time within a byte budget."""

from __future__ import annotations

import re
import zipfile
import zlib
from typing import BinaryIO

from labcore.data.upload.manifest import MB, UploadLimits, mb
from labcore.errors import DataValidationError


def open_zip(handle: BinaryIO, source: str, limits: UploadLimits) -> zipfile.ZipFile:
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
        raise DataValidationError(f"{source} would unpack to {mb(declared)}, more than the limit of "
                                  f"{mb(limits.max_unpacked_bytes)}; upload fewer or smaller files")
    return archive


class ReadBudget:
    """Counts decompressed bytes as they are read, in case an archive's declared sizes lie."""

    def __init__(self, source: str, limit: int) -> None:
        self.source, self.limit, self.used = source, limit, 0

    def read(self, archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> bytes:
        chunks = []
        try:
            with archive.open(entry) as handle:
                while chunk := handle.read(MB):
                    self.used += len(chunk)
                    if self.used > self.limit:
                        raise DataValidationError(f"{self.source} unpacks to more than {mb(self.limit)} "
                                                  f"(reading {entry.filename!r}); upload fewer or smaller files")
                    chunks.append(chunk)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
            raise DataValidationError(f"{self.source}: entry {entry.filename!r} cannot be unpacked ({error}); "
                                      f"create the zip again with a standard zip tool") from None
        return b"".join(chunks)
