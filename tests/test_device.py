"""Device choice, precision, budgets per device, the loop's host reads, GPUs per worker and the record's speed
fields: everything of the GPU path that runs without a GPU (on one too: nothing here needs or forbids it)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from labcore import paths
from labcore.machine import device as devices
from labcore.execution import pool
from labcore.machine import rates as device_rates
from labcore.data.encode import Encoded
from labcore.errors import LabError
from labcore.engine.run import resolve_spec, run
from labcore.runspec import make_spec, train_defaults
from labcore.runspec.resolved import resolve_fields as resolve
from labcore.engine.train import TrainConfig, train

REPO = Path(__file__).resolve().parent.parent
CUDA = torch.cuda.is_available()


@pytest.fixture
def no_device_settings(monkeypatch):
    for name in (devices.SETTING, devices.COMPILE_SETTING, "TRANSFERLAB_RUN_GPUS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# ------------------------------------------------------------------------------------- device choice
def test_the_setting_chooses_the_device(no_device_settings):
    assert devices.choose_device() == ("cuda" if CUDA else "cpu")
    no_device_settings.setenv(devices.SETTING, "cpu")
    assert devices.choose_device() == "cpu"
    no_device_settings.setenv(devices.SETTING, " CPU ")
    assert devices.choose_device() == "cpu"


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:x", "tpu", "cuda:-1"])
def test_a_malformed_setting_names_itself_and_the_fix(no_device_settings, value):
    no_device_settings.setenv(devices.SETTING, value)
    with pytest.raises(LabError, match=r"TRANSFERLAB_DEVICE=.* is not a device; set it to cpu, cuda or cuda:N"):
        devices.choose_device()


@pytest.mark.skipif(CUDA, reason="this machine has a GPU")
@pytest.mark.parametrize("value", ["cuda", "cuda:1"])
def test_cuda_asked_without_cuda_says_how_to_go_on(no_device_settings, value):
    no_device_settings.setenv(devices.SETTING, value)
    with pytest.raises(LabError, match=rf"TRANSFERLAB_DEVICE={value} asks for a GPU, but torch .* sees none; "
                                       rf"set TRANSFERLAB_DEVICE=cpu"):
        devices.choose_device()


def test_a_run_names_the_setting_when_it_cannot_be_honoured(no_device_settings, tmp_path):
    no_device_settings.setenv(devices.SETTING, "cuda:99")
    with pytest.raises(LabError, match="TRANSFERLAB_DEVICE=cuda:99"):
        run(make_spec(**TINY), workdir=tmp_path)


def test_precision_follows_the_hardware_and_autocast_follows_the_precision():
    assert devices.resolve_precision("auto", "cpu") == ("bf16" if devices.native_bf16("cpu") else "fp32")
    assert devices.resolve_precision("fp32", "cpu") == "fp32" and devices.resolve_precision("bf16", "cpu") == "bf16"
    with devices.autocast("bf16", "cpu"):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.bfloat16
    with devices.autocast("fp32", "cpu"):
        assert not torch.is_autocast_enabled("cpu")
    assert devices.setup("cpu", "fp32") == []  # TF32 and the current device are CUDA's alone


@pytest.mark.parametrize("flags,bf16_rate,expected", [
    ({"avx512f", "avx512_bf16"}, 1.7e11, "fp32"),  # AVX-512 BF16 without AMX, bf16 products slower: fp32
    ({"avx512f", "avx512_bf16"}, 4.0e11, "bf16"),
    ({"avx512_bf16", "amx_bf16", "amx_tile"}, None, "bf16"),  # AMX: bf16 without measuring
    ({"avx2", "fma"}, None, "fp32"),  # no native bf16: fp32 without measuring
])
def test_auto_precision_on_a_cpu_is_the_one_whose_products_are_faster(monkeypatch, tmp_path, flags, bf16_rate,
                                                                         expected):
    monkeypatch.setenv("TRANSFERLAB_DEVICE_RATES", str(tmp_path / "device-rates.json"))  # none measured yet
    monkeypatch.setattr(devices, "cpu_flags", lambda: flags)
    measured = []

    def measure(device, precision, **_):
        measured.append(precision)
        return {"bf16": bf16_rate, "fp32": 3.3e11}[precision]

    monkeypatch.setattr(device_rates, "measure_matmul_flops", measure)  # peak_flops measures there
    assert devices.resolve_precision("auto", "cpu") == expected
    assert devices.native_bf16("cpu") == (expected == "bf16")  # pages read the same choice, without torch
    assert sorted(measured) == (["bf16", "fp32"] if bf16_rate else [])
    devices.resolve_precision("auto", "cpu")
    assert len(measured) == (2 if bf16_rate else 0)  # once per machine: the kept rates decide after that
    assert devices.resolve_precision("fp32", "cpu") == "fp32"
    notes = devices.precision_notes("auto", expected, "cpu")  # the record says why
    assert notes == ([f"{expected}: this CPU has AVX-512 BF16 without AMX, and its bf16 products measured "
                      f"{bf16_rate / 1e9:,.0f} GFLOP/s against fp32's 330"] if bf16_rate else [])
    assert devices.precision_notes("fp32", "fp32", "cpu") == []


def test_compile_is_off_unless_asked(no_device_settings):
    module = torch.nn.Linear(2, 2)
    assert devices.maybe_compile(module) == (module, [])
    no_device_settings.setenv(devices.COMPILE_SETTING, "yes")
    with pytest.raises(LabError, match="TRANSFERLAB_COMPILE='yes': set it to 1"):
        devices.compile_enabled()


def test_cpu_kernels_only_on_the_cpu():
    from labcore.models import build_lab_model_from, load_backbone
    from labcore.models.cpu_kernels import ATTENTION_NAME, KeepMaskDropout, kernels_for

    def lab():
        base, tokenizer, info = load_backbone("tiny:bert", "pretrained", seed=0)
        return build_lab_model_from(base, tokenizer, info, adapter="vocab", num_outputs=2)

    on_gpu, on_cpu = lab(), lab()
    assert kernels_for(on_gpu.backbone, "cuda:0") == []
    assert on_gpu.backbone.config._attn_implementation == "sdpa"
    assert not any(isinstance(m, KeepMaskDropout) for m in on_gpu.modules())
    assert kernels_for(on_cpu.backbone, "cpu")
    assert on_cpu.backbone.config._attn_implementation == ATTENTION_NAME
    assert any(isinstance(m, KeepMaskDropout) for m in on_cpu.modules())


# ------------------------------------------------------------------------------------ budgets per device
def test_standard_trains_larger_on_a_gpu_quick_and_paper_do_not():
    assert train_defaults("standard", "full", "cuda")["batch_size"] == 64
    assert train_defaults("standard", "full", "cuda")["lr"] == 1e-4
    assert train_defaults("standard", "frozen", "cuda")["batch_size"] == 128
    assert train_defaults("standard", "full", "cpu")["batch_size"] == 16
    for budget in ("quick", "paper"):
        for protocol in ("full", "frozen", "reinit_after"):
            assert train_defaults(budget, protocol, "cuda") == train_defaults(budget, protocol, "cpu")
    with pytest.raises(LabError, match="unknown device kind 'tpu'"):
        train_defaults("standard", "full", "tpu")


def test_text_is_longer_on_a_gpu_and_a_resolved_spec_keeps_its_key():
    spec = make_spec(discipline="text-sentiment", budget="standard")
    on_gpu, on_cpu = resolve(spec, "text", device="cuda"), resolve(spec, "text", device="cpu")
    assert on_gpu.max_length == 128 and on_gpu.batch_size == 64
    assert on_cpu.max_length == 0 and on_cpu.batch_size == 16
    assert resolve(on_cpu, "text", device="cuda") == on_cpu  # a CPU-resolved spec reaching a GPU worker
    assert resolve(on_gpu, "text", device="cpu") == on_gpu
    assert resolve(spec, "tokens", device="cuda").max_length == 0  # symbols keep the discipline's length
    assert resolve(make_spec(discipline="text-sentiment"), "text", device="cuda").max_length == 0  # quick


def test_submissions_resolve_for_where_the_jobs_will_train(no_device_settings):
    assert devices.budget_device() == ("cuda" if CUDA else "cpu")
    no_device_settings.setenv("TRANSFERLAB_RUN_GPUS", "1")  # runs ask a Ray cluster for a GPU each
    assert devices.budget_device() == "cuda"
    no_device_settings.setenv(devices.SETTING, "cpu")
    assert devices.budget_device() == "cpu"
    no_device_settings.setenv(devices.SETTING, "cuda:1")  # torch-free: no check that it exists
    assert devices.budget_device() == "cuda"
    assert resolve_spec(make_spec(budget="standard")).batch_size == 64


# ------------------------------------------------------------------------------- the loop's host reads
def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3, 2)).astype(np.float32)
    return Encoded(list(x), (x[:, :, 0].sum(1) > 0).astype(np.int64))


def _cfg(**changes):
    values = dict(optimizer="adam", lr=0.05, schedule="linear", warmup_ratio=0.1, batch_size=8, epochs=2,
                  max_steps=0, grad_clip=1.0, weight_decay=0.0, eval_every=100, patience=0, min_steps=0,
                  min_evals=0, seed=0, loss="ce", precision="fp32")
    return TrainConfig(**{**values, **changes})


def _tiny():
    torch.manual_seed(0)
    return torch.nn.Linear(2, 2)


def _train(cfg, forward=None, data=None):
    model = _tiny()
    forward = forward or (lambda b: model((b.inputs * b.mask[..., None]).mean(1)))
    return model, list(train(model, forward, data or _data(), cfg, evaluate=lambda: {"value": 0.0}))


def test_losses_are_read_every_loss_every_steps_and_events_carry_the_interval_mean():
    _, events = _train(_cfg(loss_every=4))  # 16 steps, one evaluation (the last step)
    end = events[-1]
    steps = [e for e in events if e["type"] == "step"]
    assert end["host_reads"] == 4 and [e["step"] for e in steps] == [4, 8, 12, 16]
    assert all(e["steps"] == 4 for e in steps)
    per_step = dict(end["losses"])  # the record keeps every step's loss
    assert sorted(per_step) == list(range(1, 17))
    for e in steps:
        assert e["loss"] == pytest.approx(np.mean([per_step[s] for s in range(e["step"] - 3, e["step"] + 1)]))


def test_an_evaluation_reads_what_is_pending_first():
    _, events = _train(_cfg(loss_every=5, eval_every=6))
    reads = [(e["step"], e["steps"]) for e in events if e["type"] == "step"]
    assert reads == [(5, 5), (6, 1), (10, 4), (12, 2), (15, 3), (16, 1)]
    evals = [e["step"] for e in events if e["type"] == "eval"]
    assert evals == [6, 12, 16]
    assert events[-1]["host_reads"] == len(reads)


def test_a_cpu_reads_every_step_and_cuda_every_25():
    assert _cfg().read_every == 1 and _cfg(device="cuda:0").read_every == 25 == devices.LOSS_EVERY["cuda"]
    _, events = _train(_cfg())
    assert events[-1]["host_reads"] == 16 and all(e["steps"] == 1 for e in events if e["type"] == "step")


def test_a_non_finite_loss_ends_the_run_at_the_step_it_broke():
    model = _tiny()
    calls = []

    def forward(batch):
        calls.append(1)
        out = model((batch.inputs * batch.mask[..., None]).mean(1))
        return out * math.inf if len(calls) == 6 else out

    events = list(train(model, forward, _data(), _cfg(loss_every=4), evaluate=lambda: {"value": 0.0}))
    end = events[-1]
    assert end["status"] == "diverged" and end["steps_done"] == 5
    assert "diverged at step 6: the training loss was nan" in end["error"]
    assert max(s for s, _ in end["losses"]) == 5
    assert [e["step"] for e in events if e["type"] == "step"] == [4]  # steps 5-8 had no event: the run ended
    assert all(torch.isfinite(p).all() for p in model.parameters())  # the weights handed back are sound


# ------------------------------------------------------------------------------------ GPUs per worker
def test_visible_gpus_come_from_the_environment(no_device_settings):
    no_device_settings.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert devices.visible_gpus() == ["2", "3"]
    no_device_settings.setenv("CUDA_VISIBLE_DEVICES", "1,-1,2")  # CUDA stops at the first invalid entry
    assert devices.visible_gpus() == ["1"]
    no_device_settings.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.visible_gpus() == []
    no_device_settings.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    no_device_settings.setenv(devices.SETTING, "cpu")
    assert devices.visible_gpus() == []


@pytest.mark.parametrize("gpus,count,expected", [
    (["0", "1"], 4, ["0", "1", "0", "1"]),
    (["0", "1", "2", "3"], 3, ["0", "1", "2"]),
    (["GPU-a", "GPU-b"], 2, ["GPU-a", "GPU-b"]),
    (["0"], 2, [None, None]),  # one GPU: every worker sees it, as without the supervisor
    ([], 2, [None, None]),
])
def test_the_supervisor_gives_each_worker_one_gpu(gpus, count, expected):
    assert devices.worker_gpus(count, gpus) == expected


def test_a_started_worker_gets_the_gpu_fewest_workers_hold(no_device_settings, store):
    no_device_settings.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert pool.next_gpu(store) == "0"
    store.register_worker(os.getpid(), state="idle", gpu="0")  # this process stands for a worker on GPU 0
    assert pool.next_gpu(store) == "1"
    assert pool._child_env("1")["CUDA_VISIBLE_DEVICES"] == "1"
    assert pool._child_env(None)["CUDA_VISIBLE_DEVICES"] == "0,1,2"  # None: it inherits what this process sees
    store.worker_heartbeat(os.getpid(), state="idle")  # a heartbeat keeps the GPU it registered with
    assert [w["gpu"] for w in store.workers(role="worker")] == ["0"]
    no_device_settings.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert pool.next_gpu(store) is None


# --------------------------------------------------------------------------------- the record's fields
TINY = dict(model="tiny:bert", discipline="bits-xor", precision="fp32", max_steps=6, eval_every=3, batch_size=16,
            discipline_params={"n_train": 64, "n_validation": 32, "n_test": 32})


def test_a_record_says_where_it_trained_and_how_fast(no_device_settings, tmp_path):
    no_device_settings.setenv(devices.SETTING, "cpu")
    record = run(make_spec(**TINY), workdir=tmp_path)
    assert record.status == "done" and record.device == "cpu" and record.device_name
    assert record.visible_gpus == [] and record.peak_memory_mb > 0
    assert record.tokens_per_s == pytest.approx(record.samples_per_s * record.train_tokens)
    assert record.flops_per_token > 0 and record.peak_flops > 0
    assert record.mfu == pytest.approx(record.tokens_per_s * record.flops_per_token / record.peak_flops)
    assert 0 < record.mfu < 1
    assert record.host_reads == record.steps_done == 6  # a CPU reads every step
    rates = json.loads(paths.device_rates_path().read_text())
    assert rates[devices.rate_key("cpu", "fp32")]["flops_per_s"] == record.peak_flops


def test_the_peak_rate_keeps_the_best_of_its_first_readings(tmp_path):
    path = tmp_path / "rates.json"
    key = devices.rate_key("cpu", "fp32")
    first = devices.peak_flops("cpu", "fp32", path=path)
    assert first > 0 and json.loads(path.read_text())[key]["readings"] == 1
    path.write_text(json.dumps({key: {"flops_per_s": 1e15, "readings": 1}}))  # as if a quiet machine measured it
    assert devices.peak_flops("cpu", "fp32", path=path) == 1e15  # a slower reading does not replace it
    assert json.loads(path.read_text())[key]["readings"] == 2
    path.write_text(json.dumps({key: {"flops_per_s": 123.0, "readings": devices.RATE_READINGS}}))
    assert devices.peak_flops("cpu", "fp32", path=path) == 123.0  # enough readings: read back, not measured
    path.write_text("not json")  # a damaged file is measured again and rewritten
    assert devices.peak_flops("cpu", "fp32", path=path) > 0 and json.loads(path.read_text())


def test_every_cache_on_a_machine_reads_its_one_rates_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TRANSFERLAB_DEVICE_RATES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    assert paths.device_rates_path() == tmp_path / "user" / "transferlab" / "device-rates.json"
    assert paths.device_rates_path().parent == paths.downloads_dir().parent  # the machine's, beside the downloads
    key = devices.rate_key("cpu", "fp32")
    paths.device_rates_path().parent.mkdir(parents=True)
    paths.device_rates_path().write_text(json.dumps({key: {"flops_per_s": 123.0, "readings": devices.RATE_READINGS}}))
    for cache in ("lab-a", "lab-b"):  # a new cache measures nothing: the machine's figure stands
        monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / cache))
        assert devices.peak_flops("cpu", "fp32") == 123.0
    monkeypatch.setenv("TRANSFERLAB_DEVICE_RATES", str(tmp_path / "elsewhere.json"))
    assert paths.device_rates_path() == tmp_path / "elsewhere.json"


def test_flops_per_token_counts_trained_and_frozen_products():
    assert devices.training_flops_per_token(100, 0, 0, 0, 10) == 600
    assert devices.training_flops_per_token(0, 100, 2, 8, 10) == 400 + 12 * 2 * 8 * 10
    model = torch.nn.Sequential(torch.nn.Embedding(50, 4), torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    model[2].weight.requires_grad_(False)
    assert devices.module_flops_per_token(model, 7) == 6 * 12 + 4 * 6  # the embedding table is a lookup
    assert devices.mfu(10.0, 5.0, 100.0) == 0.5 and devices.mfu(1.0, 1.0, 0.0) == 0.0


# ------------------------------------------------------------------------------------------ the bench
@pytest.mark.skipif(CUDA, reason="on a GPU machine the bench measures instead")
def test_the_gpu_bench_says_there_is_no_gpu_and_exits_0():
    env = {k: v for k, v in os.environ.items() if k != devices.SETTING}
    done = subprocess.run([sys.executable, "bench/gpu.py"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "no CUDA device here" in done.stdout and "--try-on-cpu" in done.stdout
