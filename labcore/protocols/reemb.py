"""Re-embedding: fresh word embeddings on a pretrained body, then full fine-tuning (Kao & Lee §3.2, "re-emb").

Kao & Lee ask whether a text model's gain on non-text data comes only from its trained inner layers; re-emb
keeps the body and redraws the word-embedding rows the data uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labcore.protocols.base import Protocol, ProtocolReport, finish, register, start

if TYPE_CHECKING:
    from labcore.models import LabModel


@dataclass(frozen=True)
class ReembParams:
    """Re-embedding has no parameters: the seed decides the new rows."""


def _apply(model: LabModel, params: ReembParams, seed: int) -> ProtocolReport:
    start(model)
    notes = []
    reinitialised = []
    from labcore.models import seeded

    if model.adapter_kind == "vocab":
        table = model.adapter.embedding
        with seeded(seed, "reemb"):
            model.structure.init_module(table)
        reinitialised.append("input embeddings")
        notes.append(f"re-initialised the {table.num_embeddings} input embedding rows with "
                     f"{model.structure.init_description}; everything else keeps its pretrained weights")
    else:
        notes.append(f"the {model.adapter_kind!r} input layer is new already, so re-emb trains exactly like full "
                     f"here; re-emb differs from full only with the vocab adapter")
    return finish(model, "reemb", notes, reinitialised=reinitialised)


PROTOCOL = register(Protocol(
    name="reemb",
    Params=ReembParams,
    description="Re-emb: re-initialise the input word embeddings, keep the body, fine-tune all (Kao & Lee §3.2).",
    procedure=_apply,
))
