"""Training kernels for the CPU: a cheaper dropout mask and a plain attention function.

Profiling MiniLM on dna-splice (batch 16, bf16 autocast, 2 threads) showed two costs outside the matrix
products that a CPU pays and a GPU does not:

* Dropout draws one Mersenne-Twister number per element (``bernoulli_``): 19 calls took 63 ms of a
  ~340 ms step. :func:`keep_mask` draws 64 random bits per *four* elements and compares each 16-bit
  quarter with a threshold: a Bernoulli(1 - p) keep mask with p rounded to a multiple of 2**-16 (0.1
  becomes 0.1000061), at about a third of the cost.
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

import math

import torch
from torch import nn

from labcore.errors import LabError

ATTENTION_NAME = "lab_cpu"
_BITS = 16  # a keep decision compares one 16-bit quarter of a 64-bit random word with a threshold
_PER_WORD = 64 // _BITS


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, dtype: torch.dtype, device) -> torch.Tensor:
    """Inverted-dropout noise: 1/(1-p) where an element is kept (probability 1-p), 0 elsewhere.

    ``p`` is rounded to a multiple of 2**-16 and the scale uses that rounded value, so the noise has mean
    exactly 1 (before it is cast to ``dtype``, which is what torch's own dropout does too)."""
    if not 0.0 <= p < 1.0:
        raise LabError(f"dropout probability must be in [0, 1), got {p}")
    n = math.prod(shape)
    threshold = round(p * 2 ** _BITS)  # drop where the unsigned quarter is below this
    # The full signed range: random_() alone would leave the top bit of every word at 0.
    words = torch.empty(-(-n // _PER_WORD), dtype=torch.int64, device=device).random_(-2 ** 63, 2 ** 63 - 1)
    quarters = words.view(torch.int16)[:n].view(shape)
    # int16 quarters are uniform on [-2**15, 2**15): shift the threshold into that range.
    keep = quarters >= threshold - 2 ** (_BITS - 1)
    return keep.to(dtype).mul_(2 ** _BITS / (2 ** _BITS - threshold))


def keep_mask_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if torch.compiler.is_compiling():
        # Compiled code draws its own random numbers, fused into the kernel that uses them, where the int64
        # words of keep_mask (an in-place random_) would break the graph.
        return torch.nn.functional.dropout(x, p, training)
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
        notes.append(f"CPU kernels: {swapped} dropout layers draw keep masks from 16-bit thresholds")
    current = getattr(backbone.config, "_attn_implementation", None)
    if current == "sdpa":
        try:
            backbone.set_attn_implementation(ATTENTION_NAME)
            notes.append("CPU kernels: attention computed by the lab's plain attention function")
        except (ValueError, KeyError, NotImplementedError) as exc:
            notes.append(f"CPU kernels: attention stays on SDPA ({exc})")
    return notes
