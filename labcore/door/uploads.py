"""A user's own data as the pages handle it: the upload form's formats and caps, the preview of a file's fields,
checking and saving a file in a subprocess, the uploads saved here, and the folds that cross-validate one."""

from __future__ import annotations

from labcore.data.fields import SEQUENCE_COLUMN, SPLITS, describe_field
from labcore.data.fields import preview as preview_upload
from labcore.data.upload import (DEFAULT_MAX_LENGTH, MAX_FOLDS, MIN_FOLDS, SPLIT_FRACTIONS, SaveResult, UploadInfo,
                                 UploadLimits, delete_upload, detect_kind, expected_sizes, expected_test_size,
                                 fold_specs, list_uploads, start_save, upload_info)
from labcore.data.upload import EXTENSIONS as UPLOAD_EXTENSIONS
from labcore.data.upload import KINDS as UPLOAD_KINDS

__all__ = ["DEFAULT_MAX_LENGTH", "MAX_FOLDS", "MIN_FOLDS", "SEQUENCE_COLUMN", "SPLITS", "SPLIT_FRACTIONS",
           "SaveResult", "UPLOAD_EXTENSIONS", "UPLOAD_KINDS", "UploadInfo", "UploadLimits", "delete_upload",
           "describe_field", "detect_kind", "expected_sizes", "expected_test_size", "fold_specs", "list_uploads",
           "preview_upload", "start_save", "upload_info"]
