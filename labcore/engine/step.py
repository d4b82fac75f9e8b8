"""One optimiser step, eager or replayed from a CUDA graph.

On a GPU the eager step is bound by the host: a BERT-base step launches about a thousand kernels one after
another, and the GPU waited for them (37 ms a step on an H100, of which the GPU worked 12). A CUDA graph
records the whole step once (forward, backward, clipping, optimiser) and replays it with one launch. What a
graph needs, this module provides:

- **static shapes**: a batch is padded at the end to a length bucket (:func:`bucket_length`), and a graph is
  captured for each (batch, length) shape the run meets. Padded positions are masked out, so a padded
  example's logits are the unpadded ones (up to rounding), but dropout then draws over a larger tensor: the
  random numbers fall elsewhere;
- **device-side state**: the learning rate is a tensor on the device that the scheduler fills between
  replays, and AdamW keeps its step count there (``capturable``), so nothing inside the step reads a value
  back to the host;
- **stable gradient buffers**: the step zeroes the gradients in place instead of freeing them, so every
  replay writes the same tensors the optimiser reads.

Dropout draws from the default CUDA generator, which graphs advance on each replay: a run stays
reproducible. The first steps, and the first step of each new shape, run eagerly on a side stream (lazy
initialisations: the optimiser's state, cuBLAS's workspace) before that shape is captured. Should a capture
fail (a model that reads a value to the host inside its forward), the run goes on eagerly and says why.

The same code without capture (``GraphedStep(capture=False)``) is the graph-ready step on a CPU: tests hold
its losses to the eager step's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from labcore.data.encode import Batch
from labcore.machine.device import autocast

WARMUP_STEPS = 3  # eager steps before the first capture (the optimiser's state, cuBLAS's workspace)
SMALLEST_BUCKET = 16
# torch.cuda.graph's capture_error_mode: "global" (torch's default) fails a capture when any thread of the process
# makes a call that is unsafe during capture; bench/gpu_compile.py (f) tries "thread_local" with compiled blocks
# (whose compiler keeps threads of its own), whose capture failed under "global" on one H200.
CAPTURE_ERROR_MODE = "global"


def bucket_length(length: int, longest: int) -> int:
    """The padded length of a batch whose longest example has ``length`` tokens: the next of 16, 24, 32, 48,
    64, 96, ... (powers of two and one and a half times them: at most a third is padding), never past the
    data's ``longest``, which is a bucket of its own."""
    bucket = SMALLEST_BUCKET
    while bucket < length:
        bucket = bucket * 3 // 2 if bucket & (bucket - 1) == 0 else bucket * 4 // 3
    return min(bucket, max(longest, length))


def pad_batch(batch: Batch, length: int) -> Batch:
    """``batch`` padded at the end of its positions to ``length`` (inputs 0, mask 0)."""
    extra = length - batch.inputs.shape[1]
    if extra <= 0:
        return batch
    pad = (0, 0, 0, extra) if batch.inputs.dim() == 3 else (0, extra)
    return Batch(torch.nn.functional.pad(batch.inputs, pad), torch.nn.functional.pad(batch.mask, (0, extra)),
                 batch.labels, batch.index)


@dataclass(frozen=True)
class StepParts:
    """What a step computes with: the forward, the loss, the parameters it trains and how it updates them."""

    forward: Callable[[Batch], torch.Tensor]
    criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    grad_clip: float
    precision: str
    device: str


def take_step(parts: StepParts, batch: Batch, static: bool = False) -> torch.Tensor:
    """One step; its loss, detached, still on the device. ``static``: nothing a graph cannot hold (gradients zeroed
    in place once they exist, no cast cache, foreach clipping); otherwise the step as the lab has always taken it."""
    with autocast(parts.precision, parts.device, cache=not static):
        logits = parts.forward(batch)
    loss = parts.criterion(logits.float(), batch.labels)
    grads = [p.grad for p in parts.params if p.grad is not None]
    if static and len(grads) == len(parts.params):
        torch._foreach_zero_(grads)
    else:
        parts.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if parts.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(parts.params, parts.grad_clip, foreach=True if static else None)
    parts.optimizer.step()
    return loss.detach()


# The optimizer of each name in :data:`labcore.runspec.OPTIMIZERS` (a test pins the two equal).
OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


