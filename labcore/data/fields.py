"""Which part of an uploaded record is the label, and which (if any) is the file's own split.

A FASTA header ``>seq1|1|training`` holds three *fields* (``seq1``, ``1``, ``training``): the header
is split on ``|`` and whitespace, and the fields are named ``field 1``, ``field 2``, ... A CSV's
fields are its columns, named by the header. The label is read from one field (by default: a CSV's
``label`` column, the text after a FASTA header's last ``|``); a second field may hold each record's
split, when every value of it names one:

* ``train``, ``training`` -> train
* ``valid``, ``validation``, ``val``, ``dev`` -> validation
* ``test``, ``testing`` -> test

(case is ignored). :func:`preview` reads the first records of a file (at most ``PREVIEW_RECORDS``
records from its first ``PREVIEW_BYTES``: a bounded cost, so a page may call it in its own process),
suggests the label and split fields, and for any choice gives the class counts and the warnings a
choice deserves: a label field whose values are split names, a label field with one value per record
(an id, not a class), a single class, values of a split field that name no split.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field

SPLITS = ("train", "validation", "test")
SPLIT_NAMES = {"train": "train", "training": "train",
               "valid": "validation", "validation": "validation", "val": "validation", "dev": "validation",
               "test": "test", "testing": "test"}
AFTER_LAST_BAR = ""  # the FASTA label field by default: the text after the header's last '|'
LABEL_COLUMN = "label"  # the CSV label field by default
SEQUENCE_COLUMN = "sequence"
PREVIEW_RECORDS = 2000
PREVIEW_BYTES = 4 * 2**20
_SEPARATORS = re.compile(r"[|\s]+")
_LABEL_NAMES = ("label", "labels", "class", "classes", "target", "y", "category")


def split_of(value: str) -> str | None:
    """``train``, ``validation`` or ``test`` when ``value`` names a split, else None."""
    return SPLIT_NAMES.get(value.strip().lower())


def header_fields(header: str) -> list[str]:
    """A FASTA header's fields (without the ``>``): split on ``|`` and whitespace, empty ones dropped."""
    return [part for part in _SEPARATORS.split(header.strip()) if part]


def field_name(index: int) -> str:
    """The name of a FASTA header's field ``index`` (0-based): ``field 1``, ``field 2``, ..."""
    return f"field {index + 1}"


def field_index(name: str) -> int | None:
    """The 0-based index of a FASTA field name (``field 2`` -> 1), or None when it names none."""
    match = re.fullmatch(r"field (\d+)", name.strip())
    return int(match.group(1)) - 1 if match and int(match.group(1)) >= 1 else None


def after_last_bar(header: str) -> str:
    return header.rsplit("|", 1)[1].strip() if "|" in header else ""


def describe_field(kind: str, name: str) -> str:
    """A field as the page names it."""
    if kind == "fasta" and name == AFTER_LAST_BAR:
        return "the text after the last '|'"
    return f"column {name!r}" if kind == "csv" else name


