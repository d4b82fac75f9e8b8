"""Incremental re-initialisation (Tamkin et al. §2): keep layers 0..k-1, redraw layers k.. , fine-tune all.

k = 0 keeps only the embeddings; k = number of layers is the pretrained model. Word (and position)
embeddings are never re-initialised (Tamkin et al. appendix B).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.errors import LabError
from labcore.protocols.base import (Protocol, ProtocolReport, finish, register, reinit_layers, reinit_notes,
                                    start)

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class ReinitAfterParams:
    """k: how many leading layers keep their pretrained weights; layers k and later are re-initialised."""

    k: int = 0


def _apply(model: LabModel, params: ReinitAfterParams, seed: int) -> ProtocolReport:
    start(model)
    n = model.structure.num_layers
    if not 0 <= params.k <= n:
        raise LabError(f"reinit_after: k={params.k} is out of range; this model has {n} layers, so k is 0..{n}")
    changed = reinit_layers(model, list(range(params.k, n)), seed, "reinit_after")
    return finish(model, "reinit_after", reinit_notes(model, changed), reinitialised=changed)


PROTOCOL = register(Protocol(
    name="reinit_after",
    Params=ReinitAfterParams,
    description="Incremental reinit: re-initialise every layer from k on, keep the rest, fine-tune all "
                "(Tamkin et al. §2).",
    procedure=_apply,
))
