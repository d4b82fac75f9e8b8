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
"""

from __future__ import annotations

import concurrent.futures
import functools
import gzip
import io
import json
import multiprocessing
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from labcore import assets, paths
from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo, ProgressFn
from labcore.errors import DataValidationError, LabError

ASSET = "music21-corpus"
COMPOSERS = ("bach", "palestrina", "monteverdi", "beethoven")
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # as MAESTRO-v1's own split, roughly (954 / 105 / 125 pieces)

# Score formats worth reading, best first: when one movement exists in two formats, the first wins.
# MusicXML carries the editors' full encoding; the Humdrum copies are older transcriptions.
_FORMATS = (".mxl", ".musicxml", ".xml", ".krn", ".abc", ".mid", ".midi")

# music21 writes 10,080 ticks per quarter note, and pretty_midi refuses a file whose last tick passes
# 10^7 as "likely corrupt": any file longer than ~990 quarter notes (a Beethoven quartet movement, or a
# slice of sparse music) would be lost. 960 is the usual sequencer resolution; it still places 64th
# notes, triplets and quintuplets exactly, and pushes pretty_midi's limit past 10,000 quarter notes.
TICKS_PER_QUARTER = 960

SLICE_NOTES = 1000  # notes per MIDI file written for one piece (see score_to_midi)

WORKERS = 2  # the lab's machines have two cores; parsing is CPU-bound pure Python
_PROGRESS_STEPS = 20  # at most ~20 "parsed k/N" lines per round, whatever N is

# Bump when the score -> pitches rule changes, so cached pitch lists are not reused.
EXTRACTION_VERSION = 1


@dataclass(frozen=True)
class MusicParams:
    composers: tuple[str, ...] = COMPOSERS  # class order = label order; names as music21's corpus folders
    # Pieces per composer, a seeded sample; 0 means every piece. 100 keeps the classes within 5x of each
    # other in pieces (Bach has 410, Palestrina 1,318, Monteverdi 49, Beethoven 22) and the first build
    # near 2.5 CPU-minutes, most of them spent on Beethoven's long quartet scores.
    cap_per_composer: int = 100
    window: int = 128  # pitches per example, as the paper
    # Windows kept per piece, evenly spaced through it; 0 keeps all (the paper). Without a cap, the 22
    # long Beethoven quartets give 57 % of all windows; 8 balances the classes by windows too.
    max_windows_per_piece: int = 8
    seed: int = 0  # seeds both the sample of pieces and the split

    def __post_init__(self) -> None:
        # Lists arrive from JSON and forms; keep a tuple so the frozen Params stays hashable.
        composers = tuple(str(c).strip().lower() for c in self.composers)
        object.__setattr__(self, "composers", composers)
        if len(composers) < 2:
            raise LabError(f"music-composer needs at least two composers to classify, got {list(composers)}; "
                           f"name two or more, e.g. {', '.join(COMPOSERS)}")
        if len(set(composers)) != len(composers):
            raise LabError(f"music-composer: composers {list(composers)} name one composer twice; "
                           f"list each composer once")
        if self.cap_per_composer < 0:
            raise LabError(f"music-composer: cap_per_composer must be >= 0 (0 = every piece), "
                           f"got {self.cap_per_composer}")
        if self.window < 1:
            raise LabError(f"music-composer: window must be at least 1 pitch, got {self.window}; "
                           f"the paper uses 128")
        if self.max_windows_per_piece < 0:
            raise LabError(f"music-composer: max_windows_per_piece must be >= 0 (0 = every window), "
                           f"got {self.max_windows_per_piece}")


# --------------------------------------------------------------------------------------------------
# pure helpers: MIDI -> pitches -> windows


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


# --------------------------------------------------------------------------------------------------
# the corpus: which pieces, and how a score becomes pitches


def corpus_root() -> Path:
    from music21 import corpus

    return Path(corpus.__file__).resolve().parent


def composer_pieces(composer: str) -> list[str]:
    """The composer's scores as corpus-relative paths, sorted, one copy per movement (see module doc)."""
    from music21 import corpus

    root = corpus_root()
    best: dict[str, tuple[int, str]] = {}
    for path in corpus.getComposer(composer):
        path = Path(path)
        if path.suffix.lower() not in _FORMATS:
            continue
        rel = path.resolve().relative_to(root).as_posix()
        stem = rel[: -len(path.suffix)]
        rank = _FORMATS.index(path.suffix.lower())
        if stem not in best or rank < best[stem][0]:
            best[stem] = (rank, rel)
    return sorted(rel for _, rel in best.values())


