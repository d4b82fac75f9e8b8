"""The optimal-transport dataset distance (ORCA's alignment objective), on constructed data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labcore import otdd

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def blobs(n: int = 90, dim: int = 12, classes: int = 3, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    """Features around one centre per class, labels cycling through the classes."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % classes
    centres = torch.randn(classes, dim, generator=g) * 3
    return centres[labels] + torch.randn(n, dim, generator=g), labels.numpy()


# --------------------------------------------------------------------------------------------- the distance


def test_the_otdd_of_a_sample_with_itself_is_zero():
    x, y = blobs()
    s = otdd.sample(x, y)
    assert abs(float(otdd.otdd(s, s))) < 1e-5


def test_the_otdd_grows_as_one_class_mean_moves_away():
    x, y = blobs()
    a = otdd.sample(x, y)
    reg = otdd.default_reg(a, a)
    values = []
    for shift in (0.0, 0.5, 1.0, 2.0, 4.0):
        moved = x.clone()
        moved[y == 1] += shift
        values.append(float(otdd.otdd(a, otdd.sample(moved, y), reg=reg)))
    assert abs(values[0]) < 1e-5
    assert all(later > earlier for earlier, later in zip(values, values[1:])), values


def test_labels_are_compared_by_their_features_not_their_names():
    # OTDD matches classes by the distributions they label: renamed classes are the same data set (a target's
    # labels never share names with the source's), while labels that no longer follow the features are not.
    x, y = blobs()
    same = otdd.sample(x, y)
    assert abs(float(otdd.otdd(same, otdd.sample(x, (y + 1) % 3)))) < 1e-5
    shuffled = np.random.default_rng(0).permutation(y)
    assert float(otdd.otdd(same, otdd.sample(x, shuffled))) > 1.0


def test_the_gaussian_term_is_pots_bures_wasserstein_distance():
    import ot

    g = torch.Generator().manual_seed(1)
    xa = torch.randn(200, 5, generator=g, dtype=torch.float64)
    xb = torch.randn(150, 5, generator=g, dtype=torch.float64) @ torch.randn(5, 5, generator=g,
                                                                             dtype=torch.float64) + 1.0
    a, b = otdd.sample(xa, np.zeros(200, dtype=int)), otdd.sample(xb, np.zeros(150, dtype=int))
    cov_a, cov_b = a.factors[0].T @ a.factors[0], b.factors[0].T @ b.factors[0]
    assert torch.allclose(cov_a, torch.cov(xa.T, correction=0))
    theirs = ot.gaussian.bures_wasserstein_distance(a.means[0], b.means[0], cov_a, cov_b) ** 2
    assert float(otdd.gaussian_w2(a, b)[0, 0]) == pytest.approx(float(theirs), rel=1e-9)


def test_the_gaussian_term_has_a_finite_gradient_with_fewer_examples_than_dimensions():
    x = torch.randn(9, 40, requires_grad=True)
    reference = otdd.sample(torch.randn(12, 40), np.arange(12) % 2)
    otdd.gaussian_w2(otdd.sample(x, np.arange(9) % 3), reference).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


def test_a_few_alignment_steps_through_an_embedder_reduce_the_otdd():
    torch.manual_seed(0)
    embedder = torch.nn.Linear(6, 32)
    source = otdd.sample(*blobs(n=64, dim=32, classes=2, seed=3))
    inputs, labels = blobs(n=64, dim=6, classes=3, seed=4)
    with torch.no_grad():
        reg = otdd.default_reg(otdd.sample(embedder(inputs), labels), source)
    source_self = otdd.self_cost(source, reg)
    optimiser = torch.optim.Adam(embedder.parameters(), lr=0.05)
    values = []
    for _ in range(15):
        distance = otdd.otdd(otdd.sample(embedder(inputs), labels), source, reg=reg, self_b=source_self)
        optimiser.zero_grad()
        distance.backward()
        assert all(torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0 for p in embedder.parameters())
        optimiser.step()
        values.append(float(distance.detach()))
    assert values[-1] < 0.5 * values[0], values


def test_class_ids_for_bit_vectors_and_regression_targets():
    bits = np.array([[0, 1], [1, 1], [0, 1], [0, 0]], dtype=np.float32)
    ids = otdd.class_ids(bits)
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 3
    assert otdd.class_ids(np.array([2, 0, 1])).tolist() == [2, 0, 1]
    targets = np.linspace(0.0, 1.0, 100, dtype=np.float32)
    assert np.bincount(otdd.class_ids(targets)).tolist() == [25, 25, 25, 25]
