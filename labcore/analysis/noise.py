"""How far a model's outputs move when its parameters are perturbed (Kao & Lee appendix F.3).

Kao & Lee add zero-mean Gaussian noise of standard deviation sigma (1e-2, 1e-4, 1e-6, 1e-8) to the
model's parameters and measure the variation as the L2 distance between the outputs with and without
the noise, shown as mean and standard deviation over examples (figs. 12 and 13). That is what
:func:`output_variation` returns, per sigma; :func:`summarise` gives the bars.

The noise is added in place to every parameter of the module (tied parameters once), with a seeded
generator, and the original values are copied back afterwards, even if the forward pass raises.
At sigma=1e-8 float32 parameters of size ~0.02 move by only a few ulps: use a float64 model to see
the small-sigma regime faithfully.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

SIGMAS = (1e-2, 1e-4, 1e-6, 1e-8)


@torch.no_grad()
def output_variation(module: nn.Module, forward: Callable[[], torch.Tensor],
                     sigmas: Sequence[float] = SIGMAS, *, seed: int = 0,
                     draws: int = 1) -> dict[float, np.ndarray]:
    """sigma -> [draws, B] L2 distances (float64) between each example's clean and noisy output.

    ``forward()`` runs the module on a fixed batch and returns [B, ...] (e.g. the pooled last hidden
    state, or the logits); each example's output is flattened before the distance. Put the module in
    eval mode first, so that the only difference between the passes is the noise. Each draw adds fresh
    noise to the original parameters (noise never accumulates across draws or sigmas); draw ``k`` uses
    the same standard-normal noise, scaled by sigma, at every sigma, so the sigmas compare like with like.
    """
    params = list(module.parameters())  # deduplicated: a tied weight gets one draw of noise
    originals = [p.detach().clone() for p in params]
    clean = forward().detach().flatten(1)  # [B, D]
    generator = torch.Generator(device=params[0].device if params else "cpu")
    out: dict[float, np.ndarray] = {}
    try:
        for sigma in sigmas:
            generator.manual_seed(seed)  # the same noise directions at every sigma: only the scale differs
            rows = []
            for _ in range(draws):
                for p, original in zip(params, originals):
                    noise = torch.randn(p.shape, generator=generator, dtype=p.dtype, device=p.device)
                    p.copy_(original + sigma * noise)
                noisy = forward().detach().flatten(1)
                rows.append(torch.linalg.vector_norm((noisy - clean).double(), dim=1))  # [B]
            out[float(sigma)] = torch.stack(rows).cpu().numpy()
    finally:
        for p, original in zip(params, originals):
            p.copy_(original)
    return out


def summarise(variation: dict[float, np.ndarray]) -> dict[float, tuple[float, float]]:
    """sigma -> (mean, population std) of the distances over all examples and draws."""
    return {sigma: (float(d.mean()), float(d.std())) for sigma, d in variation.items()}
