"""CPU training kernels: the keep-mask dropout, its fused C kernel, and the lab's attention function.

Eval-mode outputs must equal SDPA's for every family (padding and causal masks included), the dropout
noise must have the distribution of inverted dropout (by torch's keep masks and by the fused kernel alike),
and swapping kernels must not touch parameters.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from labcore.errors import LabError
from labcore.machine import native
from labcore.models import build_lab_model_from, load_backbone
from labcore.models.cpu_kernels import (
    ATTENTION_NAME,
    KeepMaskDropout,
    dropout_kind,
    fused_dropout,
    fused_dropout_kernels,
    keep_mask,
    keep_mask_dropout,
    use_cpu_kernels,
)

FAMILIES = ("bert", "roberta", "albert", "gpt2", "llama")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def lab(family: str, attn: str = "sdpa"):
    model, tokenizer, info = load_backbone(f"tiny:{family}", "pretrained", seed=0, attn_implementation=attn)
    return build_lab_model_from(model, tokenizer, info, adapter="vocab", num_outputs=3)


def padded_batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, -4:] = 0
    mask[2, -1:] = 0
    return ids, mask


def test_keep_mask_has_the_distribution_of_inverted_dropout():
    torch.manual_seed(0)
    noise = keep_mask((2000, 1000), 0.1, torch.float32, "cpu")
    kept = noise > 0
    assert torch.unique(noise).tolist() == [0.0, pytest.approx(65536 / (65536 - 6554))]
    # 2M draws: the keep rate's standard error is 2.1e-4
    assert kept.float().mean().item() == pytest.approx(1 - 6554 / 65536, abs=1e-3)
    assert noise.mean().item() == pytest.approx(1.0, abs=1.5e-3)
    # No position is favoured: each of the four quarters of a random word keeps at the same rate.
    by_quarter = kept.view(-1, 4).float().mean(0)
    assert (by_quarter - by_quarter.mean()).abs().max().item() < 3e-3


def test_keep_mask_follows_torch_seed_and_p_edges():
    torch.manual_seed(3)
    a = keep_mask((5, 7), 0.5, torch.float32, "cpu")
    torch.manual_seed(3)
    b = keep_mask((5, 7), 0.5, torch.float32, "cpu")
    assert torch.equal(a, b)
    assert torch.equal(keep_mask((4, 4), 0.0, torch.float32, "cpu"), torch.ones(4, 4))
    with pytest.raises(LabError, match=r"\[0, 1\)"):
        keep_mask((2,), 1.0, torch.float32, "cpu")


def test_keep_mask_dropout_is_identity_in_eval_and_masks_gradients():
    x = torch.randn(4, 6, requires_grad=True)
    assert keep_mask_dropout(x, 0.3, training=False) is x
    torch.manual_seed(1)
    y = keep_mask_dropout(x, 0.3, training=True)
    y.sum().backward()
    scale = 65536 / (65536 - round(0.3 * 65536))
    kept = y.detach() != 0
    assert torch.allclose(y.detach()[kept], x.detach()[kept] * scale)
    assert torch.allclose(x.grad, kept.float() * scale)  # gradient flows exactly where kept
    module = KeepMaskDropout(0.3).eval()
    assert module(x) is x


SCALE_01 = 65536 / (65536 - 6554)  # p = 0.1 rounded to 6554 / 65536


@pytest.fixture
def fused():
    """The fused dropout kernel, built with this machine's compiler (every machine the tests run on has one)."""
    try:
        fused_dropout_kernels()
    except native.NativeUnavailable as exc:
        pytest.fail(f"the fused dropout kernel did not build here: {exc}")


