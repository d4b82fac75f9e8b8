"""Single-layer re-initialisation (Tamkin et al. appendix D): redraw one layer, keep the rest, fine-tune all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.errors import LabError
from labcore.protocols.base import (Protocol, ProtocolReport, finish, register, reinit_layers, reinit_notes,
                                    start)

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class ReinitLayerParams:
    """layer: the 0-based index of the layer to re-initialise."""

    layer: int = 0


def _apply(model: LabModel, params: ReinitLayerParams, seed: int) -> ProtocolReport:
    start(model)
    n = model.structure.num_layers
    if not 0 <= params.layer < n:
        raise LabError(f"reinit_layer: layer {params.layer} does not exist; this model has layers 0..{n - 1}")
    changed = reinit_layers(model, [params.layer], seed, "reinit_layer")
    return finish(model, "reinit_layer", reinit_notes(model, changed), reinitialised=changed)


PROTOCOL = register(Protocol(
    name="reinit_layer",
    Params=ReinitLayerParams,
    description="Single-layer reinit: re-initialise one layer, fine-tune all (Tamkin et al. appendix D).",
    procedure=_apply,
))
