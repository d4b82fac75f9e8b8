"""Where each transformer family keeps its parts, reached through the module tree.

Protocols freeze, re-initialise and permute *modules*: the layer list, each block's attention, feed-forward
and norms, the position table. A :class:`Layout` knows where those live in one family's base model
(``BertModel.encoder.layer``, ``GPT2Model.h``, ``LlamaModel.layers`` ...), so nothing in the lab matches
substrings of parameter names. Adding a family is one :class:`Layout` and one registry entry.

:func:`structure` wraps a base model and its layout in a :class:`Structure`, the object protocols use.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from labcore.errors import LabError
from labcore.models.pooled_rows import RowsFn, bert_rows
from labcore.registry import Registry

Initialiser = Callable[[nn.Module, nn.Module], None]


def _clear_init_flags(module: nn.Module) -> None:
    """Forget that transformers already initialised these tensors.

    transformers 5 marks loaded tensors (and initialised modules) with ``_is_hf_initialized`` and its init
    functions then do nothing; a deliberate re-initialisation must clear the marks first.
    """
    for sub in module.modules():
        if getattr(sub, "_is_hf_initialized", False):
            sub._is_hf_initialized = False
        for tensor in list(sub.parameters(recurse=False)) + list(sub.buffers(recurse=False)):
            if getattr(tensor, "_is_hf_initialized", False):
                tensor._is_hf_initialized = False


def hf_initialiser(model: nn.Module, module: nn.Module) -> None:
    """The family's own transformers initialiser (``PreTrainedModel._init_weights``), applied to ``module``.

    ``apply`` visits children before parents, as transformers does, so GPT-2's scaled residual projections
    (set when the attention/MLP module itself is visited) win over the plain Linear init.
    """
    _clear_init_flags(module)
    with torch.no_grad():
        module.apply(model._init_weights)


def truncated_initialiser(model: nn.Module, module: nn.Module) -> None:
    """BERT's original initialiser: truncated normal within ±2σ (σ = initializer_range), biases 0, norms 1/0.

    transformers draws plain normals; Google's BERT and ALBERT code (and Tamkin et al., appendix B: σ 0.02,
    truncation ±0.04, LN γ=1 β=0) truncate. The transformers pass sets biases, norms and buffers; the
    weights are then redrawn truncated, and padding rows zeroed again.
    """
    hf_initialiser(model, module)
    std = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(sub.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
                if isinstance(sub, nn.Embedding) and sub.padding_idx is not None:
                    sub.weight[sub.padding_idx].zero_()


class Layout:
    """Where one family keeps its parts. Subclasses override the accessors; ``None`` means "has none"."""

    family = ""
    kind = "encoder"  # "encoder" | "decoder"
    initialiser: Initialiser = staticmethod(hf_initialiser)
    init_description = "the family's transformers initialiser (σ={std})"
    forward_kwargs: dict = {}  # extra keyword arguments every backbone call gets

    # embeddings ---------------------------------------------------------------------------------------
    def word_embeddings(self, model: nn.Module) -> nn.Module:
        return model.get_input_embeddings()

    def set_word_embeddings(self, model: nn.Module, module: nn.Module) -> None:
        model.set_input_embeddings(module)

    def position_embeddings(self, model: nn.Module) -> nn.Embedding | None:
        return None

    def token_type_embeddings(self, model: nn.Module) -> nn.Embedding | None:
        return None

    def embedding_norm(self, model: nn.Module) -> nn.Module | None:
        return None

    def embedding_projection(self, model: nn.Module) -> nn.Module | None:
        return None

    # blocks -------------------------------------------------------------------------------------------
    def layers(self, model: nn.Module) -> nn.ModuleList:
        raise NotImplementedError

    def set_layers(self, model: nn.Module, layers: nn.ModuleList) -> None:
        raise NotImplementedError

    def block_of_layer(self, model: nn.Module, layer: int) -> int:
        """Which entry of ``layers`` computes layer application ``layer`` (identity unless shared)."""
        return layer

    def attention(self, block: nn.Module) -> list[nn.Module]:
        raise NotImplementedError

    def feedforward(self, block: nn.Module) -> list[nn.Module]:
        raise NotImplementedError

    def layer_norms(self, block: nn.Module) -> list[nn.Module]:
        raise NotImplementedError

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        return None

    # whole model --------------------------------------------------------------------------------------
    def num_layers(self, model: nn.Module) -> int:
        return int(model.config.num_hidden_layers)

    def drop_unused(self, model: nn.Module) -> list[str]:
        """Remove parts a lab model never uses (BERT's pooler); return what was removed."""
        return []

    def rows_block(self, block: nn.Module) -> RowsFn | None:
        """How to compute ``block`` for the pooled rows only (:mod:`labcore.models.pooled_rows`), or
        ``None``: the whole block runs."""
        return None


class BertLayout(Layout):
    """BERT and RoBERTa: ``embeddings`` (word, position, token type, LayerNorm) + ``encoder.layer``."""

    family = "bert"

    def __init__(self, family: str = "bert", truncated: bool = True) -> None:
        self.family = family
        if truncated:
            self.initialiser = truncated_initialiser
            self.init_description = ("truncated normal σ={std} within ±2σ, biases 0, LayerNorm "
                                     "γ=1 β=0 (BERT's original initialiser; Tamkin et al. appendix B)")
        else:
            self.initialiser = hf_initialiser
            self.init_description = "normal σ={std}, biases 0, LayerNorm γ=1 β=0"

    def position_embeddings(self, model):
        return model.embeddings.position_embeddings

    def token_type_embeddings(self, model):
        return model.embeddings.token_type_embeddings

    def embedding_norm(self, model):
        return model.embeddings.LayerNorm

    def layers(self, model):
        return model.encoder.layer

    def set_layers(self, model, layers):
        model.encoder.layer = layers

    def attention(self, block):
        parts = [block.attention]
        if hasattr(block, "crossattention"):
            parts.append(block.crossattention)
        return parts

    def feedforward(self, block):
        return [block.intermediate, block.output]

    def layer_norms(self, block):
        norms = [block.attention.output.LayerNorm, block.output.LayerNorm]
        if hasattr(block, "crossattention"):
            norms.append(block.crossattention.output.LayerNorm)
        return norms

    def drop_unused(self, model):
        if getattr(model, "pooler", None) is not None:
            model.pooler = None
            return ["pooler"]
        return []

    def rows_block(self, block):
        return None if hasattr(block, "crossattention") else bert_rows


class AlbertLayout(BertLayout):
    """ALBERT: factorised embeddings (``embedding_size`` then a projection) and one block shared by all layers.

    ``layers`` are the shared layer *groups* (usually one); layer application ``i`` runs group
    ``i // (num_hidden_layers / num_hidden_groups)``, exactly as ``AlbertTransformer.forward`` does.
    """

    def __init__(self) -> None:
        super().__init__(family="albert", truncated=True)

    def embedding_projection(self, model):
        return model.encoder.embedding_hidden_mapping_in

    def layers(self, model):
        return model.encoder.albert_layer_groups

    def set_layers(self, model, layers):
        model.encoder.albert_layer_groups = layers

    def block_of_layer(self, model, layer):
        config = model.config
        return int(layer / (config.num_hidden_layers / config.num_hidden_groups))

    def attention(self, block):
        return [inner.attention for inner in block.albert_layers]

    def feedforward(self, block):
        return [part for inner in block.albert_layers for part in (inner.ffn, inner.ffn_output)]

    def layer_norms(self, block):
        return [norm for inner in block.albert_layers
                for norm in (inner.attention.LayerNorm, inner.full_layer_layer_norm)]

    def drop_unused(self, model):
        if getattr(model, "pooler", None) is not None:
            model.pooler = None
            model.pooler_activation = None
            return ["pooler"]
        return []

    def rows_block(self, block):
        return None  # one block serves every layer: it cannot stand in for the last application only


class GPT2Layout(Layout):
    """GPT-2: ``wte``, ``wpe``, blocks ``h`` (ln_1, attn, ln_2, mlp) and a final ``ln_f``."""

    family = "gpt2"
    kind = "decoder"
    init_description = ("normal σ={std} (residual projections σ/√(2·layers)), biases 0, "
                        "LayerNorm γ=1 β=0 (GPT-2's initialiser)")
    forward_kwargs = {"use_cache": False}

    def position_embeddings(self, model):
        return model.wpe

    def layers(self, model):
        return model.h

    def set_layers(self, model, layers):
        model.h = layers

    def attention(self, block):
        parts = [block.attn]
        if hasattr(block, "crossattention"):
            parts.append(block.crossattention)
        return parts

    def feedforward(self, block):
        return [block.mlp]

    def layer_norms(self, block):
        norms = [block.ln_1, block.ln_2]
        if hasattr(block, "ln_cross_attn"):
            norms.append(block.ln_cross_attn)
        return norms

    def final_norm(self, model):
        return model.ln_f


class LlamaLayout(Layout):
    """Llama (SmolLM2): ``embed_tokens``, rotary positions (no table), ``layers``, final RMSNorm ``norm``."""

    family = "llama"
    kind = "decoder"
    init_description = "normal σ={std}, RMSNorm scales 1 (Llama's initialiser)"
    forward_kwargs = {"use_cache": False}

    def layers(self, model):
        return model.layers

    def set_layers(self, model, layers):
        model.layers = layers

    def attention(self, block):
        return [block.self_attn]

    def feedforward(self, block):
        return [block.mlp]

    def layer_norms(self, block):
        return [block.input_layernorm, block.post_attention_layernorm]

    def final_norm(self, model):
        return model.norm


# Keyed by transformers' config.model_type.
LAYOUTS: Registry[Layout] = Registry("model family")
LAYOUTS.register("bert", BertLayout("bert", truncated=True))
LAYOUTS.register("roberta", BertLayout("roberta", truncated=False))  # fairseq initialised RoBERTa with plain normals
LAYOUTS.register("albert", AlbertLayout())
LAYOUTS.register("gpt2", GPT2Layout())
LAYOUTS.register("llama", LlamaLayout())


def layout_for(model: nn.Module) -> Layout:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in LAYOUTS:
        raise LabError(
            f"the lab does not know the layer structure of model type {model_type!r}, so protocols cannot "
            f"reach its layers; use a model of a supported family ({', '.join(LAYOUTS.names())}), or add a "
            f"Layout for it in labcore/models/architectures.py")
    return LAYOUTS[model_type]


class Structure:
    """A base model's parts, found through its layout. Build a fresh one after changing the model.

    ``layers`` holds the distinct blocks in order; ``num_layers`` counts layer *applications*. They differ
    only where blocks are shared (ALBERT: one block applied 12 times), which ``shared_layers`` flags.
    The per-block accessors take an index into ``layers``; :meth:`block_of_layer` maps a layer application
    to its block.
    """

    def __init__(self, model: nn.Module, layout: Layout) -> None:
        self.model = model
        self.layout = layout
        self.family = layout.family
        self.kind = layout.kind
        self.word_embeddings = layout.word_embeddings(model)
        self.position_embeddings = layout.position_embeddings(model)
        self.token_type_embeddings = layout.token_type_embeddings(model)
        self.embedding_norm = layout.embedding_norm(model)
        self.embedding_projection = layout.embedding_projection(model)
        self.layers = layout.layers(model)
        self.final_norm = layout.final_norm(model)
        self.num_layers = layout.num_layers(model)
        self.shared_layers = len(self.layers) != self.num_layers
        std = getattr(model.config, "initializer_range", 0.02) or 0.02
        self.init_description = layout.init_description.format(std=std)

    @property
    def embedding_size(self) -> int:
        """Width of the vectors the backbone takes as ``inputs_embeds`` (ALBERT: its small embedding size)."""
        return int(self.model.config.embedding_size if self.embedding_projection is not None
                   else self.model.config.hidden_size)

    def block_of_layer(self, layer: int) -> int:
        if not 0 <= layer < self.num_layers:
            raise LabError(f"layer {layer} does not exist: the model has layers 0..{self.num_layers - 1}")
        return self.layout.block_of_layer(self.model, layer)

    def attention(self, i: int) -> list[nn.Module]:
        return self.layout.attention(self.layers[i])

    def feedforward(self, i: int) -> list[nn.Module]:
        return self.layout.feedforward(self.layers[i])

    def layer_norms(self, i: int) -> list[nn.Module]:
        return self.layout.layer_norms(self.layers[i])

    def all_layer_norms(self) -> list[nn.Module]:
        """Every norm in the backbone: embedding norm, each block's norms, the final norm."""
        norms = [self.embedding_norm] if self.embedding_norm is not None else []
        for i in range(len(self.layers)):
            norms.extend(self.layer_norms(i))
        if self.final_norm is not None:
            norms.append(self.final_norm)
        return norms

    def init_module(self, module: nn.Module) -> None:
        """Re-initialise ``module`` (inside or outside the backbone) with the family's initialiser.

        Draws from the global generator: call it inside :func:`labcore.models.seeding.seeded`.
        """
        self.layout.initialiser(self.model, module)

    def set_layer_order(self, order: list[int] | tuple[int, ...]) -> None:
        """Reorder the blocks: afterwards block ``i`` is the former block ``order[i]`` (weights move along)."""
        if sorted(order) != list(range(len(self.layers))):
            raise LabError(f"layer order {list(order)} is not a permutation of 0..{len(self.layers) - 1}")
        blocks = list(self.layers)
        self.layout.set_layers(self.model, nn.ModuleList([blocks[j] for j in order]))
        self.layers = self.layout.layers(self.model)


def structure(model: nn.Module) -> Structure:
    """The :class:`Structure` of a transformers base model (BertModel, GPT2Model, LlamaModel, ...)."""
    return Structure(model, layout_for(model))
