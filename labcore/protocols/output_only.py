"""Output only: a frozen body and input layer as a fixed feature extractor, a linear head on top (Lu et al. §3.9).

The features never change while training, so the loop computes them once and trains the head on the cache;
this is linear classification on the transformer's features, and equals ``frozen`` with only ``output`` on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.protocols.base import Protocol, ProtocolReport, finish, freeze_all, register, set_trainable, start

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class OutputOnlyParams:
    """Output-only training has no parameters."""


def _apply(model: LabModel, params: OutputOnlyParams, seed: int) -> ProtocolReport:
    start(model)
    freeze_all(model)
    set_trainable([model.head], True)
    model.body_eval = True
    notes = ["only the head trains: features are computed once (body in eval mode, no dropout) and cached "
             "(Lu et al. §3.9)"]
    if model.adapter_kind != "vocab":
        notes.append(f"the new {model.adapter_kind!r} input layer stays at its random initialisation")
    return finish(model, "output_only", notes, features_only=True)


PROTOCOL = register(Protocol(
    name="output_only",
    Params=OutputOnlyParams,
    description="Output only: freeze everything but a linear head on cached features (Lu et al. §3.9).",
    procedure=_apply,
))
