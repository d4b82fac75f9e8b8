"""The discipline ``upload:NAME``: a saved upload's checked examples as a data set, split by the rules of
:mod:`labcore.data.upload.splits`.

It builds from ``examples.npz`` (never parsing the file again). Its parameters carry the upload's
``fingerprint`` (a prefix of its sha256), so replacing the file gives new cache keys instead of serving
the old data.
"""

from __future__ import annotations

import dataclasses
import functools
import zipfile
from typing import Any

from labcore.data import fields
from labcore.data.base import Discipline, DisciplineInfo, fold_split, stratified_split
from labcore.data.upload.manifest import EXAMPLES, UploadInfo
from labcore.data.upload.splits import SPLIT_FRACTIONS, check_folds, expected_test_size, own_split
from labcore.data.upload.store import file_sha256, upload_info, uploads_dir
from labcore.errors import DataValidationError


@functools.lru_cache(maxsize=None)
def _params_class(fingerprint: str) -> type:
    # One Params class per upload content: the fingerprint default puts the content into every cache
    # key and run spec built from the defaults, so a replaced file never serves the old data set.
    params = dataclasses.make_dataclass(
        "UploadParams",
        [("seed", int, dataclasses.field(default=0)),  # seed of the 80/10/10 split, or of the folds
         ("fingerprint", str, dataclasses.field(default=fingerprint)),  # sha256 prefix of the file
         # k-fold cross-validation: 0 for the fixed split; k cuts the data into k folds, and a run tests on
         # fold `fold` (0 .. k-1). Each fold is a parameter, so each has its own data set and result key.
         ("folds", int, dataclasses.field(default=0)),
         ("fold", int, dataclasses.field(default=0))],
        frozen=True)
    params.__module__ = __package__  # labcore.data.upload, where the discipline is imported from
    return params


