"""The optimal-transport dataset distance (OTDD) between two labelled samples, differentiable in torch.

OTDD (Alvarez-Melis & Fusi 2020) is the optimal-transport cost between the (feature, label) pairs of two
data sets, with the ground cost

    d((x, y), (x', y'))^2 = ||x - x'||^2 + W2^2(P_y, P'_y'),

where P_y is the distribution of the features of class y. Following ORCA (Shen et al. 2023, §3), each
class-conditional distribution is fitted with a Gaussian, so the label-to-label term is the 2-Wasserstein
(Bures) distance between Gaussians:

    W2^2(N(m, S), N(m', S')) = ||m - m'||^2 + tr S + tr S' - 2 tr (S^1/2 S' S^1/2)^1/2.

Approximations, chosen here and stated wherever a distance is reported:

* **Empirical Gaussians.** Each class's mean and (biased, 1/n) covariance come from the sample itself. The
  trace of the square root is computed without any square root of a matrix: with S = A^T A and S' = B^T B
  (A, B the centred features of the two classes over sqrt(n)), the eigenvalues of S^1/2 S' S^1/2 are the
  squared singular values of A B^T, so tr (S^1/2 S' S^1/2)^1/2 is the nuclear norm of A B^T. This is exact,
  costs O(n n' d) instead of O(d^3), and its gradient (through singular values only) stays finite where a
  class has fewer examples than dimensions -- the usual case here (tens of examples in 384 dimensions),
  where the eigenvalue form that ``ot.gaussian.bures_wasserstein_distance`` uses divides by sums of
  vanishing square roots. The tests check the two agree on full-rank covariances.
* **Entropic regularisation.** The outer transport problem is solved by log-domain Sinkhorn (POT's
  ``ot.solve``, torch backend, gradient by the envelope theorem: the optimal plan), with ε a fixed share
  (:data:`ENTROPIC`) of the mean ground cost unless the caller gives ε.
* **Debiasing.** The reported distance is the Sinkhorn divergence OT_ε(a, b) - ½ OT_ε(a, a) - ½ OT_ε(b, b)
  (Feydy et al. 2019), so a sample's distance to itself is 0 and not the entropic bias.
* **Samples, not data sets.** Callers pass samples (a few hundred examples); the distance of two samples
  estimates the distance of the data sets they come from.

Labels must be class indices: :func:`class_ids` turns multi-label bit vectors and regression targets into
classes first.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

ENTROPIC = 0.1  # Sinkhorn's ε as a share of the mean ground cost (scale-free: features of any size)
SINKHORN_ITERATIONS = 1000
SINKHORN_TOLERANCE = 1e-6  # on the marginals (each 1/n); the transport is solved in float64
REGRESSION_BINS = 4  # regression targets become quantile classes (ORCA clusters its dense targets)


def class_ids(labels: np.ndarray) -> np.ndarray:
    """Class indices [n] for OTDD from a split's labels: class indices as they are, each distinct row of a
    multi-label (bit vector) target as one class, regression targets cut at their quartiles."""
    labels = np.asarray(labels)
    if labels.ndim == 2:
        _, ids = np.unique(labels.astype(np.int64), axis=0, return_inverse=True)
        return ids.reshape(-1).astype(np.int64)
    if np.issubdtype(labels.dtype, np.integer):
        return labels.astype(np.int64)
    edges = np.quantile(labels, np.linspace(0, 1, REGRESSION_BINS + 1)[1:-1])
    return np.searchsorted(edges, labels, side="right").astype(np.int64)


@dataclass(frozen=True)
class Sample:
    """Features [n, d] with their labels, and each class's Gaussian fit (what OTDD compares)."""

    features: torch.Tensor
    row_class: torch.Tensor  # [n] index into the classes below
    classes: tuple[int, ...]  # the label of each class present
    means: torch.Tensor  # [k, d]
    factors: tuple[torch.Tensor, ...]  # per class: centred features / sqrt(n_c), [n_c, d]; covariance F^T F

    @property
    def traces(self) -> torch.Tensor:
        """tr S of each class, [k]."""
        import torch

        return torch.stack([(f * f).sum() for f in self.factors])


def sample(features: torch.Tensor, labels: torch.Tensor | np.ndarray) -> Sample:
    """Fit a Gaussian to each class of ``features`` [n, d] (labels: class indices [n])."""
    import torch

    labels = torch.as_tensor(np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels),
                             dtype=torch.long)
    if features.dim() != 2 or len(labels) != len(features) or not len(features):
        raise ValueError(f"OTDD needs features [n, d] and n labels, got {tuple(features.shape)} and {len(labels)}")
    classes, row_class = torch.unique(labels, return_inverse=True)
    row_class = row_class.to(features.device)
    means, factors = [], []
    for c in range(len(classes)):
        rows = features[row_class == c]
        mean = rows.mean(0)
        means.append(mean)
        factors.append((rows - mean) / len(rows) ** 0.5)
    return Sample(features, row_class, tuple(int(c) for c in classes), torch.stack(means), tuple(factors))