@dataclass
class Preview:
    """The first records of a CSV or FASTA file, with their fields."""

    kind: str  # "csv" or "fasta"
    fields: tuple[str, ...]  # the field names the chooser offers (CSV: columns; FASTA: field 1..n)
    records: list[dict[str, str]]  # field name -> value, per record read (FASTA: also AFTER_LAST_BAR)
    lengths: list[int]  # symbols per record (characters; CSV: of the sequence column, if any)
    complete: bool  # whether every record of the file was read
    label_field: str = LABEL_COLUMN  # suggested
    split_field: str = ""  # suggested; "" for none
    problems: list[str] = field(default_factory=list)  # what kept records from being read

    @property
    def label_choices(self) -> tuple[str, ...]:
        extra = (AFTER_LAST_BAR,) if self.kind == "fasta" else ()
        return extra + tuple(f for f in self.fields if f != SEQUENCE_COLUMN)

    def values(self, name: str) -> list[str | None]:
        return [record.get(name) for record in self.records]

    def counts(self, label_field: str, split_field: str = "") -> dict[str, Counter]:
        """Class counts per split (``all`` when no split field) over the records read."""
        out: dict[str, Counter] = {}
        for record in self.records:
            label = record.get(label_field)
            if not label:
                continue
            split = "all"
            if split_field:
                split = split_of(record.get(split_field) or "") or "unrecognised"
            out.setdefault(split, Counter())[label] += 1
        return dict(sorted(out.items(), key=lambda item: (SPLITS + ("all", "unrecognised")).index(item[0])))

    def test_counts(self, label_field: str, split_field: str, min_per_split: int, fraction: float) -> Counter:
        """Class counts of the test split this choice gives: the file's own, a ninth of its train where
        it has none (as the upload's split takes it), or a seeded ``fraction`` of each class."""
        counts = self.counts(label_field, split_field)
        if split_field:
            if counts.get("test"):
                return counts["test"]
            return Counter({c: max(min_per_split, round(n / 9)) for c, n in counts.get("train", {}).items()})
        return Counter({c: max(min_per_split, round(n * fraction)) for c, n in counts.get("all", {}).items()})

    def warnings(self, label_field: str, split_field: str = "", min_per_class: int = 0) -> list[str]:
        """What is suspicious about reading labels from ``label_field`` (and splits from ``split_field``)."""
        where = "in the records read" if not self.complete else "in the file"
        shown = describe_field(self.kind, label_field)
        labels = [v for v in self.values(label_field) if v]
        out = []
        missing = len(self.records) - len(labels)
        if missing:
            out.append(f"{missing} of {len(self.records)} records have no value in {shown}.")
        classes = Counter(labels)
        if classes and all(split_of(v) for v in classes):
            label_like = _suggest(self.kind, self.fields, self.records)[0]
            other = (f" ({describe_field(self.kind, label_like)} could be the label)"
                     if label_like != label_field and not _is_split_field(self.values(label_like)) else "")
            out.append(f"The labels in {shown} ({', '.join(sorted(classes)[:4])}) are split names, not "
                       f"classes: choose another field as the label{other}, and this one as the split.")
        elif len(labels) >= 6 and len(classes) == len(labels):
            out.append(f"Every record has its own label in {shown} ({len(classes)} classes for {len(labels)} "
                       f"records): it looks like an id, not a class. Choose another field as the label.")
        elif len(classes) == 1 and self.complete:
            out.append(f"Every record {where} has the label {next(iter(classes))!r}: a classifier needs at "
                       f"least 2 classes.")
        elif len(classes) == 1:  # a file sorted by class: its other classes come after the records read
            out.append(f"The first {len(self.records):,} records all have the label {next(iter(classes))!r}; the "
                       f"file goes on, and the save counts the classes of all of it (a classifier needs at "
                       f"least 2).")
        elif min_per_class and self.complete:
            small = sorted(c for c, n in classes.items() if n < min_per_class)
            if small:
                out.append(f"{len(small)} class(es) have fewer than {min_per_class} examples "
                           f"({', '.join(small[:5])}): the file will be refused; each class needs "
                           f"{min_per_class}.")
        if split_field:
            values = [v or "" for v in self.values(split_field)]
            odd = sorted({v for v in values if not split_of(v)})
            if odd:
                out.append(f"{describe_field(self.kind, split_field)} holds values that name no split "
                           f"({', '.join(repr(v) for v in odd[:4])}); the file will be refused unless every "
                           f"record says train/training, valid/validation/dev or test/testing.")
            named = {split_of(v) for v in values} - {None}
            if "train" in named and named != set(SPLITS):
                gone = [s for s in SPLITS if s not in named]
                if self.complete:
                    out.append(f"The file's split has no {' or '.join(gone)} records {where}: "
                               f"{' and '.join(gone)} will be taken from its training records (seeded, by class).")
                else:  # a file sorted by split shows its test records only past the preview
                    out.append(f"The first {len(self.records):,} records hold no {' or '.join(gone)} records; the "
                               f"file goes on: where all of it has none, {' and '.join(gone)} will be taken from "
                               f"its training records (seeded, by class).")
        return out


def _is_split_field(values: list[str | None]) -> bool:
    present = [v for v in values if v]
    return bool(present) and len(present) == len(values) and all(split_of(v) for v in present)


