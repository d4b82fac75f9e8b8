"""Score -> MIDI -> pitches: a music21 score written as MIDI in memory, as written (see :mod:`labcore.data.music`).

Ties are merged in one pass (:func:`merge_ties`), and a long score is written as slices of about
:data:`SLICE_NOTES` notes at a coarser MIDI resolution (:data:`TICKS_PER_QUARTER`), so that neither music21's
writer nor pretty_midi's reader slows down or refuses a long piece.
"""

from __future__ import annotations

import os
from typing import Any

from labcore.data.music.midi import pitches_from_midi

# music21 writes 10,080 ticks per quarter note, and pretty_midi refuses a file whose last tick passes
# 10^7 as "likely corrupt": any file longer than ~990 quarter notes (a Beethoven quartet movement, or a
# slice of sparse music) would be lost. 960 is the usual sequencer resolution; it still places 64th
# notes, triplets and quintuplets exactly, and pushes pretty_midi's limit past 10,000 quarter notes.
TICKS_PER_QUARTER = 960

SLICE_NOTES = 1000  # notes per MIDI file written for one piece (see score_to_midi)

# Bump when the score -> pitches rule changes, so cached pitch lists are not reused.
EXTRACTION_VERSION = 1


def _rescale_ticks(midi_file: Any, ticks_per_quarter: int) -> None:
    """Re-time a music21 MidiFile to a coarser resolution, in place (see TICKS_PER_QUARTER)."""
    source = midi_file.ticksPerQuarterNote
    if source == ticks_per_quarter:
        return
    for track in midi_file.tracks:
        absolute = new_previous = 0
        for event in track.events:
            if not event.isDeltaTime():
                continue
            absolute += event.time
            # Rounding absolute times (not deltas) keeps the tracks aligned: one tick in the source is
            # one tick in every track of the result.
            new_absolute = (absolute * ticks_per_quarter + source // 2) // source
            event.time = new_absolute - new_previous
            new_previous = new_absolute
    midi_file.ticksPerQuarterNote = ticks_per_quarter


def merge_ties(score: Any) -> None:
    """Merge tied notes in place, in one pass per part: a tie continues a note, it strikes no new one.

    music21 has ``stripTies`` for this (its MIDI writer calls it), but it rescans the whole part for
    spanners and removes each merged note with a recursive search, so its cost grows with the square
    of the part's length: 80 of the 105 seconds that writing op. 133 (~9,000 notes) took.

    The rules follow ``stripTies(matchByPitch=True)``, per voice: a note (or chord member) continues an
    open tie of its pitch when its tie is "stop" or "continue", or when it directly follows the tied
    note with no tie or with a second "start" (scores often omit the "stop" or repeat the "start").
    A continuing note is dropped and its duration added to the note that opened the tie; a chord drops
    its continuing members, or the whole chord when every member continues (then extending the
    opening chord). A "continue" with nothing open opens a tie, as a "start" does. Where music21's
    own pass gives up (a tie from a chord member into a single note), this one still merges.
    """
    from music21 import stream

    for part in list(score.parts) or [score]:
        heads: dict[tuple[str, float], Any] = {}  # (voice, pitch) -> element that opened the open tie
        tails: dict[tuple[str, float], Any] = {}  # (voice, pitch) -> latest element of that tie chain
        previous: dict[str, Any] = {}  # voice -> the element before, to accept a missing "stop"
        drop: dict[int, tuple[Any, list[Any]]] = {}  # id(container) -> (container, elements to remove)
        extended: dict[int, Any] = {}

        for element in part.recurse().notes:
            if element.duration.isGrace:
                continue  # grace notes carry no ties worth merging and no duration to add
            site = element.activeSite
            voice = str(site.id) if isinstance(site, stream.Voice) else ""
            members = list(element.notes) if element.isChord else [element]
            continues: list[Any] = []  # per member: the head it continues, or None
            for member in members:
                key = (voice, member.pitch.ps)
                tie = member.tie if element.isChord else element.tie
                kind = tie.type if tie is not None else None
                follows = key in heads and tails[key] is previous.get(voice)
                if key in heads and (kind in ("stop", "continue") or follows):
                    continues.append(heads[key])
                    tails[key] = element
                    if kind not in ("start", "continue"):
                        del heads[key], tails[key]
                else:
                    continues.append(None)
                    if kind in ("start", "continue"):
                        heads[key] = tails[key] = element
            previous[voice] = element
            if all(head is not None for head in continues):
                # Every pitch continues an earlier note: nothing is struck here.
                first = continues[0]
                if all(head is first for head in continues) and len(first.pitches) == len(members):
                    first.quarterLength = first.quarterLength + element.quarterLength
                    extended[id(first)] = first
                drop.setdefault(id(site), (site, []))[1].append(element)
            elif any(head is not None for head in continues):
                for member, head in zip(members, continues):
                    if head is not None:
                        element.remove(member)
        for container, elements in drop.values():
            container.remove(elements)  # one call per measure or voice, not one search per note
        for head in extended.values():
            head.informSites()
        for element in part.recurse().notes:
            # Merged, the score keeps no ties: a head holds the whole length now, and a tie left open
            # pointed nowhere.
            element.tie = None
            for member in element.notes if element.isChord else ():
                member.tie = None


def _timed_notes(container: Any, base: Any = 0):
    """(onset in quarters from the part's start, element) for every note and chord, in score order."""
    from music21 import note

    for element in container:
        # The container's own offset table: getOffsetInHierarchy() would search every site the element
        # ever had, which is slow on large scores.
        onset = base + container.elementOffset(element)
        if element.isStream:
            yield from _timed_notes(element, onset)
        elif isinstance(element, note.NotRest):
            yield onset, element


def score_to_midi(score: Any, slice_notes: int = SLICE_NOTES) -> list[bytes]:
    """Write a music21 score as MIDI, in memory: one MIDI file per slice of about ``slice_notes`` notes.

    As written: sounding pitch (transposing instruments, as music21's own export does), ties merged
    (:func:`merge_ties`), then the notes and chords of each part as plain notes of the same MIDI pitch
    and length, sliced at onsets into consecutive stretches of time, each slice written by music21.

    Why slices: the writer compares every note with every earlier one when it assigns channels, so its
    time grows with the square of a file's notes (a whole quartet in one file: tens of seconds, where
    its slices take one or two). Why plain notes: the writer deep-copies what it is given,
    and a score's notes drag their lyrics, beams, articulations and containers along. A slice starts
    at an onset and holds every note that starts there, so reading the slices one after another gives
    the order one file would. Left out: notes without duration (grace notes, unrealised chord
    symbols), which music21 writes as a note-on and a note-off on one tick that pretty_midi keeps or
    drops depending on what follows; and unpitched percussion, which goes to the drum channel that
    the reader skips. The score is changed in place.
    """
    from music21 import chord, midi, note, percussion, pitch, stream

    if score.atSoundingPitch is False:
        score.toSoundingPitch(inPlace=True)
    merge_ties(score)
    timeline: list[tuple[Any, int, tuple[int, ...], Any]] = []  # (onset, part, MIDI pitches, length)
    parts = list(score.parts) or [score]
    for index, part in enumerate(parts):
        for onset, element in _timed_notes(part):
            if element.quarterLength == 0 or isinstance(element, (note.Unpitched,
                                                                  percussion.PercussionChord)):
                continue
            timeline.append((onset, index, tuple(p.midi for p in element.pitches), element.quarterLength))
    timeline.sort(key=lambda item: (item[0], item[1]))
    out: list[bytes] = []
    start = 0
    while start < len(timeline):
        end = min(start + max(1, slice_notes), len(timeline))
        while end < len(timeline) and timeline[end][0] == timeline[end - 1][0]:
            end += 1  # never split the notes of one onset between two files
        origin = timeline[start][0]
        slice_parts = [stream.Part() for _ in parts]
        for onset, index, midis, length in timeline[start:end]:
            if len(midis) == 1:
                element = note.Note(pitch.Pitch(midi=midis[0]), quarterLength=length)
            else:
                element = chord.Chord([pitch.Pitch(midi=m) for m in midis], quarterLength=length)
            slice_parts[index].coreInsert(onset - origin, element)
        for part in slice_parts:
            part.coreElementsChanged()
        midi_file = midi.translate.streamToMidiFile(stream.Score(slice_parts))
        _rescale_ticks(midi_file, TICKS_PER_QUARTER)
        out.append(midi_file.writestr())
        start = end
    return out


def pitches_from_score(path: str | os.PathLike) -> list[int]:
    """Score file -> music21 -> MIDI (in memory) -> pretty_midi -> pitch sequence."""
    from music21 import converter, stream

    # forceSource/storePickle: music21 would otherwise keep its own pickled copy of every score in a
    # scratch folder; the lab caches the pitches itself.
    parsed = converter.parse(str(path), forceSource=True, storePickle=False)
    # A collection file (an Opus: several tunes in one ABC or Humdrum file) is read tune after tune.
    scores = list(parsed.scores) if isinstance(parsed, stream.Opus) else [parsed]
    return [pitch for score in scores for data in score_to_midi(score) for pitch in pitches_from_midi(data)]