@pytest.mark.usefixtures("fused")
def test_fused_dropout_has_the_distribution_of_inverted_dropout():
    torch.manual_seed(0)
    noise = fused_dropout(torch.ones(2048, 1024), 0.1)
    kept = noise > 0
    assert torch.unique(noise).tolist() == [0.0, pytest.approx(SCALE_01)]
    # 2M draws: the keep rate's standard error is 2.1e-4
    assert kept.float().mean().item() == pytest.approx(1 - 6554 / 65536, abs=1e-3)
    assert noise.mean().item() == pytest.approx(1.0, abs=1.5e-3)
    # No position is favoured: the four quarters of a word, and the places in a thread's block, keep alike.
    for group in (4, 1024):
        by_place = kept.view(-1, group).float().mean(0)
        assert (by_place - by_place.mean()).abs().max().item() < 6 * (0.09 / (kept.numel() / group)) ** 0.5
    # Neighbours are independent: the rate of "both kept" is the square of the rate.
    flat = kept.view(-1).float()
    assert (flat[1:] * flat[:-1]).mean().item() == pytest.approx(flat.mean().item() ** 2, abs=1.5e-3)


@pytest.mark.usefixtures("fused")
def test_fused_dropout_follows_torch_seed_not_the_thread_count():
    x = torch.randn(3, 1031)  # not a whole number of words or of a thread's blocks
    torch.manual_seed(5)
    one = fused_dropout(x, 0.5)
    torch.set_num_threads(2)
    torch.manual_seed(5)
    two = fused_dropout(x, 0.5)
    assert torch.equal(one, two)
    assert not torch.equal(one, fused_dropout(x, 0.5))  # the next call draws another seed
    assert 0.4 < (one == 0).float().mean().item() < 0.6
    assert fused_dropout(torch.empty(0, 4), 0.5).shape == (0, 4)
    assert torch.equal(fused_dropout(x, 0.0), x)
    with pytest.raises(LabError, match=r"\[0, 1\)"):
        fused_dropout(x, 1.0)


@pytest.mark.usefixtures("fused")
def test_fused_dropout_gradient_is_the_same_mask():
    x = torch.randn(6, 40, 5, requires_grad=True)
    torch.manual_seed(2)
    y = fused_dropout(x.transpose(0, 1), 0.1)  # a non-contiguous input
    grad = torch.randn(6, 5, 40).permute(2, 0, 1)  # and a non-contiguous gradient, in y's shape [40, 6, 5]
    y.backward(grad)
    kept = y.detach() != 0
    assert torch.equal(y.detach()[kept], x.detach().transpose(0, 1)[kept] * SCALE_01)
    assert torch.equal(x.grad, torch.where(kept, grad * SCALE_01, 0.0).transpose(0, 1))


@pytest.mark.usefixtures("fused")
def test_fused_dropout_in_bf16_rounds_as_torch_and_keeps_nan():
    x = torch.randn(64, 100).bfloat16()
    x[0, :8] = float("nan")
    torch.manual_seed(1)
    y = fused_dropout(x, 0.3)
    scale = 65536 / (65536 - round(0.3 * 65536))
    kept = y != 0
    assert y.dtype == torch.bfloat16
    assert torch.equal(y[kept & ~x.isnan()], (x.float() * scale).bfloat16()[kept & ~x.isnan()])
    assert y[0, :8].isnan().all()  # dropped or kept, a NaN stays one (x * 0 is NaN in torch too)
    assert 0.25 < 1 - kept.float().mean().item() < 0.35


def test_keep_masks_stand_in_where_the_kernel_is_off(monkeypatch):
    monkeypatch.setenv(native.NATIVE_SETTING, "0")
    assert dropout_kind().startswith("keep masks from 16-bit thresholds") and "TRANSFERLAB_NATIVE=0" in dropout_kind()
    x = torch.ones(4000)
    torch.manual_seed(7)
    y = keep_mask_dropout(x, 0.1, training=True)
    torch.manual_seed(7)
    assert torch.equal(y, keep_mask((4000,), 0.1, torch.float32, "cpu"))  # torch's keep masks, value for value


