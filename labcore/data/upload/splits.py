"""The split rules of an upload: the class sizes a save insists on (:func:`check_classes`), the file's own
split (:func:`own_split`), k-fold cross-validation (:func:`check_folds`, :func:`fold_specs`) and how many
examples each split will hold (:func:`expected_sizes`).

The discipline ``upload:NAME`` splits 80/10/10 (seeded, stratified by class; by file for MIDI, by record
where records are cut into windows), with at least ``min_per_split`` examples of every class in every
split; or, with a split field, as the file says (a split the file lacks is taken from train, a seeded
ninth of each class). For data too small for a fixed split, the parameters ``folds`` (k, 2 to 10) and
``fold`` (0 .. k-1) choose k-fold cross-validation instead: k seeded, stratified folds, the run testing on
fold ``fold`` (:func:`labcore.data.base.fold_split`); each fold is a run of its own key, and Compare counts
the folds as repeats of one condition.
"""

from __future__ import annotations

from typing import Any

from labcore.data import fields
from labcore.data.upload.manifest import UploadInfo, UploadLimits, UploadOptions
from labcore.data.upload.parsed import ParsedUpload, numpy
from labcore.errors import DataValidationError, LabError

SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
# k-fold cross-validation (the parameters folds and fold), for data too small for a fixed split: at least 2
# folds; at most 10, past which each test fold is smaller still and the runs multiply for little gain.
MIN_FOLDS, MAX_FOLDS = 2, 10


def check_classes(parsed: ParsedUpload, source: str, limits: UploadLimits, kind: str) -> None:
    if len(parsed.class_names) < 2:
        only = parsed.class_names[0] if parsed.class_names else "(none)"
        raise DataValidationError(f"{source}: every example has the label {only!r}; a classifier needs at "
                                  f"least 2 classes: add examples of another class")
    np = numpy()
    if parsed.groups is not None:  # MIDI: a file's windows share its class and its split
        first = np.unique(parsed.groups, return_index=True)[1]
        units, what = parsed.labels[first], "MIDI files" if kind == "midi" else "records"
    else:
        units, what = parsed.labels, "examples"
    if parsed.splits is not None:
        _check_own_split(parsed, source, limits)
        return
    counts = np.bincount(units, minlength=len(parsed.class_names))
    need = limits.min_per_class
    small = [(parsed.class_names[i], int(counts[i])) for i in np.flatnonzero(counts < need)]
    if small:
        shown = ", ".join(f"{name!r} ({n})" for name, n in small[:10])
        more = f" and {len(small) - 10} more" if len(small) > 10 else ""
        raise DataValidationError(
            f"{source}: {len(small)} of {len(parsed.class_names)} classes have fewer than {need} {what}: "
            f"{shown}{more}. Each class needs {need} so that train, validation and test each hold "
            f"{limits.min_per_split} of it; add {what} to these classes, merge them into related ones, "
            f"or drop their rows")


def _check_own_split(parsed: ParsedUpload, source: str, limits: UploadLimits) -> None:
    """The file's own split: every class needs ``min_per_split`` examples in each split it gives, and
    train enough more to give the splits it lacks (taken from train, see :func:`own_split`)."""
    np = numpy()
    present = [i for i in range(3) if (parsed.splits == i).any()]
    if 0 not in present:
        raise DataValidationError(f"{source}: the split field names no training records; mark the records to "
                                  f"train on with train or training")
    missing = 3 - len(present)
    short = []
    for i in present:
        counts = np.bincount(parsed.labels[parsed.splits == i], minlength=len(parsed.class_names))
        need = limits.min_per_split * (1 + missing if i == 0 else 1)
        short += [f"{parsed.class_names[c]!r} has {int(counts[c])} in {fields.SPLITS[i]}"
                  for c in np.flatnonzero(counts < need)]
    if short:
        taken = (f" ({' and '.join(fields.SPLITS[i] for i in range(3) if i not in present)} are taken from "
                 f"train, so train needs {limits.min_per_split * (1 + missing)})") if missing else ""
        raise DataValidationError(
            f"{source}: the file's own split leaves classes too small to measure: {'; '.join(short[:6])}"
            f"{' ...' if len(short) > 6 else ''}. Every class needs {limits.min_per_split} examples in each of "
            f"train, validation and test{taken}; add examples, or choose no split field (a seeded 80/10/10 "
            f"split)")


def own_split(labels, splits, seed: int, min_per_split: int) -> tuple[list[int], list[int], list[int]]:
    """Rows of train, validation and test as the file's split says; a split the file lacks is taken
    from train: of each class, a seeded ninth of its training rows (at least ``min_per_split``)."""
    import numpy as np

    labels, splits = np.asarray(labels), np.asarray(splits).copy()
    rng = np.random.default_rng(seed)
    for lacking in [i for i in (1, 2) if not (splits == i).any()]:
        for klass in np.unique(labels):
            rows = np.flatnonzero((splits == 0) & (labels == klass))
            take = max(min_per_split, int(round(len(rows) / 9)))
            splits[rng.permutation(rows)[:take]] = lacking
    return tuple(np.flatnonzero(splits == i).tolist() for i in range(3))  # type: ignore[return-value]


