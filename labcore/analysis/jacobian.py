"""Singular values of the output-input Jacobian, per example (Kao & Lee appendix F.1, "dynamical isometry").

Kao & Lee differentiate the last layer's representation with respect to the input word embeddings
and plot the distribution of the Jacobian's singular values (fig. 10): isometry would put them near 1;
pretrained BERT's concentrate near 0. Here ``f`` maps one example's embeddings [L, d_in] to a
representation [d_out] (e.g. the pooled last hidden state, as a closure over a model in eval mode);
its Jacobian [d_out, L, d_in] is flattened to a [d_out, L * d_in] matrix before the SVD.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch.func import jacrev, vmap


def _singular_values(f: Callable[..., torch.Tensor], embeddings: torch.Tensor, *extra: torch.Tensor):
    """[min(d_out, L * d_in)] singular values of one example's Jacobian; ``extra`` are passed to ``f``
    undifferentiated (e.g. the example's attention mask)."""
    jac = jacrev(f)(embeddings, *extra)  # [d_out, L, d_in]: derivative w.r.t. the first argument only
    return torch.linalg.svdvals(jac.reshape(jac.shape[0], -1))


def jacobian_singular_values(f: Callable[..., torch.Tensor], embeddings: torch.Tensor,
                             *extra: torch.Tensor, batched: bool = True) -> np.ndarray:
    """Singular values [B, min(d_out, L * d_in)] (largest first, float64) of each example's Jacobian.

    ``embeddings`` is [B, L, d_in]; each of ``extra`` is [B, ...] and is given to ``f`` one row at a time.
    With ``batched`` the batch goes through ``vmap``; models whose forward ``vmap`` cannot trace
    (data-dependent Python control flow, some fused kernels) raise, and then one example at a time is
    done instead, which gives the same numbers. Use float64 inputs (and model) for precise small values.
    """
    if batched:
        try:
            values = vmap(lambda e, *x: _singular_values(f, e, *x))(embeddings, *extra)
            return values.detach().cpu().double().numpy()
        except (RuntimeError, NotImplementedError):
            pass  # fall through to the loop below
    rows = [_singular_values(f, embeddings[i], *(x[i] for x in extra)) for i in range(embeddings.shape[0])]
    return torch.stack(rows).detach().cpu().double().numpy()
