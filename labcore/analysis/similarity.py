"""How alike two models' representations of the same examples are: CCA, PWCCA and linear CKA.

Kao & Lee §4.3 (table 1) compare the last-layer representations of BERT, PLUS and random models with
PWCCA (Morcos et al., 2018); linear CKA (Kornblith et al., 2019) is the usual cross-check. Every
function takes ``x`` [n, d1] and ``y`` [n, d2]: row ``i`` of both is example ``i``, the widths may
differ. Pure numpy in float64; no torch, no store.

Before CCA both sides go through an SVCCA-style step (Raghu et al., 2017): centre the columns, take
the SVD and keep the fewest leading directions that explain ``keep`` (default 99 %) of the variance.
Dropping the tail (and always the numerically zero directions) is what makes rank-deficient
representations, e.g. duplicated or dead units, safe: CCA on them would divide by zero.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from labcore.errors import LabError

KEEP = 0.99  # fraction of variance the SVD step keeps


def _float64(a) -> np.ndarray:
    """A 2-D float64 copy of an array or a (CPU or GPU, grad or not) tensor."""
    a = a.detach().cpu().numpy() if hasattr(a, "detach") else a
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise LabError(f"a representation must be [examples, features], got shape {a.shape}")
    return a


def _centred(a) -> np.ndarray:
    x = _float64(a)
    return x - x.mean(axis=0)


def _same_examples(rows_x: int, rows_y: int) -> None:
    if rows_x != rows_y or rows_x < 2:
        raise LabError(f"representations of the same examples needed (at least 2): got {rows_x} "
                       f"and {rows_y} rows")


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = _float64(x), _float64(y)
    _same_examples(x.shape[0], y.shape[0])
    return x - x.mean(axis=0), y - y.mean(axis=0)


def svd_basis(x_centred: np.ndarray, keep: float = KEEP) -> np.ndarray:
    """Orthonormal basis [n, k] of the leading directions of centred ``x`` [n, d] holding ``keep`` of its
    variance; directions with numerically zero singular values are never kept (rank deficiency)."""
    n, d = x_centred.shape
    if n > 4 * d:
        # Many more rows than columns (every position of every example): the eigenvectors of the d x d
        # Gram matrix are the right singular vectors, at a fraction of a tall SVD's cost (LAPACK's tall
        # SVD and QR run for seconds per call on this CPU). Eigenvalues are squared singular values, so
        # "numerically zero" is judged at the square root of the usual tolerance.
        evals, v = np.linalg.eigh(x_centred.T @ x_centred)
        order = np.argsort(evals)[::-1]
        s = np.sqrt(np.clip(evals[order], 0.0, None))
        v = v[:, order]
        nonzero = s > s[:1].max(initial=0.0) * np.sqrt(d * np.finfo(np.float64).eps) * 10
        k = _kept(s[nonzero], keep)
        return x_centred @ v[:, :k] / s[:k]
    u, s, _ = np.linalg.svd(x_centred, full_matrices=False)  # u [n, r], s [r]
    nonzero = s > s[:1].max(initial=0.0) * max(x_centred.shape) * np.finfo(np.float64).eps
    return u[:, :_kept(s[nonzero], keep)]


def _kept(s_nonzero: np.ndarray, keep: float) -> int:
    """How many leading directions hold ``keep`` of the variance (``keep=1`` keeps every non-zero one)."""
    var = s_nonzero ** 2
    if var.size == 0:
        raise LabError("a representation is constant over the examples: it has no directions to compare")
    k = int(np.searchsorted(np.cumsum(var) / var.sum(), keep - 1e-12) + 1)
    return min(k, var.size)


def _canonical(bx: np.ndarray, by: np.ndarray):
    """The SVD of the bases' cross-product: the canonical directions and correlations."""
    # For orthonormal bases, the singular values of bx^T by are the canonical correlations.
    p, rho, qt = np.linalg.svd(bx.T @ by, full_matrices=False)  # p [kx, k], rho [k], qt [k, ky]
    return p, np.clip(rho, 0.0, 1.0), qt


def cca(x, y, keep: float = KEEP) -> np.ndarray:
    """Canonical correlations [min(kx, ky)] of ``x`` [n, d1] and ``y`` [n, d2], largest first, after the
    SVD step (``kx``, ``ky``: directions kept). Invariant to invertible linear maps of either side."""
    x, y = _pair(x, y)
    return _canonical(svd_basis(x, keep), svd_basis(y, keep))[1]


