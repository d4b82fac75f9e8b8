"""Per-example gradients and how aligned they are (Kao & Lee appendix F.2, "gradient confusion").

Kao & Lee plot the distribution of the cosine similarity between the gradients of different examples
(fig. 11): strongly negative cosines mean examples pull the weights apart. :func:`per_example_grads`
computes every example's gradient in one pass with ``torch.func`` (``functional_call`` + ``grad`` +
``vmap``) instead of one backward pass per example; :func:`gradient_cosines` gives the pairwise cosines
as the 1-D distribution the figure plots.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap


def per_example_grads(module: nn.Module, params: Mapping[str, torch.Tensor],
                      loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradient of each example's loss w.r.t. ``params``: name -> [B, *param.shape].

    ``params`` are the named parameters to differentiate (e.g. ``dict(module.named_parameters())``, or
    only the trainable ones); the module's other parameters and buffers are used as they are.
    ``inputs`` [B, ...] and ``targets`` [B, ...]; each example goes through the module as a batch of
    one, so ``loss_fn(output [1, ...], target [1, ...]) -> scalar`` may reduce by mean. Put the module
    in eval mode first: dropout would draw differently from an ordinary pass, and batch norm would see
    batches of one. The batch goes through ``vmap``; a module whose forward reads tensor values in
    Python (transformers' attention masks do) raises there, and then one backward pass per example
    gives the same numbers.
    """
    detached = {name: p.detach() for name, p in params.items()}

    def loss_of_one(p, x, y):  # x [...], y [...] -> scalar
        return loss_fn(functional_call(module, p, (x.unsqueeze(0),)), y.unsqueeze(0))

    try:
        return vmap(grad(loss_of_one), in_dims=(None, 0, 0))(detached, inputs, targets)
    except (RuntimeError, NotImplementedError):
        pass
    names = list(params)
    rows: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for i in range(inputs.shape[0]):
        loss = loss_fn(module(inputs[i:i + 1]), targets[i:i + 1])
        for name, g in zip(names, torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)):
            rows[name].append(torch.zeros_like(params[name]) if g is None else g.detach())
    return {name: torch.stack(values) for name, values in rows.items()}


def flatten_grads(grads: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """[B, P]: each example's gradients over all parameters, concatenated in ``grads``' order."""
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)


def cosine_matrix(flat) -> np.ndarray:
    """[B, B] cosine similarities (float64) between the rows of ``flat`` [B, P]; an all-zero gradient has
    no direction, so its row and column are nan rather than a made-up 0."""
    g = flat.detach().cpu().double().numpy() if hasattr(flat, "detach") else np.asarray(flat, np.float64)
    norms = np.linalg.norm(g, axis=1)  # [B]
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = g / norms[:, None]
    # Rounding can put |cos| a hair above 1; clip so the values are valid cosines.
    return np.clip(unit @ unit.T, -1.0, 1.0)


def gradient_cosines(flat) -> np.ndarray:
    """Pairwise cosines [B * (B - 1) / 2] of distinct examples (upper triangle, row by row) of
    ``flat`` [B, P]: the distribution Kao & Lee fig. 11 plots."""
    cos = cosine_matrix(flat)
    return cos[np.triu_indices(cos.shape[0], k=1)]
