"""Frozen pretrained transformer (Lu et al. §2.2, §3.12): only switched-on groups train.

FPT freezes self-attention and feed-forward layers and trains the input layer, the output layer, the
position embeddings and the layer norms; each switch here turns one group on or off. Groups are found
through the model's structure (:func:`labcore.protocols.base.parameter_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.protocols.base import (Protocol, ProtocolReport, backbone_trains, finish, parameter_groups,
                                    register, start)

if TYPE_CHECKING:
    from labcore.models import LabModel

SWITCHES = ("input", "output", "positions", "layernorm", "feedforward", "attention")


@dataclass(frozen=True)
class FrozenParams:
    """Which groups train; the defaults are FPT's (Lu et al. §2.2)."""

    input: bool = True
    output: bool = True
    positions: bool = True
    layernorm: bool = True
    feedforward: bool = False
    attention: bool = False


def _apply(model: LabModel, params: FrozenParams, seed: int) -> ProtocolReport:
    return apply_switches(model, params, "frozen")


def apply_switches(model: LabModel, params: FrozenParams, protocol: str) -> ProtocolReport:
    start(model)
    groups = parameter_groups(model)
    wanted = {g for g in SWITCHES if getattr(params, g)}
    parameters = dict(model.named_parameters())
    for group, names in groups.items():
        for name in names:
            parameters[name].requires_grad_(group in wanted)
    struct = model.structure
    notes = []
    if params.positions and struct.position_embeddings is None:
        notes.append("positions: this model encodes positions by rotation (rotary embeddings) and has no "
                     "position table, so the switch trains nothing here")
    if groups["token_types"]:
        notes.append("token-type embeddings stay frozen (FPT trains no token-type table; the lab uses type 0)")
    if groups["embedding_projection"]:
        notes.append("the embedding projection (ALBERT's embedding_hidden_mapping_in) stays frozen: it is "
                     "pretrained body, not the input layer")
    if groups["other"]:
        notes.append(f"{len(groups['other'])} other backbone tensor(s) stay frozen: "
                     f"{', '.join(groups['other'][:4])}{', ...' if len(groups['other']) > 4 else ''}")
    if params.layernorm and struct.family == "llama":
        notes.append("layernorm: this model's norms are RMSNorms, which have a scale and no bias")
    if struct.shared_layers and (params.attention or params.feedforward or params.layernorm):
        notes.append(f"this model applies {len(struct.layers)} shared block(s) {struct.num_layers} times: "
                     f"training a block's weights changes every layer that uses it")
    model.body_eval = not backbone_trains(model)
    if model.body_eval:
        notes.append("no backbone parameter trains, so the backbone runs in eval mode (no dropout)")
    return finish(model, protocol, notes)


PROTOCOL = register(Protocol(
    name="frozen",
    Params=FrozenParams,
    description="Frozen pretrained transformer: train input, output, positions and layer norms only, each "
                "switchable (Lu et al. §2.2, §3.12).",
    procedure=_apply,
))