def corpus_composers() -> list[str]:
    """Folders of music21's corpus that hold scores: the names ``composers`` accepts."""
    root = corpus_root()
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(("_", ".")) and composer_pieces(p.name))


def _seed_for(seed: int, composer: str, purpose: int) -> list[int]:
    # Each composer draws from its own stream, so adding or reordering composers leaves the others'
    # samples and splits unchanged. crc32, unlike hash(), is stable across processes.
    return [seed, zlib.crc32(composer.encode()), purpose]


def candidate_order(pieces: Sequence[str], composer: str, seed: int) -> list[str]:
    """The seeded order in which a composer's pieces are taken until the cap is reached."""
    import numpy as np

    order = np.random.default_rng(_seed_for(seed, composer, 0)).permutation(len(pieces))
    return [pieces[i] for i in order]


def split_pieces(pieces: Sequence[str], composer: str, seed: int) -> tuple[list[str], list[str], list[str]]:
    """One composer's pieces into train/validation/test (80/10/10, each >= 1 piece where n >= 3)."""
    import numpy as np

    n = len(pieces)
    if n >= 3:
        n_val = max(1, int(n * SPLIT_FRACTIONS[1] + 0.5))
        n_test = max(1, int(n * SPLIT_FRACTIONS[2] + 0.5))
    else:  # too few for three splits: the first piece trains, a second one tests, validation is empty
        n_val, n_test = 0, 1 if n == 2 else 0
    order = np.random.default_rng(_seed_for(seed, composer, 1)).permutation(n)
    chosen = [pieces[i] for i in order]
    n_train = n - n_val - n_test
    return (sorted(chosen[:n_train]), sorted(chosen[n_train:n_train + n_val]),
            sorted(chosen[n_train + n_val:]))


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


def _extract(rel: str) -> tuple[str, list[int] | None, str]:
    """Worker entry point: (piece, pitches or None, reason for None). Never raises for a bad score."""
    try:
        pitches = pitches_from_score(corpus_root() / rel)
    except Exception as error:  # music21 raises many types; one bad score must not stop the build
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return rel, None, f"{type(error).__name__}: {message}"[:300]
    if not pitches:
        return rel, None, "no notes"
    return rel, pitches, ""


# --------------------------------------------------------------------------------------------------
# the per-piece pitch cache


def _versions() -> str:
    from importlib import metadata

    return (f"music21-{metadata.version('music21')}_pretty_midi-{metadata.version('pretty_midi')}"
            f"_tpq{TICKS_PER_QUARTER}_v{EXTRACTION_VERSION}")


def pitch_cache_path() -> Path:
    return paths.cache_dir() / "music" / f"pitches_{_versions()}.json.gz"


