"""Music: composer classification from pitch sequences (Kao & Lee §3.1, appendix G.4).

The paper reads MAESTRO-v1 MIDI files, turns each piece into its sequence of MIDI pitches (128 symbols),
cuts it into segments of 128, trains on segments and, at evaluation, votes over a piece's segments.
MAESTRO needs a data hub; here the pieces come from music21's bundled corpus instead, through the same
kind of pipeline a MIDI corpus would take::

    music21 score (MusicXML / Humdrum) --music21--> MIDI bytes (in memory) --pretty_midi--> pitches

Rules, in order:

* **Pieces.** Each composer's corpus files, without roman-numeral analyses (``.rntxt``: chord labels,
  not scores). Where one movement is stored twice (``movement1.krn`` and ``movement1.mxl``), only the
  MusicXML copy is kept, so one piece can never sit in train and test at once. A seeded permutation of
  the sorted list decides which ``cap_per_composer`` pieces are used; a piece that cannot be parsed is
  skipped (its reason is reported) and the next piece in that order takes its place.
* **Pitches.** All notes of all non-drum instruments, sorted by onset time and, for notes that start
  together, by ascending pitch: a chord reads bottom-up, like an arpeggio. A pitch sounded by two voices
  at once (a unison) appears twice. Tied notes sound once. Grace notes, which have no written
  duration, are left out.
* **As written.** Repeats, first and second endings and da capo are read as written, not played out:
  a played-out repeat only adds windows the model has already seen, and music21 cannot play them out
  reliably here (some scores' repeat marks do not pair up; in the whole-quartet files, whose bars
  are numbered through all movements, an end-repeat sends music21 back to the first movement and
  op. 18 no. 4 grows from 11,000 to 50,000 notes). MAESTRO, recorded from performances, does
  contain the repeats its pianists played.
* **Windows.** Consecutive, non-overlapping windows of ``window`` pitches; the last, partial window is
  dropped, except that a piece shorter than one window is kept whole as one shorter window.
* **Splits.** By piece, never by window, seeded and stratified: 80/10/10 of each composer's pieces, with
  at least one piece per split wherever a composer has three or more. The ``group`` column holds the
  piece id (its corpus path), and evaluation votes over a piece's windows.

Parsing is the slow part (a Beethoven quartet takes seconds, a Bach chorale a fraction of one), so it
runs on two processes and every piece's pitches are kept in a small compressed cache under
``cache/music/`` keyed by corpus path and library versions: changing the window, cap, seed or
composers only re-parses pieces never seen before.

The parts: :mod:`.midi` (MIDI -> pitches -> windows), :mod:`.score` (score -> MIDI), :mod:`.corpus` (which
pieces, their order and split), :mod:`.parsing` (worker processes and the pitch cache) and
:mod:`.discipline` (the ``music-composer`` discipline, registered on import).
"""

from __future__ import annotations

from labcore.data.music.corpus import (
    SPLIT_FRACTIONS, candidate_order, composer_pieces, corpus_composers, corpus_root, split_pieces,
)
from labcore.data.music.discipline import ASSET, COMPOSERS, MusicComposer, MusicParams, piece_counts, select_and_parse
from labcore.data.music.midi import UnreadableMidiError, note_names, pitches_from_midi, spaced, windows
from labcore.data.music.parsing import WORKERS, PitchCache, pitch_cache_path
from labcore.data.music.score import (
    EXTRACTION_VERSION, SLICE_NOTES, TICKS_PER_QUARTER, merge_ties, pitches_from_score, score_to_midi,
)

__all__ = ["ASSET", "COMPOSERS", "EXTRACTION_VERSION", "SLICE_NOTES", "SPLIT_FRACTIONS", "TICKS_PER_QUARTER",
           "WORKERS", "MusicComposer", "MusicParams", "PitchCache", "UnreadableMidiError", "candidate_order",
           "composer_pieces", "corpus_composers", "corpus_root", "merge_ties", "note_names", "piece_counts",
           "pitch_cache_path", "pitches_from_midi", "pitches_from_score", "score_to_midi", "select_and_parse",
           "spaced", "split_pieces", "windows"]