def gaussian_w2(a: Sample, b: Sample) -> torch.Tensor:
    """Squared 2-Wasserstein distances between the class Gaussians of ``a`` and ``b``, [k_a, k_b]."""
    import torch

    means = _squared_distances(a.means, b.means)
    # Every pair of classes in one batched call: zero rows pad the factors to one length, which changes
    # neither a covariance F^T F nor the singular values of F_a F_b^T.
    fa, fb = _padded(a.factors), _padded(b.factors)
    cross = torch.linalg.matrix_norm(torch.einsum("aid,bjd->abij", fa, fb), ord="nuc")
    return (means + a.traces[:, None] + b.traces[None, :] - 2 * cross).clamp_min(0)


def _padded(factors: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The classes' factors stacked [k, n_max, d], shorter ones padded with zero rows."""
    import torch

    longest = max(len(f) for f in factors)
    return torch.stack([torch.nn.functional.pad(f, (0, 0, 0, longest - len(f))) for f in factors])


def ground_cost(a: Sample, b: Sample) -> torch.Tensor:
    """OTDD's ground cost between every example of ``a`` and of ``b``: squared feature distance plus the
    squared W2 distance of their classes, [n_a, n_b]."""
    labels = gaussian_w2(a, b)
    return _squared_distances(a.features, b.features) + labels[a.row_class][:, b.row_class]


def _squared_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # Written out rather than cdist(...)**2: cdist's gradient is NaN at distance 0, which a sample's
    # distance to itself always meets on its diagonal.
    return ((x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T).clamp_min(0)


# POT loads every array library it finds as a backend when it is first imported. JAX, once loaded where a GPU
# is, takes 75 % of the GPU's memory for itself: on an H100 with JAX installed, ten workers aligning at once
# ran out of memory, one of them holding 60 GiB. The lab hands POT torch tensors only, so the others stay out.
_OTHER_BACKENDS = ("POT_BACKEND_DISABLE_JAX", "POT_BACKEND_DISABLE_CUPY", "POT_BACKEND_DISABLE_TENSORFLOW")


def _torch_backend_only() -> None:
    for name in _OTHER_BACKENDS:
        os.environ.setdefault(name, "1")


def entropic_ot(cost: torch.Tensor, reg: float) -> torch.Tensor:
    """The entropic OT cost between uniform weights for ``cost`` [n, m] (POT, log-domain Sinkhorn); its
    gradient with respect to the cost is the optimal plan (envelope theorem: no backward through the
    iterations)."""
    _torch_backend_only()
    import ot
    import torch

    # float64: in float32 the marginals stall near 3e-6 and Sinkhorn runs to its last iteration
    cost = cost.double()
    a = torch.full((cost.shape[0],), 1.0 / cost.shape[0], dtype=cost.dtype, device=cost.device)
    b = torch.full((cost.shape[1],), 1.0 / cost.shape[1], dtype=cost.dtype, device=cost.device)
    with warnings.catch_warnings():
        # Sinkhorn converges slowly where classes lie far apart; by its last iteration the value has settled
        # to about 1e-5 of itself (measured on shifted classes), which is all a distance needs.
        warnings.filterwarnings("ignore", message="Sinkhorn did not converge")
        result = ot.solve(cost, a, b, reg=float(reg), max_iter=SINKHORN_ITERATIONS, tol=SINKHORN_TOLERANCE,
                          grad="envelope")
    return result.value.float()


def default_reg(a: Sample, b: Sample) -> float:
    """Sinkhorn's ε for comparing ``a`` with ``b``: :data:`ENTROPIC` times their mean ground cost."""
    import torch

    with torch.no_grad():
        return float(ENTROPIC * ground_cost(a, b).mean().clamp_min(1e-12))


def self_cost(s: Sample, reg: float) -> torch.Tensor:
    """OT_ε(s, s), the debiasing term of a sample that stays fixed (compute it once, pass it to :func:`otdd`)."""
    return entropic_ot(ground_cost(s, s), reg)


def otdd(a: Sample, b: Sample, *, reg: float | None = None, self_a: torch.Tensor | None = None,
         self_b: torch.Tensor | None = None) -> torch.Tensor:
    """The debiased OTDD of samples ``a`` and ``b`` (a scalar tensor, differentiable in both samples'
    features). ``reg``: Sinkhorn's ε (None: :func:`default_reg`); ``self_a`` / ``self_b``: their
    :func:`self_cost` where already known (a fixed reference sample needs it once)."""
    if reg is None:
        reg = default_reg(a, b)
    cross = entropic_ot(ground_cost(a, b), reg)
    own_a = self_a if self_a is not None else self_cost(a, reg)
    own_b = self_b if self_b is not None else self_cost(b, reg)
    return cross - 0.5 * own_a - 0.5 * own_b


__all__ = ["ENTROPIC", "Sample", "class_ids", "default_reg", "entropic_ot", "gaussian_w2", "ground_cost", "otdd",
           "sample", "self_cost"]
