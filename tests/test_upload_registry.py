"""The upload format registry: one module per format, each looked up by kind and extension in one place."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from labcore.data import upload
from labcore.data.upload import format_csv, format_fasta, format_midi, format_npz, registry
from labcore.data.upload.manifest import UploadLimits, UploadOptions
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.errors import DataValidationError, LabError


def test_every_format_module_is_registered_under_its_kind():
    modules = (format_csv, format_fasta, format_midi, format_npz)
    assert registry.KINDS == upload.KINDS == ("csv", "fasta", "midi", "npz")
    for module in modules:
        assert registry.format_of(module.FORMAT.kind) is module.FORMAT
        assert module.FORMAT.parse is module.parse
    assert upload.EXTENSIONS == {".csv": "csv", ".fasta": "fasta", ".fa": "fasta", ".faa": "fasta",
                                 ".fna": "fasta", ".fas": "fasta", ".zip": "midi", ".npz": "npz"}
    assert upload.STORED_NAMES == {"csv": "data.csv", "fasta": "data.fasta", "midi": "data.zip", "npz": "data.npz"}
    assert upload.DEFAULT_MAX_LENGTH == {"csv": 510, "fasta": 510, "midi": 128, "npz": 512}
    assert [k for k, f in registry.FORMATS.items() if f.records] == ["csv", "fasta"]


def test_kinds_and_extensions_are_looked_up_in_the_registry():
    assert upload.detect_kind("dir/Genes.FA") == "fasta"
    assert upload.detect_kind("anything.bin", "npz") == "npz"
    with pytest.raises(LabError, match="valid kinds: csv, fasta, midi, npz"):
        registry.format_of("wav")
    with pytest.raises(DataValidationError, match="accepted extensions: .csv, .fasta"):
        upload.detect_kind("song.wav")


def test_two_formats_cannot_claim_one_kind_or_extension():
    other = dataclasses.replace(format_csv.FORMAT, kind="tsv")
    with pytest.raises(LabError, match="extension .csv is claimed by the upload formats csv and tsv"):
        registry._registry(format_csv.FORMAT, other)
    with pytest.raises(LabError, match="two upload formats are called 'csv'"):
        registry._registry(format_csv.FORMAT, dataclasses.replace(format_csv.FORMAT, extensions=(".tsv",)))


def test_a_format_parses_a_path_and_names_the_file_in_its_refusals(tmp_path):
    path = tmp_path / "genes.fasta"
    path.write_text(">a|x\nACGT\n>b\nTTGA\n")
    with pytest.raises(DataValidationError, match=r"^genes.fasta: line 3: header '>b' has no label"):
        format_fasta.parse(path, UploadOptions(max_length=510), UploadLimits())
    with pytest.raises(DataValidationError, match=r"^my genes.fasta: line 3"):
        format_fasta.parse(path, UploadOptions(max_length=510), UploadLimits(), source="my genes.fasta")


def test_parse_upload_reads_through_the_registered_format_then_checks_the_classes(tmp_path, monkeypatch):
    calls = []

    def parse(path, options, limits, source=""):
        calls.append((path, options, limits, source))
        return ParsedUpload(input_kind="tokens", class_names=("a", "b"), labels=np.array([0, 1], dtype=np.int32))

    fake = UploadFormat(kind="fake", extensions=(".fake",), stored_name="data.fake", default_max_length=8,
                        hint="anything", parse=parse)
    monkeypatch.setattr(registry, "FORMATS", {"fake": fake})
    path = tmp_path / "f.fake"
    path.write_text("x")
    options, limits = UploadOptions(max_length=8), UploadLimits()
    # Its two classes have one example each: the shared check refuses what the format read.
    with pytest.raises(DataValidationError, match="fewer than 6 examples"):
        registry.parse_upload("fake", path, "shown.fake", options, limits)
    assert calls == [(path, options, limits, "shown.fake")]
    path.write_text("  \n")
    with pytest.raises(DataValidationError, match=r"shown.fake is empty; .*\(anything\)"):
        registry.parse_upload("fake", path, "shown.fake", options, limits)
    assert len(calls) == 1  # an empty file never reaches the format
