"""music-composer: MIDI -> pitches -> windows, the piece-level split, and the real corpus build."""

from __future__ import annotations

import time

import pytest

from labcore.data import music
from labcore.errors import DataValidationError, LabError

# --------------------------------------------------------------------------------------------------
# windows


def test_windows_drop_the_last_partial_window():
    assert music.windows(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_windows_exact_multiple_keeps_every_window():
    assert music.windows([1, 2, 3, 4, 5, 6], 3) == [[1, 2, 3], [4, 5, 6]]


def test_windows_piece_shorter_than_one_window_is_kept_whole():
    assert music.windows([60, 62, 64], 128) == [[60, 62, 64]]


def test_windows_of_nothing_is_nothing():
    assert music.windows([], 128) == []


def test_windows_length_one_and_bad_length():
    assert music.windows([7, 8], 1) == [[7], [8]]
    with pytest.raises(LabError, match="at least 1"):
        music.windows([1, 2], 0)


# --------------------------------------------------------------------------------------------------
# pitches_from_midi on a MIDI file written here


def _tiny_midi(path=None) -> bytes:
    """Piano: chord G4/C4/E4 (added out of order) at 0, D4 at 0.5, E4 at 1.0; bass C3 at 0 and E4
    at 1.0 (a unison with the piano); a drum hit at 0.25 that must be ignored."""
    import io

    import pretty_midi

    midi = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(program=0)
    for pitch, start in [(67, 0.0), (60, 0.0), (64, 0.0), (62, 0.5), (64, 1.0)]:
        piano.notes.append(pretty_midi.Note(velocity=80, pitch=pitch, start=start, end=start + 0.5))
    bass = pretty_midi.Instrument(program=32)
    for pitch, start in [(48, 0.0), (64, 1.0)]:
        bass.notes.append(pretty_midi.Note(velocity=80, pitch=pitch, start=start, end=start + 0.5))
    drums = pretty_midi.Instrument(program=0, is_drum=True)
    drums.notes.append(pretty_midi.Note(velocity=80, pitch=38, start=0.25, end=0.3))
    midi.instruments.extend([piano, bass, drums])
    buffer = io.BytesIO()
    midi.write(buffer)
    if path is not None:
        path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


# By onset; simultaneous notes lowest first (the chord and the bass read bottom-up); the unison E4 twice.
TINY_PITCHES = [48, 60, 64, 67, 62, 64, 64]


def test_pitches_from_midi_bytes_orders_by_onset_then_pitch():
    assert music.pitches_from_midi(_tiny_midi()) == TINY_PITCHES


def test_pitches_from_midi_path(tmp_path):
    path = tmp_path / "tiny.mid"
    _tiny_midi(path)
    assert music.pitches_from_midi(path) == TINY_PITCHES
    assert music.pitches_from_midi(str(path)) == TINY_PITCHES


def test_pitches_from_midi_rejects_what_is_not_midi(tmp_path):
    with pytest.raises(DataValidationError, match="standard MIDI file"):
        music.pitches_from_midi(b"not a midi file at all")
    with pytest.raises(DataValidationError, match="does not exist"):
        music.pitches_from_midi(tmp_path / "missing.mid")


def test_alphabet_is_128_note_names():
    names = music.note_names()
    assert len(names) == 128 and len(set(names)) == 128
    assert (names[0], names[60], names[61], names[127]) == ("C-1", "C4", "C#4", "G9")


# --------------------------------------------------------------------------------------------------
# score -> MIDI (music21 builds a tiny score in memory; no corpus file is read)


def _part(*measures):
    from music21 import stream

    part = stream.Part()
    for number, notes in enumerate(measures, start=1):
        measure = stream.Measure(number=number)
        for element in notes:
            measure.append(element)
        part.append(measure)
    return part


def _note(name, quarters, tie=None):
    from music21 import note, tie as tie_module

    element = note.Note(name, quarterLength=quarters)
    if tie:
        element.tie = tie_module.Tie(tie)
    return element


def test_score_to_midi_merges_ties_and_keeps_chords_bottom_up():
    from music21 import chord, stream, tie

    held = chord.Chord(["E4", "G4"], quarterLength=2)
    held.notes[0].tie = tie.Tie("start")  # only E4 is held into the next bar
    again = chord.Chord(["E4", "A4"], quarterLength=2)
    again.notes[0].tie = tie.Tie("stop")
    upper = _part(
        [_note("C5", 2, "start"), _note("C5", 2)],  # a tie whose "stop" the score forgot
        [_note("D5", 4)],
        [held, _note("F4", 2)],
        [again, _note("B4", 2)],
    )
    lower = _part([_note("C3", 4, "start")], [_note("C3", 4, "stop")], [_note("G3", 4)], [_note("C3", 4)])
    score = stream.Score([upper, lower])
    pitches = [p for data in music.score_to_midi(score) for p in music.pitches_from_midi(data)]
    # C3 and C5 sound once; the chord E4/G4 and the new A4 (E4 held over) read bottom-up.
    assert pitches == [48, 72, 74, 55, 64, 67, 65, 48, 69, 71]

    # In slices of two notes or more: the notes of one onset stay together, and the order holds.
    slices = music.score_to_midi(score, slice_notes=2)
    assert [music.pitches_from_midi(data) for data in slices] == [[48, 72], [74, 55, 64, 67], [65, 48, 69],
                                                                  [71]]


def test_score_to_midi_reads_back_a_long_piece():
    # 300 whole notes: at music21's 10,080 ticks a quarter, pretty_midi would refuse the file as
    # "likely corrupt"; re-timed to TICKS_PER_QUARTER it reads back.
    from music21 import stream

    score = stream.Score([_part(*[[_note("C4" if i % 2 else "G4", 4)] for i in range(300)])])
    pitches = [p for data in music.score_to_midi(score) for p in music.pitches_from_midi(data)]
    assert pitches == [67 if i % 2 == 0 else 60 for i in range(300)]


# --------------------------------------------------------------------------------------------------
# parameters, sample and split


def test_params_defaults_and_normalisation():
    params = music.MusicParams()
    assert params.composers == ("bach", "palestrina", "monteverdi", "beethoven")
    assert (params.cap_per_composer, params.window, params.seed) == (100, 128, 0)
    assert music.MusicParams(composers=["Bach", " Beethoven"]).composers == ("bach", "beethoven")
    hash(music.MusicParams(composers=["bach", "beethoven"]))  # a list from a form still hashes


@pytest.mark.parametrize("values, match", [
    ({"composers": ("bach",)}, "at least two composers"),
    ({"composers": ("bach", "Bach")}, "twice"),
    ({"window": 0}, "window"),
    ({"cap_per_composer": -1}, "cap_per_composer"),
])
def test_params_refuse_bad_values(values, match):
    with pytest.raises(LabError, match=match):
        music.MusicParams(**values)


def test_info_describes_tokens_classes_and_voting():
    discipline = music.MusicComposer()
    info = discipline.info(music.MusicParams())
    assert info.input_kind == "tokens" and info.output_kind == "class" and info.metric == "accuracy"
    assert info.class_names == ("Bach", "Palestrina", "Monteverdi", "Beethoven")
    assert len(info.alphabet) == 128 and info.max_length == 128 and info.vote_by_group
    assert info.assets == ("music21-corpus",) and "G.4" in info.citation
    assert "cap_per_composer=100" in info.notes
    assert discipline.info(music.MusicParams(window=64)).max_length == 64


def test_split_is_by_piece_80_10_10_and_seeded():
    pieces = [f"p{i:03d}" for i in range(100)]
    train, val, test = music.split_pieces(pieces, "bach", seed=0)
    assert (len(train), len(val), len(test)) == (80, 10, 10)
    assert sorted(train + val + test) == pieces
    assert music.split_pieces(pieces, "bach", seed=0) == (train, val, test)
    assert music.split_pieces(pieces, "bach", seed=1) != (train, val, test)


@pytest.mark.parametrize("n, sizes", [(3, (1, 1, 1)), (22, (18, 2, 2)), (49, (39, 5, 5)), (2, (1, 0, 1)),
                                      (1, (1, 0, 0)), (0, (0, 0, 0))])
def test_split_gives_every_split_a_piece_where_possible(n, sizes):
    parts = music.split_pieces([f"p{i}" for i in range(n)], "beethoven", seed=0)
    assert tuple(len(p) for p in parts) == sizes


def test_candidate_order_is_seeded_and_per_composer():
    pieces = [f"p{i:02d}" for i in range(50)]
    order = music.candidate_order(pieces, "bach", 0)
    assert sorted(order) == pieces and order == music.candidate_order(pieces, "bach", 0)
    assert order != music.candidate_order(pieces, "bach", 1)
    assert order != music.candidate_order(pieces, "palestrina", 0)


def test_pitch_cache_round_trip_and_merge(tmp_path):
    path = tmp_path / "pitches.json.gz"
    first = music.PitchCache(path)
    first.pitches["a/x.mxl"] = [60, 62]
    first.save()
    second = music.PitchCache(path)  # another build, started before the first one saved more
    first.failed["a/bad.krn"] = "ExpanderException: bad repeats"
    first.save()
    second.pitches["b/y.krn"] = [50]
    second.save()
    merged = music.PitchCache(path)
    assert merged.pitches == {"a/x.mxl": [60, 62], "b/y.krn": [50]}
    assert merged.failed == {"a/bad.krn": "ExpanderException: bad repeats"}
    path.write_bytes(b"damaged")
    assert music.PitchCache(path).pitches == {}


# --------------------------------------------------------------------------------------------------
# the real corpus


@pytest.mark.integration
def test_corpus_pieces_are_deduplicated():
    beethoven = music.composer_pieces("beethoven")
    assert len(beethoven) == 22  # op. 18 no. 1 is stored as .krn and .mxl: one copy kept
    assert "beethoven/opus18no1/movement1.mxl" in beethoven
    assert not any(p.endswith(".rntxt") for p in music.composer_pieces("bach"))


@pytest.mark.integration
def test_unknown_composer_names_the_valid_ones():
    with pytest.raises(LabError, match="composers with scores: .*bach"):
        music.select_and_parse(music.MusicParams(composers=("bach", "nobody")), progress=lambda _m: None)


# The default build (100 pieces a composer) parses for minutes on two cores, most of them on Beethoven's
# quartets, and the "quick" preset (10 a composer) for 80-120 s; 3 a composer runs the same pipeline by default,
# the other two with the slow set.
@pytest.mark.integration
@pytest.mark.parametrize("preset, params, cap", [pytest.param("", {"cap_per_composer": 3}, 3, id="3-a-composer"),
                                                 pytest.param("quick", {}, 10, id="quick", marks=pytest.mark.slow),
                                                 pytest.param("", {}, 100, id="default", marks=pytest.mark.slow)])
def test_music_composer_build_and_cache(capsys, preset, params, cap):
    from labcore.data import base, load

    lines: list[str] = []
    started = time.perf_counter()
    dataset, info = load("music-composer", params, preset=preset, progress=lines.append)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again, _ = load("music-composer", params, preset=preset, progress=lines.append)
    cached_s = time.perf_counter() - started

    assert info.class_names == ("Bach", "Palestrina", "Monteverdi", "Beethoven") and info.vote_by_group
    groups = {split: set(dataset[split]["group"]) for split in base.SPLITS}
    assert not groups["train"] & groups["validation"]
    assert not groups["train"] & groups["test"]
    assert not groups["validation"] & groups["test"]
    for split in base.SPLITS:
        tokens = dataset[split]["tokens"]
        assert all(1 <= len(t) <= 128 for t in tokens)
        assert all(0 <= p < 128 for t in tokens for p in t)
        # A piece belongs to one composer.
        labels = {}
        for label, group in zip(dataset[split]["label"], dataset[split]["group"]):
            assert labels.setdefault(group, label) == label

    pieces = music.piece_counts(dataset, info)
    for composer in info.class_names:  # every composer has a piece in every split
        assert all(pieces[split][composer] >= 1 for split in base.SPLITS)
    assert sum(pieces[s]["Bach"] for s in base.SPLITS) == cap  # the cap, skipped pieces replaced
    assert sum(pieces[s]["Beethoven"] for s in base.SPLITS) <= 22

    # The second load comes from the Arrow cache: same files, same fingerprint.
    assert all(again[s]._fingerprint == dataset[s]._fingerprint for s in base.SPLITS)
    assert "pieces train/validation/test" in dataset["train"].info.description

    windows = {split: {c: 0 for c in info.class_names} for split in base.SPLITS}
    for split in base.SPLITS:
        for label in dataset[split]["label"]:
            windows[split][info.class_names[label]] += 1
    with capsys.disabled():
        print(f"\nmusic-composer ({cap} pieces a composer): first load {first_s:.1f} s, cached load {cached_s:.2f} s")
        for split in base.SPLITS:
            print(f"  {split:<10} pieces {pieces[split]}  windows {windows[split]}")
        print("  " + (lines[-1] if lines else "(built earlier: no build messages)"))

    # Another window length builds a new Arrow cache from the pitches parsed above: nothing is parsed.
    lines.clear()
    shorter, short_info = load("music-composer", {**params, "window": 32}, preset=preset, progress=lines.append)
    assert not any(line.startswith("music21 corpus: parsing") for line in lines)
    assert short_info.max_length == 32 and all(len(t) <= 32 for t in shorter["train"]["tokens"])
    assert set(shorter["test"]["group"]) == groups["test"]  # same pieces, same split
