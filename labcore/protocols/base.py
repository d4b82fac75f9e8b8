"""What a protocol is, what it reports, and the pieces protocols share.

A protocol decides, on a freshly built :class:`~labcore.models.LabModel`, which parameters train, which
layers are re-initialised or re-ordered, and how the features are read out. It works through the
backbone's :class:`~labcore.models.Structure` (its layer list, each block's attention, feed-forward and
norms), never by matching parameter names. Apply it before building the optimiser.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generator, Mapping

from labcore.errors import LabError
from labcore.registry import Registry

# The registry, Params and descriptions load without torch (the app builds its forms from them); the
# model code loads when a protocol is applied.
if TYPE_CHECKING:
    from torch import nn

    from labcore.data import DisciplineInfo
    from labcore.data.encode import Encoded
    from labcore.models import LabModel, Structure
    from labcore.runspec.resolved import ResolvedSpec


@dataclass(frozen=True)
class ProtocolReport:
    """What a protocol did to a model, and the flags the training loop needs.

    ``features_only``: the head's input never changes while training (frozen body in eval mode), so the
    loop may compute the pooled features once and train the head on the cache (Lu et al. §3.9).
    ``body_eval``: the backbone runs without dropout while the model trains (no backbone parameter trains).
    ``layer_order``: after ``permute_layers``, block ``i`` holds the former block ``layer_order[i]``.
    """

    protocol: str
    trainable_names: tuple[str, ...]
    trainable_parameters: int
    total_parameters: int
    notes: tuple[str, ...] = ()
    features_only: bool = False
    body_eval: bool = False
    reinitialised: tuple[str, ...] = ()
    layer_order: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StageInput:
    """What a protocol's stage before training works with: the run's model (protocol applied, on its device,
    in the run's threads) and its data. ``should_stop`` is the run's stop request (None: go on)."""

    model: LabModel
    spec: ResolvedSpec
    splits: Mapping[str, Encoded]  # "train", "validation", "test", encoded for this model
    info: DisciplineInfo
    tokenizer: Any  # the backbone's tokenizer (None where it has none)
    device: str
    should_stop: Callable[[], str | None] = lambda: None


# A stage: (input, params) -> a generator of run events whose return value is the stage's summary, a
# JSON-able dict the run's record keeps (RunRecord.stage): at least "name", and "notes" to add to the run's.
Stage = Callable[[StageInput, Any], Generator[dict[str, Any], None, dict[str, Any]]]


@dataclass(frozen=True)
class Protocol:
    """A named protocol: its parameters (a frozen dataclass with defaults) and what it does to a model.

    ``stage``: a pre-training stage the protocol declares (ORCA's alignment): it runs after the protocol
    is applied and before the training loop, streams its own events, and returns its summary.
    """

    name: str
    Params: type
    description: str  # one line, with the paper and section
    procedure: Callable[[LabModel, Any, int], ProtocolReport]
    stage: Stage | None = None

    def apply(self, model: LabModel, params: Any = None, seed: int = 0) -> ProtocolReport:
        if params is None:
            params = self.Params()
        if not isinstance(params, self.Params):
            raise LabError(f"protocol {self.name!r} takes {self.Params.__name__}, got {type(params).__name__}; "
                           f"build it with parse_protocol_params({self.name!r}, {{...}})")
        return self.procedure(model, params, seed)


PROTOCOLS: Registry[Protocol] = Registry("protocol")


def register(protocol: Protocol) -> Protocol:
    return PROTOCOLS.register(protocol.name, protocol)


def protocol_names() -> list[str]:
    return PROTOCOLS.names()


def _check_type(protocol: str, name: str, expected: Any, value: Any) -> None:
    # bool is an int in Python: keep switches and counts apart, so {"k": True} is an error, not k=1.
    ok = (isinstance(value, bool) if expected is bool else
          isinstance(value, int) and not isinstance(value, bool) if expected is int else
          isinstance(value, expected))
    if not ok:
        raise LabError(f"protocol {protocol!r}: parameter {name!r} must be {expected.__name__}, "
                       f"got {value!r} ({type(value).__name__})")


def parse_protocol_params(name: str, values: dict[str, Any] | None = None) -> Any:
    """The protocol's frozen Params from a dict of overrides; unknown keys and wrong types are errors."""
    protocol = PROTOCOLS[name]
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(protocol.Params)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        valid = ", ".join(fields) or "(none)"
        raise LabError(f"protocol {name!r} has no parameter(s) {', '.join(unknown)}; valid parameters: {valid}")
    hints = typing.get_type_hints(protocol.Params)
    for key, value in values.items():
        _check_type(name, key, hints[key], value)
    return protocol.Params(**values)


def apply_protocol(model: LabModel, name: str, values: dict[str, Any] | None = None,
                   seed: int = 0) -> ProtocolReport:
    """Parse ``values`` for protocol ``name`` and apply it to ``model``."""
    return PROTOCOLS[name].apply(model, parse_protocol_params(name, values), seed)


# --------------------------------------------------------------------------------------------------
# shared pieces


def start(model: LabModel) -> None:
    """Every protocol starts from: everything trains, the body in train mode, the model's own readout."""
    for param in model.parameters():
        param.requires_grad_(True)
    model.body_eval = False


def set_trainable(modules: list[nn.Module], flag: bool) -> None:
    for module in modules:
        for param in module.parameters():
            param.requires_grad_(flag)


def freeze_all(model: LabModel) -> None:
    set_trainable([model], False)


def backbone_trains(model: LabModel) -> bool:
    return any(p.requires_grad for p in model.backbone.parameters())


def finish(model: LabModel, protocol: str, notes: list[str], *, features_only: bool = False,
           reinitialised: list[str] | tuple[str, ...] = (),
           layer_order: tuple[int, ...] | None = None) -> ProtocolReport:
    """Build the report from the model's actual state (so it cannot disagree with what trains)."""
    from labcore.models import count_parameters

    names = tuple(n for n, p in model.named_parameters() if p.requires_grad)
    if not names:
        raise LabError(f"protocol {protocol!r} left no parameter to train; switch on at least one group "
                       f"(the output head, usually)")
    total, trainable = count_parameters(model)
    return ProtocolReport(protocol=protocol, trainable_names=names, trainable_parameters=trainable,
                          total_parameters=total, notes=tuple(notes), features_only=features_only,
                          body_eval=model.body_eval, reinitialised=tuple(reinitialised),
                          layer_order=layer_order)


def parameter_groups(model: LabModel) -> dict[str, list[str]]:
    """Every parameter name of a lab model in exactly one group, found through the model's structure.

    Groups: ``input`` (adapter), ``output`` (head), ``positions``, ``layernorm`` (every norm: embedding,
    per block, final), ``attention`` and ``feedforward`` (the blocks' sub-layers, their norms excluded),
    ``token_types``, ``embedding_projection`` (ALBERT), ``other`` (anything else in the backbone).
    """
    struct = model.structure
    owner: dict[int, str] = {}

    def claim(group: str, modules: list[nn.Module | None]) -> None:
        for module in modules:
            if module is None:
                continue
            for param in module.parameters():
                owner.setdefault(id(param), group)

    # Norms first: BERT keeps a LayerNorm inside its attention output, GPT-2/Llama beside; either way a
    # norm is a norm.
    claim("layernorm", struct.all_layer_norms())
    claim("input", [model.adapter])
    claim("output", [model.head])
    claim("positions", [struct.position_embeddings])
    claim("token_types", [struct.token_type_embeddings])
    claim("embedding_projection", [struct.embedding_projection])
    for i in range(len(struct.layers)):
        claim("attention", struct.attention(i))
        claim("feedforward", struct.feedforward(i))
    groups: dict[str, list[str]] = {g: [] for g in ("input", "output", "positions", "layernorm", "attention",
                                                     "feedforward", "token_types", "embedding_projection",
                                                     "other")}
    for name, param in model.named_parameters():
        groups[owner.get(id(param), "other")].append(name)
    return groups


def require_layers(struct: Structure, protocol: str, layers: list[int]) -> None:
    """Layer-wise protocols need each chosen layer to own its weights (ALBERT shares one block)."""
    if not struct.shared_layers:
        return
    chosen = set(layers)
    for block in range(len(struct.layers)):
        uses = {i for i in range(struct.num_layers) if struct.block_of_layer(i) == block}
        if uses & chosen and uses - chosen:
            raise LabError(
                f"protocol {protocol!r} does not apply to this {struct.family} model: its {struct.num_layers} "
                f"layers share {len(struct.layers)} block(s) of weights, so layer(s) {sorted(uses & chosen)} "
                f"cannot change without layer(s) {sorted(uses - chosen)}; choose full, frozen, output_only or "
                f"probe, or a model whose layers are separate (BERT, RoBERTa, GPT-2, Llama)")


def reinit_layers(model: LabModel, layers: list[int], seed: int, protocol: str) -> list[str]:
    """Re-initialise the blocks of the given layers with the family's initialiser; return what changed.

    Each block draws from its own seed (run seed, block index), so layer 5 gets the same fresh weights
    whichever other layers are re-initialised alongside it.
    """
    from labcore.models import seeded

    struct = model.structure
    for layer in layers:
        struct.block_of_layer(layer)  # range check with a clear message
    require_layers(struct, protocol, layers)
    blocks = sorted({struct.block_of_layer(i) for i in layers})
    for block in blocks:
        with seeded(seed, "reinit", block):
            struct.init_module(struct.layers[block])
    if not struct.shared_layers:
        return [f"layer {b}" for b in blocks]
    labels = []
    for block in blocks:
        uses = [i for i in range(struct.num_layers) if struct.block_of_layer(i) == block]
        labels.append(f"shared block {block} (layers {uses[0]}-{uses[-1]})")
    return labels


def reinit_notes(model: LabModel, reinitialised: list[str]) -> list[str]:
    struct = model.structure
    if not reinitialised:
        return ["no layer was re-initialised: this run equals full fine-tuning"]
    notes = [f"re-initialised {', '.join(reinitialised)} with {struct.init_description}; embeddings kept "
             f"(Tamkin et al. appendix B)"]
    if struct.final_norm is not None:
        notes.append("the final norm after the last block is kept (it belongs to no layer)")
    return notes
