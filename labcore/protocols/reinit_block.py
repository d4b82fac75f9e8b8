"""Localised re-initialisation (Tamkin et al. §4): re-initialise a block of consecutive layers, or all but it.

``mode="reinit"`` redraws layers start..start+size-1 (are they necessary?); ``mode="preserve"`` keeps them
and redraws every other layer (are they sufficient?). Embeddings are kept in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.errors import LabError
from labcore.protocols.base import (Protocol, ProtocolReport, finish, register, reinit_layers, reinit_notes,
                                    start)

if TYPE_CHECKING:
    from labcore.models import LabModel

MODES = ("reinit", "preserve")


@dataclass(frozen=True)
class ReinitBlockParams:
    """A block of ``size`` consecutive layers from ``start`` (0-based), re-initialised or preserved."""

    start: int = 0
    size: int = 3
    mode: str = "reinit"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise LabError(f"reinit_block: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.size < 1 or self.start < 0:
            raise LabError(f"reinit_block: need start >= 0 and size >= 1, got start={self.start}, size={self.size}")


def _apply(model: LabModel, params: ReinitBlockParams, seed: int) -> ProtocolReport:
    start(model)
    n = model.structure.num_layers
    if params.start + params.size > n:
        raise LabError(f"reinit_block: layers {params.start}..{params.start + params.size - 1} do not fit in this "
                       f"model's {n} layers (0..{n - 1}); lower start or size")
    block = set(range(params.start, params.start + params.size))
    layers = sorted(block) if params.mode == "reinit" else [i for i in range(n) if i not in block]
    changed = reinit_layers(model, layers, seed, "reinit_block")
    return finish(model, "reinit_block", reinit_notes(model, changed), reinitialised=changed)


PROTOCOL = register(Protocol(
    name="reinit_block",
    Params=ReinitBlockParams,
    description="Localised reinit: re-initialise a block of consecutive layers, or everything but it, then "
                "fine-tune all (Tamkin et al. §4).",
    procedure=_apply,
))
