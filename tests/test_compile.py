"""Blocks compiled with torch.compile train the same step as eager ones (TRANSFERLAB_COMPILE=1)."""

from __future__ import annotations

import copy

import pytest
import torch

from labcore.machine import device as devices
from labcore.models import build_lab_model_from, load_backbone
from labcore.models.cpu_kernels import use_cpu_kernels

# fp32: the compiled kernels sum in another order (fused, vectorised), so the last bits differ; 1e-5 of the
# value is a thousand times what that moves and a thousandth of what one wrong term would.
TOLERANCE = dict(rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # compiling takes 20-60 s on 2 shared CPU cores
def test_a_compiled_step_gives_the_eager_loss_and_gradients(monkeypatch, tmp_path):
    monkeypatch.setenv(devices.COMPILE_SETTING, "1")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    base, tokenizer, info = load_backbone("tiny:bert", "pretrained", seed=0)
    eager = build_lab_model_from(base, tokenizer, info, adapter="vocab", num_outputs=3)
    use_cpu_kernels(eager.backbone)
    compiled, notes = devices.maybe_compile(copy.deepcopy(eager))
    assert notes and all(p1.data_ptr() != p2.data_ptr() for p1, p2 in zip(eager.parameters(), compiled.parameters()))
    assert [n for n, _ in compiled.named_parameters()] == [n for n, _ in eager.named_parameters()]
    ids = torch.randint(5, 40, (4, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(4, 12, dtype=torch.long)
    mask[1, 7:] = 0
    labels = torch.tensor([0, 1, 2, 0])
    results = []
    for model in (eager, compiled):
        model.eval()  # dropout off: the compiled blocks draw their masks from other random numbers
        loss = torch.nn.functional.cross_entropy(model(ids, mask), labels)
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    torch.testing.assert_close(results[1][0], results[0][0], **TOLERANCE)
    for name, grad in results[0][1].items():
        torch.testing.assert_close(results[1][1][name], grad, **TOLERANCE, msg=name)
