"""LogME (You et al., ICML 2021): how well frozen features suit a task, without training a head.

For each target column y [n], a Bayesian linear model y = F w + noise with prior w ~ N(0, I / alpha)
and noise ~ N(0, I / beta) has the log evidence

    L(alpha, beta) = n/2 log beta + d/2 log alpha - n/2 log 2 pi - beta/2 ||F m - y||^2
                     - alpha/2 ||m||^2 - 1/2 log det(alpha I + beta F^T F),
    m = beta (alpha I + beta F^T F)^-1 F^T y.

LogME is its maximum over (alpha, beta), found as the paper does: one SVD of F [n, d], then the
fixed-point iteration gamma = sum_i beta s_i^2 / (alpha + beta s_i^2), alpha <- gamma / ||m||^2,
beta <- (n - gamma) / ||F m - y||^2 from alpha = beta = 1, each step O(min(n, d)) in the SVD basis.
It stops when alpha / beta changes by less than ``TOL`` (relative) for every target, or after
``MAX_ITER`` steps (the paper's tolerance is looser, 1e-2; it typically converges in a few steps).

The score reported is the paper's: the maximum log evidence divided by n, averaged over the target
columns, which for classification are the one-hot indicators of the classes present. Features are used
as given (no centring, no bias term), as in the paper. Pure numpy, float64.
"""

from __future__ import annotations

import numpy as np

from labcore.errors import LabError

TOL = 1e-6  # relative change of alpha / beta at which the iteration stops
MAX_ITER = 100


def _targets(labels, n: int) -> np.ndarray:
    """[n, k] float64 targets: one-hot over the classes present for integer labels [n], the columns of
    float targets [n, k], or one column for float targets [n]."""
    labels = labels.detach().cpu().numpy() if hasattr(labels, "detach") else np.asarray(labels)
    if labels.shape[0] != n or labels.ndim not in (1, 2):
        raise LabError(f"LogME: labels of shape {labels.shape} for {n} feature rows; pass [n] class "
                       f"indices or [n, k] float targets")
    if labels.ndim == 1 and labels.dtype.kind in "iub":
        # Absent classes would be all-zero columns with unbounded evidence: use the classes present.
        return (labels[:, None] == np.unique(labels)[None, :]).astype(np.float64)
    return labels.astype(np.float64).reshape(n, -1)


def logme(features, labels, *, tol: float = TOL, max_iter: int = MAX_ITER) -> float:
    """Mean over target columns of max_{alpha, beta} L(alpha, beta) / n for ``features`` [n, d] and
    ``labels`` [n] integer classes or [n, k] float targets (1-D floats: one regression target)."""
    f = features.detach().cpu().numpy() if hasattr(features, "detach") else features
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 2:
        raise LabError(f"LogME: features must be [examples, dims], got shape {f.shape}")
    n, d = f.shape
    y = _targets(labels, n)  # [n, k]
    u, s, _ = np.linalg.svd(f, full_matrices=False)  # u [n, min(n, d)], s [min(n, d)]
    keep = s > s[:1].max(initial=0.0) * max(n, d) * np.finfo(np.float64).eps  # rank r: zeros are exact
    u, s = u[:, keep], s[keep]  # [n, r], [r]
    sigma = s[:, None] ** 2  # [r, 1]: the non-zero eigenvalues of F^T F; the other d - r are 0
    z = u.T @ y  # [r, k]: the targets in the left singular basis
    outside = ((y - u @ z) ** 2).sum(axis=0)  # [k]: the part of ||F m - y||^2 no m can reduce
    floor = 1e-12 * (y ** 2).sum(axis=0) + np.finfo(np.float64).tiny  # keeps exact fits finite

    def posterior(alpha, beta):  # alpha, beta [k] -> gamma, ||m||^2, ||F m - y||^2, each [k]
        shrink = beta * sigma / (alpha + beta * sigma)  # [r, k]
        m_sq = (shrink ** 2 * z ** 2 / sigma).sum(axis=0)  # m in the right singular basis is shrink z / s
        residual = outside + ((1.0 - shrink) ** 2 * z ** 2).sum(axis=0)
        return shrink.sum(axis=0), np.maximum(m_sq, floor), np.maximum(residual, floor)

    alpha, beta = np.ones(y.shape[1]), np.ones(y.shape[1])
    for _ in range(max_iter):
        gamma, m_sq, residual = posterior(alpha, beta)
        new_alpha, new_beta = gamma / m_sq, (n - gamma) / residual
        done = np.all(np.abs(new_alpha / new_beta - alpha / beta) <= tol * alpha / beta)
        alpha, beta = new_alpha, new_beta
        if done:
            break
    _, m_sq, residual = posterior(alpha, beta)
    evidence = (n / 2 * np.log(beta) + d / 2 * np.log(alpha) - n / 2 * np.log(2 * np.pi)
                - beta / 2 * residual - alpha / 2 * m_sq
                - 0.5 * np.log(alpha + beta * sigma).sum(axis=0) - (d - s.size) / 2 * np.log(alpha))
    return float((evidence / n).mean())
