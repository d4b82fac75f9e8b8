"""The ``midi`` upload format (``.zip``): MIDI files (``.mid``, ``.midi``) inside class folders.

The label is the name of the folder a file sits in (``composerA/piece1.mid`` -> ``composerA``). Each
file becomes the pitches (0..127) of its non-drum notes sorted by onset, then pitch, cut into
consecutive windows of ``max_length`` notes (128 by default, as Kao & Lee, appendix G.4; a last partial
window is dropped unless it is the file's only one, as in :mod:`labcore.data.music`). The windows of one
file share its path as ``group``: splits never cut a file and evaluation votes over its windows. Hidden
entries (``.DS_Store``, ``__MACOSX/``) and files of other types are skipped and counted. Members are read
one at a time, never extracted (:mod:`labcore.data.upload.zips`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from labcore.data.upload.manifest import UploadLimits, UploadOptions
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.data.upload.tokens import TokenExamples
from labcore.data.upload.zips import ReadBudget, open_zip
from labcore.errors import DataValidationError

MIDI_SUFFIXES = (".mid", ".midi")


def parse(path: Path, options: UploadOptions, limits: UploadLimits, source: str = "") -> ParsedUpload:
    with open(path, "rb") as handle:
        return _read(handle, source or path.name, options, limits)


def _read(handle: BinaryIO, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    from labcore.data.music import UnreadableMidiError, note_names, pitches_from_midi, windows

    archive = open_zip(handle, source, limits)
    budget = ReadBudget(source, limits.max_unpacked_bytes)
    window = options.max_length
    # Pitches 0..127 are the ids; windows are never longer than max_length, so none is "too long".
    examples = TokenExamples(source, options, limits, alphabet=note_names())
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


# 128 notes a window: music is cut into 128-note segments as in Kao & Lee, appendix G.4
FORMAT = UploadFormat(kind="midi", extensions=(".zip",), stored_name="data.zip", default_max_length=128,
                      hint="a zip of class folders holding .mid files, e.g. composerA/piece1.mid", parse=parse)
