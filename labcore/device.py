"""Where and how a job trains: the device, its precision, its settings and its measured matmul rate, in one place.

* :func:`choose_device`: ``cuda`` where torch sees a GPU, else ``cpu``; ``TRANSFERLAB_DEVICE=cpu|cuda|cuda:N``
  overrides, and a value that cannot be honoured is an error naming the setting and the fix.
* :func:`resolve_precision`: ``auto`` is bf16 autocast where the hardware has native bf16 (a GPU that supports
  it, a CPU with AMX, or one with AVX-512 BF16 whose bf16 products measured faster than fp32's), else fp32;
  :func:`setup` turns TF32 matmuls on for fp32 on CUDA.
* :func:`budget_device`: the device kind a submission's budget is resolved for (``standard`` trains larger
  batches on a GPU), decided without importing torch, since pages resolve specs too.
* :func:`visible_gpus`: the GPUs this process may hand to workers (``CUDA_VISIBLE_DEVICES`` or the driver's
  list), read without torch; :func:`worker_gpus` deals them out one per worker.
* :func:`loss_every`: steps between host reads of the training loss (1 on a CPU; 25 on CUDA, where each read
  waits for the GPU to drain its queue).
* :func:`peak_flops`: the device's measured matrix-product rate in a precision, measured once and kept in
  ``cache/device-rates.json`` (a CPU's figure per thread count): the denominator of a run's MFU.

Importing this module imports no torch; the functions that need it import it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

from labcore import paths
from labcore.errors import LabError

SETTING = "TRANSFERLAB_DEVICE"
COMPILE_SETTING = "TRANSFERLAB_COMPILE"
RATES_FILE = "device-rates.json"
RATE_READINGS = 3  # matmul-rate measurements kept (their best) before the figure is only read back
# Steps between host reads of the loss: each read on CUDA waits for every queued kernel, so the GPU idles
# while Python catches up; 25 steps keep the queue full and the curve fine enough to watch.
LOSS_EVERY = {"cpu": 1, "cuda": 25}
_FORM = re.compile(r"^(cpu|cuda|cuda:\d+)$")


# ---------------------------------------------------------------------------------------- which device
def requested() -> str:
    """The device ``TRANSFERLAB_DEVICE`` asks for ("" when unset); a malformed value is an error."""
    text = os.environ.get(SETTING, "").strip().lower()
    if text and not _FORM.match(text):
        raise LabError(f"{SETTING}={os.environ[SETTING]!r} is not a device; set it to cpu, cuda or cuda:N "
                       f"(N a GPU's index, from 0), or unset it to use a GPU where there is one")
    return text


def kind(device: str) -> str:
    """``cuda`` or ``cpu``: the family a device name belongs to (``cuda:1`` is ``cuda``)."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def choose_device() -> str:
    """The device to train on: ``TRANSFERLAB_DEVICE`` where set, else ``cuda`` where torch sees a GPU."""
    import torch

    asked = requested()
    if not asked:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if asked == "cpu":
        return asked
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise LabError(f"{SETTING}={asked} asks for a GPU, but torch {torch.__version__} ({build}) sees none; "
                       f"set {SETTING}=cpu (or unset it) to train on the CPU, or install a CUDA build of torch on a "
                       f"machine with an NVIDIA driver")
    index = int(asked.split(":")[1]) if ":" in asked else 0
    if index >= torch.cuda.device_count():
        raise LabError(f"{SETTING}={asked} names GPU {index}, but torch sees {torch.cuda.device_count()} "
                       f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}); set it to one of those, or to cuda")
    return asked


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (indices or UUIDs), without torch.

    ``CUDA_VISIBLE_DEVICES`` where set (empty or ``-1``: none); else one index per GPU the NVIDIA driver lists
    in ``/proc/driver/nvidia/gpus``; none where ``TRANSFERLAB_DEVICE=cpu``."""
    if requested() == "cpu":
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        names = [n.strip() for n in listed.split(",") if n.strip()]
        # CUDA stops at the first invalid entry; -1 is the usual way to hide every GPU.
        out = []
        for name in names:
            if name.startswith("-"):
                break
            out.append(name)
        return out
    try:
        return [str(i) for i in range(len(os.listdir("/proc/driver/nvidia/gpus")))]
    except OSError:
        return []


def torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA build (its CUDA library is there), without importing it."""
    if "torch" in sys.modules:
        return sys.modules["torch"].version.cuda is not None
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib"
    return any(lib.glob("libtorch_cuda*"))


