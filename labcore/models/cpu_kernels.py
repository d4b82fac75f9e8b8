"""Training kernels for the CPU: a cheaper dropout mask and a plain attention function.

Profiling MiniLM on dna-splice (batch 16, bf16 autocast, 2 threads) showed two costs outside the matrix
products that a CPU pays and a GPU does not:

* Dropout draws one Mersenne-Twister number per element (``bernoulli_``): 19 calls took 63 ms of a
  ~340 ms step. :func:`keep_mask` draws 64 random bits per *four* elements and compares each 16-bit
  quarter with a threshold: a Bernoulli(1 - p) keep mask with p rounded to a multiple of 2**-16 (0.1
  becomes 0.1000061), at about a third of the cost. Where this machine's C compiler builds
  ``cpu_dropout.c`` (:mod:`labcore.machine.native`), :func:`fused_dropout` does the same in one pass: each
  16-bit quarter comes from a counter-based stream (SplitMix64 of a seed torch's generator draws, and the
  element's index), so no mask is made or kept, the backward pass recomputes it from the seed, and the
  result does not depend on the thread count. On 2 Xeon cores (fp32) one [16, 12, 62, 62] dropout took
  0.16 ms against 1.74 ms for the keep mask and its product. Elsewhere :func:`keep_mask` stands in.
* SDPA on the CPU falls back to its math path whenever dropout is on, adding a fully-masked-row check
  per layer, and its fused CPU kernel (dropout off) took 17.5 ms per layer backward. :func:`lab_attention`
  is the textbook computation (scores, mask, softmax, dropout, weighted sum), registered with transformers'
  ``AttentionInterface`` as ``"lab_cpu"`` and given the eager attention masks.

:func:`use_cpu_kernels` switches a lab model's backbone to both. Outputs in eval mode equal SDPA's; in
training the dropout masks are drawn differently, with the same distribution, from torch's seeded
generator (so runs stay reproducible and resumable). GPUs keep SDPA and native dropout: their kernels are
fused and their random numbers cheap.
"""

from __future__ import annotations

import ctypes
import functools
import math
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from labcore.errors import LabError
from labcore.machine import native

ATTENTION_NAME = "lab_cpu"
_BITS = 16  # a keep decision compares one 16-bit quarter of a 64-bit random word with a threshold
_PER_WORD = 64 // _BITS
DROPOUT_SOURCE = Path(__file__).with_name("cpu_dropout.c")


