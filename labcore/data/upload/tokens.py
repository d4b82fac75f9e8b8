"""Reading text uploads (CSV, FASTA) and MIDI notes into flat arrays of symbol ids, every cap checked as
it is crossed: the file's lines (:func:`lines`), the examples gathered (:class:`TokenExamples`) and the
windows over-long records are cut into (:func:`window_starts`)."""

from __future__ import annotations

import array
import re
from typing import Any, BinaryIO, Iterator

from labcore.data import fields
from labcore.data.upload.manifest import UploadLimits, UploadOptions
from labcore.data.upload.parsed import ParsedUpload, numpy
from labcore.errors import DataValidationError

# max_length of CSV and FASTA uploads: 510 symbols, so [CLS], a window and [SEP] fill the 512 positions of
# the BERT-sized models (Kao & Lee truncate proteins to 512).
RECORD_MAX_LENGTH = 510


def lines(handle: BinaryIO, source: str) -> Iterator[str]:
    """The file's lines as text, ends kept, decoded one at a time (the line of a bad byte is known)."""
    handle.seek(0)
    number = 0
    for chunk in handle:
        # A file reads by b"\n"; lines that end in a lone b"\r" (old Mac files) are split here.
        for raw in (chunk,) if b"\r" not in chunk else chunk.splitlines(keepends=True):
            number += 1
            try:
                # -sig: spreadsheet programs start CSVs with a byte-order mark
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise DataValidationError(f"{source}: line {number}: not UTF-8 text (byte "
                                          f"{raw[error.start]:#04x}); save the file as UTF-8 text") from None


_WHITESPACE = re.compile(r"\s")


class Spaced(Exception):
    """A sequence with whitespace turned up: the whole file is read again as space-separated symbols."""


