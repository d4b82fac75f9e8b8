"""The device's measured matrix-product rate, a training step's FLOPs a token, and the MFU they give.

* :func:`peak_flops`: the device's measured matrix-product rate in a precision, measured once and kept in
  the machine's ``device-rates.json`` (:func:`labcore.paths.device_rates_path`; a CPU's figure per thread
  count): the denominator of a run's MFU.
  :func:`bf16_fp32_rates` reads a CPU's two kept figures back, for labcore.machine.device's choice of precision.
* :func:`training_flops_per_token` and :func:`module_flops_per_token`: the dense estimate of a step's FLOPs
  a token (a run's record counts what its step computes instead: labcore.engine.flops).
* :func:`mfu` and :func:`speed_fields`: the utilisation, and a record's device and speed fields.

labcore.machine.device re-exports these names. Importing this module imports no torch; the functions that need it
import it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from labcore import durable, paths
from labcore.machine.hardware import describe, kind, peak_memory_mb, visible_gpus

RATE_READINGS = 3  # matmul-rate measurements kept (their best) before the figure is only read back


# --------------------------------------------------------------------------------- measured peak rate
# The peak is what large square products sustain, not one small product timed once: a single 1024 x 1024
# product read 13-23 GFLOP/s on a 2-core AMD EPYC whose training step sustained more than 100 GFLOP/s. Square
# products of this side fill every thread's caches and vector units; each reading repeats them for at least
# PEAK_READING_S seconds (so a timer tick or one slow product does not decide it), and the best of
# PEAK_READINGS readings stands (others' work on a shared machine only ever lowers a reading).
PEAK_SIDE = {"cpu": 2048, "cuda": 8192}
PEAK_READINGS = 3
PEAK_READING_S = {"cpu": 1.0, "cuda": 0.5}


def measure_matmul_flops(device: str, precision: str, *, n: int = 0, readings: int = 0,
                         reading_s: float = 0.0) -> float:
    """FLOP/s of large n x n matrix products in ``precision`` on ``device`` at the threads as set: the best of
    ``readings`` readings, each the mean rate of back-to-back products over at least ``reading_s`` seconds."""
    import torch

    family = kind(device)
    n = n or PEAK_SIDE[family]
    readings = readings or PEAK_READINGS
    reading_s = reading_s or PEAK_READING_S[family]
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
    out = torch.empty(n, n, device=device, dtype=dtype)

    def sync() -> None:
        if family == "cuda":
            torch.cuda.synchronize()

    torch.matmul(a, b, out=out)  # warm-up: the library picks its kernel, pages are touched
    sync()
    best = 0.0
    for _ in range(readings):
        products, start = 0, time.perf_counter()
        while True:
            torch.matmul(a, b, out=out)
            products += 1
            if family == "cuda" and products % 8:
                continue  # time the GPU's queue in groups, not one launch at a time
            sync()
            elapsed = time.perf_counter() - start
            if elapsed >= reading_s:
                break
        best = max(best, 2 * n ** 3 * products / elapsed)
    return best


def rate_key(device: str, precision: str) -> str:
    """What a measured rate is kept under: the device's name and precision, and a CPU's thread count."""
    name = describe(device)
    if kind(device) == "cuda":
        import torch

        tf32 = "+tf32" if precision == "fp32" and torch.backends.cuda.matmul.allow_tf32 else ""
        return f"cuda|{name}|{precision}{tf32}|gemm {PEAK_SIDE['cuda']}"
    import torch

    # The products' side is part of the key: a figure another method measured is not this one.
    return f"cpu|{name}|{precision}|{torch.get_num_threads()} threads|gemm {PEAK_SIDE['cpu']}"


def peak_flops(device: str, precision: str, *, path: Path | None = None) -> float:
    """The device's matrix-product rate in ``precision`` (FLOP/s), kept in the machine's ``device-rates.json``.

    Measured by the first :data:`RATE_READINGS` callers (a run each, a few seconds: :func:`measure_matmul_flops`),
    keeping the best reading: one taken while other work held the cores would otherwise stand for the machine for
    good. After that the kept figure is read back without measuring."""
    path = path or paths.device_rates_path()
    key = rate_key(device, precision)
    entry = _read_rates(path).get(key)
    if entry is not None and entry["readings"] >= RATE_READINGS:
        return entry["flops_per_s"]
    rate = measure_matmul_flops(device, precision)
    rates = _read_rates(path)  # again: another process may have written meanwhile
    old = rates.get(key, {"flops_per_s": 0.0, "readings": 0})
    rates[key] = {"flops_per_s": max(rate, old["flops_per_s"]), "readings": old["readings"] + 1}
    path.parent.mkdir(parents=True, exist_ok=True)
    durable.write_json(path, rates, indent=1, sort_keys=True)
    return rates[key]["flops_per_s"]


def _read_rates(path: Path) -> dict[str, dict[str, float]]:
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # none yet, or a damaged file: measured again and rewritten
    if not isinstance(values, dict):
        return {}
    return {k: {"flops_per_s": float(v["flops_per_s"]), "readings": int(v["readings"])} for k, v in values.items()
            if isinstance(v, dict) and isinstance(v.get("flops_per_s"), (int, float))
            and isinstance(v.get("readings"), int)}


def bf16_fp32_rates(path: Path | None = None) -> tuple[float, float] | None:
    """This CPU's kept bf16 and fp32 product rates (:func:`peak_flops`' figures, FLOP/s) at the most threads
    both were measured on; None where both have not been measured yet."""
    rates = _read_rates(path or paths.device_rates_path())
    by_threads: dict[int, dict[str, float]] = {}
    for key, entry in rates.items():
        parts = key.split("|")
        if len(parts) == 5 and parts[0] == "cpu" and parts[1] == describe("cpu") and \
                parts[4] == f"gemm {PEAK_SIDE['cpu']}":
            by_threads.setdefault(int(parts[3].split()[0]), {})[parts[2]] = entry["flops_per_s"]
    both = [(threads, r) for threads, r in by_threads.items() if "bf16" in r and "fp32" in r]
    if not both:
        return None
    _, rates_at = max(both, key=lambda pair: pair[0])
    return rates_at["bf16"], rates_at["fp32"]


def bf16_measured_faster(path: Path | None = None) -> bool | None:
    """Whether this CPU's bf16 products measured faster than its fp32 ones; None where not measured yet."""
    rates = bf16_fp32_rates(path)
    return None if rates is None else rates[0] > rates[1]


