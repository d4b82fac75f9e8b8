"""The last block computed for the pooled rows only gives the full block's rows and gradients."""

from __future__ import annotations

import pytest
import torch

from labcore.models import build_lab_model_from, load_backbone, structure
from labcore.models.cpu_kernels import use_cpu_kernels
from labcore.models.pooled_rows import mask_rows, run_pooled_rows, take_rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def lab(family: str, attn: str = "sdpa", pooling: str = "cls"):
    model, tokenizer, info = load_backbone(f"tiny:{family}", "pretrained", seed=0, attn_implementation=attn)
    return build_lab_model_from(model, tokenizer, info, adapter="vocab", num_outputs=3, pooling=pooling)


def batch():
    """Three sequences, the second and third right-padded (so the 'last' rows differ)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 50, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 2:] = 0
    return ids * mask, mask


def full_features(model, ids, mask):
    """What the pooling reads from the whole last hidden state (the path without the rows-only block)."""
    from labcore.models.lab_model import POOLINGS

    hidden = model.backbone(inputs_embeds=model.adapter(ids), attention_mask=mask).last_hidden_state
    return POOLINGS[model.pooling](hidden, mask)


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("attn", ["sdpa", "eager", "lab_cpu"])
@pytest.mark.parametrize("pooling", ["cls", "last"])
def test_rows_only_block_equals_the_full_block(family, attn, pooling):
    model = lab(family, "sdpa" if attn == "lab_cpu" else attn, pooling)
    if attn == "lab_cpu":
        use_cpu_kernels(model.backbone)
    model.eval()
    ids, mask = batch()
    torch.testing.assert_close(model.features(ids, mask), full_features(model, ids, mask))


@pytest.mark.parametrize("pooling", ["cls", "last"])
def test_rows_only_block_gives_the_same_gradients(pooling):
    model = lab("bert", pooling=pooling)
    model.eval()  # dropout off, gradients on
    ids, mask = batch()
    target = torch.tensor([0, 1, 2])

    def grads(logits):
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(logits, target).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    fast = grads(model(ids, mask))
    slow = grads(model.head(full_features(model, ids, mask)))
    assert fast.keys() == slow.keys()
    # Every weight of the last block still learns (the key and value projections from all rows).
    last = structure(model.backbone).layers[-1]
    assert {id(p) for p in last.parameters()} <= {id(p) for n, p in model.named_parameters() if n in fast}
    for name in fast:
        torch.testing.assert_close(fast[name], slow[name], msg=name)


def test_the_last_block_really_runs_one_row_per_sequence():
    model = lab("bert")
    widths = []
    last = structure(model.backbone).layers[-1]
    handle = last.intermediate.register_forward_hook(lambda _m, args, _out: widths.append(args[0].shape[1]))
    ids, mask = batch()
    model(ids, mask)
    model.pooling = "mean"  # reads every row: the whole block runs
    model(ids, mask)
    handle.remove()
    assert widths == [1, 9]


@pytest.mark.parametrize("family", ["albert", "gpt2", "llama"])
def test_families_without_a_rows_only_block_run_the_whole_block(family):
    model = lab(family, pooling="cls")
    layout = structure(model.backbone).layout
    assert layout.rows_block(structure(model.backbone).layers[-1]) is None
    model.eval()
    ids, mask = batch()
    torch.testing.assert_close(model.features(ids, mask), full_features(model, ids, mask))


def test_the_stand_in_leaves_even_when_the_forward_fails():
    model = lab("bert")
    layers = structure(model.backbone).layers
    last = layers[-1]

    def boom():
        assert type(layers[-1]).__name__ == "RowsBlock"
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_pooled_rows(layers, torch.zeros(3, dtype=torch.long), lambda *a: None, boom)
    assert layers[-1] is last
    assert all(type(m).__name__ != "RowsBlock" for m in model.modules())


def test_take_rows_and_mask_rows():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).view(2, 4, 3)
    rows = torch.tensor([3, 1])
    torch.testing.assert_close(take_rows(hidden, rows), torch.stack([hidden[0, 3:4], hidden[1, 1:2]]))
    mask = torch.arange(1 * 1 * 4 * 4, dtype=torch.float32).view(1, 1, 4, 4)  # shared by the batch
    cut = mask_rows(mask, rows)
    assert cut.shape == (2, 1, 1, 4)
    torch.testing.assert_close(cut[:, 0, 0], torch.stack([mask[0, 0, 3], mask[0, 0, 1]]))
    shared = torch.zeros(2, 1, 1, 4)
    assert mask_rows(shared, rows) is shared and mask_rows(None, rows) is None
