"""How a job trains on its device: the precision, torch's settings and compiling, in one place.

* :func:`resolve_precision`: ``auto`` is bf16 autocast where the hardware has native bf16 (a GPU that supports
  it, a CPU with AMX, or one with AVX-512 BF16 whose bf16 products measured faster than fp32's), else fp32;
  :func:`setup` turns TF32 matmuls on for fp32 on CUDA.
* :func:`maybe_compile`: the model's blocks compiled where ``TRANSFERLAB_COMPILE=1``.

Which device a job trains on and what it is (labcore.machine.hardware: :func:`choose_device`, :func:`budget_device`,
:func:`visible_gpus`, :func:`loss_every` ...), and the device's measured matmul rate, FLOPs a token and MFU
(labcore.machine.rates: :func:`peak_flops`, :func:`speed_fields` ...), are re-exported here: callers reach the whole
device through this module.

Importing this module imports no torch; the functions that need it import it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from labcore import paths
from labcore.machine.hardware import (  # noqa: F401  (re-exported for callers)
    LOSS_EVERY, SETTING, budget_device, choose_device, cpu_flags, describe, kind, least_used_gpu, loss_every,
    peak_memory_mb, requested, torch_has_cuda, visible_gpus, worker_gpus)
from labcore.machine.rates import (  # noqa: F401  (re-exported for callers)
    PEAK_READING_S, PEAK_READINGS, PEAK_SIDE, RATE_READINGS, bf16_fp32_rates, bf16_measured_faster,
    measure_matmul_flops, mfu, module_flops_per_token, peak_flops, rate_key, speed_fields, training_flops_per_token)

COMPILE_SETTING = "TRANSFERLAB_COMPILE"
GRAPHS_SETTING = "TRANSFERLAB_GRAPHS"  # "0": a spec's step "auto" resolves to eager on CUDA too


def graphs_wanted(device: str) -> bool:
    """Whether a run on ``device`` replays its steps from CUDA graphs (labcore.engine.step) when its spec leaves
    the step to the lab: on CUDA unless the setting says 0. Read where a spec is resolved, so it imports no torch."""
    return str(device).startswith("cuda") and os.environ.get(GRAPHS_SETTING, "1") != "0"


def resolve_step(requested_step: str, device: str) -> str:
    """A spec's step (labcore.runspec.STEPS) for a job that trains on ``device``: ``auto`` is ``graphs`` where
    :func:`graphs_wanted`, else ``eager``; any other value stays as it is. Imports no torch."""
    if requested_step != "auto":
        return requested_step
    return "graphs" if graphs_wanted(device) else "eager"


# ------------------------------------------------------------------------------------------- precision
def native_bf16(device: str) -> bool:
    """bf16 pays off only where the hardware has it: CUDA with bf16 support, a CPU with AMX, or a CPU with
    AVX-512 BF16 whose bf16 products measured faster than its fp32 ones (:func:`bf16_measured_faster`).

    Without either a CPU emulates bf16: on a 2-core AMD EPYC without them (one thread, a shared machine), a
    1024 x 1024 matrix product ran at 0.2-0.3 GFLOP/s in bf16 against 13-23 in fp32, and the lab's MiniLM
    fine-tune step (dna-splice, batch 16) at 0.3-0.4 samples/s under bf16 autocast against 1.7-5.7 in fp32
    (``bench/throughput.py --precisions``). AVX-512 BF16 alone does not settle it: on a 2-core Intel Xeon with
    it and no AMX, 2048-square products ran at about 167 GFLOP/s in bf16 and 330 in fp32, and the lab's step
    was slower under bf16 autocast. Until this machine's rates are measured (:func:`resolve_precision` does it
    once) the flag stands for it. Reads files only: pages call it without torch."""
    if kind(device) == "cuda":
        import torch

        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    flags = cpu_flags()
    if "amx_bf16" in flags:
        return True
    if "avx512_bf16" not in flags:
        return False
    faster = bf16_measured_faster()
    return True if faster is None else faster


def precision_notes(requested_precision: str, precision: str, device: str) -> list[str]:
    """Why ``auto`` gave ``precision`` where the CPU's flags alone do not decide it, for the run's record."""
    rates = bf16_fp32_rates()
    if requested_precision != "auto" or kind(device) != "cpu" or "amx_bf16" in cpu_flags() or \
            "avx512_bf16" not in cpu_flags() or rates is None:
        return []
    return [f"{precision}: this CPU has AVX-512 BF16 without AMX, and its bf16 products measured "
            f"{rates[0] / 1e9:,.0f} GFLOP/s against fp32's {rates[1] / 1e9:,.0f}"]


def resolve_precision(requested_precision: str, device: str) -> str:
    """``bf16`` or ``fp32``: ``auto`` is bf16 where the device has native bf16, else fp32. On a CPU with AVX-512
    BF16 and no AMX both precisions' peaks are measured first (once per machine, a few seconds each)."""
    if requested_precision != "auto":
        return requested_precision
    if kind(device) == "cpu" and "avx512_bf16" in cpu_flags() and "amx_bf16" not in cpu_flags() and \
            bf16_measured_faster() is None:
        for precision in ("bf16", "fp32"):
            peak_flops(device, precision)
    return "bf16" if native_bf16(device) else "fp32"


