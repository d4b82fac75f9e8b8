"""The five upload cases of bench/upload_cases.py and the files each uploads, written once under the lab
cache (malonylation windows as a FASTA with label and split fields, MIDI files at 10,080 ticks per beat, long
sequences, a small DNA CSV)."""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from labcore import assets, paths

MIDI_COMPOSERS = ("bach", "beethoven", "monteverdi")
MIDI_PER_COMPOSER = 7
LONG_RECORDS = 1200
DNA_ROWS = 106
FOLDS = 5


def workdir() -> Path:
    return paths.cache_dir() / "bench-upload-cases"


def _write_once(path: Path, make: Callable[[Path], None]) -> Path:
    if not path.exists():
        partial = path.with_name(path.name + ".partial")
        make(partial)
        partial.rename(path)
    return path


# ---------------------------------------------------------------------------------------- the files
def malonylation_fasta(folder: Path, _args: argparse.Namespace) -> Path:
    source = assets.require("malonylation") / "Malonylation.txt"
    return _write_once(folder / "malonylation.fasta", lambda out: shutil.copyfile(source, out))


def midi_zip(folder: Path, _args: argparse.Namespace) -> Path:
    from music21 import converter

    from labcore.data import music

    def make(out: Path) -> None:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for composer in MIDI_COMPOSERS:
                pieces = music.composer_pieces(composer)
                if composer == "beethoven":  # whole quartets in one file number their bars through all movements
                    pieces = [p for p in pieces if "/movement" in p]
                for rel in music.candidate_order(pieces, composer, 0)[:MIDI_PER_COMPOSER]:
                    midi = folder / "midi" / composer / (rel.split("/", 1)[1].replace("/", "-").rsplit(".", 1)[0]
                                                         + ".mid")
                    midi.parent.mkdir(parents=True, exist_ok=True)
                    # music21's own writer, at its own resolution (10,080 ticks per beat), as a user's export
                    _write_once(midi, lambda part: converter.parse(str(music.corpus_root() / rel)).write(
                        "midi", fp=str(part)))
                    archive.write(midi, f"{composer}/{midi.name}")

    return _write_once(folder / "composers.zip", make)


def long_fasta(folder: Path, args: argparse.Namespace) -> Path:
    import numpy as np

    def make(out: Path) -> None:
        records: dict[str, list[tuple[str, str]]] = {}
        header = ""
        for line in (assets.require("lncrna") / "lncRNA_sequences.txt").read_text().splitlines():
            if line.startswith(">"):
                header = line[1:]
            elif line.strip() and len(line.strip()) <= args.long_max:
                ident, label = header.split("|")[:2]
                records.setdefault(label, []).append((ident, line.strip()))
        rng = np.random.default_rng(0)
        chosen = []
        for label in sorted(records):  # half of each class, a seeded sample
            picks = rng.choice(len(records[label]), LONG_RECORDS // len(records), replace=False)
            chosen += [(records[label][i][0], label, records[label][i][1]) for i in sorted(picks)]
        # the file's training/testing field is left out: the page's seeded 80/10/10 split, as the file
        out.write_text("".join(f">{ident}|{label}\n{sequence}\n" for ident, label, sequence in chosen))

    return _write_once(folder / f"lncrna-{LONG_RECORDS}-max{args.long_max}.fasta", make)


def dna_csv(folder: Path, _args: argparse.Namespace) -> Path:
    import numpy as np

    from labcore.data.dna import read_splice

    def make(out: Path) -> None:
        sequences, labels = read_splice()
        rng = np.random.default_rng(0)
        order = rng.permutation(len(labels))
        classes = sorted(set(labels))
        # a seeded sample, each class in its share of the 3,186 rows (largest remainders fill up to 106)
        shares = {c: DNA_ROWS * labels.count(c) / len(labels) for c in classes}
        counts = {c: int(s) for c, s in shares.items()}
        for c in sorted(classes, key=lambda c: counts[c] - shares[c])[:DNA_ROWS - sum(counts.values())]:
            counts[c] += 1
        rows = [i for c in classes for i in [j for j in order if labels[j] == c][:counts[c]]]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["sequence", "label"])
        writer.writerows([sequences[i], labels[i]] for i in sorted(rows))
        out.write_text(buffer.getvalue())

    return _write_once(folder / f"splice-{DNA_ROWS}.csv", make)


@dataclass(frozen=True)
class Case:
    number: int
    title: str
    upload: str  # the upload's name (upload:NAME)
    write: Callable[[Path, argparse.Namespace], Path]
    label_field: str = ""  # CSV/FASTA: the fields chosen in the preview ("" with suggest: the preview's own)
    split_field: str = ""
    suggest: bool = False  # take the preview's suggested fields, as a user who changes nothing
    folds: int = 0


CASES = (
    Case(1, ">id|label|split FASTA, label field chosen", "bench-malonyl", malonylation_fasta, "field 2", "field 3"),
    Case(2, f"{len(MIDI_COMPOSERS) * MIDI_PER_COMPOSER} MIDI files at 10,080 ticks/beat by composer", "bench-midi",
         midi_zip),
    Case(3, f"{LONG_RECORDS:,} long sequences, the page's default (windows)", "bench-long", long_fasta, suggest=True),
    Case(4, f"the MIDI zip as {FOLDS}-fold cross-validation", "bench-midi", midi_zip, folds=FOLDS),
    Case(5, f"a {DNA_ROWS}-row DNA CSV as {FOLDS}-fold cross-validation", "bench-dna", dna_csv, suggest=True,
         folds=FOLDS),
)