def _threshold_scale(p: float) -> tuple[int, float]:
    """Drop where a uniform 16-bit quarter is below the threshold; scale the kept elements so the noise has mean
    exactly 1 for the rounded ``p``."""
    if not 0.0 <= p < 1.0:
        raise LabError(f"dropout probability must be in [0, 1), got {p}")
    threshold = round(p * 2 ** _BITS)
    return threshold, 2 ** _BITS / (2 ** _BITS - threshold)


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, dtype: torch.dtype, device) -> torch.Tensor:
    """Inverted-dropout noise: 1/(1-p) where an element is kept (probability 1-p), 0 elsewhere.

    ``p`` is rounded to a multiple of 2**-16 and the scale uses that rounded value, so the noise has mean
    exactly 1 (before it is cast to ``dtype``, which is what torch's own dropout does too)."""
    threshold, scale = _threshold_scale(p)
    n = math.prod(shape)
    # The full signed range: random_() alone would leave the top bit of every word at 0.
    words = torch.empty(-(-n // _PER_WORD), dtype=torch.int64, device=device).random_(-2 ** 63, 2 ** 63 - 1)
    quarters = words.view(torch.int16)[:n].view(shape)
    # int16 quarters are uniform on [-2**15, 2**15): shift the threshold into that range.
    keep = quarters >= threshold - 2 ** (_BITS - 1)
    return keep.to(dtype).mul_(scale)


Kernel = Callable[..., None]


@functools.cache
def _typed(library: ctypes.CDLL) -> dict[torch.dtype, Kernel]:
    kernels = {}
    for dtype, name in ((torch.float32, "lab_dropout_f32"), (torch.bfloat16, "lab_dropout_bf16")):
        kernel = getattr(library, name)
        kernel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint32,
                           ctypes.c_float, ctypes.c_int]
        kernel.restype = None
        kernels[dtype] = kernel
    return kernels


def fused_dropout_kernels() -> dict[torch.dtype, Kernel]:
    """The fused dropout's C kernels by dtype; raises :class:`~labcore.machine.native.NativeUnavailable`."""
    return _typed(native.load(DROPOUT_SOURCE))


def _noise(x: torch.Tensor, seed: int, threshold: int, scale: float) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    fused_dropout_kernels()[x.dtype](x.data_ptr(), out.data_ptr(), x.numel(), seed, threshold, scale,
                                     torch.get_num_threads())
    return out


class _FusedDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        # One draw from torch's seeded generator a call: runs stay reproducible, and resumable from its state.
        seed = int(torch.empty((), dtype=torch.int64).random_())
        ctx.noise = (seed, *_threshold_scale(p))
        return _noise(x, *ctx.noise)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _noise(grad, *ctx.noise), None  # the same mask and scale, recomputed from the seed


def fused_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout of ``x`` (training) by the C kernel: the distribution of :func:`keep_mask`'s noise times
    ``x``, in one pass. Raises ``NativeUnavailable`` where the kernel is not built."""
    return _FusedDropout.apply(x, p)


def _unbuilt() -> str:
    """Why the fused dropout kernel is not built here; "" where it is."""
    try:
        fused_dropout_kernels()
    except native.NativeUnavailable as exc:
        return str(exc)
    return ""


def _fuses(x: torch.Tensor) -> bool:
    """Whether :func:`fused_dropout` serves ``x``: a tensor a C kernel takes, of a dtype it has, with the kernel
    built here."""
    return native.takes(x, (torch.float32, torch.bfloat16)) and not _unbuilt()


def keep_mask_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if torch.compiler.is_compiling():
        # Compiled code draws its own random numbers, fused into the kernel that uses them, where the int64
        # words of keep_mask (an in-place random_) would break the graph.
        return torch.nn.functional.dropout(x, p, training)
    if _fuses(x):
        return fused_dropout(x, p)
    return x * keep_mask(x.shape, p, x.dtype, x.device)


class KeepMaskDropout(nn.Module):
    """Stands in for ``nn.Dropout`` (same ``p``, same train/eval behaviour) with :func:`keep_mask` noise."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return keep_mask_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def lab_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                  **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention as transformers' eager functions compute it ([B, heads, L, d] in, [B, L, heads, d] out),
    with grouped key/value heads repeated (Llama) and :func:`keep_mask` dropout on the weights."""
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:  # additive: 0 where attended, the dtype's minimum elsewhere
        scores = scores + attention_mask
    # In float32: more exact, and on the CPU faster than bf16's softmax (1.1 ms against 1.7 ms forward and
    # backward for one MiniLM layer, batch 16, length 62).
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    weights = keep_mask_dropout(weights, dropout, module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION_NAME, lab_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)


_register()


def kernels_for(backbone: nn.Module, device: str) -> list[str]:
    """The training kernels that suit ``device``: on a CPU :func:`use_cpu_kernels`; on CUDA the backbone keeps
    SDPA (flash / memory-efficient kernels) and torch's dropout, which are fused there. Notes for the record."""
    from labcore.machine.device import kind

    return use_cpu_kernels(backbone) if kind(device) == "cpu" else []


def dropout_kind() -> str:
    """How :class:`KeepMaskDropout` draws its masks in this process, in words for the run's record."""
    why = _unbuilt()
    if why:
        return f"keep masks from 16-bit thresholds (no fused dropout kernel: {why})"
    return "fused dropout kernel (16-bit thresholds on a SplitMix64 stream of torch's seed)"


def use_cpu_kernels(backbone: nn.Module) -> list[str]:
    """Switch a backbone to :class:`KeepMaskDropout` and :func:`lab_attention`; return notes for the record.

    A backbone loaded with eager attention (for attention maps) keeps it: those maps are what it is for.
    A model class that takes no custom attention function keeps SDPA, and the note says so."""
    notes = []
    swapped = 0
    for parent in backbone.modules():
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                setattr(parent, name, KeepMaskDropout(child.p).train(child.training))
                swapped += 1
    if swapped:
        notes.append(f"CPU kernels: {swapped} dropout layers, {dropout_kind()}")
    current = getattr(backbone.config, "_attn_implementation", None)
    if current == "sdpa":
        try:
            backbone.set_attn_implementation(ATTENTION_NAME)
            notes.append("CPU kernels: attention computed by the lab's plain attention function")
        except (ValueError, KeyError, NotImplementedError) as exc:
            notes.append(f"CPU kernels: attention stays on SDPA ({exc})")
    return notes
