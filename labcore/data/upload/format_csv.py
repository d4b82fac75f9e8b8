"""The ``csv`` upload format (``.csv``): a header naming the columns ``sequence`` and ``label``.

Other columns are ignored; ``label_field`` names another label column, ``split_field`` a column of
split names. A sequence is a string of one-character symbols (``ACGGTA``), unless some sequence in the
file contains whitespace: then *every* sequence is read as whitespace-separated symbols (``C4 E4 G4``).
The label is the class name. The file is read line by line from disk (see
:mod:`labcore.data.upload.tokens`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import BinaryIO

from labcore.data import fields
from labcore.data.upload.manifest import UploadLimits, UploadOptions
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.data.upload.tokens import RECORD_MAX_LENGTH, Spaced, TokenExamples, lines
from labcore.errors import DataValidationError


def parse(path: Path, options: UploadOptions, limits: UploadLimits, source: str = "") -> ParsedUpload:
    source = source or path.name
    # One rule for the whole file, so "AB" never means two symbols on one line and one on another:
    # read as characters until a sequence holds whitespace, then read the file again, space-separated.
    with open(path, "rb") as handle:
        try:
            return _read(handle, TokenExamples(source, options, limits), source)
        except Spaced:
            return _read(handle, TokenExamples(source, options, limits, spaced=True), source)


def _read(handle: BinaryIO, examples: TokenExamples, source: str) -> ParsedUpload:
    reader = csv.reader(lines(handle, source))
    try:
        header = next(reader, None)
        while header is not None and not any(cell.strip() for cell in header):
            header = next(reader, None)  # leading blank lines
        columns = [cell.strip().lower() for cell in header or []]
        options = examples.options
        label_column = options.label_field or fields.LABEL_COLUMN
        if "sequence" not in columns or label_column not in columns:
            found = ", ".join(repr(c) for c in (header or [])[:5]) or "nothing"
            which = "'label'" if label_column == fields.LABEL_COLUMN else f"{label_column!r} (the label field chosen)"
            raise DataValidationError(f"{source}: line {reader.line_num or 1}: the header must name the "
                                      f"columns 'sequence' and {which} (found {found}); add a first line "
                                      f"sequence,label above the examples, or choose the label column")
        if options.split_field and options.split_field not in columns:
            raise DataValidationError(f"{source}: line {reader.line_num or 1}: no column "
                                      f"{options.split_field!r} (the split field chosen); choose one of "
                                      f"{', '.join(columns)}")
        i_seq, i_label = columns.index("sequence"), columns.index(label_column)
        i_split = columns.index(options.split_field) if options.split_field else None
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            number = reader.line_num
            if len(row) > len(columns):
                raise DataValidationError(f"{source}: line {number}: expected {len(columns)} fields "
                                          f"({', '.join(columns)}), found {len(row)}; quote fields that hold "
                                          f"commas")
            row = row + [""] * (len(columns) - len(row))  # a short row reads as missing fields
            sequence, label = row[i_seq].strip(), row[i_label].strip()
            if not sequence:
                raise DataValidationError(f"{source}: line {number}: empty sequence; fill it in or remove "
                                          f"the line")
            if not label:
                raise DataValidationError(f"{source}: line {number}: missing label; every example needs "
                                          f"its class name in the label column")
            examples.add(sequence, label, f"line {number}", row[i_split].strip() if i_split is not None else "")
    except csv.Error as error:
        raise DataValidationError(f"{source}: line {reader.line_num}: not valid CSV ({error}); save the "
                                  f"file as comma-separated text with a sequence,label header") from None
    if not len(examples):
        raise DataValidationError(f"{source} has a header but no examples; add lines sequence,label below it")
    return examples.finish()


FORMAT = UploadFormat(kind="csv", extensions=(".csv",), stored_name="data.csv",
                      default_max_length=RECORD_MAX_LENGTH,
                      hint="a header line sequence,label and one example per line", parse=parse, records=True)
