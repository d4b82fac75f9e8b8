"""DNA: UCI primate splice junctions (Kao & Lee §3.1, "Splice"; split 90/5/5 as Hilbert-CNN, seeded)."""

from __future__ import annotations

from dataclasses import dataclass

from labcore import assets
from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo, seeded_split

# mlbench stores each base as three indicator columns (the Statlog encoding).
_BITS_TO_BASE = {(1, 0, 0): "A", (0, 1, 0): "C", (0, 0, 1): "G", (0, 0, 0): "T"}
ALPHABET = ("A", "C", "G", "T")
CLASSES = ("EI", "IE", "N")  # exon->intron (donor), intron->exon (acceptor), neither


@dataclass(frozen=True)
class SpliceParams:
    seed: int = 0  # seed of the 90/5/5 split


def read_splice() -> tuple[list[str], list[str]]:
    """Sequences (60 letters) and class names from DNA.rda, decoded from the 3-bit columns."""
    import numpy as np
    import pyreadr

    frame = pyreadr.read_r(str(assets.require("uci-splice") / "DNA.rda"))["DNA"]
    bits = frame.iloc[:, :180].astype(int).to_numpy().reshape(-1, 60, 3)
    sequences = ["".join(_BITS_TO_BASE[tuple(int(b) for b in triple)] for triple in row) for row in bits]
    labels = [str(c).upper() for c in np.asarray(frame.iloc[:, -1])]
    return sequences, labels


@register
class DnaSplice(Discipline):
    name = "dna-splice"
    title = "DNA splice junctions (UCI)"
    Params = SpliceParams

    def info(self, params: SpliceParams) -> DisciplineInfo:
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="tokens", output_kind="class",
            metric="accuracy", alphabet=ALPHABET, class_names=CLASSES, max_length=60,
            citation="Kao & Lee 2021, §3.1 (DNA classification: Splice) and appendix G.3",
            source="R package mlbench (Debian r-cran-mlbench), data set DNA",
            licence=assets.ASSETS["uci-splice"].licence, assets=("uci-splice",),
            notes="Seeded random 90/5/5 split, as Hilbert-CNN. This encoding carries only A/C/G/T "
                  "(every 3-bit group is one of the four bases), so no ambiguity code occurs.",
        )

    def build(self, params: SpliceParams, progress):
        import datasets

        progress("reading DNA.rda")
        sequences, labels = read_splice()
        index = {b: i for i, b in enumerate(ALPHABET)}
        rows = {"tokens": [[index[b] for b in s] for s in sequences],
                "label": [CLASSES.index(lab) for lab in labels]}
        full = datasets.Dataset.from_dict(rows)
        train, val, test = seeded_split(len(full), (0.90, 0.05, 0.05), params.seed)
        return datasets.DatasetDict(train=full.select(train), validation=full.select(val),
                                    test=full.select(test))
