"""Which device a job trains on, and what it is: read from the settings, the driver and ``/proc``.

* :func:`choose_device`: ``cuda`` where torch sees a GPU, else ``cpu``; ``TRANSFERLAB_DEVICE=cpu|cuda|cuda:N``
  overrides, and a value that cannot be honoured is an error naming the setting and the fix.
* :func:`budget_device`: the device kind a submission's budget is resolved for (``standard`` trains larger
  batches on a GPU), decided without importing torch, since pages resolve specs too.
* :func:`visible_gpus`: the GPUs this process may hand to workers (``CUDA_VISIBLE_DEVICES`` or the driver's
  list), read without torch; :func:`worker_gpus` deals them out one per worker.
* :func:`loss_every`: steps between host reads of the training loss (1 on a CPU; 25 on CUDA, where each read
  waits for the GPU to drain its queue).
* :func:`describe`, :func:`cpu_flags` and :func:`peak_memory_mb`: the device's name, a CPU's feature flags and
  the most memory a run held.

labcore.machine.device builds on these (precision, setup, compiling) and re-exports them. Importing this module
imports no torch; the functions that need it import it.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

from labcore.errors import LabError

SETTING = "TRANSFERLAB_DEVICE"
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


# ------------------------------------------------------------------------------- what the machine has
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


def peak_memory_mb(device: str) -> float:
    """The most memory the run held: the GPU's allocations on CUDA, the process's resident peak on a CPU."""
    import resource

    if kind(device) == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return kib / (2**20 if sys.platform == "darwin" else 2**10)

