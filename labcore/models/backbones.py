"""Backbones: the packaged pretrained models, hub ids and local folders, loaded offline in fp32.

:func:`load_backbone` gives a base model, its tokenizer and a :class:`BackboneInfo`. The parts it draws on:

* :mod:`labcore.models.model_names`: what a backbone name means (packaged, ``hub:``, ``local:``, ``tiny:``,
  ``lab:``, ``run:``) and where its model comes from;
* :mod:`labcore.models.conversion`: packaged checkpoints (AntiBERTy's pickle, SmolLM2's GGUF) converted once
  into transformers folders under ``cache/models``;
* :mod:`labcore.models.inits`: the inits (:data:`INITS`): ``pretrained``, ``random``, ``stats``.

Their names stay importable from here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from labcore.errors import LabError
from labcore.models.conversion import install_folder, models_dir  # noqa: F401  (re-exported for callers)
from labcore.models.inits import INITS, build_random, init_from_statistics, load_pretrained
from labcore.models.model_names import (  # noqa: F401  (re-exported for callers)
    BACKBONES, TINY_VOCAB, Source, backbone_names, made_here_names, model_folder, read_card, resolve_backbone,
)

# torch and transformers load inside the functions that use them: the app lists backbones (names,
# descriptions, licences) without importing either.
if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class BackboneInfo:
    """What the rest of the lab needs to know about a loaded backbone (plain data, safe to store)."""

    name: str
    family: str  # "bert" | "roberta" | "albert" | "gpt2" | "llama" | another transformers model_type
    kind: str  # "encoder" | "decoder"
    hidden_size: int
    num_layers: int
    num_heads: int
    max_positions: int | None  # None where positions are rotary (no learned table bounds the length)
    description: str
    licence: str
    cls_id: int | None = None
    sep_id: int | None = None
    bos_id: int | None = None
    pad_id: int | None = None
    eos_id: int | None = None
    vocab_size: int = 0
    embedding_size: int = 0  # width of inputs_embeds: hidden_size, except ALBERT's factorised embeddings
    shared_layers: bool = False  # ALBERT: one block applied num_layers times
    init: str = "pretrained"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _token_id(tokenizer: Any, attribute: str) -> int | None:
    value = getattr(tokenizer, attribute, None) if tokenizer is not None else None
    return int(value) if isinstance(value, int) else None


def positions_of(config: dict[str, Any]) -> int | None:
    """The longest input, in tokens, that a model with this ``config.json`` takes; None where positions are
    rotary (Llama: no learned table bounds the length). Plain JSON in, so specs are resolved without torch."""
    family = config.get("model_type")
    limit = config.get("max_position_embeddings", config.get("n_positions"))  # GPT-2 names it n_positions
    if family == "llama" or limit is None:
        return None
    if family == "roberta":  # RoBERTa numbers positions from padding_idx + 1: two rows are never reached
        return int(limit) - int(config.get("pad_token_id", 1)) - 1
    return int(limit)


def known_positions(name: str) -> int | None:
    """The model's :func:`positions_of` read from its ``config.json`` on this machine, without torch; None
    where it is unbounded or not known here (a hub id, a packaged model not fetched yet, a tiny model not
    built yet): the engine then cuts inputs to the loaded model's positions and says so in the run's notes."""
    folder = model_folder(name)
    try:
        config = json.loads((folder / "config.json").read_text()) if folder is not None else None
    except (OSError, ValueError):
        return None
    return positions_of(config) if isinstance(config, dict) else None


def known_layers(name: str) -> int | None:
    """How many layers the model has, from its ``config.json`` on this machine (no torch); None where the
    folder is not here yet."""
    folder = model_folder(name)
    try:
        config = json.loads((folder / "config.json").read_text()) if folder is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    for field in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(config.get(field), int):
            return int(config[field])
    return None


def backbone_info(name: str, model: nn.Module, tokenizer: Any = None, *, description: str = "",
                  licence: str = "", init: str = "pretrained") -> BackboneInfo:
    """Describe a base model (and its tokenizer, if any) as a :class:`BackboneInfo`."""
    from labcore.models.architectures import LAYOUTS

    config = model.config
    family = config.model_type
    layout = LAYOUTS[family] if family in LAYOUTS else None
    if layout is not None:
        kind = layout.kind
    else:
        kind = "decoder" if getattr(config, "is_decoder", False) or any(
            a.endswith(("CausalLM", "LMHeadModel")) for a in (config.architectures or [])) else "encoder"
    max_positions = positions_of(config.to_dict())
    # getattr: families without a layout may name these differently; their info is then partial (0).
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    num_layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    groups = getattr(config, "num_hidden_groups", None)
    return BackboneInfo(
        name=name, family=family, kind=kind, hidden_size=hidden, num_layers=num_layers,
        num_heads=int(getattr(config, "num_attention_heads", 0) or 0), max_positions=max_positions,
        description=description, licence=licence,
        cls_id=_token_id(tokenizer, "cls_token_id"), sep_id=_token_id(tokenizer, "sep_token_id"),
        bos_id=_token_id(tokenizer, "bos_token_id"), pad_id=_token_id(tokenizer, "pad_token_id"),
        eos_id=_token_id(tokenizer, "eos_token_id"),
        vocab_size=int(getattr(config, "vocab_size", 0) or 0),
        embedding_size=int(getattr(config, "embedding_size", hidden) if family == "albert" else hidden),
        shared_layers=bool(groups is not None and groups != num_layers),
        init=init,
    )


def _damaged_weights(error: Exception) -> bool:
    """Whether loading failed on the weight files themselves: shapes that contradict config.json (RuntimeError),
    a truncated safetensors file (SafetensorError) or a truncated pickle (EOFError, UnpicklingError)."""
    import pickle

    from safetensors import SafetensorError

    return isinstance(error, (RuntimeError, SafetensorError, EOFError, pickle.UnpicklingError))


def load_backbone(name: str, init: str = "pretrained", *, seed: int = 0,
                  attn_implementation: str = "sdpa") -> tuple[nn.Module, Any, BackboneInfo]:
    """Load ``(base_model, tokenizer, info)``: the transformers base model without task head, fp32, eval mode.

    ``attn_implementation="eager"`` is needed for attention maps (SDPA returns none). ``seed`` fixes the
    ``random`` and ``stats`` draws; the global random state is left as it was.
    """
    from labcore.models.architectures import LAYOUTS
    from labcore.models.seeding import seeded

    INITS[init]  # unknown init: an error listing the valid ones
    source = resolve_backbone(name)
    try:
        location = source.locate()
        tokenizer = source.tokenizer(location)
        with seeded(seed, "backbone", init):  # also covers any init transformers does while loading
            if init == "random":
                model = build_random(location, attn_implementation)
            else:
                model = load_pretrained(source, location, attn_implementation)
        if init == "stats":
            init_from_statistics(model, seed)
    except OSError as error:
        if name.startswith("hub:"):
            raise LabError(
                f"backbone {name!r} needs the model hub or a copy in the local hub cache, and neither is "
                f"reachable here ({str(error).splitlines()[0]}); download it on a machine with the hub, "
                f"save it with save_pretrained and use local:<folder>, or pick a packaged backbone "
                f"({', '.join(BACKBONES.names())})") from None
        raise LabError(f"backbone {name!r} could not be loaded from {name[6:] if name.startswith('local:') else name}"
                       f" ({str(error).splitlines()[0]}); check that it is a complete transformers folder "
                       f"(config.json, weights, tokenizer files)") from None
    except ValueError as error:
        if isinstance(error, LabError):
            raise
        raise LabError(f"backbone {name!r} could not be loaded ({str(error).splitlines()[0]}); the lab "
                       f"loads transformers models of the families {', '.join(LAYOUTS.names())}") from None
    except Exception as error:
        if not _damaged_weights(error):
            raise
        where = name[len("local:"):] if name.startswith("local:") else name
        what = ("its config.json does not describe the model its weights hold (tensor shapes differ)"
                if isinstance(error, RuntimeError) and "mismatch" in str(error)
                else "a weight file is truncated or damaged")
        raise LabError(f"backbone {name!r}: the weights in {where} do not load: {what} "
                       f"({str(error).splitlines()[0][:200]}); save the model again into the folder with "
                       f"save_pretrained (config and weights together), or copy the folder again in full") from None
    model.eval()
    info = backbone_info(name, model, tokenizer, description=source.description, licence=source.licence,
                         init=init)
    return model, tokenizer, info