# ------------------------------------------------------------------------------------ FLOPs and MFU
def training_flops_per_token(trained_matmul: int, frozen_matmul: int, layers: int, hidden: int,
                             length: float) -> float:
    """Training FLOPs per token of a transformer (the PaLM appendix's count): 6 per trained matrix parameter
    (forward 2, input and weight gradients 4), 4 per frozen one (forward, and the input gradient that still
    flows through it to what trains below), plus the attention products, 12 x layers x hidden x length.

    Embedding tables are lookups, not products, and are left out. This is the dense estimate (a plain
    Trainer's model computes it); a run's record counts what its step computes instead (labcore.engine.flops)."""
    return 6.0 * trained_matmul + 4.0 * frozen_matmul + 12.0 * layers * hidden * length


def module_flops_per_token(module: Any, length: float) -> float:
    """:func:`training_flops_per_token` for a torch module: its linear layers' weights, trained or frozen,
    and its transformer's layers and width (from the first ``config`` found in it)."""
    import torch

    trained = frozen = 0
    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear) or type(sub).__name__ == "Conv1D":  # GPT-2's linear layers
            n = sub.weight.numel()
            if sub.weight.requires_grad:
                trained += n
            else:
                frozen += n
    layers = hidden = 0
    for sub in module.modules():
        config = getattr(sub, "config", None)
        if config is not None and hasattr(config, "hidden_size"):
            layers = int(getattr(config, "num_hidden_layers", 0) or 0)
            hidden = int(config.hidden_size)
            break
    return training_flops_per_token(trained, frozen, layers, hidden, length)


def mfu(tokens_per_s: float, flops_per_token: float, peak: float) -> float:
    """Model FLOPs utilisation: the FLOP/s the training did, over the device's measured peak."""
    return tokens_per_s * flops_per_token / peak if peak > 0 else 0.0


def speed_fields(device: str, precision: str, tokens_per_s: float, flops_per_token: float) -> dict[str, Any]:
    """A record's device and speed fields, the same names for a run (labcore.results.record.RunRecord) and a
    pretraining: where it trained, its peak memory, training tokens/s, FLOPs a token, the device's measured
    matmul rate in the precision used, and the MFU."""
    peak = peak_flops(device, precision)
    return {"device_name": describe(device), "visible_gpus": visible_gpus(), "peak_memory_mb": peak_memory_mb(device),
            "tokens_per_s": tokens_per_s, "flops_per_token": flops_per_token, "peak_flops": peak,
            "mfu": mfu(tokens_per_s, flops_per_token, peak)}
