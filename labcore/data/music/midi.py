"""MIDI -> pitches -> windows: the pure steps of the music pipeline, shared by the music21 corpus and uploads.

A MIDI file (a path, or bytes from an upload) becomes the MIDI pitches of its notes in onset order
(:func:`pitches_from_midi`), and a piece's pitches become windows of a fixed length (:func:`windows`).
"""

from __future__ import annotations

import functools
import io
import os
from pathlib import Path
from typing import Any, Sequence

from labcore.errors import DataValidationError, LabError


@functools.lru_cache(maxsize=1)
def note_names() -> tuple[str, ...]:
    """The 128-symbol alphabet: MIDI pitch i is token i, named like pretty_midi names it ("C4", "C#4")."""
    import pretty_midi

    return tuple(pretty_midi.note_number_to_name(i) for i in range(128))


class UnreadableMidiError(DataValidationError):
    """A file or bytes that are not MIDI we can read; ``why`` names the parser's error in one line."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def pitches_from_midi(source: str | os.PathLike | bytes | bytearray) -> list[int]:
    """MIDI pitches (0-127) of all notes of all non-drum instruments, ordered by onset, then pitch.

    ``source`` is a path to a MIDI file or the file's bytes (an upload's zip entry: untrusted). Notes
    that start together come lowest first, so a chord reads bottom-up; equal notes (a unison of two
    voices) are both kept. Raises :class:`UnreadableMidiError` for what is not a readable MIDI file.
    """
    import warnings

    import pretty_midi

    if isinstance(source, (bytes, bytearray, memoryview)):
        handle: Any = io.BytesIO(bytes(source))
        label = f"MIDI data ({len(source)} bytes)"
    else:
        path = Path(source)
        if not path.is_file():
            raise DataValidationError(f"MIDI file {path} does not exist; check the path")
        handle, label = str(path), str(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pretty_midi warns about odd meta events; pitches are unaffected
        try:
            try:
                midi = pretty_midi.PrettyMIDI(handle)
            except ValueError as error:
                if "largest tick" not in str(error):
                    raise
                # pretty_midi refuses a file whose last tick passes its MAX_TICK (10^7) as "likely
                # corrupt", to bound its tick -> seconds table (8 bytes a tick). A long piece at a fine
                # resolution (music21 writes 10,080 ticks per beat) is not corrupt: read it with mido
                # and re-time it to a resolution under the limit, then read that.
                midi = pretty_midi.PrettyMIDI(_coarser(source if isinstance(handle, str) else handle))
        # mido and pretty_midi raise OSError, EOFError, ValueError, KeyError, IndexError... for broken
        # files; every one of them means "not a MIDI file we can read".
        except Exception as error:  # noqa: BLE001
            why = f"{type(error).__name__}: {str(error)[:120]}" if str(error) else type(error).__name__
            raise UnreadableMidiError(
                f"could not read {label} as MIDI ({type(error).__name__}: {error}); provide a standard "
                f"MIDI file (.mid), e.g. one exported by a notation program or sequencer", why) from None
    # pretty_midi derives every onset from one shared tick->seconds table, so notes on the same tick
    # get exactly the same float start and the pitch tie-break is reliable.
    notes = sorted((note.start, note.pitch) for instrument in midi.instruments if not instrument.is_drum
                   for note in instrument.notes)
    return [pitch for _, pitch in notes if 0 <= pitch <= 127]


def spaced(chunks: list[list[int]], limit: int) -> list[list[int]]:
    """At most `limit` of `chunks`, evenly spaced from first to last (all of them for limit 0).

    >>> spaced([[1], [2], [3], [4], [5]], 3)
    [[1], [3], [5]]
    """
    if limit <= 0 or len(chunks) <= limit:
        return chunks
    import numpy as np

    keep = np.unique(np.linspace(0, len(chunks) - 1, limit).round().astype(int))
    return [chunks[i] for i in keep]


def windows(pitches: Sequence[int], window: int) -> list[list[int]]:
    """Consecutive non-overlapping windows; the last partial one is dropped unless it is the only one.

    >>> windows([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4]]
    >>> windows([1, 2, 3], 8)
    [[1, 2, 3]]
    """
    if window < 1:
        raise LabError(f"window must be at least 1, got {window}")
    if len(pitches) < window:
        # A piece shorter than one window would otherwise vanish and take its composer's short pieces
        # with it; a shorter sequence is still a valid example (the model pads).
        return [list(pitches)] if pitches else []
    return [list(pitches[start:start + window]) for start in range(0, len(pitches) - window + 1, window)]


def _coarser(source: Any) -> io.BytesIO:
    """A MIDI file (path or handle) re-timed by mido so that its last tick stays under pretty_midi's
    MAX_TICK: every event's absolute tick is scaled and rounded (order kept; events closer than the
    new resolution may share a tick). A file mido cannot read raises mido's error."""
    import mido
    import pretty_midi

    if hasattr(source, "seek"):
        source.seek(0)
    midi = mido.MidiFile(file=source) if hasattr(source, "read") else mido.MidiFile(str(source))
    last = max((sum(message.time for message in track) for track in midi.tracks), default=0) + 1
    limit = int(pretty_midi.pretty_midi.MAX_TICK) // 2
    resolution = max(1, midi.ticks_per_beat * limit // last)
    for track in midi.tracks:
        absolute = previous = 0
        for message in track:
            absolute += message.time
            scaled = (absolute * resolution + midi.ticks_per_beat // 2) // midi.ticks_per_beat
            message.time, previous = scaled - previous, scaled
    midi.ticks_per_beat = resolution
    out = io.BytesIO()
    midi.save(file=out)
    out.seek(0)
    return out
