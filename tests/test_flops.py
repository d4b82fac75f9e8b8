"""The step's FLOPs counted for what it computes, its linear products' shapes and floor, and the measured peak."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from labcore.machine import device as devices
from labcore.engine import flops
from labcore.data.encode import Encoded, collate
from labcore.models import build_lab_model_from, load_backbone
from labcore.models.cpu_kernels import use_cpu_kernels

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# tiny:bert (labcore.models.backbones): hidden 64, 2 layers, feed-forward 128; a head of 3 classes.
H, FFN, LAYERS, CLASSES = 64, 128, 2, 3


def lab(pooling: str = "cls"):
    base, tokenizer, info = load_backbone("tiny:bert", "pretrained", seed=0)
    model = build_lab_model_from(base, tokenizer, info, adapter="vocab", num_outputs=CLASSES, pooling=pooling)
    use_cpu_kernels(model.backbone)
    return model


def hand_count(batch: int, length: int) -> int:
    """A training step of the tiny pooled-row model, product by product (2 FLOPs a multiply-add; the backward
    of every product twice its forward: everything trains, the input embeddings too)."""
    full_block = (batch * length * (2 * 4 * H * H + 2 * 2 * H * FFN)  # Q, K, V, output; feed-forward
                  + batch * 2 * (2 * length * length * H))  # scores and weighted sum
    last_block = (batch * length * 2 * 2 * H * H  # keys and values for every row
                  + batch * (2 * 2 * H * H + 2 * 2 * H * FFN)  # query, output and feed-forward: pooled row only
                  + batch * 2 * (2 * length * H))  # one query row's scores and weighted sum
    head = batch * 2 * H * CLASSES  # once a sequence
    return 3 * ((LAYERS - 1) * full_block + last_block + head)


def test_a_pooled_row_step_counts_what_it_computes():
    model = lab()
    batch, length = 3, 10
    ids = torch.randint(5, 40, (batch, length), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(batch, length, dtype=torch.long)
    counted = flops.step_flops(model, lambda: model(ids, mask).sum())
    assert counted == hand_count(batch, length)
    # the dense estimate counts the whole last block and the head for every token: more than is computed
    dense = devices.module_flops_per_token(model, length) * batch * length
    assert dense > counted * 1.05


def test_flops_a_token_count_each_example_unpadded():
    model = lab()
    data = Encoded([np.arange(5, 5 + n) for n in (6, 10, 10, 14)], np.zeros(4, dtype=np.int64))
    per_token = flops.flops_per_token(model, lambda b: model(b.inputs, b.mask), data, count=4)
    assert per_token == pytest.approx(sum(hand_count(1, n) for n in (6, 10, 10, 14)) / 40)


def test_eight_lengths_are_read_off_four_counts_exactly(monkeypatch):
    model = lab()
    lengths = (3, 5, 6, 9, 11, 12, 16, 20)
    data = Encoded([np.arange(5, 5 + n) % 40 for n in lengths], np.zeros(len(lengths), dtype=np.int64))
    counted = []
    real = flops.step_flops

    def counting(module, loss):
        counted.append(1)
        return real(module, loss)

    monkeypatch.setattr(flops, "step_flops", counting)
    per_token = flops.flops_per_token(model, lambda b: model(b.inputs, b.mask), data)
    assert len(counted) == 4
    assert per_token == sum(hand_count(1, n) for n in lengths) / sum(lengths)


def test_a_count_that_is_no_quadratic_is_counted_at_every_length():
    asked = []

    def cubic(n: int) -> float:
        asked.append(n)
        return float(n ** 3 + 7)

    got = flops.flops_by_length(cubic, [2, 4, 5, 8, 10, 13])
    assert got == {n: float(n ** 3 + 7) for n in (2, 4, 5, 8, 10, 13)}
    assert sorted(set(asked)) == [2, 4, 5, 8, 10, 13] and len(asked) == 6


def test_counting_leaves_gradients_and_random_numbers_as_they_were():
    model = lab()
    model.train()
    ids, mask = torch.randint(5, 40, (2, 8)), torch.ones(2, 8, dtype=torch.long)
    model(ids, mask).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    state = torch.get_rng_state()
    flops.step_flops(model, lambda: model(ids, mask).sum())
    assert torch.equal(torch.get_rng_state(), state)
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, grads[n])


def test_frozen_weights_have_no_weight_gradient_product():
    model = lab()
    ids, mask = torch.randint(5, 40, (2, 8)), torch.ones(2, 8, dtype=torch.long)
    assert flops.step_flops(model, lambda: model(ids, mask).sum()) == hand_count(2, 8)
    for p in list(model.backbone.parameters()) + list(model.adapter.parameters()):
        p.requires_grad_(False)
    # the forward, then the head's weight gradient alone: nothing below the head needs an input gradient
    assert flops.step_flops(model, lambda: model(ids, mask).sum()) == hand_count(2, 8) // 3 + 2 * 2 * H * CLASSES


def test_linear_calls_see_the_pooled_rows_and_the_floor_times_every_product():
    model = lab()
    batch, length = 4, 12
    ids, mask = torch.randint(5, 40, (batch, length)), torch.ones(batch, length, dtype=torch.long)
    calls = flops.linear_calls(model, lambda: model(ids, mask))
    rows = [c.rows for c in calls]
    # first block: Q, K, V, output, feed-forward in and out on every row; last block: K and V on every row,
    # Q, output and feed-forward on the pooled row; then the head
    assert rows == [batch * length] * 6 + [batch, batch * length, batch * length] + [batch] * 3 + [batch]
    floor = flops.gemm_floor(calls, "fp32")
    linear = sum(2 * c.rows * c.inputs * c.outputs for c in calls)
    assert floor.flops == 3 * linear and floor.products == 3 * len(calls)
    assert floor.seconds > 0 and floor.flops_per_s > 0


def test_the_measured_peak_is_above_what_a_small_training_step_achieves():
    model = lab()
    data = Encoded([np.arange(5, 5 + 16) for _ in range(32)], np.zeros(32, dtype=np.int64))
    batch = collate(data, np.arange(32))
    per_step = flops.step_flops(model, lambda: model(batch.inputs, batch.mask).sum())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps, start = 10, time.perf_counter()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(batch.inputs, batch.mask), batch.labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    achieved = steps * per_step / (time.perf_counter() - start)
    peak = devices.measure_matmul_flops("cpu", "fp32", readings=2, reading_s=0.2)
    assert peak >= achieved