class PitchCache:
    """Corpus path -> pitch list (or the reason it failed), one gzipped JSON file per library version.

    Failures are kept too: a score music21 cannot read today it cannot read tomorrow with the same
    versions, and re-trying it would cost the parse each build.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pitches, self.failed = self._read()

    def _read(self) -> tuple[dict[str, list[int]], dict[str, str]]:
        if not self.path.is_file():
            return {}, {}
        try:
            with gzip.open(self.path, "rt", encoding="utf-8") as handle:
                data = json.load(handle)
            return dict(data["pitches"]), dict(data["failed"])
        except (OSError, ValueError, KeyError, TypeError):
            return {}, {}  # a damaged cache is only lost time: it is rewritten on the next save

    def save(self) -> None:
        # Another build (the app's worker, a test run) may have added pieces since this one read the
        # file: merge, so neither loses the other's work.
        pitches, failed = self._read()
        self.pitches = {**pitches, **self.pitches}
        self.failed = {rel: why for rel, why in {**failed, **self.failed}.items() if rel not in self.pitches}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pitches-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
                handle.write(json.dumps({"pitches": self.pitches, "failed": self.failed},
                                        sort_keys=True, separators=(",", ":")).encode())
            os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is as readable as the others
            os.replace(tmp, self.path)  # atomic: a concurrent reader sees the old or the new file
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


class _Parser:
    """Parses pieces on up to WORKERS processes, started on first use and kept for later rounds."""

    def __init__(self, cache: PitchCache, progress: ProgressFn) -> None:
        self.cache = cache
        self.progress = progress
        self.lost: dict[str, str] = {}  # failures of this build only (a dead worker): never cached
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def __enter__(self) -> "_Parser":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def parse(self, todo: list[str]) -> None:
        """Parse ``todo``, storing each result in the cache as it arrives."""
        root = corpus_root()
        # Largest files first: the long quartet movements then start at once instead of trailing at
        # the end on one busy core while the other idles.
        todo = sorted(todo, key=lambda rel: (-(root / rel).stat().st_size, rel))
        if self._pool is None:
            # 'spawn': a fresh interpreter per worker, safe even when the parent has torch or threads
            # loaded (fork would copy their locks); the workers import only music21 and pretty_midi.
            workers = max(1, min(WORKERS, os.cpu_count() or 1, len(todo)))
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        total = len(todo)
        step = max(1, total // _PROGRESS_STEPS)
        futures = {self._pool.submit(_extract, rel): rel for rel in todo}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            rel = futures[future]
            try:
                rel, pitches, reason = future.result()
            except Exception as error:  # the worker process died (killed, out of memory)
                self.lost[rel] = f"worker process failed ({type(error).__name__}: {error})"
                self.progress(f"skipped {rel}: {self.lost[rel]}")
            else:
                if pitches is None:
                    self.cache.failed[rel] = reason
                    self.progress(f"skipped {rel}: {reason}")
                else:
                    self.cache.pitches[rel] = pitches
            if done % step == 0 or done == total:
                self.progress(f"parsed {done}/{total} pieces")
                self.cache.save()  # an interrupted build keeps what it parsed


def select_and_parse(params: MusicParams,
                     progress: ProgressFn) -> tuple[dict[str, list[str]], PitchCache, dict[str, str]]:
    """Each composer's chosen pieces (sorted), the pitch cache holding them, and the skipped pieces."""
    available = {}
    for composer in params.composers:
        pieces = composer_pieces(composer)
        if not pieces:
            raise LabError(f"music21's corpus has no scores by {composer!r}; composers with scores: "
                           f"{', '.join(corpus_composers())}")
        available[composer] = pieces
    orders = {c: candidate_order(p, c, params.seed) for c, p in available.items()}
    cache = PitchCache(pitch_cache_path())
    with _Parser(cache, progress) as parser:
        while True:
            # Walk each composer's seeded order until the cap is met; pieces known to fail are passed
            # over, so the next one takes their place. Repeat while this finds pieces not parsed yet.
            chosen: dict[str, list[str]] = {}
            skipped: dict[str, str] = {}
            todo: list[str] = []
            for composer, order in orders.items():
                cap = params.cap_per_composer or len(order)
                picked: list[str] = []
                for rel in order:
                    if len(picked) >= cap:
                        break
                    reason = cache.failed.get(rel) or parser.lost.get(rel)
                    if reason:
                        skipped[rel] = reason
                        continue
                    picked.append(rel)
                    if rel not in cache.pitches:
                        todo.append(rel)
                chosen[composer] = picked
            if not todo:
                break
            cached = sum(len(p) for p in chosen.values()) - len(todo)
            progress(f"music21 corpus: parsing {len(todo)} pieces on up to {WORKERS} processes "
                     f"({cached} already cached)")
            parser.parse(todo)
    return {c: sorted(p) for c, p in chosen.items()}, cache, skipped


# --------------------------------------------------------------------------------------------------
# the discipline


