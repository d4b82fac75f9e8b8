"""A lab model: input adapter -> transformer backbone -> pooling -> linear head.

The backbone is always called with ``inputs_embeds``: the input adapter turns a discipline's inputs into
embedding vectors, so position ids never depend on token ids (RoBERTa derives them from the ids
otherwise), a sliced vocabulary works for every family, and FPT's new input layers plug in the same way.

Input adapters (:data:`INPUT_ADAPTERS`):

* ``vocab`` (Kao & Lee): ids in the model's vocabulary through its pretrained word-embedding table. With
  ``vocab_rows`` (sorted ids actually used) the table is cut to those rows and inputs are compact indices
  ``0..len(rows)-1`` (:meth:`VocabAdapter.compact`); MiniLM's table is 11.7M of its 22.7M parameters.
* ``embedding`` (Lu et al., token inputs): a new table of ``n_symbols`` rows, the family's initialiser.
* ``linear`` (Lu et al., vector inputs): a new linear layer, orthogonal weights (gain 1.41), zero bias,
  as in the FPT code.

The backbone's own word-embedding table always moves into the adapter (or is dropped), and a
:class:`DetachedEmbedding` stands in its place, so the input side of every lab model is ``model.adapter``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from labcore.errors import LabError
from labcore.registry import Registry
from labcore.models.architectures import Structure, structure
from labcore.models.backbones import BackboneInfo, load_backbone
from labcore.models.pooled_rows import run_pooled_rows, take_rows
from labcore.models.seeding import seeded

# FPT's input layers: orthogonal init with this gain (universal-computation, fpt.py, orth_gain=1.41).
ORTHOGONAL_GAIN = 1.41


class DetachedEmbedding(nn.Module):
    """Stands where the backbone's word-embedding table was; a lab model feeds ``inputs_embeds`` instead."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.original_num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        # Empty and not saved: only there for code that asks the input embeddings for a dtype or device.
        self.register_buffer("weight", torch.empty(0, embedding_dim), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise LabError("this backbone's word embeddings live in the lab model's input adapter; call the lab "
                       "model (or its adapter) instead of passing input_ids to the backbone")

    def extra_repr(self) -> str:
        return f"moved to the input adapter ({self.original_num_embeddings} x {self.embedding_dim})"


def reads_range(inputs: torch.Tensor) -> bool:
    """Whether an adapter checks its indices in its forward. Not on a GPU: reading the largest index to the
    host there waits for every queued kernel each step, so the host cannot run ahead (a BERT-base step on an
    H100 was host-bound); a run checks its splits on the host before training instead
    (:meth:`LabModel.check_ids`), where an index out of range would otherwise end in a device-side assert."""
    return bool(inputs.numel()) and inputs.device.type != "cuda"


class VocabAdapter(nn.Module):
    """Token ids through (part of) the pretrained word-embedding table."""

    kind = "vocab"

    def __init__(self, embedding: nn.Embedding, rows: tuple[int, ...] | None) -> None:
        super().__init__()
        self.embedding = embedding
        self.rows = rows
        if rows is not None:
            self.register_buffer("row_ids", torch.tensor(rows, dtype=torch.long), persistent=False)

    def compact(self, ids: torch.Tensor) -> torch.Tensor:
        """Model-vocabulary ids -> compact indices into the sliced table (identity without slicing)."""
        if self.rows is None:
            return ids
        row_ids = self.row_ids.to(ids.device)
        index = torch.searchsorted(row_ids, ids).clamp(max=len(self.rows) - 1)
        missing = row_ids[index] != ids
        if bool(missing.any()):
            absent = sorted(set(ids[missing].tolist()))[:8]
            raise LabError(f"token id(s) {absent} are not among the {len(self.rows)} vocabulary rows this model "
                           f"kept; build the model with vocab_rows covering every id the data uses")
        return index

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if inputs.dtype != torch.long:
            raise LabError(f"the vocab adapter takes token ids (LongTensor), got {inputs.dtype}; vector inputs "
                           f"need adapter='linear'")
        if reads_range(inputs):
            self.check_largest(int(inputs.max()))
        return self.embedding(inputs)

    def check_largest(self, largest: int) -> None:
        if largest >= self.embedding.num_embeddings:
            what = ("compact indices (adapter.compact(ids))" if self.rows is not None
                    else f"ids below the vocabulary size {self.embedding.num_embeddings}")
            raise LabError(f"input index {largest} is out of range: this adapter takes {what}")


class EmbeddingAdapter(nn.Module):
    """A new embedding table for a discipline's own symbols (FPT's input layer for tokens)."""

    kind = "embedding"

    def __init__(self, n_symbols: int, dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_symbols, dim)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if inputs.dtype != torch.long:
            raise LabError(f"the embedding adapter takes symbol indices (LongTensor), got {inputs.dtype}")
        if reads_range(inputs):
            self.check_largest(int(inputs.max()))
        return self.embedding(inputs)

    def check_largest(self, largest: int) -> None:
        if largest >= self.embedding.num_embeddings:
            raise LabError(f"symbol index {largest} is out of range for n_symbols="
                           f"{self.embedding.num_embeddings}; build the model with the discipline's alphabet size")


class LinearAdapter(nn.Module):
    """A new linear input layer for vector inputs [B, L, vector_dim] (FPT's input layer for patches, bits)."""

    kind = "linear"

    def __init__(self, vector_dim: int, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(vector_dim, dim)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if not inputs.is_floating_point() or inputs.dim() != 3 or inputs.shape[-1] != self.linear.in_features:
            raise LabError(f"the linear adapter takes float vectors [batch, length, {self.linear.in_features}], "
                           f"got {tuple(inputs.shape)} {inputs.dtype}")
        return self.linear(inputs)


AdapterFactory = Callable[..., nn.Module]


def _vocab_adapter(struct: Structure, table: nn.Module, *, vocab_rows, n_symbols, vector_dim) -> nn.Module:
    if not isinstance(table, nn.Embedding):
        raise LabError("the vocab adapter needs the backbone's word-embedding table, and this backbone's was "
                       "already moved out; load the backbone again")
    if vocab_rows is None:
        return VocabAdapter(table, None)
    rows = tuple(int(r) for r in vocab_rows)
    if not rows or list(rows) != sorted(set(rows)) or rows[0] < 0 or rows[-1] >= table.num_embeddings:
        raise LabError(f"vocab_rows must be a non-empty, strictly increasing tuple of ids in "
                       f"0..{table.num_embeddings - 1}; sort and de-duplicate the ids the data uses")
    # Keep the table's padding row frozen at its compact index, so gradients match the full table exactly.
    padding = rows.index(table.padding_idx) if table.padding_idx in rows else None
    compact = nn.Embedding(len(rows), table.embedding_dim, padding_idx=padding)
    with torch.no_grad():
        compact.weight.copy_(table.weight[list(rows)])
    return VocabAdapter(compact, rows)


def _embedding_adapter(struct: Structure, table: nn.Module, *, vocab_rows, n_symbols, vector_dim) -> nn.Module:
    if n_symbols <= 0:
        raise LabError("the embedding adapter needs n_symbols > 0 (the discipline's alphabet size)")
    adapter = EmbeddingAdapter(n_symbols, struct.embedding_size)
    struct.init_module(adapter.embedding)
    return adapter


def _linear_adapter(struct: Structure, table: nn.Module, *, vocab_rows, n_symbols, vector_dim) -> nn.Module:
    if vector_dim <= 0:
        raise LabError("the linear adapter needs vector_dim > 0 (the dimension of each input vector)")
    adapter = LinearAdapter(vector_dim, struct.embedding_size)
    with torch.no_grad():
        nn.init.orthogonal_(adapter.linear.weight, gain=ORTHOGONAL_GAIN)
        adapter.linear.bias.zero_()
    return adapter


INPUT_ADAPTERS: Registry[AdapterFactory] = Registry("input adapter")
INPUT_ADAPTERS.register("vocab", _vocab_adapter)
INPUT_ADAPTERS.register("embedding", _embedding_adapter)
INPUT_ADAPTERS.register("linear", _linear_adapter)


# --------------------------------------------------------------------------------------------------
# pooling: hidden [B, L, H], mask [B, L] -> [B, H]


def _cls_row(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape[0], dtype=torch.long, device=mask.device)


def _last_row(mask: torch.Tensor) -> torch.Tensor:
    # Right padding: the last real token sits at (number of real tokens - 1).
    return (mask.long().sum(1) - 1).clamp(min=0)


def _pool_cls(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return hidden[:, 0]


def _pool_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def _pool_last(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return take_rows(hidden, _last_row(mask))[:, 0]


POOLINGS: Registry[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = Registry("pooling")
POOLINGS.register("cls", _pool_cls)
POOLINGS.register("mean", _pool_mean)
POOLINGS.register("last", _pool_last)

# Poolings that read one row per sequence: mask [B, L] -> that row's index [B]. The last block then runs
# for those rows only (labcore.models.pooled_rows).
POOLED_ROW: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"cls": _cls_row, "last": _last_row}


class _ReachedFirstBlock(Exception):
    """Stops a backbone's forward at its first block (:meth:`LabModel.first_block_input`)."""


class LabModel(nn.Module):
    """Adapter -> backbone -> pooled features -> linear head, returning logits [B, num_outputs].

    ``pool_layer``: ``None`` pools the final hidden state; ``l`` pools ``hidden_states[l]`` (0 = embedding
    output), which probing uses. As in transformers, the last hidden state of GPT-2 and Llama is taken
    after their final norm, the earlier ones straight from the blocks.

    ``body_eval``: the backbone stays in eval mode (no dropout) even while the lab model trains; protocols
    set it when no backbone parameter trains. ``tokenizer`` rides along for the caller (may be ``None``).
    """

    def __init__(self, backbone: nn.Module, info: BackboneInfo, adapter: nn.Module, head: nn.Linear, *,
                 pooling: str, tokenizer: Any = None) -> None:
        super().__init__()
        POOLINGS[pooling]  # unknown pooling: an error listing the valid ones
        self.backbone = backbone
        self.adapter = adapter
        self.head = head
        self.info = info
        self.pooling = pooling
        self.pool_layer: int | None = None
        self.tokenizer = tokenizer
        self._body_eval = False
        self._layout = structure(backbone).layout
        self._forward_kwargs = dict(self._layout.forward_kwargs)

    # ----------------------------------------------------------------------------------------------
    @property
    def structure(self) -> Structure:
        """The backbone's structure, built afresh (so it reflects re-ordered layers)."""
        return structure(self.backbone)

    @property
    def adapter_kind(self) -> str:
        return self.adapter.kind

    @property
    def num_outputs(self) -> int:
        return self.head.out_features

    @property
    def body_eval(self) -> bool:
        return self._body_eval

    @body_eval.setter
    def body_eval(self, value: bool) -> None:
        self._body_eval = bool(value)
        self.train(self.training)

    def train(self, mode: bool = True) -> "LabModel":
        super().train(mode)
        if self._body_eval:
            self.backbone.eval()
        return self

    def check_ids(self, splits) -> None:
        """Refuse, with the adapters' own error, data whose indices the input table has no row for: every
        example of ``splits`` (labcore.data.encode.Encoded), read on the host once."""
        check = getattr(self.adapter, "check_largest", None)
        if check is None:  # vectors, not indices
            return
        largest = max((int(x.max()) for split in splits for x in split.inputs if len(x)), default=-1)
        check(largest)

    # ----------------------------------------------------------------------------------------------
    def _mask(self, inputs: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        if attention_mask is None:
            return torch.ones(inputs.shape[:2], dtype=torch.long, device=inputs.device)
        return attention_mask

    def _run(self, inputs: torch.Tensor, attention_mask: torch.Tensor, **extra: Any):
        embeds = self.adapter(inputs)
        return self.backbone(inputs_embeds=embeds, attention_mask=attention_mask, **self._forward_kwargs,
                             **extra)

    def features(self, inputs: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The pooled vector the head sees, [B, hidden]."""
        mask = self._mask(inputs, attention_mask)
        if self.pool_layer is None:
            pooled = self._pooled_rows_only(inputs, mask)
            if pooled is not None:
                return pooled
            hidden = self._run(inputs, mask).last_hidden_state
        else:
            if not 0 <= self.pool_layer <= self.info.num_layers:
                raise LabError(f"pool_layer {self.pool_layer} does not exist: this model has hidden states "
                               f"0..{self.info.num_layers} (0 = embedding output)")
            hidden = self._run(inputs, mask, output_hidden_states=True).hidden_states[self.pool_layer]
        return POOLINGS[self.pooling](hidden, mask)

    def _pooled_rows_only(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
        """The pooled features with the last block computed for the pooled rows only, or ``None`` where the
        pooling reads more than one row or the family has no rows-only block."""
        row_of = POOLED_ROW.get(self.pooling)
        if row_of is None:
            return None
        layers = self._layout.layers(self.backbone)
        compute = self._layout.rows_block(layers[-1])
        if compute is None:
            return None
        hidden = run_pooled_rows(layers, row_of(mask), compute,
                                 lambda: self._run(inputs, mask).last_hidden_state)
        return hidden[:, 0]

    def forward(self, inputs: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.features(inputs, attention_mask))

    def hidden_states(self, inputs: torch.Tensor,
                      attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Every layer's output, [B, L, hidden] each: index 0 is the embedding output, then one per layer."""
        mask = self._mask(inputs, attention_mask)
        return tuple(self._run(inputs, mask, output_hidden_states=True).hidden_states)

    def first_block_input(self, embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """What the first block receives from input embeddings [B, L, embedding size]: ``hidden_states[0]``,
        the embeddings with the backbone's positions (and its embedding norm and projection where the family
        has them), [B, L, hidden], computed without running any block (ORCA's embedder output)."""
        captured: list[torch.Tensor] = []

        def grab(_module: nn.Module, args: tuple, kwargs: dict) -> None:
            captured.append(args[0] if args else kwargs["hidden_states"])
            raise _ReachedFirstBlock

        handle = self._layout.layers(self.backbone)[0].register_forward_pre_hook(grab, with_kwargs=True)
        try:
            self.backbone(inputs_embeds=embeds, attention_mask=attention_mask, **self._forward_kwargs)
        except _ReachedFirstBlock:
            pass
        finally:
            handle.remove()
        return captured[0]

    def pooled_from_embeddings(self, embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The pooled last-layer representation [B, hidden] from input embeddings [B, L, hidden] (what
        the adapter gives): the function whose Jacobian Kao & Lee appendix F.1 studies."""
        hidden = self.backbone(inputs_embeds=embeds, attention_mask=attention_mask,
                               **self._forward_kwargs).last_hidden_state
        return POOLINGS[self.pooling](hidden, attention_mask)

    def attentions(self, inputs: torch.Tensor,
                   attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Attention maps, one [B, heads, L, L] tensor per layer application."""
        implementation = getattr(self.backbone.config, "_attn_implementation", None)
        if implementation != "eager":
            raise LabError(f"attention maps need eager attention, and this model runs {implementation!r} "
                           f"(which returns no maps); build it with attn_implementation='eager'")
        mask = self._mask(inputs, attention_mask)
        return tuple(self._run(inputs, mask, output_attentions=True).attentions)


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(total, trainable) parameter counts; a tensor shared by several modules counts once."""
    total = trainable = 0
    for param in model.parameters():
        total += param.numel()
        if param.requires_grad:
            trainable += param.numel()
    return total, trainable


def _resolve_pooling(pooling: str, info: BackboneInfo) -> str:
    if pooling == "auto":
        return "last" if info.kind == "decoder" else "cls"
    POOLINGS[pooling]
    return pooling


def build_lab_model_from(base_model: nn.Module, tokenizer: Any, info: BackboneInfo, *, adapter: str,
                         num_outputs: int, pooling: str = "auto", vocab_rows: tuple[int, ...] | None = None,
                         n_symbols: int = 0, vector_dim: int = 0, seed: int = 0) -> LabModel:
    """Wrap a loaded base model (it is taken over: its word table moves into the adapter, its pooler goes).

    ``pooling="auto"`` is ``cls`` for encoders and ``last`` for decoders. The new adapter and head are
    drawn from ``seed`` (independently of each other), with the family's initialiser.
    """
    factory = INPUT_ADAPTERS[adapter]
    if num_outputs <= 0:
        raise LabError(f"num_outputs must be positive (classes, bits or 1 for regression), got {num_outputs}")
    pooling = _resolve_pooling(pooling, info)
    struct = structure(base_model)
    table = struct.word_embeddings
    with seeded(seed, "adapter", adapter):
        input_adapter = factory(struct, table, vocab_rows=vocab_rows, n_symbols=n_symbols, vector_dim=vector_dim)
    # The big table is either inside the adapter now or no longer needed: keep it out of the backbone.
    struct.layout.set_word_embeddings(
        base_model, DetachedEmbedding(getattr(table, "num_embeddings", 0), struct.embedding_size))
    struct.layout.drop_unused(base_model)
    with seeded(seed, "head"):  # nn.Linear draws its default init from the global generator
        head = nn.Linear(int(base_model.config.hidden_size), num_outputs)
        struct.init_module(head)
    model = LabModel(base_model, info, input_adapter, head, pooling=pooling, tokenizer=tokenizer)
    model.train(base_model.training)
    return model


def build_lab_model(backbone_name: str, init: str = "pretrained", *, adapter: str, num_outputs: int,
                    pooling: str = "auto", vocab_rows: tuple[int, ...] | None = None, n_symbols: int = 0,
                    vector_dim: int = 0, seed: int = 0, attn_implementation: str = "sdpa") -> LabModel:
    """Load a backbone (:func:`load_backbone`) and wrap it with an input adapter and a linear head."""
    INPUT_ADAPTERS[adapter]  # fail before loading weights
    base_model, tokenizer, info = load_backbone(backbone_name, init, seed=seed,
                                                attn_implementation=attn_implementation)
    return build_lab_model_from(base_model, tokenizer, info, adapter=adapter, num_outputs=num_outputs,
                                pooling=pooling, vocab_rows=vocab_rows, n_symbols=n_symbols,
                                vector_dim=vector_dim, seed=seed)
