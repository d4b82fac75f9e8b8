"""The training loop on a tiny module: events, divergence, stop requests, exact resume, best checkpoint."""

from __future__ import annotations

import numpy as np
import torch

from labcore.data.encode import Encoded, batch_order, subsample
from labcore.engine.train import TrainConfig, make_optimizer, steps_to_converge, train


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3, 2)).astype(np.float32)
    y = (x[:, :, 0].sum(1) > 0).astype(np.int64)
    return Encoded([row for row in x], y)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, inputs, mask):
        return self.lin((inputs * mask[..., None]).mean(1))


def _cfg(**changes):
    values = dict(optimizer="adam", lr=0.05, schedule="linear", warmup_ratio=0.1, batch_size=8, epochs=2,
                  max_steps=0, grad_clip=1.0, weight_decay=0.0, eval_every=4, patience=0, min_steps=0, min_evals=0,
                  seed=0, loss="ce", precision="fp32")
    values.update(changes)
    return TrainConfig(**values)


def _run(model, data, cfg, **kwargs):
    def evaluate():
        with torch.no_grad():
            from labcore.data.encode import collate
            batch = collate(data, np.arange(len(data)))
            logits = model(batch.inputs, batch.mask)
            return {"value": float((logits.argmax(-1) == batch.labels).float().mean()), "loss": 0.0}
    return list(train(model, lambda b: model(b.inputs, b.mask), data, cfg, evaluate=evaluate, **kwargs))


def test_events_and_learning():
    data = _data()
    events = _run(Tiny(), data, _cfg(epochs=6, lr=0.1, eval_every=8))
    steps = [e for e in events if e["type"] == "step"]
    assert len(steps) == 48 and steps[-1]["step"] == 48
    end = events[-1]
    assert end["type"] == "train_end" and end["status"] == "done"
    assert end["best_value"] >= 0.9
    assert [s for s, _ in end["val_curve"]] == [8, 16, 24, 32, 40, 48]


