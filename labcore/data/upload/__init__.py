"""A user's own discipline: an uploaded file of labelled sequences or images.

Formats, chosen by the file's extension (or by ``kind=``), one module each, looked up in
:mod:`~labcore.data.upload.registry`:

* ``csv`` (``.csv``, :mod:`~labcore.data.upload.format_csv`): a header naming the columns ``sequence``
  and ``label``; a sequence is a string of one-character symbols, or whitespace-separated symbols.
* ``fasta`` (``.fasta .fa .faa .fna .fas``, :mod:`~labcore.data.upload.format_fasta`): headers
  ``>id|label``, or the label and split in chosen header fields.
* ``midi`` (``.zip``, :mod:`~labcore.data.upload.format_midi`): MIDI files inside class folders, cut
  into windows of notes.
* ``npz`` (``.npz``, :mod:`~labcore.data.upload.format_npz`): arrays ``images`` and ``labels``; each
  image is cut into patches.

Uploads are untrusted: the raw bytes are size-checked before parsing, zip members are read one at a
time (never extracted) after their paths, kinds and unpacked sizes are checked
(:mod:`~labcore.data.upload.zips`), ``.npy`` headers are checked before any array is allocated, and
``np.load`` always runs with ``allow_pickle=False``. What an upload may cost is bounded by
:class:`UploadLimits` (bytes, examples, classes, symbols): CSV and FASTA files are read line by line from
disk into flat arrays of symbol ids (:mod:`~labcore.data.upload.tokens`), and a file is refused as soon
as it crosses a cap, with the cap named. Every class needs ``min_per_split`` examples (files, for MIDI)
in each of train, validation and test.

The package, one job a module: :mod:`~labcore.data.upload.manifest` (names, caps, options, the
manifest), :mod:`~labcore.data.upload.store` (the folder and manifest of each upload, saving in this
process), :mod:`~labcore.data.upload.save_job` (saving in a subprocess, what the Data page does),
:mod:`~labcore.data.upload.splits` (the split rules, k-fold cross-validation) and
:mod:`~labcore.data.upload.discipline` (the discipline ``upload:NAME``). A save whose labels are all
split names (``training``/``testing``) is kept but carries a warning in its manifest.

The names below are the package's public face: import them from ``labcore.data.upload``. A setting such
as ``SAVE_TIMEOUT_S`` is read where it is defined (``save_job``): change it there, not here.
"""

from labcore.data.upload.discipline import UploadedDiscipline, uploaded_discipline
from labcore.data.upload.format_midi import MIDI_SUFFIXES
from labcore.data.upload.manifest import (EXAMPLES, MANIFEST, MANIFEST_FORMAT, NAME_PATTERN, UploadInfo,
                                          UploadLimits, UploadOptions)
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.data.upload.registry import (DEFAULT_MAX_LENGTH, EXTENSIONS, FORMATS, KINDS, STORED_NAMES,
                                          detect_kind, format_of, parse_upload)
from labcore.data.upload.save_job import SAVE_MEMORY_LIMIT, SAVE_TIMEOUT_S, SaveJob, SaveResult, start_save
from labcore.data.upload.splits import (MAX_FOLDS, MIN_FOLDS, SPLIT_FRACTIONS, check_folds, expected_sizes,
                                        expected_test_size, fold_specs, own_split)
from labcore.data.upload.store import (SaveRequest, delete_upload, list_uploads, save_file, save_request,
                                       save_upload, upload_info, uploads_dir)
from labcore.data.upload.tokens import window_starts

__all__ = [
    "DEFAULT_MAX_LENGTH", "EXAMPLES", "EXTENSIONS", "FORMATS", "KINDS", "MANIFEST", "MANIFEST_FORMAT", "MAX_FOLDS",
    "MIDI_SUFFIXES", "MIN_FOLDS", "NAME_PATTERN", "ParsedUpload", "SAVE_MEMORY_LIMIT", "SAVE_TIMEOUT_S",
    "SPLIT_FRACTIONS", "STORED_NAMES", "SaveJob", "SaveRequest", "SaveResult", "UploadFormat", "UploadInfo",
    "UploadLimits", "UploadOptions", "UploadedDiscipline", "check_folds", "delete_upload", "detect_kind",
    "expected_sizes", "expected_test_size", "fold_specs", "format_of", "list_uploads", "own_split",
    "parse_upload", "save_file", "save_request", "save_upload", "start_save", "upload_info", "uploaded_discipline",
    "uploads_dir", "window_starts",
]