class UploadedDiscipline(Discipline):
    """The discipline ``upload:NAME`` over one saved upload."""

    def __init__(self, upload: UploadInfo) -> None:
        self.upload = upload
        self.name = f"upload:{upload.name}"
        self.title = f"Upload: {upload.name} ({upload.filename})"
        self.Params = _params_class(upload.fingerprint)

    def info(self, params: Any) -> DisciplineInfo:
        up = self.upload
        params = params if params is not None else self.Params()  # None: the upload as such, its fixed split
        check_folds(up, params.folds, params.fold)
        how = ("by file (windows of a file vote)" if up.kind == "midi" else
               "by record (windows of a record vote)" if up.windowed else "by class")
        counts = ", ".join(f"{c} {n}" for c, n in zip(up.class_names, up.class_counts))
        run_notes = []
        if up.truncated:
            run_notes.append(f"{up.truncated} sequence(s) of the upload cut to its max length of "
                             f"{up.options.max_length} symbols (the rest of each is not seen)")
        if up.windowed:
            run_notes.append(f"{up.windowed} sequence(s) of the upload longer than {up.options.max_length} symbols cut "
                             f"into windows of {up.options.max_length}; a record's windows share its split and "
                             f"evaluation votes over them")
        if up.skipped:
            run_notes.append(f"{len(up.skipped)} unreadable MIDI file(s) left out of the upload")
        if params.folds:
            run_notes.insert(0, f"k-fold cross-validation: tested on fold {params.fold} of {params.folds} "
                                f"(folds 0-{params.folds - 1}, about {expected_test_size(up, params.folds)[0]} "
                                f"{'files' if up.kind == 'midi' else 'records'} each); the {params.folds} folds' "
                                f"runs together test every {'file' if up.kind == 'midi' else 'record'} once")
        extra = "".join(f" {note[0].upper()}{note[1:]}." for note in run_notes[:2])
        if up.kind == "npz":
            extra += f" Patches of {up.options.patch_size}x{up.options.patch_size}, zero-padded."
        if up.ignored_entries:
            extra += f" {up.ignored_entries} zip entr(y/ies) skipped (hidden or not MIDI)."
        if up.skipped:
            extra += f" Unreadable MIDI file(s) left out: {'; '.join(up.skipped[:5])}."
        split = f"Seeded 80/10/10 split, stratified {how}."
        if params.folds:
            split = (f"Fold {params.fold} of a seeded {params.folds}-fold cross-validation, stratified {how}: test "
                     f"is this fold, validation a seeded ninth of each class of the other folds, train the rest.")
        elif up.options.split_field:
            given = ", ".join(f"{s} {n}" for s, n in zip(fields.SPLITS, up.split_counts) if n)
            split = (f"The file's own split ({given}; from {fields.describe_field(up.kind, up.options.split_field)})"
                     + (", a split it lacks taken from train by a seeded ninth of each class." if 0 in up.split_counts
                        else "."))
        for warning in up.warnings:
            extra += f" Warning: {warning}."
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind=up.input_kind, output_kind="class",
            metric="accuracy", citation="User upload", source=up.filename, licence="as provided by the user",
            alphabet=up.alphabet, vector_dim=up.vector_dim, class_names=up.class_names,
            max_length=up.max_length, vote_by_group=up.kind == "midi" or up.windowed > 0, vectors_are_patches=up.kind == "npz",
            notes=f"Uploaded {up.created} ({up.kind}, sha256 {up.fingerprint}). {up.n_examples} examples: "
                  f"{counts}. {split}{extra}", run_notes=tuple(run_notes),
        )

    def available(self) -> tuple[bool, str]:
        up = self.upload
        if up.format < 2:
            return False, (f"upload {up.name!r} was saved by an older version of the lab, which kept no "
                           f"checked examples: upload the file again")
        if not (uploads_dir() / up.name / EXAMPLES).is_file():
            return False, f"the examples of upload {up.name!r} are gone: upload the file again"
        return True, ""

    def build(self, params: Any, progress):
        import datasets
        import numpy as np
        import pyarrow as pa

        up = self.upload
        if params.fingerprint != up.fingerprint:
            raise DataValidationError(f"upload {up.name!r} has changed since these parameters were made "
                                      f"(fingerprint {params.fingerprint}, now {up.fingerprint}); set the run "
                                      f"up again on the current upload")
        ok, why = self.available()
        if not ok:
            raise DataValidationError(why)
        path = uploads_dir() / up.name / EXAMPLES
        progress(f"reading the checked examples of {up.filename}")
        try:
            if file_sha256(path) != up.examples_sha256:
                raise DataValidationError(f"upload {up.name!r}: {path} no longer matches its manifest "
                                          f"(sha256); delete the upload and upload the file again")
            with np.load(path, allow_pickle=False) as stored:  # plain arrays: never pickled objects
                arrays = {key: stored[key] for key in stored.files}
        except (OSError, ValueError, zipfile.BadZipFile) as error:
            raise DataValidationError(f"upload {up.name!r}: cannot read {path} ({error}); delete the upload "
                                      f"and upload the file again") from None
        labels = arrays["labels"].astype(np.int64)
        groups = arrays["group_names"][arrays["groups"]].tolist() if "groups" in arrays else None
        own = arrays.get("splits")
        if up.input_kind == "tokens":
            # Arrow straight from the flat arrays: one list<int64> column, no Python object per symbol.
            columns = {"label": pa.array(labels), "tokens": pa.ListArray.from_arrays(
                pa.array(arrays["offsets"]), pa.array(arrays["tokens"].astype(np.int64)))}
            if groups is not None:
                columns["group"] = pa.array(groups, type=pa.string())
            table = pa.table(columns)
        else:
            table = datasets.Dataset.from_dict({"label": labels, "vectors": arrays["vectors"]}).data.table
        del arrays
        if params.folds:
            parts = fold_split(labels.tolist(), params.folds, params.fold, params.seed, groups=groups,
                               min_per_split=up.limits.min_per_split)
        elif own is not None:
            parts = own_split(labels, own, params.seed, up.limits.min_per_split)
        else:
            parts = stratified_split(labels.tolist(), SPLIT_FRACTIONS, params.seed, groups=groups,
                                     min_per_split=up.limits.min_per_split)
        # Each split is taken out of the table in Arrow; the fingerprints are given (the upload's
        # sha256 prefix and the seed), where datasets would otherwise hash every row to make them.
        return datasets.DatasetDict({
            split: datasets.Dataset(table.take(pa.array(rows, type=pa.int64())),
                                    fingerprint=f"upload-{up.fingerprint}-{params.seed}-"
                                                f"{params.fold}of{params.folds}-{split}")
            for split, rows in zip(("train", "validation", "test"), parts)})


def uploaded_discipline(name: str) -> UploadedDiscipline:
    """The discipline of saved upload ``name`` (``upload:NAME`` or ``NAME``)."""
    return UploadedDiscipline(upload_info(name))
