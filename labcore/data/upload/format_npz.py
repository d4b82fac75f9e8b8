"""The ``npz`` upload format (``.npz``): arrays ``images`` (N,H,W) or (N,H,W,C), numeric, and ``labels``
(N,) of ints or strings.

``uint8`` images are scaled to [0, 1]; other dtypes are kept as given. Each image is zero-padded to a
multiple of ``patch_size`` and cut into patches in raster order; each patch, flattened (row, column,
channel), is one input vector, as the frozen pretrained transformer's image tasks (Lu et al.) do. The
``.npy`` headers are checked before any array is allocated (:func:`_headers`), and ``np.load`` always
runs with ``allow_pickle=False``.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from labcore.data.upload.manifest import UploadLimits, UploadOptions, mb
from labcore.data.upload.parsed import ParsedUpload, UploadFormat
from labcore.data.upload.zips import open_zip
from labcore.errors import DataValidationError


def parse(path: Path, options: UploadOptions, limits: UploadLimits, source: str = "") -> ParsedUpload:
    import numpy as np

    source = source or path.name
    with open(path, "rb") as handle:
        _check_headers(_headers(handle, source, limits), source, limits)
        images, raw_labels = _load(handle, source)
    patches = _patches(images, options.patch_size, options.max_length, source)
    names, class_names = _class_names(raw_labels, source, limits)
    index = {c: i for i, c in enumerate(class_names)}
    return ParsedUpload(
        input_kind="vectors", class_names=class_names,
        labels=np.array([index[n] for n in names], dtype=np.int32), vectors=patches,
        vector_dim=int(patches.shape[2]), longest=int(patches.shape[1]))


def _headers(handle: BinaryIO, source: str, limits: UploadLimits) -> dict[str, tuple[Any, Any]]:
    """Shape and dtype of the arrays images and labels, from their headers alone."""
    archive = open_zip(handle, source, limits)
    with archive:
        members = set(archive.namelist())
        missing = [k for k in ("images", "labels") if f"{k}.npy" not in members]
        if missing:
            found = ", ".join(sorted(m.removesuffix(".npy") for m in members)) or "none"
            raise DataValidationError(f"{source}: no array named {' or '.join(missing)} (found: {found}); "
                                      f"save with np.savez(file, images=images, labels=labels)")
        headers = {k: _npy_header(archive, f"{k}.npy", source) for k in ("images", "labels")}
    return headers


def _npy_header(archive: zipfile.ZipFile, member: str, source: str):
    """Shape and dtype from an .npy header, read before any array memory is allocated."""
    import numpy as np

    try:
        with archive.open(member) as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(handle)
            elif version == (2, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(handle)
            else:
                raise ValueError(f"format version {version} is not supported")
    except (ValueError, zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
        raise DataValidationError(f"{source}: array {member!r} is not a readable .npy array ({error}); "
                                  f"save the arrays with np.savez") from None
    return shape, dtype


_NUMERIC_HINT = {"images": "numbers, e.g. images.astype(np.float32)",
                 "labels": "integers or fixed-width strings, e.g. np.asarray(labels, dtype=str)"}


def _check_headers(headers: dict[str, tuple[Any, Any]], source: str, limits: UploadLimits) -> None:
    """Refuse what the headers already show to be wrong or too large, before any array is read."""
    for key, (shape, dtype) in headers.items():
        if dtype.hasobject:
            raise DataValidationError(f"{source}: array {key!r} holds Python objects (dtype object), which "
                                      f"are refused because loading them would run pickled code; save "
                                      f"{_NUMERIC_HINT[key]}")
        size = math.prod(shape) * dtype.itemsize  # Python ints: a crafted shape cannot overflow
        if size > limits.max_unpacked_bytes:
            raise DataValidationError(f"{source}: array {key!r} of shape {shape} needs {mb(size)}, more than "
                                      f"the limit of {mb(limits.max_unpacked_bytes)}; upload fewer images")
    (image_shape, image_dtype), (label_shape, label_dtype) = headers["images"], headers["labels"]
    if len(image_shape) not in (3, 4):
        raise DataValidationError(f"{source}: images has shape {image_shape}; expected (N,H,W) or (N,H,W,C)")
    if image_dtype.kind not in "biuf":
        raise DataValidationError(f"{source}: images has dtype {image_dtype}; save numbers (uint8 0..255 or "
                                  f"float32)")
    if len(label_shape) != 1 or label_shape[0] != image_shape[0]:
        raise DataValidationError(f"{source}: labels has shape {label_shape} but there are {image_shape[0]} "
                                  f"images; save one label per image, shape ({image_shape[0]},)")
    if label_dtype.kind not in "biuUS":
        raise DataValidationError(f"{source}: labels has dtype {label_dtype}; save class numbers as integers "
                                  f"or class names as strings")
    if image_shape[0] == 0 or 0 in image_shape[1:]:
        raise DataValidationError(f"{source}: images has shape {image_shape}, which holds no pixels; save at "
                                  f"least one non-empty image per example")
    if image_shape[0] > limits.max_rows:
        raise DataValidationError(f"{source}: {image_shape[0]:,} images, more than {limits.max_rows:,}, the lab's "
                                  f"cap on examples; upload at most {limits.max_rows:,} (a random sample of "
                                  f"each class keeps their shares)")


def _load(handle: BinaryIO, source: str):
    """The images as float32 [N,H,W,C] (uint8 scaled to [0, 1]) and the labels as stored."""
    import numpy as np

    handle.seek(0)
    try:
        with np.load(handle, allow_pickle=False) as arrays:  # never pickle: the file is untrusted
            images, raw_labels = arrays["images"], arrays["labels"]
    except (ValueError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise DataValidationError(f"{source}: the arrays cannot be read ({error}); save them again with "
                                  f"np.savez(file, images=images, labels=labels)") from None
    if images.ndim == 3:
        images = images[..., None]
    if images.dtype == np.uint8:
        images = images.astype(np.float32) / 255.0
    else:
        images = images.astype(np.float32)
    if not np.isfinite(images).all():
        bad = int(np.flatnonzero(~np.isfinite(images).reshape(len(images), -1).all(axis=1))[0])
        raise DataValidationError(f"{source}: image {bad} holds NaN or infinite values; replace them "
                                  f"(e.g. np.nan_to_num) before saving")
    return images, raw_labels


def _class_names(raw_labels, source: str, limits: UploadLimits) -> tuple[list[str], tuple[str, ...]]:
    """Each image's class name, and the sorted class names (integer labels sort as numbers)."""
    import numpy as np

    if raw_labels.dtype.kind in "US":
        names = [str(x.decode("utf-8", "replace") if isinstance(x, bytes) else x).strip() for x in raw_labels]
        empty = [i for i, n in enumerate(names) if not n]
        if empty:
            raise DataValidationError(f"{source}: label {empty[0]} is empty; give every image a class name")
        class_names = tuple(sorted(set(names)))
    else:
        values = raw_labels.astype(np.int64).tolist()
        names = [str(v) for v in values]
        class_names = tuple(str(v) for v in sorted(set(values)))
    if len(class_names) > limits.max_classes:
        raise DataValidationError(f"{source}: {len(class_names):,} classes, more than the lab's cap of "
                                  f"{limits.max_classes} classes; merge related classes or drop the images of "
                                  f"classes you do not need")
    return names, class_names


def _patches(images, patch: int, max_patches: int, source: str):
    """[N,H,W,C] -> [N, patches, patch*patch*C], zero-padding H and W up to a multiple of ``patch``."""
    from labcore.data.images import cut_patches

    _, height, width, _ = images.shape
    rows, cols = -(-height // patch), -(-width // patch)
    if rows * cols > max_patches:
        better = next(p for p in range(patch, max(height, width) + 1)
                      if -(-height // p) * -(-width // p) <= max_patches)
        raise DataValidationError(f"{source}: images of {height}x{width} give {rows * cols} patches of "
                                  f"{patch}x{patch}, more than max_length {max_patches}; upload again with "
                                  f"patch_size={better}, a larger max_length, or smaller images")
    return cut_patches(images, patch)


# 512 patches an image, as many as the BERT-sized models have positions
FORMAT = UploadFormat(kind="npz", extensions=(".npz",), stored_name="data.npz", default_max_length=512,
                      hint="arrays images (N,H,W) or (N,H,W,C) and labels (N,)", parse=parse)
