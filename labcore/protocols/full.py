"""Full fine-tuning: every parameter trains (Kao & Lee §2; the reference every other protocol is read against)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.protocols.base import Protocol, ProtocolReport, finish, register, start

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class FullParams:
    """Full fine-tuning has no parameters."""


def _apply(model: LabModel, params: FullParams, seed: int) -> ProtocolReport:
    start(model)
    return finish(model, "full", [])


PROTOCOL = register(Protocol(
    name="full",
    Params=FullParams,
    description="Full fine-tuning: adapter, body and head all train (Kao & Lee §2).",
    procedure=_apply,
))