def pwcca(x, y, keep: float = KEEP) -> float:
    """Projection-weighted CCA (Morcos et al., 2018): the mean canonical correlation weighted by how much
    of the representation each canonical variate accounts for.

    The weights come from the side with fewer kept directions (``x`` on a tie), as Morcos et al.'s code
    does: weight_i = sum_j |<h_i, z_j>| over that side's centred units z_j (columns), h_i its unit-norm
    canonical variates, normalised to sum to 1. A value in [0, 1]; 1 for invertible linear maps.
    """
    x, y = _pair(x, y)
    return _pwcca(x, y, svd_basis(x, keep), svd_basis(y, keep))


def _pwcca(x: np.ndarray, y: np.ndarray, bx: np.ndarray, by: np.ndarray) -> float:
    """PWCCA of centred ``x`` and ``y`` whose SVD-step bases are ``bx`` [n, kx] and ``by`` [n, ky]."""
    p, rho, qt = _canonical(bx, by)
    if bx.shape[1] <= by.shape[1]:
        variates, units = bx @ p, x  # [n, k] orthonormal, [n, d1]
    else:
        variates, units = by @ qt.T, y
    weights = np.abs(variates.T @ units).sum(axis=1)  # [k]
    return float(weights @ rho / weights.sum())


def linear_cka(x, y) -> float:
    """Linear CKA (Kornblith et al., 2019): ||y^T x||_F^2 / (||x^T x||_F ||y^T y||_F) on centred ``x``
    [n, d1], ``y`` [n, d2]. In [0, 1]; invariant to orthogonal maps and isotropic scaling only (unlike
    CCA, not to every invertible map). Needs no SVD step: rank deficiency is harmless."""
    x, y = _pair(x, y)
    return _linear_cka(x, y, _self_norm(x), _self_norm(y))


def _self_norm(x_centred: np.ndarray) -> float:
    return np.linalg.norm(x_centred.T @ x_centred)


def _linear_cka(x: np.ndarray, y: np.ndarray, norm_x: float, norm_y: float) -> float:
    """Linear CKA of centred ``x`` and ``y`` whose :func:`_self_norm` are ``norm_x`` and ``norm_y``."""
    cross = np.linalg.norm(y.T @ x) ** 2
    denominator = norm_x * norm_y
    if denominator == 0.0:
        raise LabError("a representation is constant over the examples: CKA is undefined")
    return float(cross / denominator)


def layer_similarity(reps_a: Sequence, reps_b: Sequence, fn: Callable[..., float] = pwcca) -> np.ndarray:
    """[layers_a, layers_b] matrix of ``fn(reps_a[i], reps_b[j])``; each rep is [n, d] over the same n
    examples (e.g. one model's hidden states per layer, pooled per example).

    For :func:`pwcca` and :func:`linear_cka` what depends on one layer alone (its SVD-step basis, its
    self-similarity norm) is computed once per layer, not once per pair: the same numbers, far fewer
    SVDs. Layer ``i`` of ``reps_a`` is prepared in its row; every layer of ``reps_b`` is kept prepared.
    """
    if fn is pwcca:
        return _matrix(reps_a, reps_b, lambda x: svd_basis(x, KEEP), _pwcca)
    if fn is linear_cka:
        return _matrix(reps_a, reps_b, _self_norm, _linear_cka)
    out = np.empty((len(reps_a), len(reps_b)))
    for i, a in enumerate(reps_a):
        for j, b in enumerate(reps_b):
            out[i, j] = fn(a, b)
    return out


def _matrix(reps_a: Sequence, reps_b: Sequence, prepare: Callable[[np.ndarray], Any],
            measure: Callable[[np.ndarray, np.ndarray, Any, Any], float]) -> np.ndarray:
    """[layers_a, layers_b] of ``measure(x, y, prepare(x), prepare(y))`` on the centred layers, with
    ``prepare`` run once per layer. A centred layer is made again where needed (cheap next to
    ``prepare``), so only ``prepare``'s results are held for every layer of ``reps_b``."""
    out = np.empty((len(reps_a), len(reps_b)))
    if out.size == 0:
        return out
    prepared_b = [prepare(_centred(b)) for b in reps_b]
    for i, a in enumerate(reps_a):
        x = _centred(a)
        prepared_x = prepare(x)
        for j, b in enumerate(reps_b):
            y = _centred(b)
            _same_examples(x.shape[0], y.shape[0])
            out[i, j] = measure(x, y, prepared_x, prepared_b[j])
    return out
