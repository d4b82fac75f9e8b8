"""The graph-ready step (labcore.engine.step) on a CPU: length buckets, the learning rate on the device, gradients
zeroed in place. It must train exactly as the eager step does; on CUDA the same code is captured and replayed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from labcore.data.encode import Encoded
from labcore.engine.step import bucket_length, pad_batch
from labcore.machine.device import graphs_wanted
from labcore.engine.train import TrainConfig, train
from labcore.models import build_lab_model_from
from labcore.models.backbones import backbone_info


def _lab_model(pooling: str) -> torch.nn.Module:
    # No dropout: padding to a bucket moves where dropout's random numbers fall, which is not what is compared.
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    config._attn_implementation = "sdpa"
    base = BertModel(config, add_pooling_layer=False)
    info = backbone_info("tiny bert (random init)", base, None, init="random")
    return build_lab_model_from(base, None, info, adapter="vocab", num_outputs=3, pooling=pooling, seed=0)


def _data(n: int = 96) -> Encoded:
    rng = np.random.default_rng(0)
    rows = [np.concatenate([[1], rng.integers(3, 40, int(length)), [2]]) for length in rng.integers(3, 37, n)]
    labels = np.array([int(row[1]) % 3 for row in rows])
    return Encoded(rows, labels)


def _cfg(graphs: bool, device: str = "cpu") -> TrainConfig:
    return TrainConfig(optimizer="adamw", lr=1e-2, schedule="linear", warmup_ratio=0.1, batch_size=8, epochs=10,
                       max_steps=50, grad_clip=1.0, weight_decay=0.01, eval_every=25, patience=0, min_steps=0,
                       min_evals=0, seed=0, loss="ce", precision="fp32", device=device, graphs=graphs)


def _losses(graphs: bool, pooling: str) -> list[float]:
    model = _lab_model(pooling)
    cfg = _cfg(graphs)
    events = list(train(model, lambda b: model(b.inputs, b.mask), _data(), cfg,
                        evaluate=lambda: {"value": 0.0, "loss": 0.0}))
    end = events[-1]
    assert end["type"] == "train_end" and end["steps_done"] == 50
    assert ("step_note" in end) == graphs
    return [value for _, value in end["losses"]]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_the_graph_ready_step_trains_as_the_eager_step_to_1e_5(pooling):
    eager, ready = _losses(False, pooling), _losses(True, pooling)
    assert len(eager) == len(ready) == 50
    assert np.mean(eager[-10:]) < np.mean(eager[:10]) - 0.1  # it learns: the comparison covers moving weights
    np.testing.assert_allclose(ready, eager, rtol=1e-5)


def test_a_model_with_compiled_blocks_is_not_captured():
    # With torch.compile'd blocks the first eager step after another model's graphs failed in dropout's random-number
    # bookkeeping on an H200: such a model takes the bucketed step uncaptured (the loop is only built here, not run).
    from labcore.engine.train import LoopHooks, TrainingLoop

    model = _lab_model("cls")

    def loop():
        return TrainingLoop(model, lambda b: model(b.inputs, b.mask), _data(), _cfg(True, "cuda"),
                            LoopHooks(evaluate=lambda: {"value": 0.0}))

    assert loop().graphed.capture
    model.structure.layers[0].compile()
    assert not loop().graphed.capture
    assert "eager" in loop().graphed.note()


def test_buckets_bound_the_padding_and_end_at_the_longest_example():
    assert [bucket_length(n, 512) for n in (1, 16, 17, 25, 33, 49, 65, 97, 129, 200)] == \
        [16, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert all(bucket_length(n, 512) < 1.5 * n + 16 for n in range(1, 513))
    assert bucket_length(130, 140) == 140 and bucket_length(140, 140) == 140
    assert len({bucket_length(n, 512) for n in range(1, 513)}) <= 14  # few shapes: one graph each


def test_a_padded_batch_keeps_its_rows_and_masks_the_rest():
    from labcore.data.encode import collate

    data = _data(8)
    batch = collate(data, np.arange(8))
    padded = pad_batch(batch, batch.inputs.shape[1] + 5)
    assert padded.inputs.shape[1] == batch.inputs.shape[1] + 5
    assert torch.equal(padded.inputs[:, :batch.inputs.shape[1]], batch.inputs)
    assert int(padded.mask[:, batch.inputs.shape[1]:].sum()) == 0
    assert pad_batch(batch, batch.inputs.shape[1]) is batch


def test_graphs_are_a_cuda_matter_and_the_setting_turns_them_off(monkeypatch):
    assert not graphs_wanted("cpu")
    assert graphs_wanted("cuda:0")
    monkeypatch.setenv("TRANSFERLAB_GRAPHS", "0")
    assert not graphs_wanted("cuda:0")


def test_a_cpu_run_keeps_the_eager_step_and_its_key_and_a_gpu_key_names_the_graphs():
    import hashlib
    import json

    from labcore.engine.resolve import resolve
    from labcore.engine.run import train_config
    from labcore.runspec import RESULTS_REVISION, make_spec

    spec = make_spec(model="minilm", discipline="dna-splice", budget="quick")
    on_cpu, on_gpu = resolve(spec, "cpu"), resolve(spec, "cuda")
    assert (on_cpu.step, on_gpu.step) == ("eager", "graphs")
    assert not train_config(on_cpu, loss="ce", precision="fp32", device="cpu").graphs
    assert train_config(on_gpu, loss="ce", precision="bf16", device="cuda").graphs
    # the eager key is the one the spec had before it had a step: every stored CPU result keeps its key
    before = {k: v for k, v in on_cpu.to_dict().items() if k != "step"}
    text = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert on_cpu.key == hashlib.sha256(f"r{RESULTS_REVISION}:{text}".encode()).hexdigest()[:20]
    assert dataclasses.replace(on_gpu, step="eager").key != on_gpu.key  # the GPU's padded steps are other results
    # an explicit choice stands, and the setting turns graphs off where they would be chosen
    assert resolve(spec.replace(step="eager"), "cuda").step == "eager"
    assert resolve(spec.replace(step="graphs"), "cpu").step == "graphs"


def test_the_setting_keeps_a_gpu_run_eager(monkeypatch):
    from labcore.engine.resolve import resolve
    from labcore.runspec import make_spec

    monkeypatch.setenv("TRANSFERLAB_GRAPHS", "0")
    assert resolve(make_spec(model="minilm", discipline="dna-splice"), "cuda").step == "eager"