@register
class MusicComposer(Discipline):
    name = "music-composer"
    title = "Music composer classification (music21 corpus)"
    Params = MusicParams
    presets = {
        "quick": {"cap_per_composer": 10},  # a demo-sized build: 10 pieces each (8/1/1 split)
        "full": {"cap_per_composer": 0, "max_windows_per_piece": 0},  # every piece and window (the paper)
    }

    def info(self, params: MusicParams) -> DisciplineInfo:
        asset = assets.ASSETS[ASSET]
        cap = f"at most {params.cap_per_composer}" if params.cap_per_composer else "all"
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="tokens", output_kind="class", metric="accuracy",
            alphabet=note_names(), class_names=tuple(c.capitalize() for c in params.composers),
            max_length=params.window, vote_by_group=True, assets=(ASSET,),
            citation="Kao & Lee 2021, §3.1 and appendix G.4 (music composer classification, MAESTRO)",
            source=f"music21 {asset.version} bundled corpus via pretty_midi",
            licence=asset.licence,
            notes=(f"Stands in for MAESTRO-v1, which needs a data hub. {cap.capitalize()} pieces per "
                   f"composer (cap_per_composer={params.cap_per_composer}), a seeded sample "
                   f"(seed={params.seed}) of each composer's corpus scores without .rntxt analyses and "
                   f"with one copy per movement (MusicXML preferred); a piece that fails to parse is "
                   f"skipped and replaced by the next in the seeded order, and each split's description "
                   f"lists the skipped ones. Score as written (repeats not played out, ties merged, "
                   f"grace notes left out) -> MIDI (music21) -> pretty_midi: every note of every "
                   f"non-drum instrument, by onset, simultaneous notes lowest pitch first; token = MIDI "
                   f"pitch, named as pretty_midi names it. Windows of {params.window} pitches, stride "
                   f"{params.window}; the last partial window is dropped unless the piece "
                   f"is shorter than one window (then kept, shorter). Split by piece (group = corpus "
                   f"path), 80/10/10 of each composer's pieces, at least one per split where a composer "
                   f"has three or more; evaluation votes over a piece's windows. Long pieces give many "
                   f"windows: at most {params.max_windows_per_piece or 'all'} evenly spaced windows are kept per piece."),
        )

    def build(self, params: MusicParams, progress: ProgressFn):
        import datasets

        assets.require(ASSET)
        chosen, cache, skipped = select_and_parse(params, progress)
        features = datasets.Features({"tokens": datasets.List(datasets.Value("int64")),
                                      "label": datasets.Value("int64"), "group": datasets.Value("string")})
        rows: dict[str, dict[str, list]] = {s: {"tokens": [], "label": [], "group": []}
                                            for s in ("train", "validation", "test")}
        counts = []
        for label, composer in enumerate(params.composers):
            parts = split_pieces(chosen[composer], composer, params.seed)
            for split, pieces in zip(rows, parts):
                for rel in pieces:
                    for chunk in spaced(windows(cache.pitches[rel], params.window),
                                        params.max_windows_per_piece):
                        rows[split]["tokens"].append(chunk)
                        rows[split]["label"].append(label)
                        rows[split]["group"].append(rel)
            counts.append(f"{composer}: " + "/".join(str(len(p)) for p in parts))
        if skipped:
            missed = "; ".join(f"{rel} ({why})" for rel, why in sorted(skipped.items()))
            skip_note = f"Skipped, could not be parsed: {missed}."
        else:
            skip_note = "No piece was skipped."
        report = "pieces train/validation/test: " + "; ".join(counts) + ". " + skip_note
        progress(report)
        # Kept with the Arrow files, so a cached load still tells which pieces were left out.
        info = datasets.DatasetInfo(description=f"music-composer from music21's corpus. {report}",
                                    features=features)
        return datasets.DatasetDict({split: datasets.Dataset.from_dict(columns, features=features, info=info)
                                     for split, columns in rows.items()})


def piece_counts(dataset: Any, info: DisciplineInfo) -> dict[str, dict[str, int]]:
    """Split -> class name -> number of pieces (groups), for reports and the Data page."""
    out: dict[str, dict[str, int]] = {}
    for split in dataset:
        seen: dict[str, set[str]] = {name: set() for name in info.class_names}
        for label, group in zip(dataset[split]["label"], dataset[split]["group"]):
            seen[info.class_names[label]].add(group)
        out[split] = {name: len(groups) for name, groups in seen.items()}
    return out