def class_units(parsed: ParsedUpload) -> tuple[int, ...]:
    if parsed.groups is None:
        return ()
    np = numpy()
    first = np.unique(parsed.groups, return_index=True)[1]
    return tuple(int(n) for n in np.bincount(parsed.labels[first], minlength=len(parsed.class_names)))


def expected_test_size(up: UploadInfo, folds: int = 0) -> tuple[int, int]:
    """How many units (records; MIDI files) the test split of ``upload:NAME`` holds, and of how many
    classes, by the rules of :meth:`labcore.data.upload.discipline.UploadedDiscipline.build` (the file's
    own split is counted in examples, and a test split it lacks is estimated as a ninth of train). With ``folds``, a test fold:
    a k-th of the units, with every class that has a unit in each fold."""
    classes = len(up.class_names)
    if folds:
        units = up.class_units or up.class_counts
        return round(sum(units) / folds), sum(1 for u in units if u >= folds)
    if up.split_counts:
        test = up.split_counts[2] or max(classes * up.limits.min_per_split, round(up.split_counts[0] / 9))
        return test, classes
    units = up.class_units or up.class_counts
    return sum(max(up.limits.min_per_split, int(round(u * SPLIT_FRACTIONS[2]))) for u in units), classes


def expected_sizes(up: UploadInfo, folds: int = 0) -> tuple[int, int, int]:
    """About how many examples (windows count one each) train, validation and test of ``upload:NAME`` hold
    (with ``folds``: of one fold's run, see :func:`labcore.data.base.fold_split`)."""
    if folds:
        test = round(up.n_examples / folds)
        validation = round((up.n_examples - test) / 9)
        return up.n_examples - test - validation, validation, test
    if up.split_counts:
        train, validation, test = up.split_counts
        carved = max(len(up.class_names) * up.limits.min_per_split, round(train / 9))
        validation, test = validation or carved, test or carved
        return up.n_examples - validation - test, validation, test
    per_unit = up.n_examples / max(1, up.n_groups)
    test = round(expected_test_size(up)[0] * per_unit)
    return up.n_examples - 2 * test, test, test


def split_name_warnings(parsed: ParsedUpload, options: UploadOptions, kind: str) -> tuple[str, ...]:
    """What a save of records (CSV, FASTA) warns of: labels that are all split names."""
    out = []
    if all(fields.split_of(c) for c in parsed.class_names):
        out.append(f"the labels ({', '.join(parsed.class_names)}) are split names, not classes: the label was "
                   f"read from {fields.describe_field(kind, options.label_field or (fields.LABEL_COLUMN if kind == 'csv' else ''))}; "
                   f"upload again choosing the field that holds the class as the label and this one as the split")
    return tuple(out)


def check_folds(up: UploadInfo, folds: Any, fold: Any) -> None:
    """The k-fold parameters of a run on ``up``: ``folds`` 0 (the fixed split) or MIN_FOLDS..MAX_FOLDS, and
    ``fold`` one of its folds; refused on a file that gives its own split, which the folds would ignore."""
    for name, value in (("folds", folds), ("fold", fold)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise LabError(f"the discipline parameter {name} must be a whole number, got {value!r}")
    if folds == 0:
        if fold:
            raise LabError(f"fold {fold} is given without folds: set folds ({MIN_FOLDS} to {MAX_FOLDS}) for k-fold "
                           f"cross-validation, or leave fold at 0 for the fixed split")
        return
    if not MIN_FOLDS <= folds <= MAX_FOLDS:
        raise LabError(f"folds must be 0 (the fixed 80/10/10 split) or from {MIN_FOLDS} to {MAX_FOLDS}, got {folds}")
    if not 0 <= fold < folds:
        raise LabError(f"fold must be one of 0 to {folds - 1} for {folds} folds, got {fold}")
    if up.options.split_field:
        raise LabError(f"upload {up.name!r} gives its own split (from "
                       f"{fields.describe_field(up.kind, up.options.split_field)}), which k-fold cross-validation "
                       f"would ignore: leave folds at 0, or upload the file again with no split field")


def fold_specs(spec: Any, folds: int) -> list[Any]:
    """One spec per fold of a ``folds``-fold cross-validation of ``spec`` (a RunSpec on an upload): the
    runs of one condition, which Compare counts as its repeats (see :data:`labcore.results.compare.REPEAT_FIELDS`)."""
    own = dict(spec.discipline_params)
    return [spec.replace(discipline_params={**own, "folds": folds, "fold": fold}) for fold in range(folds)]