def test_optimizer_is_fused_on_cpu_and_steps_like_the_unfused_one():
    model = Tiny()
    params = list(model.parameters())
    for kind, cls in (("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)):
        fused = make_optimizer(_cfg(optimizer=kind, weight_decay=0.01), params)
        assert type(fused) is cls and fused.defaults["fused"] is True
    # The same update rule: a few steps of each from the same start agree to rounding.
    results = []
    for fused in (True, False):
        net = Tiny()
        opt = torch.optim.AdamW(net.parameters(), lr=0.05, weight_decay=0.01, fused=fused)
        x = torch.randn(16, 3, 2, generator=torch.Generator().manual_seed(1))
        for _ in range(5):
            opt.zero_grad()
            net(x, torch.ones(16, 3)).square().sum().backward()
            opt.step()
        results.append(torch.cat([p.detach().flatten() for p in net.parameters()]))
    assert torch.allclose(results[0], results[1], atol=1e-6)


def test_best_weights_are_restored():
    model = Tiny()
    data = _data()
    events = _run(model, data, _cfg())
    end = events[-1]
    assert end["best_value"] == max(v for _, v in end["val_curve"])


def test_divergence_stops_with_status():
    x = Encoded([np.full((2, 2), np.nan, dtype=np.float32)] * 8, np.zeros(8, dtype=np.int64))
    events = _run(Tiny(), x, _cfg())
    assert events[-1]["status"] == "diverged" and events[-1]["steps_done"] == 0


def test_stop_request_stops_after_one_step(tmp_path):
    calls = []

    def stop():
        calls.append(1)
        return "cancelled" if len(calls) >= 3 else None

    events = _run(Tiny(), _data(), _cfg(), workdir=tmp_path, should_stop=stop)
    assert events[-1]["status"] == "cancelled" and events[-1]["steps_done"] == 3
    assert (tmp_path / "resume.pt").is_file()


def test_resume_is_exact(tmp_path):
    data = _data()
    straight = Tiny()
    _run(straight, data, _cfg(eval_every=100))
    first = Tiny()
    calls = []
    _run(first, data, _cfg(eval_every=100), workdir=tmp_path,
         should_stop=lambda: "interrupted" if calls.append(1) or len(calls) >= 5 else None)
    resumed = Tiny()
    events = _run(resumed, data, _cfg(eval_every=100), workdir=tmp_path, resume=True)
    steps = [e["step"] for e in events if e["type"] == "step"]
    assert steps[0] == 6 and steps[-1] == 16  # the curve continues from the checkpoint step
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_steps_to_converge_definition():
    assert steps_to_converge([(10, 0.5), (20, 0.895), (30, 0.9), (40, 0.89)]) == 20
    assert steps_to_converge([]) is None


def test_bucketing_covers_every_example_once():
    lengths = np.random.default_rng(1).integers(1, 50, size=103)
    batches = batch_order(lengths, 8, shuffle=True, seed=0, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(103))
    assert [b.tolist() for b in batches] == [b.tolist() for b in batch_order(lengths, 8, shuffle=True, seed=0, epoch=0)]


def test_subsample_sizes():
    assert subsample(1000, ("full", 0), 0, 10, 0) is None
    assert len(subsample(1000, ("fraction", 0.01), 0, 10, 0)) == 10
    assert len(subsample(1000, ("count", 500), 0, 10, 0)) == 500
    assert len(subsample(1000, ("full", 0), 2000, 10, 0)) == 200


def test_budget_floors_fit_small_data():
    """Issue 13: 106 examples (85 to train) x 2 epochs were 12 steps with one evaluation."""
    from labcore.data.encode import subsample
    from labcore.engine.run import budget_notes

    cfg = _cfg(batch_size=16, epochs=2.0, eval_every=40, min_steps=150, min_evals=8)
    assert cfg.total_steps(85) == 150 and round(cfg.epochs_run(85), 1) == 25.0
    assert cfg.evaluate_every(85) == 18  # 150 // 8: at least 8 evaluations
    assert cfg.total_steps(2258) == 284 and cfg.evaluate_every(2258) == 40  # splice: 2 epochs, 8 evaluations, as before
    assert _cfg(batch_size=16, epochs=2.0, min_steps=150, max_steps=40).total_steps(85) == 40  # a cap still caps
    notes = budget_notes(cfg, 85)
    assert "25.0 epochs instead of 2" in notes[0] and "at least 150 steps" in notes[0]
    assert "validation every 18 steps instead of 40" in notes[1]
    # 960 sequences of 512 tokens: the 140k-token cap alone keeps 273, the floor 500.
    assert len(subsample(960, ("full", 0), 140_000, 512.0, 0)) == 273
    assert len(subsample(960, ("full", 0), 140_000, 512.0, 0, min_examples=500)) == 500
    assert subsample(300, ("full", 0), 140_000, 512.0, 0, min_examples=500) is None  # all 300 kept


def test_a_short_run_draws_a_validation_curve():
    data = _data(40)
    events = _run(Tiny(), data, _cfg(epochs=2, eval_every=40, min_steps=30, min_evals=8))
    evals = [e for e in events if e["type"] == "eval"]
    end = [e for e in events if e["type"] == "train_end"][0]
    assert end["total_steps"] == 30 and len(evals) >= 8


def test_early_stopping_waits_for_the_floor_of_min_steps():
    # lr 0: validation never improves after the first evaluation, so patience 1 stops at the second one, unless
    # the floor holds the run until min_steps
    data = _data()
    plain = _run(Tiny(), data, _cfg(epochs=6, lr=0.0, eval_every=4, patience=1))
    assert plain[-1]["status"] == "done" and max(e["step"] for e in plain if e["type"] == "step") == 8
    floored = _run(Tiny(), data, _cfg(epochs=6, lr=0.0, eval_every=4, patience=1, min_steps=20))
    assert floored[-1]["status"] == "done" and max(e["step"] for e in floored if e["type"] == "step") == 20
