"""Layer permutation (Tamkin et al. §5): shuffle the pretrained blocks' order, then fine-tune all.

Every block keeps its pretrained weights; only their order changes. The permutation comes from its own
``seed`` parameter rather than the run seed, so the same permutation can be reused across tasks and trials,
as Tamkin et al. do when correlating tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.errors import LabError
from labcore.protocols.base import Protocol, ProtocolReport, finish, register, start

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class PermuteLayersParams:
    """seed: which permutation (the same seed gives the same order for any run seed)."""

    seed: int = 0


def _apply(model: LabModel, params: PermuteLayersParams, seed: int) -> ProtocolReport:
    import torch

    from labcore.models import generator

    start(model)
    struct = model.structure
    n = len(struct.layers)
    if struct.shared_layers:
        raise LabError(f"permute_layers does not apply to this {struct.family} model: its {struct.num_layers} layers "
                       f"share {n} block(s) of weights, so there is no order of distinct layers to shuffle; "
                       f"choose full, frozen, output_only or probe, or a model whose layers are separate")
    order = tuple(int(i) for i in torch.randperm(n, generator=generator(params.seed, "permutation", n)))
    struct.set_layer_order(order)
    notes = [f"block i now holds the pretrained block order[i]; order = {list(order)}"]
    if order == tuple(range(n)):
        notes.append(f"this seed drew the identity permutation (chance 1/{n}!): pick another permutation seed "
                     f"for a real shuffle")
    return finish(model, "permute_layers", notes, layer_order=order)


PROTOCOL = register(Protocol(
    name="permute_layers",
    Params=PermuteLayersParams,
    description="Layer permutation: shuffle the order of the pretrained layers, fine-tune all "
                "(Tamkin et al. §5).",
    procedure=_apply,
))
