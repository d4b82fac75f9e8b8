"""Probing (Tamkin et al. §3): a linear head on the mean of one layer's hidden states, the body frozen.

Layer 0 is the embedding output, layer ℓ the output of the ℓ-th layer. Tamkin et al. compare how well a
layer's *representations* transfer (probing) with how well its *parameters* transfer (re-initialisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.errors import LabError
from labcore.protocols.base import Protocol, ProtocolReport, finish, freeze_all, register, set_trainable, start

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class ProbeParams:
    """layer: which hidden state to probe, 0 (embedding output) .. number of layers; -1 is the last."""

    layer: int = -1


def _apply(model: LabModel, params: ProbeParams, seed: int) -> ProtocolReport:
    n = model.structure.num_layers
    if not -(n + 1) <= params.layer <= n:
        raise LabError(f"probe: layer {params.layer} does not exist; this model has hidden states 0..{n} "
                       f"(0 = embedding output, -1 = last)")
    layer = params.layer % (n + 1)
    start(model)
    freeze_all(model)
    set_trainable([model.head], True)
    model.pool_layer = layer
    model.pooling = "mean"
    model.body_eval = True
    notes = [f"probing hidden state {layer} of 0..{n} ({'embedding output' if layer == 0 else f'after layer {layer}'}), "
             f"mean-pooled over real tokens; body frozen in eval mode, features can be cached"]
    return finish(model, "probe", notes, features_only=True)


PROTOCOL = register(Protocol(
    name="probe",
    Params=ProbeParams,
    description="Probe: linear head on one layer's mean-pooled hidden states, body frozen (Tamkin et al. §3).",
    procedure=_apply,
))
