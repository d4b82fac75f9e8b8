"""Image disciplines as patch sequences (FPT §2.1 MNIST) and the patch helpers the Data page uses."""

from __future__ import annotations

import numpy as np
import pytest

from labcore import data
from labcore.data import images
from labcore.errors import DataValidationError, LabError


def quiet(_message: str) -> None:
    pass


# --------------------------------------------------------------------------------------------------
# patch helpers


@pytest.mark.parametrize("side, patch", [(32, 4), (8, 2), (8, 1), (8, 8), (28, 7)])
def test_patches_round_trip(side, patch):
    image = np.random.default_rng(side * patch).random((side, side))
    vectors = images.images_to_patches(image[None], patch)[0]
    assert vectors.shape == ((side // patch) ** 2, patch * patch)
    assert np.array_equal(images.patches_to_image(vectors, patch, side), image)
    assert np.array_equal(images.patches_to_image(vectors.tolist(), patch, side), image)  # a dataset cell


def test_patch_order_is_row_major():
    image = np.arange(64, dtype=float).reshape(8, 8)
    vectors = images.images_to_patches(image[None], 2)[0]
    assert vectors[0].tolist() == [0, 1, 8, 9]  # top-left patch, pixels row by row
    assert vectors[1].tolist() == [2, 3, 10, 11]  # its right-hand neighbour comes next
    assert vectors[4].tolist() == [16, 17, 24, 25]  # then the second row of patches


def test_patches_image_shows_square_grey_patches_only():
    image = np.random.default_rng(0).random((8, 8)) * 1.4 - 0.2
    vectors = images.images_to_patches(image[None], 2)[0]
    assert np.array_equal(images.patches_image(vectors.tolist()), np.clip(image, 0, 1))
    assert images.patches_image(np.zeros((16, 12))) is None  # 2x2 patches of 3 channels
    assert images.patches_image(np.zeros((6, 4))) is None  # not a square grid
    assert images.patches_image(np.zeros(16)) is None


def test_image_disciplines_say_their_vectors_are_patches():
    for name in ("image-digits", "image-mnist"):
        discipline = data.get(name)
        assert discipline.info(discipline.Params()).vectors_are_patches
    xor = data.get("bits-xor")
    assert not xor.info(xor.Params()).vectors_are_patches


def test_patch_helpers_name_the_shape_problem():
    with pytest.raises(DataValidationError, match=r"expected shape \(16, 4\)"):
        images.patches_to_image(np.zeros((15, 4)), 2, 8)
    with pytest.raises(LabError, match="does not divide"):
        images.patches_to_image(np.zeros((16, 9)), 3, 8)
    with pytest.raises(LabError, match="does not divide"):
        images.images_to_patches(np.zeros((1, 8, 8)), 3)


def test_stratified_split_is_disjoint_complete_and_balanced():
    labels = np.repeat(np.arange(10), 50)
    train, val, test = images.stratified_split(labels, images.FRACTIONS, seed=0)
    assert len(set(train) | set(val) | set(test)) == len(train) + len(val) + len(test) == 500
    for part, per_class in ((train, 40), (val, 5), (test, 5)):
        assert np.bincount(labels[part], minlength=10).tolist() == [per_class] * 10
    assert images.stratified_split(labels, images.FRACTIONS, seed=0)[2] == test
    assert images.stratified_split(labels, images.FRACTIONS, seed=1)[2] != test


# --------------------------------------------------------------------------------------------------
# scikit-learn digits (no asset)


def test_digits_shapes_values_and_classes():
    dataset, info = data.load("image-digits", progress=quiet)
    assert (info.input_kind, info.output_kind, info.vector_dim, info.max_length) == ("vectors", "class", 4, 16)
    assert info.class_names == tuple("0123456789") and info.assets == ()
    for split in dataset:
        x = np.asarray(dataset[split]["vectors"])
        assert x.shape[1:] == (16, 4)
        assert x.min() >= 0.0 and x.max() <= 1.0
    summary = data.summarize("image-digits", progress=quiet)
    assert sum(summary.split_sizes.values()) == 1797
    assert sum(summary.class_counts.values()) == 1797 and len(summary.class_counts) == 10
    test_counts = np.bincount(dataset["test"]["label"], minlength=10)
    assert test_counts.min() >= 17 and test_counts.max() <= 19  # about 10 % of each digit


def test_digits_match_scikit_learn_images():
    from sklearn.datasets import load_digits

    dataset, _ = data.load("image-digits", progress=quiet)
    digits = load_digits()
    _, _, test_idx = images.stratified_split(digits.target, images.FRACTIONS, seed=0)
    first = images.patches_to_image(dataset["test"][0]["vectors"], 2, 8)
    assert np.allclose(first * 16, digits.images[test_idx[0]], atol=1e-5)
    assert dataset["test"][0]["label"] == digits.target[test_idx[0]]


def test_digits_split_is_seeded():
    discipline = data.get("image-digits")
    first = discipline.build(data.parse_params(discipline, {"seed": 7}), quiet)
    again = discipline.build(data.parse_params(discipline, {"seed": 7}), quiet)
    other = discipline.build(data.parse_params(discipline, {"seed": 8}), quiet)
    assert first["test"]["vectors"] == again["test"]["vectors"]
    assert first["test"]["vectors"] != other["test"]["vectors"]


def test_patch_size_must_divide_the_image():
    with pytest.raises(LabError, match=r"use one of \[1, 2, 4, 8\]"):
        data.parse_params(data.get("image-digits"), {"patch": 3})
    with pytest.raises(LabError, match="does not divide"):
        data.parse_params(data.get("image-mnist"), {"patch": 5})


def test_mnist_info_needs_its_asset():
    info = data.get("image-mnist").info(images.MnistParams())
    assert info.assets == ("mnist5k",) and (info.vector_dim, info.max_length) == (16, 64)
    assert "stratified" in info.notes and "CC BY-SA" in info.licence


# --------------------------------------------------------------------------------------------------
# MNIST 5k (asset)


@pytest.mark.integration
def test_mnist_patches_classes_and_split(fetched_assets):
    dataset, info = data.load("image-mnist", progress=quiet)
    summary = data.summarize("image-mnist", progress=quiet)
    assert summary.split_sizes == {"train": 4000, "validation": 500, "test": 500}
    assert summary.class_counts == {str(d): 500 for d in range(10)}
    assert (summary.length_min, summary.length_max) == (64, 64)
    x = np.asarray(dataset["test"]["vectors"])
    assert x.shape == (500, 64, 16) and x.min() == 0.0 and x.max() <= 1.0
    assert np.bincount(dataset["test"]["label"], minlength=10).tolist() == [50] * 10


@pytest.mark.integration
def test_mnist_images_are_the_padded_originals(fetched_assets):
    dataset, _ = data.load("image-mnist", progress=quiet)
    originals, labels = images.read_mnist5k()
    _, _, test_idx = images.stratified_split(labels, images.FRACTIONS, seed=0)
    for row in (0, 250, 499):
        image = images.patches_to_image(dataset["test"][row]["vectors"], 4, 32)
        assert not image[:2].any() and not image[-2:].any()  # the 2-pixel black frame
        assert not image[:, :2].any() and not image[:, -2:].any()
        assert np.allclose(image[2:30, 2:30], originals[test_idx[row]], atol=1e-6)
        assert dataset["test"][row]["label"] == labels[test_idx[row]]