def autocast(precision: str, device: str, cache: bool = True):
    """The autocast context a forward runs in (none for fp32). ``cache=False``: no cache of cast weights, which a
    CUDA graph cannot keep across captures (each forward casts once anyway)."""
    if precision == "bf16":
        import torch

        return torch.autocast(device_type=kind(device), dtype=torch.bfloat16, cache_enabled=cache)
    return contextlib.nullcontext()


def setup(device: str, precision: str) -> list[str]:
    """Set torch up for training on ``device`` in ``precision``; notes for the run's record.

    On CUDA: the current device, TF32 tensor cores for fp32 matmuls and convolutions (10-bit mantissa
    products, fp32 accumulation: the speed of bf16 inputs at fp32 range), and SDPA without its cuDNN backend:
    cuDNN builds an attention plan for each new shape, and in the MLM step, whose lengths and masked-row
    counts change every batch, its backward took 2.7 ms of host time a call on an H100 (32 ms a RoBERTa-base
    step, more than the GPU's whole step); the flash and memory-efficient kernels need no plan."""
    import torch

    if kind(device) != "cuda":
        return []
    index = torch.device(device).index
    if index is not None:  # plain "cuda" is the current device already; set_device wants an index
        torch.cuda.set_device(index)
    torch.cuda.reset_peak_memory_stats()
    torch.backends.cuda.enable_cudnn_sdp(False)
    notes = [f"on {describe(device)} ({device}); attention by SDPA (flash / memory-efficient kernels)"]
    if precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        notes.append("fp32 with TF32 matrix products")
    return notes


def compile_enabled() -> bool:
    """``TRANSFERLAB_COMPILE=1`` turns torch.compile on. Off by default: on 2 Intel Xeon cores (fp32, MiniLM,
    batch 16) compiled blocks trained slower than eager ones: 0.78x on dna-splice and 0.61x on text-sentiment
    (``bench/levers.py``, medians of two interleaved rounds), since the step's time is mostly its matrix
    products, which compiling leaves to the same library; the compile took about 46 s cold and 3-4 s from the
    warm cache."""
    return paths.env_switch(COMPILE_SETTING, False, "1 to compile models with torch.compile, or 0 (the default) "
                                                    "not to")


def compile_blocks(model: Any) -> Any:
    """A lab model's transformer blocks each compiled on their own (regional compilation), in place.

    Every block has the same graph, so one compile serves all of them; the input adapter (whose range check
    reads a value to the host) and the pooled-row last block (a module swapped in for one forward) stay eager,
    outside any graph. The module keeps its parameters and their names: protocols and checkpoints see the
    same model. Compiled code is kept under the lab cache (``inductor/``), so a machine pays a cold compile
    once and later processes load it."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(paths.cache_dir() / "inductor"))
    for block in model.structure.layers:
        block.compile()  # static shapes first; torch makes a length dynamic once it changes
    return model


def maybe_compile(module: Any) -> tuple[Any, list[str]]:
    """``module`` (a lab model) with its blocks compiled where :func:`compile_enabled`, with a note; else as it
    is."""
    if not compile_enabled():
        return module, []
    return compile_blocks(module), ["blocks compiled with torch.compile (TRANSFERLAB_COMPILE=1)"]

