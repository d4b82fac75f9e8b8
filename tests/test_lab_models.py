"""Lab models: a backbone with an input adapter, a head and pooling; their forward, vocabulary slicing, input
checks, seeding, attention maps and state. Tiny random backbones (``tiny:<family>``), no asset."""

from __future__ import annotations

import pytest
import torch

from labcore.errors import LabError, UnknownNameError
from labcore.models import DetachedEmbedding, build_lab_model, count_parameters
from test_models import FAMILIES, lab, tiny

# Tiny models run fastest on one thread, and the machine's cores are shared.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def batch(seed: int = 0, vocab: int = 50, length: int = 7):
    """Two sequences, the second right-padded by three positions."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (2, length), generator=g)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, -3:] = 0
    ids[1, -3:] = 0
    return ids, mask


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("adapter", ["vocab", "embedding", "linear"])
def test_forward_shapes_for_every_family_and_adapter(family, adapter):
    model = lab(family, adapter, num_outputs=4, n_symbols=9, vector_dim=5)
    ids, mask = batch()
    inputs = {"vocab": ids, "embedding": ids % 9, "linear": torch.randn(2, 7, 5)}[adapter]
    assert model(inputs, mask).shape == (2, 4)
    assert model.features(inputs, mask).shape == (2, 64)
    assert model.adapter_kind == adapter
    assert model.pooling == ("last" if family in ("gpt2", "llama") else "cls")
    # the backbone never keeps a word table of its own in a lab model
    assert isinstance(model.structure.word_embeddings, DetachedEmbedding)
    assert not any(p.shape[0] == 50 for n, p in model.backbone.named_parameters())


def test_backbone_table_is_gone_and_pooler_dropped():
    model = lab("bert")
    with pytest.raises(LabError, match="input adapter"):
        model.backbone(input_ids=torch.tensor([[2, 3]]))
    assert model.backbone.pooler is None
    names = [n for n, _ in model.named_parameters()]
    assert names[0].startswith("backbone.") and "adapter.embedding.weight" in names
    assert names[-2:] == ["head.weight", "head.bias"]


@pytest.mark.parametrize("family", ["bert", "roberta", "gpt2", "llama"])
def test_sliced_vocabulary_gives_identical_logits_and_gradients(family):
    rows = (0, 2, 3, 7, 11, 19, 23, 31, 42, 49)
    full = lab(family, seed=1)
    sliced = lab(family, seed=1, vocab_rows=rows)
    full.eval()
    sliced.eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor(rows)[torch.randint(0, len(rows), (3, 6), generator=g)]
    mask = torch.ones_like(ids)
    mask[2, -2:] = 0
    ids[2, -2:] = 0
    compact = sliced.adapter.compact(ids)
    assert torch.equal(torch.tensor(rows)[compact], ids)
    out_full, out_sliced = full(ids, mask), sliced(compact, mask)
    torch.testing.assert_close(out_full, out_sliced, rtol=0, atol=0)
    weights = torch.randn(out_full.shape, generator=g)
    (out_full * weights).sum().backward()
    (out_sliced * weights).sum().backward()
    g_full, g_sliced = full.adapter.embedding.weight.grad, sliced.adapter.embedding.weight.grad
    torch.testing.assert_close(g_sliced, g_full[list(rows)], rtol=0, atol=0)
    unused = [i for i in range(50) if i not in rows]
    assert torch.all(g_full[unused] == 0)
    for (name, a), b in zip(full.named_parameters(), sliced.parameters()):
        if not name.startswith("adapter."):
            torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0, msg=name)
    total_full, _ = count_parameters(full)
    total_sliced, _ = count_parameters(sliced)
    assert total_full - total_sliced == (50 - len(rows)) * 64


def test_sliced_vocabulary_keeps_the_padding_row_frozen():
    model = lab("bert", vocab_rows=(0, 5, 9))
    assert model.adapter.embedding.padding_idx == 0
    assert lab("bert", vocab_rows=(5, 9)).adapter.embedding.padding_idx is None


def test_vocab_rows_are_validated_and_compact_rejects_unkept_ids():
    with pytest.raises(LabError, match="strictly increasing"):
        lab("bert", vocab_rows=(5, 3))
    with pytest.raises(LabError, match="strictly increasing"):
        lab("bert", vocab_rows=(3, 50))
    model = lab("bert", vocab_rows=(3, 8, 9))
    assert model.adapter.compact(torch.tensor([[9, 3, 8]])).tolist() == [[2, 0, 1]]
    with pytest.raises(LabError, match=r"\[4\]"):
        model.adapter.compact(torch.tensor([[3, 4]]))
    with pytest.raises(LabError, match="compact indices"):
        model(torch.tensor([[3, 8]]))


def test_adapters_check_their_inputs():
    with pytest.raises(LabError, match="n_symbols"):
        lab("bert", "embedding")
    with pytest.raises(LabError, match="vector_dim"):
        lab("bert", "linear")
    with pytest.raises(UnknownNameError, match="vocab, embedding, linear"):
        lab("bert", "conv")
    with pytest.raises(LabError, match="LongTensor"):
        lab("bert")(torch.randn(1, 3, 64))
    with pytest.raises(LabError, match=r"\[batch, length, 5\]"):
        lab("bert", "linear", vector_dim=5)(torch.randn(1, 3, 4))
    with pytest.raises(LabError, match="n_symbols=4"):
        lab("bert", "embedding", n_symbols=4)(torch.tensor([[1, 4]]))


def test_a_runs_splits_are_checked_on_the_host_with_the_adapters_words():
    from labcore.data.encode import Encoded
    import numpy as np

    def split(*rows):
        return Encoded([np.asarray(r, dtype=np.int64) for r in rows], np.zeros(len(rows), dtype=np.int64))

    model = lab("bert", "embedding", n_symbols=4)
    model.check_ids([split([0, 3], [1]), split([2])])  # every index has a row
    with pytest.raises(LabError, match="symbol index 4 is out of range for n_symbols=4"):
        model.check_ids([split([0, 3]), split([4, 1])])
    lab("bert", "linear", vector_dim=5).check_ids([split([99])])  # vectors: nothing to check


def test_linear_adapter_is_orthogonal_with_fpt_gain():
    model = lab("gpt2", "linear", vector_dim=5)
    weight = model.adapter.linear.weight  # [64, 5]: orthogonal columns, each of norm 1.41
    torch.testing.assert_close(weight.T @ weight, 1.41 ** 2 * torch.eye(5), atol=1e-5, rtol=0)
    assert torch.all(model.adapter.linear.bias == 0)


def test_embedding_adapter_uses_the_family_initialiser():
    model = lab("bert", "embedding", n_symbols=300)
    weight = model.adapter.embedding.weight
    assert weight.shape == (300, 64) and weight.abs().max() <= 0.04 + 1e-7


def test_head_and_adapter_are_seeded_independently():
    a = lab("bert", "embedding", n_symbols=5, seed=3)
    b = lab("bert", "linear", vector_dim=4, seed=3)
    c = lab("bert", "embedding", n_symbols=5, seed=4)
    assert torch.equal(a.head.weight, b.head.weight)
    assert not torch.equal(a.head.weight, c.head.weight)
    assert not torch.equal(a.adapter.embedding.weight, c.adapter.embedding.weight)
    assert a.head.weight.abs().max() <= 0.04 + 1e-7 and torch.all(a.head.bias == 0)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_pooling_reads_the_right_positions(family):
    model = lab(family)
    model.eval()
    ids, mask = batch()
    hidden = model.backbone(inputs_embeds=model.adapter(ids), attention_mask=mask).last_hidden_state
    model.pooling = "cls"
    torch.testing.assert_close(model.features(ids, mask), hidden[:, 0])
    model.pooling = "last"
    torch.testing.assert_close(model.features(ids, mask), torch.stack([hidden[0, 6], hidden[1, 3]]))
    model.pooling = "mean"
    torch.testing.assert_close(model.features(ids, mask),
                               torch.stack([hidden[0].mean(0), hidden[1, :4].mean(0)]))


@pytest.mark.parametrize("family", ["bert", "albert", "llama"])
def test_pool_layer_reads_a_hidden_state(family):
    model = lab(family)
    model.eval()
    model.pooling = "mean"
    ids, mask = batch()
    out = model.backbone(inputs_embeds=model.adapter(ids), attention_mask=mask, output_hidden_states=True)
    n = model.info.num_layers
    assert len(out.hidden_states) == n + 1
    for layer in (0, 1, n):
        model.pool_layer = layer
        expected = (out.hidden_states[layer] * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
        torch.testing.assert_close(model.features(ids, mask), expected)
    model.pool_layer = n + 1
    with pytest.raises(LabError, match=f"0..{n}"):
        model.features(ids, mask)


def test_roberta_positions_do_not_depend_on_token_ids():
    # RoBERTa numbers positions from the ids (pad id -> pad position) unless given embeddings.
    model = lab("roberta")
    model.eval()
    ids = torch.tensor([[2, 0, 0, 11, 12]])  # the pad id inside a real sequence
    embeds = model.adapter(ids)
    positions = torch.arange(5).unsqueeze(0) + 1  # padding_idx 0, numbering starts at 1
    expected = model.backbone(inputs_embeds=embeds, position_ids=positions).last_hidden_state[:, 0]
    torch.testing.assert_close(model.features(ids), expected)


def test_body_eval_keeps_dropout_off_while_training():
    model = lab("bert")
    model.train()
    ids, mask = batch()
    assert model.backbone.training
    assert not torch.equal(model.features(ids, mask), model.features(ids, mask))  # dropout on
    model.body_eval = True
    assert model.training and not model.backbone.training and model.head.training
    assert torch.equal(model.features(ids, mask), model.features(ids, mask))
    model.train()
    assert not model.backbone.training
    model.body_eval = False
    assert model.backbone.training


@pytest.mark.parametrize("family", ["bert", "albert", "gpt2", "llama"])
def test_attention_maps_need_eager_attention(family):
    sdpa = lab(family)
    ids, mask = batch()
    with pytest.raises(LabError, match="attn_implementation='eager'"):
        sdpa.attentions(ids, mask)
    eager = lab(family, attn="eager")
    maps = eager.attentions(ids, mask)
    assert len(maps) == eager.info.num_layers
    assert all(m.shape == (2, 4, 7, 7) for m in maps)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 4, 7))
    assert torch.all(maps[-1][1, :, :, 4:] == 0)  # no attention to padding


def test_state_dict_round_trip_rebuilds_the_same_model():
    a = lab("llama", vocab_rows=(0, 3, 8, 20), seed=1)
    b = lab("llama", vocab_rows=(0, 3, 8, 20), seed=2)
    ids = torch.tensor([[1, 2, 3, 0]])
    a.eval()
    b.eval()
    assert not torch.equal(a(ids), b(ids))
    b.load_state_dict(a.state_dict())
    assert torch.equal(a(ids), b(ids))
    assert not any("embed_tokens" in key for key in a.state_dict())  # the detached table is not saved


def test_count_parameters():
    model = lab("bert")
    total, trainable = count_parameters(model)
    assert total == trainable == sum(p.numel() for p in model.parameters())
    model.head.weight.requires_grad_(False)
    assert count_parameters(model) == (total, total - model.head.weight.numel())


def test_build_lab_model_by_name():
    model = build_lab_model("tiny:albert", "random", adapter="linear", vector_dim=3, num_outputs=2, seed=1,
                            pooling="mean")
    assert model.info.init == "random" and model.pooling == "mean"
    assert model.adapter.linear.out_features == 32  # ALBERT's factorised embedding width
    assert model(torch.randn(2, 4, 3)).shape == (2, 2)
    with pytest.raises(UnknownNameError, match="cls, mean, last"):
        build_lab_model("tiny:bert", adapter="vocab", num_outputs=2, pooling="max")
