"""User uploads: each format, each refusal, atomic replacement, and the ``upload:NAME`` discipline."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile

import numpy as np
import pytest

from labcore import data as disciplines
from labcore import paths
from labcore.data import music, upload
from labcore.data.base import stratified_split
from labcore.data.upload import UploadLimits, format_npz, registry, save_job, save_upload
from labcore.errors import DataValidationError, LabError, UnknownNameError


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Every test gets an empty lab cache, so uploads never leak between tests."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def csv_bytes(rows, header="sequence,label"):
    return ("\n".join([header] + [f"{s},{lab}" for s, lab in rows]) + "\n").encode()


def two_class_rows(n=20):
    return [("ACGT" * (1 + i % 3), "pos") if i % 2 else ("TTGA" * (1 + i % 2), "neg") for i in range(n)]


def leftovers(cache):
    root = cache / "uploads"
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".")) if root.exists() else []


def raises(match, fn, *args, **kwargs):
    with pytest.raises(DataValidationError, match=match) as info:
        fn(*args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------------------------------- CSV


def test_csv_upload_round_trip(own_cache):
    info = save_upload("genes", "my genes.csv", csv_bytes(two_class_rows(40)))
    assert info.kind == "csv" and info.input_kind == "tokens"
    assert info.alphabet == ("A", "C", "G", "T")
    assert info.class_names == ("neg", "pos") and info.class_counts == (20, 20)
    assert info.n_examples == 40 and info.max_length == 12
    assert upload.list_uploads() == ["genes"]
    assert "upload:genes" in disciplines.names()
    manifest = json.loads((own_cache / "uploads" / "genes" / "manifest.json").read_text())
    assert manifest["kind"] == "csv" and manifest["class_names"] == ["neg", "pos"]
    assert (own_cache / "uploads" / "genes" / "data.csv").read_bytes() == csv_bytes(two_class_rows(40))

    dataset, dinfo = disciplines.load("upload:genes", progress=lambda _m: None)
    assert dinfo.citation == "User upload" and dinfo.source == "my genes.csv"
    assert dinfo.licence == "as provided by the user" and dinfo.metric == "accuracy"
    assert dinfo.alphabet == info.alphabet and dinfo.class_names == info.class_names
    sizes = {s: len(dataset[s]) for s in ("train", "validation", "test")}
    assert sizes == {"train": 32, "validation": 4, "test": 4}
    for split in ("train", "validation", "test"):  # stratified: both classes everywhere
        assert set(dataset[split]["label"]) == {0, 1}
    first = dataset["train"][0]
    assert all(0 <= t < 4 for t in first["tokens"])


def test_csv_space_separated_symbols():
    rows = [("C4 E4 G4", "major"), ("A4 C5 E5", "minor")] * 6
    info = save_upload("chords", "chords.csv", csv_bytes(rows))
    assert info.alphabet == ("A4", "C4", "C5", "E4", "E5", "G4")
    assert info.max_length == 3


def test_one_spaced_sequence_makes_every_sequence_spaced():
    # Read as characters until the row with a space, then the whole file again, space-separated.
    rows = [("ACGT", "a"), ("CG", "b")] * 3 + [("A C", "a"), ("GG T", "b")] * 3
    info = save_upload("mixed", "m.csv", csv_bytes(rows))
    assert info.alphabet == ("A", "ACGT", "C", "CG", "GG", "T") and info.max_length == 2
    dataset, _ = disciplines.load("upload:mixed", progress=lambda _m: None)
    lengths = sorted(len(t) for s in dataset for t in dataset[s]["tokens"])
    assert lengths == [1] * 6 + [2] * 6


def test_building_reads_the_checked_examples_not_the_file(monkeypatch, own_cache):
    # `data show` and every run build from examples.npz: the file is never parsed again.
    save_upload("saved", "s.csv", csv_bytes(two_class_rows(40)))
    assert (own_cache / "uploads" / "saved" / "examples.npz").is_file()

    def no_parsing(*_args, **_kwargs):
        raise AssertionError("the upload was parsed again")

    monkeypatch.setattr(registry, "parse_upload", no_parsing)
    summary = disciplines.summarize("upload:saved", progress=lambda _m: None)
    assert summary.split_sizes == {"train": 32, "validation": 4, "test": 4}
    assert summary.class_counts == {"neg": 20, "pos": 20} and summary.length_max == 12


def test_an_upload_saved_before_checked_examples_asks_to_be_uploaded_again(own_cache):
    save_upload("old", "o.csv", csv_bytes(two_class_rows(20)))
    manifest = own_cache / "uploads" / "old" / "manifest.json"
    values = json.loads(manifest.read_text())
    values["format"] = 1
    del values["examples_sha256"]
    values["limits"]["min_examples"] = 10  # a cap of format 1, since retired
    manifest.write_text(json.dumps(values))
    (own_cache / "uploads" / "old" / "examples.npz").unlink()
    discipline = upload.uploaded_discipline("old")
    ok, why = discipline.available()
    assert not ok and "older version of the lab" in why and "upload the file again" in why
    with pytest.raises(DataValidationError, match="older version"):
        discipline.build(disciplines.parse_params(discipline), lambda _m: None)


def test_csv_line_ends_of_every_kind_and_a_byte_order_mark():
    text = "sequence,label\r\n" + "".join(f"ACG{'T' * (i % 3)},{'ab'[i % 2]}\r" for i in range(12))
    info = save_upload("ends", "e.csv", b"\xef\xbb\xbf" + text.encode())
    assert info.n_examples == 12 and info.class_names == ("a", "b") and info.alphabet == ("A", "C", "G", "T")
    raises(r"line 3: not UTF-8", save_upload, "x", "x.csv", b"sequence,label\rAC,a\r\xff,b\r")


def test_csv_extra_columns_and_header_order_are_accepted():
    text = "id,label,sequence\n" + "".join(f"{i},{'ab'[i % 2]},XYZ{'X' * (i % 3)}\n" for i in range(12))
    info = save_upload("extra", "x.csv", text.encode())
    assert info.class_names == ("a", "b") and info.alphabet == ("X", "Y", "Z")


def test_csv_refusals_name_the_line_and_the_fix():
    assert "empty" in raises("is empty", save_upload, "x", "x.csv", b"")
    message = raises("header must name", save_upload, "x", "x.csv", b"ACGT,pos\nTTTT,neg\n")
    assert "sequence,label" in message
    bad = csv_bytes(two_class_rows(12)) + b",pos\n"
    assert "fill it in" in raises(r"line 14: empty sequence", save_upload, "x", "x.csv", bad)
    bad = csv_bytes(two_class_rows(12)) + b"ACGT,\n"
    raises(r"line 14: missing label", save_upload, "x", "x.csv", bad)
    bad = csv_bytes(two_class_rows(12)) + b"ACGT\n"
    raises(r"line 14: missing label", save_upload, "x", "x.csv", bad)
    bad = csv_bytes(two_class_rows(12)) + b"AC,GT,pos\n"
    raises(r"line 14: expected 2 fields .* quote", save_upload, "x", "x.csv", bad)
    raises(r"line 2: not UTF-8", save_upload, "x", "x.csv", b"sequence,label\n\xff\xfe,pos\n")


def test_csv_over_long_sequence_is_refused_or_truncated():
    rows = two_class_rows(12) + [("A" * 30, "pos"), ("C" * 50, "neg")]
    message = raises(r"line 14: a sequence of 30 symbols is longer than the max length of 20", save_upload, "x",
                     "x.csv", csv_bytes(rows), max_length=20, windows=False)
    # The page's words, not the code's: its labels for the choices and the max length.
    assert "a max length of 50" in message and "'cut into windows'" in message and "'cut to max length'" in message
    assert "max_length=" not in message and "truncate=True" not in message
    info = save_upload("x", "x.csv", csv_bytes(rows), max_length=20, truncate=True)
    assert info.max_length == 20 and info.truncated == 2


def test_csv_alphabet_too_large():
    rows = [(chr(0x100 + i) * 3, "ab"[i % 2]) for i in range(300)]
    message = raises(r"line 258: more than 256 distinct symbols", save_upload, "x", "x.csv", csv_bytes(rows))
    assert "first few" in message


def test_single_class_and_too_few_examples():
    rows = [("ACGT", "pos")] * 12
    raises(r"every example has the label 'pos'.*at least 2 classes", save_upload, "x", "x.csv", csv_bytes(rows))
    message = raises(r"2 of 2 classes have fewer than 6 examples: 'neg' \(2\), 'pos' \(2\)", save_upload, "x",
                     "x.csv", csv_bytes(two_class_rows(4)))
    assert "train, validation and test each hold 2" in message


def test_twelve_classes_of_one_row_are_refused_naming_them():
    # Found: 12 one-row classes were accepted and trained to "test accuracy 0.0000" with no warning.
    rows = [("ACGTACGT", f"class{i:02d}") for i in range(12)]
    message = raises(r"12 of 12 classes have fewer than 6 examples: 'class00' \(1\), 'class01' \(1\)",
                     save_upload, "x", "x.csv", csv_bytes(rows))
    assert "and 2 more" in message and "merge them" in message and "drop their rows" in message
    # One small class among big ones is named alone.
    rows = two_class_rows(40) + [("ACGT", "rare")] * 5
    message = raises(r"1 of 3 classes have fewer than 6 examples: 'rare' \(5\)\.", save_upload, "x", "x.csv",
                     csv_bytes(rows))
    assert "'pos'" not in message


def test_every_split_holds_two_examples_of_every_class():
    rows = [("ACGT" * (1 + i % 5), f"c{i % 7}") for i in range(7 * 6)] + [("TTGA", "big")] * 60
    save_upload("small", "s.csv", csv_bytes(rows))
    dataset, info = disciplines.load("upload:small", progress=lambda _m: None)
    for split in ("train", "validation", "test"):
        counts = np.bincount(dataset[split]["label"], minlength=len(info.class_names))
        assert counts.min() >= 2, (split, counts)
    assert sum(len(dataset[s]) for s in dataset) == len(rows)


def test_too_many_classes_are_refused_at_the_cap():
    # Found: 200,000 classes of one row each were accepted.
    text = "sequence,label\n" + "".join(f"ACGT,c{i}\n" for i in range(200_000))
    started = time.perf_counter()
    message = raises(r"line 102: label 'c100' would be class 101, more than the lab's cap of 100 classes",
                     save_upload, "x", "x.csv", text.encode())
    assert time.perf_counter() - started < 2  # refused at the cap, not after reading every row
    assert "merge related classes" in message
    assert UploadLimits().max_classes == 100


def test_rows_over_the_cap_are_refused_at_once_with_the_cap_named():
    # Found: a 49 MB CSV of 12.8 M short rows took 45 s and 5.4 GB to save. The cap stops reading at
    # once; here it is lowered (a test writes no 50 MB file) and the file is 100x over it.
    limits = UploadLimits(max_rows=1_000)
    data = ("sequence,label\n" + "ACGT,a\nTTGA,b\n" * 50_000).encode()
    started = time.perf_counter()
    message = raises(r"line 1002: more than 1,000 examples, the lab's cap on rows", save_upload, "x", "x.csv",
                     data, limits=limits)
    assert time.perf_counter() - started < 2
    assert "upload at most 1,000" in message
    default = UploadLimits()
    assert default.max_rows == 200_000 and default.max_total_symbols == 20_000_000


def test_total_symbols_over_the_cap_are_refused_with_the_cap_named():
    limits = UploadLimits(max_total_symbols=1_000)
    rows = [("ACGT" * 10, "ab"[i % 2]) for i in range(100)]  # 40 symbols a row: the 26th row crosses
    message = raises(r"line 27: more than 1,000 symbols in all, the lab's cap on total symbols", save_upload,
                     "x", "x.csv", csv_bytes(rows), limits=limits)
    assert "'cut to max length'" in message
    # Truncation counts: cut to 8 symbols a row, the same rows fit.
    info = save_upload("x", "x.csv", csv_bytes(rows), max_length=8, truncate=True, limits=limits)
    assert info.n_examples == 100 and info.truncated == 100


def test_caps_bound_fasta_and_midi_too():
    raises(r"line 16: more than 5 examples", save_upload, "x", "x.fa", fasta_bytes(),
           limits=UploadLimits(max_rows=5))
    raises(r"more than 3 examples, the lab's cap on rows", save_upload, "m", "music.zip", zip_bytes(music_zip()),
           max_length=4, limits=UploadLimits(max_rows=3))
    raises(r"more than the lab's cap of 1 classes", save_upload, "m", "music.zip", zip_bytes(music_zip()),
           max_length=4, limits=UploadLimits(max_classes=1))
    images = np.zeros((12, 4, 4), dtype=np.uint8)
    raises(r"12 images, more than 10, the lab's cap on examples", save_upload, "i", "i.npz",
           npz_bytes(images=images, labels=np.arange(12) % 2), limits=UploadLimits(max_rows=10))
    raises(r"3 classes, more than the lab's cap of 2 classes", save_upload, "i", "i.npz",
           npz_bytes(images=np.zeros((18, 4, 4), np.uint8), labels=np.arange(18) % 3),
           limits=UploadLimits(max_classes=2))


def test_bad_names_kinds_and_sizes():
    good = csv_bytes(two_class_rows(12))
    for name in ("", "Upper", "with space", "a" * 41, "../up", "dots.x"):
        with pytest.raises(LabError, match="not allowed"):
            save_upload(name, "x.csv", good)
    raises(r"cannot tell the format .*'.txt'", save_upload, "x", "x.txt", good)
    assert save_upload("x", "x.txt", good, kind="csv").kind == "csv"
    with pytest.raises(LabError, match="kind 'xls' is not known"):
        save_upload("x", "x.csv", good, kind="xls")
    raises(r"more than the upload limit of", save_upload, "y", "y.csv", good,
           limits=UploadLimits(max_bytes=len(good) - 1))


# ----------------------------------------------------------------------------------------- FASTA


def fasta_bytes(n=12):
    records = []
    for i in range(n):
        label = "amp" if i % 2 else "other"
        records.append(f">seq{i}|x|{label}\nMKV{'L' * (i % 4)}\nGG{'K' * (i % 2)}\n")
    return "".join(records).encode()


def test_fasta_round_trip_takes_label_after_last_bar():
    info = save_upload("peptides", "pep.fasta", fasta_bytes())
    assert info.kind == "fasta" and info.class_names == ("amp", "other")
    assert info.alphabet == ("G", "K", "L", "M", "V")
    dataset, _ = disciplines.load("upload:peptides", progress=lambda _m: None)
    assert sum(len(dataset[s]) for s in dataset) == 12


def test_fasta_refusals():
    message = raises(r"line 1: header '>seq0' has no label", save_upload, "x", "x.fa", b">seq0\nACGT\n")
    assert ">id|label" in message
    raises(r"line 1: sequence before the first header", save_upload, "x", "x.fa", b"ACGT\n>a|b\nAC\n")
    raises(r"line 1: missing label", save_upload, "x", "x.fa", b">seq0|\nACGT\n")
    raises(r"line 3: empty sequence", save_upload, "x", "x.fa", b">a|x\nAC\n>b|y\n>c|y\nAC\n")


# ------------------------------------------------------------------------------------------ MIDI


def midi_bytes(pitches, drum_pitches=()):
    import pretty_midi

    midi = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(program=0)
    for i, pitch in enumerate(pitches):
        piano.notes.append(pretty_midi.Note(velocity=80, pitch=pitch, start=i * 0.25, end=i * 0.25 + 0.2))
    midi.instruments.append(piano)
    if drum_pitches:
        drums = pretty_midi.Instrument(program=0, is_drum=True)
        for i, pitch in enumerate(drum_pitches):
            drums.notes.append(pretty_midi.Note(velocity=80, pitch=pitch, start=i * 0.25, end=i * 0.25 + 0.1))
        midi.instruments.append(drums)
    buffer = io.BytesIO()
    midi.write(buffer)
    return buffer.getvalue()


def zip_bytes(entries):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():  # a name, or a ZipInfo for crafted attributes
            archive.writestr(name, content)
    return buffer.getvalue()


def music_zip(files_per_class=6, notes=10):
    entries = {}
    for c, base in (("bach", 60), ("satie", 48)):
        for k in range(files_per_class):
            entries[f"pieces/{c}/piece{k}.mid"] = midi_bytes([base + (i * (k + 1)) % 12 for i in range(notes)],
                                                             drum_pitches=[36, 38])
    entries["pieces/README.txt"] = b"not music"
    entries["__MACOSX/pieces/bach/._piece0.mid"] = b"resource fork"
    return entries


def test_midi_zip_windows_groups_and_labels():
    info = save_upload("composers", "music.zip", zip_bytes(music_zip()), max_length=4)
    assert info.kind == "midi" and info.class_names == ("bach", "satie")
    assert len(info.alphabet) == 128 and info.alphabet[60] == "C4"
    assert info.n_groups == 12 and info.n_examples == 12 * 2  # 10 notes in windows of 4: 4, 4 (2 dropped)
    assert info.ignored_entries == 2 and info.max_length == 4
    dataset, dinfo = disciplines.load("upload:composers", progress=lambda _m: None)
    assert dinfo.vote_by_group
    groups = {s: set(dataset[s]["group"]) for s in dataset}
    assert not groups["train"] & groups["validation"] and not groups["train"] & groups["test"]
    assert not groups["validation"] & groups["test"]
    assert sum(len(g) for g in groups.values()) == 12
    # Every piece has drum notes 36 and 38; only the piano's pitches (48..71) may appear.
    assert min(min(r) for s in dataset for r in dataset[s]["tokens"]) >= 48


def test_midi_notes_sorted_by_onset_then_pitch():
    import pretty_midi

    midi = pretty_midi.PrettyMIDI()
    a, b = pretty_midi.Instrument(program=0), pretty_midi.Instrument(program=40)
    a.notes += [pretty_midi.Note(velocity=80, pitch=67, start=0.5, end=0.7),
                pretty_midi.Note(velocity=80, pitch=64, start=0.0, end=0.2)]
    b.notes += [pretty_midi.Note(velocity=80, pitch=60, start=0.0, end=0.2)]
    midi.instruments += [a, b]
    buffer = io.BytesIO()
    midi.write(buffer)
    assert music.pitches_from_midi(buffer.getvalue()) == [60, 64, 67]


def test_midi_refusals_name_the_entry():
    entries = music_zip()
    entries["pieces/bach/broken.mid"] = b"MThd but not really"
    raises(r"music.zip: 1 file\(s\) cannot be read as MIDI with notes: pieces/bach/broken.mid \(\w+", save_upload,
           "m", "music.zip", zip_bytes(entries))
    entries = music_zip()
    entries["loose.mid"] = midi_bytes([60, 62])
    raises(r"'loose.mid' is not inside a class folder", save_upload, "m", "music.zip", zip_bytes(entries))
    entries = music_zip()
    entries["pieces/bach/drums.mid"] = midi_bytes([], drum_pitches=[36])
    raises(r"drums.mid \(no notes outside drum tracks\)", save_upload, "m", "music.zip", zip_bytes(entries))
    raises(r"not a readable zip archive", save_upload, "m", "music.zip", b"PK\x03\x04 broken")
    short = save_upload("short", "short.zip", zip_bytes(music_zip(notes=3)), max_length=4)
    assert short.n_examples == 12 and short.max_length == 3  # a piece shorter than a window stays whole
    raises(r"2 of 2 classes have fewer than 6 MIDI files: 'bach' \(1\), 'satie' \(1\)", save_upload, "m",
           "music.zip", zip_bytes(music_zip(files_per_class=1)))


@pytest.mark.parametrize("entry", ["../evil/x.mid", "/abs/x.mid", "a/../../x.mid", "C:/win/x.mid",
                                   "a\\..\\..\\x.mid"])
def test_zip_entries_outside_their_folder_are_refused(entry):
    entries = music_zip()
    entries[entry] = midi_bytes([60, 62])
    raises(r"would land outside its folder", save_upload, "m", "music.zip", zip_bytes(entries))


def test_zip_symlinks_are_refused():
    link = zipfile.ZipInfo("pieces/bach/link.mid")
    link.external_attr = (0o120777 << 16)
    entries = music_zip()
    entries[link] = b"/etc/passwd"
    raises(r"'pieces/bach/link.mid' is a symbolic link", save_upload, "m", "music.zip", zip_bytes(entries))


def test_zip_bomb_is_refused():
    entries = music_zip()
    entries["pieces/bach/huge.mid"] = b"\0" * (4 * 2**20)  # compresses to a few kB
    data = zip_bytes(entries)
    assert len(data) < 2**20
    raises(r"would unpack to 4\.\d MB, more than the limit of 1\.0 MB", save_upload, "m", "music.zip", data,
           limits=UploadLimits(max_unpacked_bytes=2**20))
    raises(r"entries, more than the limit of 5", save_upload, "m", "music.zip", data,
           limits=UploadLimits(max_zip_entries=5))


# ---------------------------------------------------------------------------------------- images


def npz_bytes(**arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npz_member(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_npz_images_become_padded_patches():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(20, 6, 5), dtype=np.uint8)
    labels = np.array(["cat", "dog"] * 10)
    info = save_upload("pets", "pets.npz", npz_bytes(images=images, labels=labels))
    assert info.input_kind == "vectors" and info.vector_dim == 16  # 4x4 patches, one channel
    assert info.max_length == 4  # 6x5 padded to 8x8: 2x2 patches
    assert info.class_names == ("cat", "dog")
    dataset, dinfo = disciplines.load("upload:pets", progress=lambda _m: None)
    assert dinfo.input_kind == "vectors" and dinfo.vector_dim == 16 and dinfo.vectors_are_patches
    assert sum(len(dataset[s]) for s in dataset) == 20
    # Reassemble image 0 from its patches: raster order, zero padding, uint8 scaled to [0, 1].
    patches = format_npz._patches(images[:1, ..., None].astype(np.float32) / 255, 4, 512, "x")
    grid = patches[0].reshape(2, 2, 4, 4).transpose(0, 2, 1, 3).reshape(8, 8)
    assert np.allclose(grid[:6, :5], images[0] / 255) and not grid[6:].any() and not grid[:, 5:].any()


def test_npz_colour_images_and_integer_labels():
    images = np.random.default_rng(1).random((18, 8, 8, 3), dtype=np.float32)
    info = save_upload("rgb", "rgb.npz", npz_bytes(images=images, labels=np.arange(18) % 3), patch_size=2)
    assert info.vector_dim == 2 * 2 * 3 and info.max_length == 16
    assert info.class_names == ("0", "1", "2")


def test_npz_refusals():
    images = np.zeros((12, 4, 4), dtype=np.uint8)
    labels = np.arange(12) % 2
    objects = np.empty(12, dtype=object)
    objects[:] = ["a", "b"] * 6
    message = raises(r"array 'labels' holds Python objects", save_upload, "i", "i.npz",
                     npz_bytes(images=images, labels=objects))
    assert "pickled" in message and "dtype=str" in message
    raises(r"labels has shape \(11,\) but there are 12 images", save_upload, "i", "i.npz",
           npz_bytes(images=images, labels=labels[:11]))
    raises(r"no array named labels \(found: images\)", save_upload, "i", "i.npz", npz_bytes(images=images))
    raises(r"images has shape \(12, 16\)", save_upload, "i", "i.npz",
           npz_bytes(images=images.reshape(12, 16), labels=labels))
    raises(r"labels has dtype float64", save_upload, "i", "i.npz",
           npz_bytes(images=images, labels=labels.astype(float)))
    huge = io.BytesIO()
    with zipfile.ZipFile(huge, "w") as archive:  # a header that claims 2**80 bytes in a tiny file
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                      "shape": (2**40, 2**37)})
        archive.writestr("images.npy", header.getvalue())
        archive.writestr("labels.npy", npz_member(labels))
    raises(r"array 'images' of shape \(1099511627776, 137438953472\) needs", save_upload, "i", "i.npz",
           huge.getvalue())
    bad = images.astype(np.float32)
    bad[3, 0, 0] = np.nan
    raises(r"image 3 holds NaN", save_upload, "i", "i.npz", npz_bytes(images=bad, labels=labels))
    message = raises(r"give 64 patches of 4x4, more than max_length 16", save_upload, "i", "i.npz",
                     npz_bytes(images=np.zeros((12, 32, 32), np.uint8), labels=labels), max_length=16)
    assert "patch_size=8" in message


# ------------------------------------------------------------------------------ atomic replacement


def test_a_bad_file_never_replaces_a_good_upload(own_cache):
    good = csv_bytes(two_class_rows(20))
    first = save_upload("keep", "good.csv", good)
    before = (own_cache / "uploads" / "keep" / "manifest.json").read_bytes()
    for bad in (b"", csv_bytes([("ACGT", "pos")] * 20), csv_bytes(two_class_rows(12)) + b",pos\n"):
        with pytest.raises(DataValidationError):
            save_upload("keep", "bad.csv", bad)
    assert (own_cache / "uploads" / "keep" / "manifest.json").read_bytes() == before
    assert (own_cache / "uploads" / "keep" / "data.csv").read_bytes() == good
    assert upload.upload_info("keep") == first
    assert leftovers(own_cache) == []


def test_a_failed_first_upload_leaves_nothing(own_cache):
    with pytest.raises(DataValidationError):
        save_upload("new", "bad.csv", b"sequence,label\n")
    assert upload.list_uploads() == []
    assert not (own_cache / "uploads" / "new").exists()
    assert leftovers(own_cache) == []


def test_replacing_an_upload_changes_its_data_and_cache_key(own_cache):
    save_upload("swap", "a.csv", csv_bytes(two_class_rows(20)))
    old = upload.uploaded_discipline("upload:swap")
    old_params = disciplines.parse_params(old)
    dataset, _ = disciplines.load("upload:swap", progress=lambda _m: None)
    assert len(dataset["train"]) == 12  # 10 a class: 2 each to validation and test
    save_upload("swap", "b.csv", csv_bytes(two_class_rows(30)))
    new = upload.uploaded_discipline("upload:swap")
    assert disciplines.parse_params(new) != old_params
    dataset, info = disciplines.load("upload:swap", progress=lambda _m: None)
    assert len(dataset["train"]) == 22 and info.source == "b.csv"
    with pytest.raises(DataValidationError, match="has changed since"):
        new.build(old_params, lambda _m: None)
    assert leftovers(own_cache) == []


def test_same_seed_same_split_other_seed_other_split():
    save_upload("seeded", "s.csv", csv_bytes(two_class_rows(40)))
    discipline = upload.uploaded_discipline("seeded")
    params = disciplines.parse_params(discipline)
    a = discipline.build(params, lambda _m: None)
    b = discipline.build(params, lambda _m: None)
    c = discipline.build(disciplines.parse_params(discipline, {"seed": 1}), lambda _m: None)
    assert a["test"]["tokens"] == b["test"]["tokens"]
    assert a["test"]["tokens"] != c["test"]["tokens"]


def test_stratified_split_keeps_classes_and_groups():
    labels = [0] * 50 + [1] * 30 + [2] * 20 + [3] * 7
    train, val, test = stratified_split(labels, upload.SPLIT_FRACTIONS, seed=3, min_per_split=2)
    assert sorted(train + val + test) == list(range(107))
    for part, share in ((train, 0.8), (val, 0.1), (test, 0.1)):
        for c, n in ((0, 50), (1, 30), (2, 20)):
            assert abs(sum(labels[i] == c for i in part) - n * share) <= 1
    assert [sum(labels[i] == 3 for i in part) for part in (train, val, test)] == [3, 2, 2]
    with pytest.raises(ValueError, match="6 are needed"):
        stratified_split([0] * 10 + [1] * 5, upload.SPLIT_FRACTIONS, seed=0, min_per_split=2)
    groups = [f"g{i // 3}" for i in range(60)]
    group_labels = [int(g[1:]) % 2 for g in groups]
    parts = stratified_split(group_labels, upload.SPLIT_FRACTIONS, seed=0, groups=groups, min_per_split=2)
    seen = [{groups[i] for i in part} for part in parts]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    assert all(len(s) >= 4 for s in seen)  # 2 groups of each class


def test_unknown_and_deleted_uploads():
    with pytest.raises(UnknownNameError, match=r"no upload named 'ghost'; saved uploads: \(none yet\)"):
        disciplines.get("upload:ghost")
    save_upload("real", "r.csv", csv_bytes(two_class_rows(12)))
    with pytest.raises(UnknownNameError, match="saved uploads: real.*save_upload"):
        upload.uploaded_discipline("upload:ghost")
    disciplines.load("upload:real", progress=lambda _m: None)
    upload.delete_upload("upload:real")
    assert upload.list_uploads() == []
    with pytest.raises(UnknownNameError):
        upload.delete_upload("real")


def test_uploaded_filename_is_only_displayed():
    info = save_upload("pathy", "../../etc/x\\evil\x00.csv", csv_bytes(two_class_rows(12)))
    assert info.filename == "evil.csv" and info.stored == "data.csv"


# ------------------------------------------------------------------------- saving from the page


def test_the_page_saves_in_a_subprocess(own_cache):
    # start_save is what the Data page calls: the file is parsed by another process, never the server.
    job = upload.start_save("sub", "genes.csv", csv_bytes(two_class_rows(40)))
    assert job.poll() is None or job.result is not None
    result = job.wait()
    assert result.error == "" and result.info is not None and result.info.n_examples == 40
    assert result.pid != os.getpid() and result.pid == job.process.pid
    assert 0 < result.peak_rss_bytes < 2**30
    assert upload.upload_info("sub") == result.info
    assert leftovers(own_cache) == []

    rows = [("ACGTACGT", f"class{i:02d}") for i in range(12)]
    result = upload.start_save("sub", "small.csv", csv_bytes(rows)).wait()
    assert result.info is None and "12 of 12 classes have fewer than 6 examples" in result.error
    assert upload.upload_info("sub").filename == "genes.csv"  # the refused file replaced nothing
    assert leftovers(own_cache) == []


def test_the_page_is_refused_at_once_what_needs_no_parsing(own_cache):
    with pytest.raises(DataValidationError, match="more than the upload limit of"):
        upload.start_save("big", "big.csv", b"x" * 100, limits=UploadLimits(max_bytes=99))
    with pytest.raises(LabError, match="not allowed"):
        upload.start_save("Bad Name", "x.csv", b"sequence,label\n")
    assert leftovers(own_cache) == []  # no pending folder, no process


def test_a_save_that_runs_too_long_is_stopped(own_cache, monkeypatch):
    monkeypatch.setattr(save_job, "SAVE_TIMEOUT_S", 0)
    job = upload.start_save("slow", "s.csv", csv_bytes(two_class_rows(40)))
    result = job.wait()
    assert result.info is None and "took longer than 0 s and was stopped" in result.error
    assert upload.list_uploads() == [] and leftovers(own_cache) == []


def test_streamlit_upload_limit_is_the_labs():
    import tomllib

    config = tomllib.loads((paths.REPO_ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["maxUploadSize"] * 2**20 == UploadLimits().max_bytes  # both in MB: 50


# ------------------------------------------------------------------- label and split fields (issue 13)


def split_fasta(n_per_split=(16, 4, 4)):
    """``>id|label|split`` headers, the common form whose last field is the split, not the class."""
    records, i = [], 0
    for split, n in zip(("training", "validation", "testing"), n_per_split):
        for _ in range(n):
            records.append(f">seq{i}|{i % 2}|{split}\n{'ACGT' if i % 2 else 'TTGA'}{'C' * (i % 3)}\n")
            i += 1
    return "".join(records).encode()


def test_a_split_field_read_as_the_label_is_flagged_not_shown_as_classes():
    # A label field chosen where the split is (the last field, which was once the default) reads the split as
    # the class: the save says so.
    info = save_upload("bars", "t.fasta", split_fasta((16, 6, 6)), label_field="field 3")
    assert info.class_names == ("testing", "training", "validation")
    assert info.warnings and "split names, not classes" in info.warnings[0]
    discipline = disciplines.get("upload:bars")
    assert "Warning: the labels" in discipline.info(disciplines.parse_params(discipline, {})).notes


def test_the_preview_suggests_the_label_and_the_files_own_split():
    from labcore.data import fields

    preview = fields.preview("fasta", split_fasta())
    assert preview.fields == ("field 1", "field 2", "field 3") and preview.complete
    assert (preview.label_field, preview.split_field) == ("field 2", "field 3")
    assert preview.counts("field 2", "field 3") == {"train": {"0": 8, "1": 8}, "validation": {"0": 2, "1": 2},
                                                   "test": {"0": 2, "1": 2}}
    assert preview.warnings("field 2", "field 3") == []
    assert preview.test_counts("field 2", "field 3", 2, 0.1) == {"0": 2, "1": 2}  # the file's own test split
    assert preview.test_counts("field 2", "", 2, 0.1) == {"0": 2, "1": 2}  # 12 of each: a tenth, at least 2
    assert fields.preview("fasta", split_fasta((18, 0, 0))).test_counts("field 2", "field 3", 2, 0.1) == \
        {"0": 2, "1": 2}  # none given: a ninth of train
    assert "split names, not classes" in preview.warnings("field 3")[0]
    assert "looks like an id" in preview.warnings("field 1")[0]
    assert "split names" in preview.warnings(fields.AFTER_LAST_BAR)[0]
    # A split field of other values is flagged before anything is saved.
    assert "name no split" in preview.warnings("field 3", "field 1")[-1]


def test_a_file_sorted_by_class_still_gets_its_label_field_suggested():
    # iLearnPlus' >id|label|training files list thousands of one class first: the records the preview reads
    # hold one class, and the suggestion had fallen back on the text after the last '|', the split.
    from labcore.data import fields

    n_first = fields.PREVIEW_RECORDS + 100
    records = [f">p{i}|1|{'testing' if i % 5 == 0 else 'training'}\nACDEFG{'K' * (i % 4)}\n" for i in range(n_first)]
    records += [f">n{i}|0|{'testing' if i % 5 == 0 else 'training'}\nGFEDCA{'W' * (i % 4)}\n" for i in range(300)]
    data = "".join(records).encode()
    preview = fields.preview("fasta", data)
    assert not preview.complete and len(preview.records) == fields.PREVIEW_RECORDS
    assert (preview.label_field, preview.split_field) == ("field 2", "field 3")
    warnings = preview.warnings(preview.label_field, preview.split_field)
    assert any("the file goes on" in w for w in warnings) and not any("needs at least 2 classes." in w for w in warnings)
    assert any("hold no validation records; the file goes on" in w for w in warnings)
    # The split names read as labels point at the label field, not at the other field of split names.
    assert "(field 2 could be the label)" in preview.warnings(fields.AFTER_LAST_BAR)[0]
    info = save_upload("sorted", "s.fasta", data, label_field=preview.label_field, split_field=preview.split_field)
    assert info.class_names == ("0", "1") and info.warnings == ()
    assert info.split_counts[0] + info.split_counts[2] == n_first + 300


def test_without_options_the_library_reads_the_fields_the_preview_suggests():
    from labcore.data import fields

    data = split_fasta()
    suggested = fields.preview("fasta", data)
    info = save_upload("bars", "t.fasta", data)
    assert (info.options.label_field, info.options.split_field) == (suggested.label_field, suggested.split_field)
    assert info.class_names == ("0", "1") and info.warnings == () and info.split_counts == (16, 4, 4)


def test_the_chosen_label_and_split_fields_give_the_right_classes_and_splits():
    info = save_upload("bars", "t.fasta", split_fasta(), label_field="field 2", split_field="field 3")
    assert info.class_names == ("0", "1") and info.warnings == ()
    assert info.split_counts == (16, 4, 4) and info.options.split_field == "field 3"
    dataset, _ = disciplines.load("upload:bars", progress=lambda _m: None)
    assert [len(dataset[s]) for s in ("train", "validation", "test")] == [16, 4, 4]
    assert sorted(set(dataset["test"]["label"])) == [0, 1]


def test_a_file_with_train_and_test_only_takes_validation_from_train():
    info = save_upload("tt", "t.fasta", split_fasta((18, 0, 6)), label_field="field 2", split_field="field 3")
    assert info.split_counts == (18, 0, 6)
    dataset, _ = disciplines.load("upload:tt", progress=lambda _m: None)
    assert [len(dataset[s]) for s in ("train", "validation", "test")] == [14, 4, 6]


def test_split_field_refusals_name_the_line_and_the_rule():
    raises(r"line 1: the split field \(field 1\) says 'seq0', which names no split", save_upload, "x", "t.fa",
           split_fasta(), label_field="field 2", split_field="field 1")
    raises(r"'0' has 1 in test", save_upload, "x", "t.fa", split_fasta((16, 4, 2)), label_field="field 2",
           split_field="field 3")
    raises(r"line 1: header 'a' has 1 field\(s\), so no field 2", save_upload, "x", "t.fa", b">a\nAC\n",
           label_field="field 2")
    with pytest.raises(LabError, match="both read from field 2"):
        save_upload("x", "t.fa", split_fasta(), label_field="field 2", split_field="field 2")


def test_csv_label_and_split_columns_are_chosen():
    from labcore.data import fields

    rows = [f"{'ACGT' if i % 2 else 'TTGA'},g{i},{'pos' if i % 2 else 'neg'},{('train', 'dev', 'test')[i % 3]}"
            for i in range(36)]
    data = ("sequence,id,class,fold\n" + "\n".join(rows) + "\n").encode()
    preview = fields.preview("csv", data)
    assert (preview.label_field, preview.split_field) == ("class", "fold")
    info = save_upload("cols", "c.csv", data, label_field="class", split_field="fold")
    assert info.class_names == ("neg", "pos") and info.split_counts == (12, 12, 12)
    # Without options the library takes the preview's suggestion, as the Data page does.
    unasked = save_upload("x", "c.csv", data)
    assert unasked.class_names == ("neg", "pos") and unasked.split_counts == (12, 12, 12)


def fine_midi_bytes(beats=1100, resolution=10_080):
    """A long piece at music21's resolution: its last tick passes pretty_midi's 10^7 guard."""
    import mido

    midi = mido.MidiFile(ticks_per_beat=resolution)
    track = mido.MidiTrack()
    midi.tracks.append(track)
    for i in range(beats):
        track.append(mido.Message("note_on", note=60 + i % 12, velocity=80, time=0))
        track.append(mido.Message("note_on", note=64 + i % 5, velocity=80, time=0))
        track.append(mido.Message("note_off", note=60 + i % 12, velocity=0, time=resolution))
        track.append(mido.Message("note_off", note=64 + i % 5, velocity=0, time=0))
    buffer = io.BytesIO()
    midi.save(file=buffer)
    return buffer.getvalue()


def test_a_long_midi_at_10080_ticks_per_beat_is_read():
    import pretty_midi

    data = fine_midi_bytes()
    with pytest.raises(ValueError, match="largest tick"):
        pretty_midi.PrettyMIDI(io.BytesIO(data))  # the guard the issue ran into
    pitches = music.pitches_from_midi(data)
    assert len(pitches) == 2200
    assert pitches[:4] == [60, 64, 61, 65]  # onset order kept, a chord bottom-up


def test_every_unreadable_midi_is_named_at_once_and_can_be_skipped():
    entries = music_zip()
    entries["pieces/bach/long.mid"] = fine_midi_bytes(beats=1000)
    for k in range(3):
        entries[f"pieces/satie/broken{k}.mid"] = b"MThd but not really"
    message = raises(r"3 file\(s\) cannot be read", save_upload, "m", "music.zip", zip_bytes(entries))
    assert all(f"broken{k}.mid" in message for k in range(3)) and "long.mid" not in message
    info = save_upload("m", "music.zip", zip_bytes(entries), skip_unreadable=True)
    assert len(info.skipped) == 3 and info.n_groups == 13  # the long file is kept, the broken ones left out
    discipline = disciplines.get("upload:m")
    meta = discipline.info(disciplines.parse_params(discipline, {}))
    assert "broken0.mid" in meta.notes and meta.run_notes == ("3 unreadable MIDI file(s) left out of the upload",)


# ------------------------------------------------------------------------ long sequences (issue 13)


def long_fasta(n=12, length=1000):
    return "".join(f">r{i}|{'ab'[i % 2]}\n{('ACGT' if i % 2 else 'TTGA') * (length // 4)}\n"
                   for i in range(n)).encode()


def test_sequences_longer_than_max_length_are_cut_into_windows_that_vote():
    assert upload.window_starts(1000, 510) == [0, 490] and upload.window_starts(1020, 510) == [0, 510]
    info = save_upload("long", "l.fasta", long_fasta())  # the default: windows of 510 symbols
    assert info.options.max_length == 510 and info.windowed == 12
    assert info.n_examples == 24 and info.n_groups == 12 and info.max_length == 510 and info.truncated == 0
    discipline = disciplines.get("upload:long")
    meta = discipline.info(disciplines.parse_params(discipline, {}))
    assert meta.vote_by_group and "12 sequence(s) of the upload longer than 510 symbols cut into windows" in meta.notes
    assert meta.run_notes and "evaluation votes over them" in meta.run_notes[0]
    dataset, _ = disciplines.load("upload:long", progress=lambda _m: None)
    groups = {s: set(dataset[s]["group"]) for s in ("train", "validation", "test")}
    assert not groups["train"] & groups["test"] and not groups["train"] & groups["validation"]
    assert all(len(t) == 510 for s in dataset for t in dataset[s]["tokens"])
    cut = save_upload("cut", "l.fasta", long_fasta(), truncate=True)
    assert cut.windowed == 0 and cut.truncated == 12 and cut.n_examples == 12
    assert disciplines.get("upload:cut").info(None).run_notes == (
        "12 sequence(s) of the upload cut to its max length of 510 symbols (the rest of each is not seen)",)
    short = save_upload("short", "s.fasta", long_fasta(length=100))
    assert short.windowed == 0 and short.n_groups == 12  # no record cut: no groups, no vote
    assert not disciplines.get("upload:short").info(None).vote_by_group
