"""Inits (:data:`INITS`): how a backbone's weights start out.

``pretrained``: the weights as saved, checked to be complete; ``random``: the same config, the family's own
initialiser, seeded; ``stats`` (Lu et al. §3.8): each tensor redrawn i.i.d. normal with the pretrained
tensor's mean and std.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcore.errors import LabError
from labcore.registry import Registry

# torch and transformers load inside the functions that use them (see labcore.models.backbones).
if TYPE_CHECKING:
    from torch import nn

    from labcore.models.model_names import Source


INITS: Registry[str] = Registry("init")
INITS.register("pretrained", "the pretrained weights")
INITS.register("random", "same architecture, the family's own initialiser (seeded)")
INITS.register("stats", "each tensor redrawn i.i.d. normal with the pretrained tensor's mean and std "
                        "(Lu et al. §3.8)")


def init_from_statistics(model: nn.Module, seed: int = 0) -> None:
    """Redraw every parameter tensor i.i.d. normal with that tensor's own mean and std (FPT §3.8).

    Weights, biases, norms and position tables alike, as in Lu et al. Table 9. A one-element tensor has
    no spread and keeps its value. Buffers (position ids, rotary frequencies) are not parameters: untouched.
    """
    import torch

    from labcore.models.seeding import generator

    draw = generator(seed, "stats")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.numel() < 2:
                continue
            values = param.detach().double()
            mean, std = values.mean().item(), values.std().item()
            sample = torch.randn(param.shape, generator=draw, dtype=torch.float64) * std + mean
            param.copy_(sample.to(param.dtype))


def load_pretrained(source: Source, location: str, attn_implementation: str) -> nn.Module:
    import torch
    from transformers import AutoModel

    model, loading = AutoModel.from_pretrained(location, dtype=torch.float32,
                                               attn_implementation=attn_implementation,
                                               output_loading_info=True)
    # A missing pooler is harmless (lab models pool themselves and drop it); anything else missing would
    # silently be random weights posing as pretrained ones.
    missing = [k for k in loading.get("missing_keys", []) if not k.startswith("pooler")]
    if missing:
        fix = (f"delete {location} to convert it again" if source.strict else
               "check that the folder holds the weights of a whole base model")
        raise LabError(f"backbone {source.name!r} lacks weights for {len(missing)} tensor(s) "
                       f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}); {fix}")
    return model


def build_random(location: str, attn_implementation: str) -> nn.Module:
    import torch
    from transformers import AutoConfig, AutoModel

    from labcore.models.architectures import LAYOUTS

    config = AutoConfig.from_pretrained(location)
    model = AutoModel.from_config(config, attn_implementation=attn_implementation, dtype=torch.float32)
    if config.model_type in LAYOUTS:  # BERT/ALBERT: redraw with their original truncated normal
        LAYOUTS[config.model_type].initialiser(model, model)
    return model