@pytest.mark.usefixtures("fused")
def test_dropout_under_vmap_uses_keep_masks():
    x = torch.ones(3, 500)
    out = torch.func.vmap(lambda row: keep_mask_dropout(row, 0.5, training=True), randomness="same")(x)
    assert out.shape == x.shape and set(torch.unique(out).tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("family", FAMILIES)
def test_lab_attention_equals_sdpa_in_eval(family):
    ids, mask = padded_batch()
    reference = lab(family).eval()
    switched = lab(family).eval()
    use_cpu_kernels(switched.backbone)
    assert switched.backbone.config._attn_implementation == ATTENTION_NAME
    with torch.no_grad():
        want = reference(ids, mask)
        got = switched(ids, mask)
        want_hidden = reference.features(ids, mask)
        got_hidden = switched.features(ids, mask)
    assert torch.allclose(got, want, atol=1e-5)
    assert torch.allclose(got_hidden, want_hidden, atol=1e-5)


@pytest.mark.parametrize("family", ("bert", "gpt2", "llama"))
def test_lab_attention_gradients_equal_sdpa_without_dropout(family):
    ids, mask = padded_batch()
    models = [lab(family), lab(family)]
    use_cpu_kernels(models[1].backbone)
    grads = []
    for model in models:
        model.train()
        for module in model.modules():  # dropout off in both: the comparison is of the attention maths
            if hasattr(module, "p"):
                module.p = 0.0
        for module in model.backbone.modules():
            for name in ("attention_dropout", "dropout_prob"):
                if isinstance(getattr(module, name, None), float):
                    setattr(module, name, 0.0)
        model.zero_grad()
        model(ids, mask).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5), name


def test_use_cpu_kernels_swaps_every_dropout_and_keeps_parameters():
    model = lab("bert")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    probabilities = sorted(m.p for m in model.backbone.modules() if type(m) is nn.Dropout)
    notes = use_cpu_kernels(model.backbone)
    assert not any(type(m) is nn.Dropout for m in model.backbone.modules())
    assert sorted(m.p for m in model.backbone.modules() if isinstance(m, KeepMaskDropout)) == probabilities
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert any("dropout" in n for n in notes) and any("attention" in n for n in notes)
    assert any(dropout_kind() in n for n in notes)  # the record says how the masks were drawn
    evaluated = lab("bert").eval()
    use_cpu_kernels(evaluated.backbone)  # a model in eval mode stays there, new modules included
    assert not any(m.training for m in evaluated.modules())


def test_eager_models_keep_eager_attention_for_their_maps():
    model = lab("bert", attn="eager")
    use_cpu_kernels(model.backbone)
    assert model.backbone.config._attn_implementation == "eager"
    ids, mask = padded_batch()
    assert len(model.eval().attentions(ids, mask)) == 2


def test_training_with_cpu_kernels_is_reproducible():
    ids, mask = padded_batch()
    losses = []
    for _ in range(2):
        torch.manual_seed(0)
        model = lab("bert")
        use_cpu_kernels(model.backbone)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        run = []
        for _ in range(3):
            loss = model(ids, mask).logsumexp(-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[0] == losses[1]


@pytest.mark.usefixtures("fused")
def test_a_resumed_run_with_fused_dropout_equals_an_uninterrupted_one(tmp_path):
    import numpy as np

    from labcore.data.encode import Encoded
    from labcore.engine.train import TrainConfig, train

    g = np.random.default_rng(0)
    data = Encoded([g.integers(5, 50, size=int(n)) for n in g.integers(4, 12, size=40)], g.integers(0, 3, size=40))
    cfg = TrainConfig(optimizer="adamw", lr=1e-3, schedule="linear", warmup_ratio=0.1, batch_size=8, epochs=2,
                      max_steps=0, grad_clip=1.0, weight_decay=0.01, eval_every=100, patience=0, min_steps=0,
                      min_evals=0, seed=0, loss="ce", precision="fp32")

    def trained(workdir=None, **kwargs):
        model = lab("bert")
        use_cpu_kernels(model.backbone)
        model.train()
        events = list(train(model, lambda b: model(b.inputs, b.mask), data, cfg, evaluate=lambda: {"value": 0.0},
                            workdir=workdir, **kwargs))
        return model, events

    torch.manual_seed(0)
    straight, _ = trained()
    calls = []
    torch.manual_seed(0)
    trained(tmp_path, should_stop=lambda: "interrupted" if calls.append(1) or len(calls) >= 4 else None)
    torch.manual_seed(1)  # the checkpoint's generator state, not this one, draws the rest of the masks
    resumed, events = trained(tmp_path, resume=True)
    assert [e["step"] for e in events if e["type"] == "step"][0] == 5
    for (name, a), b in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.equal(a, b), name
