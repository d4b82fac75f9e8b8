"""The ``fasta`` upload format (``.fasta .fa .faa .fna .fas``): each record's header is ``>id|label``.

The label is the text after the *last* ``|`` (so ids such as ``sp|P12345`` keep their own bars). A
header without ``|`` is an error: a bare ``>label`` is not accepted, because most FASTA files carry only
ids there and would silently become one class per record. ``label_field="field 2"`` reads the label
from the header's second field instead (fields split on ``|`` and whitespace), and
``split_field="field 3"`` reads each record's split from its third (``>seq1|1|training``); see
:mod:`labcore.data.fields`, whose preview suggests both. Sequence lines may be wrapped; every character
is one symbol and case is kept as written (``a`` and ``A`` differ).
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from labcore.data import fields
from labcore.data.upload.manifest import UploadLimits, UploadOptions
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.data.upload.tokens import RECORD_MAX_LENGTH, TokenExamples, lines
from labcore.errors import DataValidationError


def parse(path: Path, options: UploadOptions, limits: UploadLimits, source: str = "") -> ParsedUpload:
    with open(path, "rb") as handle:
        return _read(handle, source or path.name, options, limits)


def _read(handle: BinaryIO, source: str, options: UploadOptions, limits: UploadLimits) -> ParsedUpload:
    examples = TokenExamples(source, options, limits)
    record: tuple[int, str, str, list[str]] | None = None  # header line, label, split, sequence parts
    label_at = fields.field_index(options.label_field) if options.label_field else None
    split_at = fields.field_index(options.split_field) if options.split_field else None

    def finish(record: tuple[int, str, str, list[str]]) -> None:
        number, label, split, parts = record
        sequence = "".join(parts)
        if not sequence:
            raise DataValidationError(f"{source}: line {number}: empty sequence (the record has a header "
                                      f"but no sequence lines); add its sequence or remove the record")
        examples.add(sequence, label, f"line {number}", split)

    def field(header: str, at: int, number: int, what: str) -> str:
        parts = fields.header_fields(header)
        if at >= len(parts):
            raise DataValidationError(f"{source}: line {number}: header {header[:60]!r} has {len(parts)} "
                                      f"field(s), so no {fields.field_name(at)} for the {what}; give every "
                                      f"header the same fields (split on '|' and spaces), or choose another "
                                      f"field")
        return parts[at]

    for number, raw in enumerate(lines(handle, source), 1):
        line = raw.strip()
        if not line or line.startswith(";"):  # ';' starts a comment in classic FASTA
            continue
        if line.startswith(">"):
            header = line[1:].strip()
            if label_at is not None:
                label = field(header, label_at, number, "label")
            elif "|" not in header:
                raise DataValidationError(f"{source}: line {number}: header {line[:60]!r} has no label; "
                                          f"write every header as >id|label (the label is the text after "
                                          f"the last '|'), or choose the field that holds the label")
            else:
                label = fields.after_last_bar(header)
            if not label:
                raise DataValidationError(f"{source}: line {number}: missing label after '|'; write the "
                                          f"header as >id|label")
            split = field(header, split_at, number, "split") if split_at is not None else ""
            if record is not None:
                finish(record)
            record = (number, label, split, [])
        else:
            if record is None:
                raise DataValidationError(f"{source}: line {number}: sequence before the first header; "
                                          f"start every record with a header line >id|label")
            record[3].append("".join(line.split()))
    if record is None:
        raise DataValidationError(f"{source} holds no FASTA records; start each with a header >id|label")
    finish(record)
    return examples.finish()


FORMAT = UploadFormat(kind="fasta", extensions=(".fasta", ".fa", ".faa", ".fna", ".fas"), stored_name="data.fasta",
                      default_max_length=RECORD_MAX_LENGTH,
                      hint="records with headers >id|label", parse=parse, records=True)