class TokenExamples:
    """Examples gathered while a file streams by, with every cap checked as it is crossed.

    Symbol ids go end to end into one byte buffer (1 byte per symbol, 2 when ``max_symbols`` > 256),
    with a row end and a label per example: no Python object per symbol or per example survives a
    line. Ids are given in order of first appearance and renumbered (sorted alphabet, sorted
    classes) once at the end.
    """

    def __init__(self, source: str, options: UploadOptions, limits: UploadLimits, *, spaced: bool = False,
                 alphabet: tuple[str, ...] = ()) -> None:
        self.source, self.options, self.limits, self.spaced = source, options, limits, spaced
        self.width = 1 if limits.max_symbols <= 256 else 2
        self.encoding = "latin-1" if self.width == 1 else "utf-16-le"
        self.ids = bytearray()
        self.ends = array.array("q")
        self.labels = array.array("i")
        self.groups = array.array("i")
        self.group_names: dict[str, int] = {}
        self.splits = array.array("b")  # the file's own split per example (0, 1, 2), when it gives one
        self.symbols: dict[str, int] = {s: i for i, s in enumerate(alphabet)}
        self.fixed = bool(alphabet)  # MIDI: the alphabet is all 128 pitches, ids given
        self.known = set(self.symbols)
        self.table: dict[int, str] = {}  # ord(symbol) -> chr(id), for str.translate
        self.classes: dict[str, int] = {}
        self.longest = 0
        self.too_long = 0
        self.windowed = 0  # records cut into windows (options.windows)
        self.first_too_long: tuple[str, int] | None = None  # where, length
        self.longest_too_long = 0

    def __len__(self) -> int:
        return len(self.ends)

    def _klass(self, label: str, where: str) -> int:
        klass = self.classes.get(label)
        if klass is None:
            if len(self.classes) >= self.limits.max_classes:
                raise DataValidationError(
                    f"{self.source}: {where}: label {label[:40]!r} would be class {len(self.classes) + 1:,}, more "
                    f"than the lab's cap of {self.limits.max_classes} classes; merge related classes or drop "
                    f"the rows of classes you do not need")
            klass = self.classes[label] = len(self.classes)
        return klass

    def _room(self, length: int, where: str) -> int:
        """Check the row and symbol caps for one more example of ``length`` symbols; its kept length."""
        limits = self.limits
        if len(self.ends) >= limits.max_rows:
            raise DataValidationError(
                f"{self.source}: {where}: more than {limits.max_rows:,} examples, the lab's cap on rows; "
                f"upload at most {limits.max_rows:,} (a random sample of each class keeps their shares)")
        if length > self.options.max_length:
            self.too_long += 1
            self.longest_too_long = max(self.longest_too_long, length)
            if self.first_too_long is None:
                self.first_too_long = (where, length)
            length = self.options.max_length
        total = len(self.ids) // self.width + length
        if total > limits.max_total_symbols:
            raise DataValidationError(
                f"{self.source}: {where}: more than {limits.max_total_symbols:,} symbols in all, the lab's cap "
                f"on total symbols; upload fewer or shorter sequences (a smaller max length with "
                f"'cut to max length' cuts every sequence)")
        return length

    def _new_symbol(self, symbol: str, where: str) -> int:
        if len(self.symbols) >= self.limits.max_symbols:
            few = ", ".join(repr(a) for a in list(self.symbols)[:8])
            raise DataValidationError(
                f"{self.source}: {where}: more than {self.limits.max_symbols} distinct symbols, the most a token "
                f"upload may have (first few: {few}, ...); check that the sequence column holds symbols, not "
                f"free text (a sequence with a space makes every sequence space-separated), or merge rare "
                f"symbols")
        new = self.symbols[symbol] = len(self.symbols)
        self.known.add(symbol)
        if len(symbol) == 1:
            self.table[ord(symbol)] = chr(new)
        return new

    def add(self, sequence: str, label: str, where: str, split: str = "") -> None:
        """One example: a stripped, non-empty sequence (characters, or whitespace-separated symbols).

        ``split`` is the value of the file's split field, when one is chosen."""
        if not self.spaced and _WHITESPACE.search(sequence):
            raise Spaced
        klass = self._klass(label, where)
        parts: Any = sequence.split() if self.spaced else sequence
        split_id = self._split(split, where) if self.options.split_field else -1
        limit = self.options.max_length
        if self.options.windows and not self.options.truncate:
            # Every record is a group (its windows vote together and share a split); a record longer
            # than max length is cut into windows of max length covering it, the last one ending at
            # its end (overlapping the one before where the length is not a multiple).
            starts = [0] if len(parts) <= limit else window_starts(len(parts), limit)
            self.windowed += len(starts) > 1
            for start in starts:
                self._add(parts[start:start + limit], klass, where, split_id, group=where)
        else:
            self._add(parts, klass, where, split_id)

    def _add(self, parts: Any, klass: int, where: str, split_id: int, group: str | None = None) -> None:
        keep = self._room(len(parts), where)
        parts = parts[:keep]
        if self.spaced:
            ids = [self.symbols.get(p) if p in self.known else self._new_symbol(p, where) for p in parts]
            self.ids += bytes(ids) if self.width == 1 else array.array("H", ids).tobytes()
        else:
            if not self.known.issuperset(parts):
                for symbol in sorted(set(parts) - self.known):
                    self._new_symbol(symbol, where)
            self.ids += parts.translate(self.table).encode(self.encoding)
        if split_id >= 0:
            self.splits.append(split_id)
        if group is not None:
            self.groups.append(self.group_names.setdefault(group, len(self.group_names)))
        self._end(keep, klass)

    def _split(self, value: str, where: str) -> int:
        named = fields.split_of(value)
        if named is None:
            field = fields.describe_field("fasta" if self.options.split_field.startswith("field ") else "csv",
                                          self.options.split_field)
            raise DataValidationError(
                f"{self.source}: {where}: the split field ({field}) says {value[:40]!r}, which names no split; "
                f"every record needs train/training, valid/validation/dev or test/testing there, or choose "
                f"no split field (a seeded 80/10/10 split)")
        return fields.SPLITS.index(named)

    def add_ids(self, ids: list[int], label: str, group: str, where: str) -> None:
        """One example of ids into the fixed alphabet (MIDI pitches), from the file ``group``."""
        klass = self._klass(label, where)
        keep = self._room(len(ids), where)
        self.ids += bytes(ids[:keep])
        self.groups.append(self.group_names.setdefault(group, len(self.group_names)))
        self._end(keep, klass)

    def _end(self, length: int, klass: int) -> None:
        self.ends.append(len(self.ids) // self.width)
        self.labels.append(klass)
        self.longest = max(self.longest, length)

    def finish(self) -> ParsedUpload:
        np = numpy()
        limit = self.options.max_length
        if self.too_long and not self.options.truncate:
            where, length = self.first_too_long
            raise DataValidationError(
                f"{self.source}: {where}: a sequence of {length} symbols is longer than the max length of {limit} "
                f"({self.too_long} sequence(s) are longer, the longest has {self.longest_too_long}); upload "
                f"again choosing 'cut into windows' (evaluation votes over a record's windows) or 'cut to max "
                f"length' for longer sequences, or a max length of {self.longest_too_long} (a model cuts its "
                f"inputs to its own positions: 512 for the BERT-sized ones)")
        ids = np.frombuffer(self.ids, dtype=np.uint8 if self.width == 1 else np.uint16)
        if self.fixed:
            alphabet = tuple(self.symbols)
        else:
            alphabet = tuple(sorted(self.symbols))
            renumber = np.empty(max(len(alphabet), 1), dtype=ids.dtype)
            renumber[[self.symbols[s] for s in alphabet]] = np.arange(len(alphabet), dtype=ids.dtype)
            ids = renumber[ids]
        class_names = tuple(sorted(self.classes))
        relabel = np.empty(max(len(class_names), 1), dtype=np.int32)
        relabel[[self.classes[c] for c in class_names]] = np.arange(len(class_names), dtype=np.int32)
        offsets = np.zeros(len(self.ends) + 1, dtype=np.int64)
        offsets[1:] = np.frombuffer(self.ends, dtype=np.int64)
        # Records as groups only where some record was cut into windows (or MIDI, where files are).
        keep_groups = self.group_names and (self.fixed or self.windowed)
        groups = np.frombuffer(self.groups, dtype=np.int32).copy() if keep_groups else None
        splits = np.frombuffer(self.splits, dtype=np.int8).copy() if self.options.split_field else None
        return ParsedUpload(
            input_kind="tokens", class_names=class_names,
            labels=relabel[np.frombuffer(self.labels, dtype=np.int32)], tokens=ids, offsets=offsets,
            groups=groups, group_names=tuple(self.group_names) if keep_groups else (), splits=splits,
            alphabet=alphabet, longest=self.longest, truncated=self.too_long, windowed=self.windowed)


def window_starts(length: int, window: int) -> list[int]:
    """Starts of windows of ``window`` symbols covering ``length``: consecutive, the last one ending at
    the end (so it overlaps the one before when ``length`` is not a multiple).

    >>> window_starts(1000, 510)
    [0, 490]
    >>> window_starts(1020, 510)
    [0, 510]
    """
    starts = list(range(0, length - window + 1, window))
    if starts[-1] + window < length:
        starts.append(length - window)
    return starts