def _suggest(kind: str, fields: tuple[str, ...], records: list[dict[str, str]]) -> tuple[str, str]:
    """The label field and the split field ("" for none) a file most likely means."""
    values = {f: [r.get(f) for r in records] for f in fields}
    split = next((f for f in fields if _is_split_field(values[f])), "")
    if kind == "csv" and LABEL_COLUMN in fields and not _is_split_field(values[LABEL_COLUMN]):
        return LABEL_COLUMN, split

    def good(name: str) -> bool:
        present = [v for v in values[name] if v]
        distinct = len(set(present))
        return (name != split and name != SEQUENCE_COLUMN and len(present) == len(records)
                and 2 <= distinct and (distinct < len(present) or len(present) < 6)
                and not _is_split_field(values[name]))

    candidates = [f for f in fields if good(f)]
    named = [f for f in candidates if f.strip().lower() in _LABEL_NAMES]
    if named:
        return named[0], split
    if candidates:  # fewest classes wins; among equals the later field (labels tend to follow ids)
        return min(reversed(candidates), key=lambda f: len(set(values[f]))), split
    # One value throughout the records read: a file sorted by class (iLearnPlus' >id|label|training files
    # list thousands of positives first) shows its other classes only past the preview. Such a field is
    # still the label, never the split field beside it (the text after a FASTA header's last '|' is that
    # split field in >id|label|split).
    constant = [f for f in fields if f != split and f != SEQUENCE_COLUMN and len(records) >= 2
                and all(values[f]) and len(set(values[f])) == 1 and not _is_split_field(values[f])]
    if constant:
        return constant[-1], split
    default_is_split = kind == "fasta" and _is_split_field([r.get(AFTER_LAST_BAR) for r in records])
    return (AFTER_LAST_BAR if kind == "fasta" and not default_is_split else
            LABEL_COLUMN if LABEL_COLUMN in fields else
            next((f for f in fields if f not in (SEQUENCE_COLUMN, split)), "")), split


def preview(kind: str, data: bytes, max_records: int = PREVIEW_RECORDS, max_bytes: int = PREVIEW_BYTES) -> Preview:
    """The first records of a CSV or FASTA file (bytes), with suggested label and split fields."""
    if kind not in ("csv", "fasta"):
        raise ValueError(f"no field preview for {kind!r} uploads")
    head = bytes(data[:max_bytes])
    complete = len(data) <= max_bytes
    if not complete:
        head = head[:head.rfind(b"\n") + 1]  # whole lines only
    text = head.decode("utf-8-sig", errors="replace")
    reader = _preview_csv if kind == "csv" else _preview_fasta
    fields, records, lengths, more, problems = reader(text, max_records)
    label, split = _suggest(kind, fields, records)
    return Preview(kind=kind, fields=fields, records=records, lengths=lengths, complete=complete and not more,
                   label_field=label, split_field=split, problems=problems)


def _preview_csv(text: str, max_records: int):
    rows = csv.reader(io.StringIO(text, newline=""))
    header: list[str] = []
    records, lengths, problems = [], [], []
    try:
        for row in rows:
            if not any(cell.strip() for cell in row):
                continue
            if not header:
                header = [cell.strip().lower() for cell in row]
                continue
            if len(records) >= max_records:
                return tuple(header), records, lengths, True, problems
            record = {name: cell.strip() for name, cell in zip(header, row)}
            records.append(record)
            lengths.append(len(record.get(SEQUENCE_COLUMN, "")))
    except csv.Error as error:
        problems.append(f"line {rows.line_num}: not valid CSV ({error})")
    return tuple(header), records, lengths, False, problems


def _preview_fasta(text: str, max_records: int):
    records: list[dict[str, str]] = []
    lengths: list[int] = []
    widest = 0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(">"):
            if len(records) >= max_records:
                return tuple(field_name(i) for i in range(widest)), records, lengths, True, []
            header = line[1:].strip()
            parts = header_fields(header)
            widest = max(widest, len(parts))
            record = {field_name(i): part for i, part in enumerate(parts)}
            record[AFTER_LAST_BAR] = after_last_bar(header)
            records.append(record)
            lengths.append(0)
        elif line and not line.startswith(";") and records:
            lengths[-1] += len("".join(line.split()))
    return tuple(field_name(i) for i in range(widest)), records, lengths, False, []
