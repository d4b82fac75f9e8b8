"""Proteins: lysine malonylation sites (iLearnPlus) and antimicrobial peptides (modlAMP)."""

from __future__ import annotations

import csv
from dataclasses import dataclass

from labcore import assets
from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo, seeded_split
from labcore.errors import DataValidationError

AMINO_ACIDS = tuple("ACDEFGHIKLMNPQRSTVWY")
# Malonylation windows are centred on a lysine; "-" pads windows that run past a protein's end.
# Rare codes (X unknown, B/Z/U/O) are mapped, not dropped.
MALONYL_ALPHABET = AMINO_ACIDS + ("-", "X", "B", "Z", "U", "O")
AMP_ALPHABET = AMINO_ACIDS + ("X", "B", "Z", "U", "O")


def _encode(sequence: str, alphabet: tuple[str, ...], where: str) -> list[int]:
    index = {s: i for i, s in enumerate(alphabet)}
    try:
        return [index[c] for c in sequence]
    except KeyError as error:
        raise DataValidationError(f"{where}: symbol {error.args[0]!r} is not an amino-acid code "
                                  f"({''.join(alphabet)})") from None


@dataclass(frozen=True)
class MalonylParams:
    seed: int = 0  # seed of the validation carve-out
    validation_fraction: float = 0.1  # of the given training part


@register
class ProteinMalonylation(Discipline):
    name = "protein-malonylation"
    title = "Protein: lysine malonylation sites"
    Params = MalonylParams

    def info(self, params: MalonylParams) -> DisciplineInfo:
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="tokens", output_kind="class",
            metric="accuracy", alphabet=MALONYL_ALPHABET, class_names=("non-site", "site"), max_length=31,
            citation="Kao & Lee 2021, §2.2 (amino-acid sequences as tokens); data from iLearnPlus",
            source="PyPI ilearnplus 1.5, data/Malonylation.txt", licence=assets.ASSETS["malonylation"].licence,
            assets=("malonylation",),
            notes="Train/test as the file gives them; validation carved from train "
                  f"({params.validation_fraction:.0%}, seeded).",
        )

    def build(self, params: MalonylParams, progress):
        import datasets

        path = assets.require("malonylation") / "Malonylation.txt"
        parts: dict[str, dict[str, list]] = {"training": {"tokens": [], "label": []},
                                             "testing": {"tokens": [], "label": []}}
        header = None
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                line = line.strip()
                if not line:
                    continue
                if line.startswith(">"):
                    header = line[1:].split("|")
                    continue
                if header is None or len(header) != 3 or header[2] not in parts:
                    raise DataValidationError(f"{path}:{number}: expected a header >id|label|training/testing")
                parts[header[2]]["tokens"].append(_encode(line, MALONYL_ALPHABET, f"{path}:{number}"))
                parts[header[2]]["label"].append(int(header[1]))
                header = None
        train_full = datasets.Dataset.from_dict(parts["training"])
        fractions = (1 - params.validation_fraction, params.validation_fraction, 0.0)
        train, val, _ = seeded_split(len(train_full), fractions, params.seed)
        return datasets.DatasetDict(train=train_full.select(train), validation=train_full.select(val),
                                    test=datasets.Dataset.from_dict(parts["testing"]))


@dataclass(frozen=True)
class AmpParams:
    seed: int = 0
    max_length: int = 180  # every sequence in the file fits (7-174 residues)


@register
class ProteinAmp(Discipline):
    name = "protein-amp"
    title = "Protein: antimicrobial peptides vs UniProt"
    Params = AmpParams

    def info(self, params: AmpParams) -> DisciplineInfo:
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="tokens", output_kind="class",
            metric="mcc", alphabet=AMP_ALPHABET, class_names=("UniProt", "AMP"), max_length=params.max_length,
            citation="Kao & Lee 2021, §2.2 (amino-acid sequences as tokens); data from modlAMP",
            source="PyPI modlamp 4.3.3, data/AMPvsUniProt.csv", licence=assets.ASSETS["amp"].licence,
            assets=("amp",), notes="No split given: seeded 80/10/10; longer sequences are truncated.",
        )

    def build(self, params: AmpParams, progress):
        import datasets

        path = assets.require("amp") / "AMPvsUniProt.csv"
        tokens, labels = [], []
        with open(path, encoding="utf-8") as handle:
            reader = csv.reader(handle)
            next(reader)  # first row is a summary line (count, classes), not data
            for number, row in enumerate(reader, 2):
                sequence = row[0].strip().upper()
                tokens.append(_encode(sequence, AMP_ALPHABET, f"{path}:{number}")[: params.max_length])
                labels.append(int(row[1]))
        full = datasets.Dataset.from_dict({"tokens": tokens, "label": labels})
        train, val, test = seeded_split(len(full), (0.8, 0.1, 0.1), params.seed)
        return datasets.DatasetDict(train=full.select(train), validation=full.select(val),
                                    test=full.select(test))