def build_optimizer(name: str, params: list[torch.nn.Parameter], lr: float, weight_decay: float, *,
                    device_lr: bool = False) -> torch.optim.Optimizer:
    """Adam or AdamW, fused (one kernel for all tensors) where torch has it for these parameters.

    On 2 CPU cores the per-parameter default took 17 ms a MiniLM step (of about 300), the fused one 6 ms.
    The update rule is the same; the arithmetic order differs in the last bits. ``device_lr``: the learning
    rate as a tensor on the parameters' device and the step count kept there (``capturable``), as a graph
    needs."""
    optim_cls = OPTIMIZERS[name]
    if device_lr:
        rate = torch.tensor(lr, dtype=torch.float32, device=params[0].device)
        return optim_cls(params, lr=rate, weight_decay=weight_decay, fused=True, capturable=True)
    try:
        return optim_cls(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without a fused kernel
        return optim_cls(params, lr=lr, weight_decay=weight_decay)


def _release_generator() -> None:
    """After a failed capture: torch closes a CUDA generator's capture bookkeeping only when a capture ends well, so the
    default generator stays marked as capturing, and every later draw (dropout) outside a capture refuses ("Offset
    increment outside graph capture encountered unexpectedly", one H200, torch 2.11). A clone of its state (the same
    seed and offset, not capturing) takes its place."""
    generator = torch.cuda.default_generators[torch.cuda.current_device()]
    generator.graphsafe_set_state(generator.clone_state())


@dataclass
class _Captured:
    graph: Any  # torch.cuda.CUDAGraph
    batch: Batch  # the static input buffers the graph reads
    loss: torch.Tensor  # the static loss the graph writes


class GraphedStep:
    """Steps on bucket-padded batches; with ``capture`` (CUDA), replayed from one graph per shape.

    ``longest``: the training data's longest example, the top bucket. ``note()`` says what the run used."""

    def __init__(self, parts: StepParts, longest: int, capture: bool) -> None:
        self.parts, self.longest, self.capture = parts, longest, capture
        self.graphs: dict[tuple, _Captured] = {}
        self.warm: set[tuple] = set()  # shapes already run eagerly
        self.eager_steps = 0
        self.pool = None  # the graphs' shared memory pool (they never run at once)
        self.failed: str | None = None  # why capture stopped, if it did

    def __call__(self, batch: Batch) -> torch.Tensor:
        batch = pad_batch(batch, bucket_length(batch.inputs.shape[1], self.longest))
        if not self.capture or self.failed:
            return take_step(self.parts, batch, static=True)
        shape = (tuple(batch.inputs.shape), batch.inputs.dtype, tuple(batch.labels.shape), batch.labels.dtype)
        captured = self.graphs.get(shape)
        if captured is None:
            if self.eager_steps < WARMUP_STEPS or shape not in self.warm:
                return self._side_stream(shape, batch)
            try:
                captured = self.graphs[shape] = self._capture(batch)
            except RuntimeError as error:  # something in the step the graph cannot hold: go on eagerly
                root = error
                while root.__context__ is not None:  # the capture's end fails too: name what broke it first
                    root = root.__context__
                self.failed = f"{type(root).__name__}: {(str(root).splitlines() or [''])[0][:300]}"
                _release_generator()
                torch.cuda.synchronize()
                return take_step(self.parts, batch, static=True)
        for static, value in ((captured.batch.inputs, batch.inputs), (captured.batch.mask, batch.mask),
                              (captured.batch.labels, batch.labels)):
            static.copy_(value, non_blocking=True)
        captured.graph.replay()
        return captured.loss.clone()

    def note(self) -> str:
        """What the record says about the step."""
        if not self.capture:
            return "training step: eager, batches padded to length buckets"
        if self.failed:
            return (f"training step: eager (CUDA graph capture failed after {len(self.graphs)} shape(s): "
                    f"{self.failed})")
        lengths = sorted({shape[0][1] for shape in self.graphs})
        return (f"training step: replayed from {len(self.graphs)} CUDA graph(s), one per batch shape; lengths padded "
                f"to buckets {', '.join(map(str, lengths))}; the first {self.eager_steps} steps eager")

    def _side_stream(self, shape: tuple, batch: Batch) -> torch.Tensor:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            loss = take_step(self.parts, batch, static=True)
        torch.cuda.current_stream().wait_stream(stream)
        self.warm.add(shape)
        self.eager_steps += 1
        return loss

    def _capture(self, batch: Batch) -> _Captured:
        static = Batch(batch.inputs.clone(), batch.mask.clone(), batch.labels.clone(), batch.index)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode=CAPTURE_ERROR_MODE):
            loss = take_step(self.parts, static, static=True)
        if self.pool is None:
            self.pool = graph.pool()
        return _Captured(graph, static, loss)
