"""A RoBERTa-shaped encoder with an MLM head that decodes the masked positions only.

Why only those: the decoder is a [hidden x 30,522] product. Over every position of a batch of 32 x 128 it
costs more than the whole 4-layer body of the CPU default size, and 85 % of its rows are thrown away by the
loss. Gathering the ~15 % masked rows first computes the same loss (the other rows never enter it) for a
seventh of the decoder's work, forward and backward. The same holds one block earlier: the last block's
queries, attention output and feed-forward are computed for the masked rows alone (its keys and values
still from every row, :func:`labcore.models.pooled_rows.bert_rows`); on 2 busy CPU cores that took a
training step of the CPU default size from 1.90 s to 1.64 s (one thread, batch 32 x 107).

Masking (BERT/RoBERTa): 15 % of the real, non-special positions are chosen; of those 80 % become [MASK],
10 % a random ordinary token, 10 % stay. Draws come from torch's global generator, which the training loop
seeds and stores in its checkpoints, so a resumed pretraining masks as the uninterrupted one would have.

A CUDA graph needs shapes that do not depend on the draws: :func:`mask_tokens_static` chooses the same positions
but hands them on as a fixed number of prediction slots per sequence (:func:`prediction_slots`), the empty ones
ignored by the loss, and :meth:`MaskedLM.forward_rows` decodes those slots.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from labcore.pretrain.spec import ModelSize

VOCAB_SIZE = 30_522
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 100, 101, 102, 103  # MiniLM's WordPiece specials
MASK_PROB = 0.15
IGNORED = -100  # the target of an empty prediction slot (cross_entropy's ignore_index)
SLOT_SIGMAS = 4  # prediction slots: the expected masked count plus this many standard deviations


def roberta_config(size: ModelSize) -> Any:
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=size.hidden, num_hidden_layers=size.layers,
        num_attention_heads=size.heads, intermediate_size=size.ffn,
        # RoBERTa numbers positions from pad_token_id + 1, so the table needs max_length + 1 rows
        max_position_embeddings=size.max_length + PAD_ID + 1, type_vocab_size=1,
        pad_token_id=PAD_ID, bos_token_id=CLS_ID, eos_token_id=SEP_ID, architectures=["RobertaModel"])


class MaskedLM(nn.Module):
    """``body`` (a transformers RobertaModel without pooler) and RoBERTa's LM head (dense, GELU, layer norm,
    decoder tied to the word embeddings), applied to the gathered masked rows."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        config = body.config
        self.body = body
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.rows_only = True  # the last block for the masked rows alone (False: every row, to compare)

    def masked_rows(self, ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The last hidden state at ``positions`` [M, H], the last block computed for those rows only (its
        keys and values still from every row): each sequence's masked positions, padded to the most any
        sequence has (about a fifth of the rows), through :func:`labcore.models.pooled_rows.bert_rows`."""
        from labcore.models.pooled_rows import bert_rows, run_pooled_rows

        batch, length = ids.shape
        sequence, position = positions // length, positions % length
        counts = torch.bincount(sequence, minlength=batch)
        slot = torch.arange(len(positions), device=ids.device) - (torch.cumsum(counts, 0) - counts)[sequence]
        rows = torch.zeros(batch, max(1, int(counts.max())), dtype=torch.long, device=ids.device)
        rows[sequence, slot] = position
        hidden = run_pooled_rows(self.body.encoder.layer, rows, bert_rows,
                                 lambda: self.body(input_ids=ids, attention_mask=attention_mask).last_hidden_state)
        return hidden[sequence, slot]

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.body.embeddings.word_embeddings

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """ids, attention_mask [B, L]; positions [M] flat indices into B x L, ascending -> logits [M, vocab]."""
        rows = self.masked_rows(ids, attention_mask, positions) if self.rows_only else \
            self.body(input_ids=ids, attention_mask=attention_mask).last_hidden_state.reshape(
                -1, self.body.config.hidden_size).index_select(0, positions)
        return self.decode(rows)

    def forward_rows(self, ids: torch.Tensor, attention_mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """ids, attention_mask [B, L]; rows [B, R] the positions each sequence predicts -> logits [B x R, vocab].
        Shapes follow the arguments' alone (no value is read to the host): the step a CUDA graph holds."""
        from labcore.models.pooled_rows import bert_rows, run_pooled_rows

        batch, length = ids.shape
        hidden_size = self.body.config.hidden_size
        if self.rows_only:
            hidden = run_pooled_rows(self.body.encoder.layer, rows, bert_rows,
                                     lambda: self.body(input_ids=ids, attention_mask=attention_mask).last_hidden_state)
        else:
            hidden = self.body(input_ids=ids, attention_mask=attention_mask).last_hidden_state.gather(
                1, rows.unsqueeze(-1).expand(-1, -1, hidden_size))
        return self.decode(hidden.reshape(-1, hidden_size))

    def decode(self, rows: torch.Tensor) -> torch.Tensor:
        """RoBERTa's LM head on hidden rows [N, H] -> logits [N, vocab]."""
        rows = self.norm(nn.functional.gelu(self.dense(rows)))
        return nn.functional.linear(rows, self.word_embeddings.weight, self.bias)


def build_masked_lm(size: ModelSize, seed: int) -> MaskedLM:
    from transformers import RobertaModel

    from labcore.models.seeding import seeded

    with seeded(seed, "pretrain"):
        body = RobertaModel(roberta_config(size), add_pooling_layer=False)
        model = MaskedLM(body)
    return model


HEAD_FILE = "mlm_head.safetensors"  # the LM head beside a lab model's body (loading the backbone ignores it)


def load_masked_lm(folder: str) -> MaskedLM:
    """A lab model's body and MLM head, to go on pretraining it (another corpus, or embeddings only)."""
    from pathlib import Path

    from safetensors.torch import load_file
    from transformers import RobertaModel

    body = RobertaModel.from_pretrained(folder, add_pooling_layer=False, dtype=torch.float32)
    model = MaskedLM(body)
    model.load_state_dict({**{f"body.{k}": v for k, v in body.state_dict().items()},
                           **load_file(str(Path(folder) / HEAD_FILE))})
    return model


def train_embeddings_only(model: MaskedLM) -> None:
    """Chiang §4.4: the word embeddings and the LM head train, the rest of the body stays as it is."""
    for parameter in model.body.parameters():
        parameter.requires_grad_(False)
    model.word_embeddings.weight.requires_grad_(True)


def choose_positions(ids: torch.Tensor, attention_mask: torch.Tensor, prob: float,
                     generator: torch.Generator | None) -> torch.Tensor:
    """[B, L] bool: the real, non-special positions drawn at ``prob`` (one draw over [B, L]); where the draw chose
    none in the whole batch, its first such position, so that a batch always teaches something. Decided on the
    device: no value is read to the host."""
    candidates = attention_mask.bool() & (ids != CLS_ID) & (ids != SEP_ID) & (ids != PAD_ID)
    chosen = (torch.rand(ids.shape, generator=generator, device=ids.device) < prob) & candidates
    first = candidates & (torch.cumsum(candidates.view(-1).long(), 0) == 1).view_as(candidates)
    return torch.where(chosen.any(), chosen, first)


def mask_tokens(ids: torch.Tensor, attention_mask: torch.Tensor, replacements: torch.Tensor, *,
                prob: float = MASK_PROB, generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(inputs, positions, targets)``: the corrupted ids [B, L], the flat indices of the chosen positions
    [M] and their original ids [M]. ``replacements`` are the ids a random replacement draws from."""
    chosen = choose_positions(ids, attention_mask, prob, generator)
    positions = chosen.view(-1).nonzero().squeeze(1)
    flat = ids.reshape(-1).clone()
    targets = flat[positions]
    u = torch.rand(positions.shape, generator=generator, device=ids.device)
    flat[positions[u < 0.8]] = MASK_ID
    swap = positions[(u >= 0.8) & (u < 0.9)]
    pick = torch.randint(len(replacements), swap.shape, generator=generator, device=ids.device)
    flat[swap] = replacements.to(ids.device)[pick]
    return flat.view_as(ids), positions, targets


def prediction_slots(length: int, prob: float = MASK_PROB) -> int:
    """The prediction slots a sequence of ``length`` positions has in :func:`mask_tokens_static`: the expected
    masked count plus :data:`SLOT_SIGMAS` standard deviations (at length 128: 36 slots for a mean of 19.2), so a
    sequence has more chosen positions than slots about once in 30,000."""
    mean = prob * length
    return max(1, min(length, math.ceil(mean + SLOT_SIGMAS * math.sqrt(mean * (1 - prob)))))


def mask_tokens_static(ids: torch.Tensor, attention_mask: torch.Tensor, replacements: torch.Tensor, *,
                       prob: float = MASK_PROB, generator: torch.Generator | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(inputs, rows, targets)`` as :func:`mask_tokens` chooses them, in shapes that depend on ``ids``'s alone:
    ``rows`` [B, R] (R = :func:`prediction_slots`) holds each sequence's chosen positions in ascending order, then
    filler positions; ``targets`` [B, R] their original ids, :data:`IGNORED` at the filler. The positions chosen
    are the ones :func:`mask_tokens` chooses from the same generator state (one draw over [B, L] decides both);
    a sequence with more than R keeps its first R, the rest left uncorrupted and untaught. The 80/10/10 split is
    drawn over the slots, so the corrupted ids differ from :func:`mask_tokens`'s."""
    chosen = choose_positions(ids, attention_mask, prob, generator)
    slots = prediction_slots(ids.shape[1], prob)
    rows = torch.argsort((~chosen).to(torch.uint8), dim=1, stable=True)[:, :slots]
    taught = chosen.gather(1, rows)
    original = ids.gather(1, rows)
    u = torch.rand(rows.shape, generator=generator, device=ids.device)
    pick = torch.randint(len(replacements), rows.shape, generator=generator, device=ids.device)
    corrupted = torch.where(u < 0.8, MASK_ID, torch.where(u < 0.9, replacements.to(ids.device)[pick], original))
    inputs = ids.scatter(1, rows, torch.where(taught, corrupted, original))
    return inputs, rows, torch.where(taught, original, IGNORED)


def substitute_rows(embeddings: torch.Tensor, used: torch.Tensor, unused: torch.Tensor) -> None:
    """50-substitute (Chiang §4.3): the row of each unused id becomes a copy of a used id's row, the used
    ids taken in turn (unused[j] <- used[j mod len(used)]), so every token of the fine-tuning text starts
    from an embedding the body has learnt to read. Special and used rows are left as they are."""
    with torch.no_grad():
        embeddings[unused] = embeddings[used[torch.arange(len(unused)) % len(used)]]