def budget_device() -> str:
    """``cuda`` or ``cpu``: the device a job submitted from this process will train on, for its budget.

    Decided without importing torch (pages resolve specs): ``TRANSFERLAB_DEVICE`` where set; ``cuda`` where
    runs ask a cluster for GPUs (``TRANSFERLAB_RUN_GPUS``); else ``cuda`` where this machine has a GPU and a CUDA
    build of torch. Only a spec's unset fields follow it: a resolved spec keeps its values wherever it runs."""
    asked = requested()
    if asked:
        return kind(asked)
    try:
        if float(os.environ.get("TRANSFERLAB_RUN_GPUS", "0") or 0) > 0:
            return "cuda"
    except ValueError:
        pass  # the executor reports a malformed value where it uses it
    if "torch" in sys.modules:
        return "cuda" if sys.modules["torch"].cuda.is_available() else "cpu"
    return "cuda" if visible_gpus() and torch_has_cuda() else "cpu"


def worker_gpus(count: int, gpus: list[str] | None = None) -> list[str | None]:
    """``CUDA_VISIBLE_DEVICES`` for each of ``count`` workers: one GPU each, in turn, where there are several
    (more workers than GPUs share them round the table); None (inherit) with one GPU or none."""
    gpus = visible_gpus() if gpus is None else gpus
    if len(gpus) < 2:
        return [None] * count
    return [gpus[i % len(gpus)] for i in range(count)]


def least_used_gpu(in_use: list[str], gpus: list[str] | None = None) -> str | None:
    """The GPU for one more worker: the one the fewest alive workers hold (None with one GPU or none)."""
    gpus = visible_gpus() if gpus is None else gpus
    if len(gpus) < 2:
        return None
    return min(gpus, key=lambda g: (in_use.count(g), gpus.index(g)))


def describe(device: str) -> str:
    """The device's own name: the GPU's model, or the CPU's."""
    if kind(device) == "cuda":
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loss_every(device: str) -> int:
    return LOSS_EVERY[kind(device)]


# ------------------------------------------------------------------------------------------- precision
def cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``); empty where they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


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


def bf16_fp32_rates(path: Path | None = None) -> tuple[float, float] | None:
    """This CPU's kept bf16 and fp32 product rates (:func:`peak_flops`' figures, FLOP/s) at the most threads
    both were measured on; None where both have not been measured yet."""
    rates = _read_rates(path or paths.cache_dir() / RATES_FILE)
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


def autocast(precision: str, device: str):
    """The autocast context a forward runs in (none for fp32)."""
    if precision == "bf16":
        import torch

        return torch.autocast(device_type=kind(device), dtype=torch.bfloat16)
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
    text = os.environ.get(COMPILE_SETTING, "").strip()
    if text not in ("", "0", "1"):
        raise LabError(f"{COMPILE_SETTING}={text!r}: set it to 1 to compile models with torch.compile, or 0 (the "
                       f"default) not to")
    return text == "1"


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


def peak_memory_mb(device: str) -> float:
    """The most memory the run held: the GPU's allocations on CUDA, the process's resident peak on a CPU."""
    import resource

    if kind(device) == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return kib / (2**20 if sys.platform == "darwin" else 2**10)


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
    """The device's matrix-product rate in ``precision`` (FLOP/s), kept in ``cache/device-rates.json``.

    Measured by the first :data:`RATE_READINGS` callers (a run each, a few seconds: :func:`measure_matmul_flops`),
    keeping the best reading: one taken while other work held the cores would otherwise stand for the machine for
    good. After that the kept figure is read back without measuring."""
    path = path or paths.cache_dir() / RATES_FILE
    key = rate_key(device, precision)
    entry = _read_rates(path).get(key)
    if entry is not None and entry["readings"] >= RATE_READINGS:
        return entry["flops_per_s"]
    rate = measure_matmul_flops(device, precision)
    rates = _read_rates(path)  # again: another process may have written meanwhile
    old = rates.get(key, {"flops_per_s": 0.0, "readings": 0})
    rates[key] = {"flops_per_s": max(rate, old["flops_per_s"]), "readings": old["readings"] + 1}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(rates, indent=1, sort_keys=True))
    os.replace(tmp, path)
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


# ------------------------------------------------------------------------------------ FLOPs and MFU
def training_flops_per_token(trained_matmul: int, frozen_matmul: int, layers: int, hidden: int,
                             length: float) -> float:
    """Training FLOPs per token of a transformer (the PaLM appendix's count): 6 per trained matrix parameter
    (forward 2, input and weight gradients 4), 4 per frozen one (forward, and the input gradient that still
    flows through it to what trains below), plus the attention products, 12 x layers x hidden x length.

    Embedding tables are lookups, not products, and are left out. This is the dense estimate (a plain
    Trainer's model computes it); a run's record counts what its step computes instead (labcore.flops)."""
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
    """A record's device and speed fields, the same names for a run (labcore.record.RunRecord) and a
    pretraining: where it trained, its peak memory, training tokens/s, FLOPs a token, the device's measured
    matmul rate in the precision used, and the MFU."""
    peak = peak_flops(device, precision)
    return {"device_name": describe(device), "visible_gpus": visible_gpus(), "peak_memory_mb": peak_memory_mb(device),
            "tokens_per_s": tokens_per_s, "flops_per_token": flops_per_token, "peak_flops": peak,
            "mfu": mfu(tokens_per_s, flops_per_token, peak)}
