"""What a training step computes: its FLOPs a token, counted, and the floor its matrix products alone set.

* :func:`step_flops`: the FLOPs of one forward and backward as torch executes them
  (``torch.utils.flop_counter.FlopCounterMode``: every matrix product, attention's included, forward and
  backward). Counted, not estimated from the parameter count, so whatever the engine skips is not counted:
  the last block run for the pooled rows only (labcore.models.pooled_rows), the weight gradients of frozen
  parameters, a head applied once a sequence. The dense estimate (6 per trained matrix parameter and token,
  labcore.machine.rates.training_flops_per_token) counted MiniLM's whole last block and its head for every token:
  about 16 % more than a pooled-row step computes.
* :func:`flops_per_token`: that count over a few of the data's own examples, each unpadded (padding is
  work, but no useful work: a step that pads more does not get a higher MFU for it), divided by their tokens;
  each length counted once, and at most four counted (:func:`flops_by_length`: the count is a quadratic in length).
* :func:`linear_calls` and :func:`gemm_floor`: the shapes of the linear layers a forward calls, and the time
  their products alone take at the run's precision and threads (the forward product, and the input- and
  weight-gradient products of the backward where they are computed). The step can be no faster than that
  floor; how far it is above the floor is what the rest of the step (attention, norms, dropout, the optimizer,
  Python) costs.

Counting runs a forward and backward: it keeps the RNG state and the parameters' gradients as they were, so a
run that counts stays equal to one that does not.
"""

from __future__ import annotations

import time
from collections import Counter
from fractions import Fraction
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from labcore.data.encode import Batch, Encoded, collate

COUNT_EXAMPLES = 8  # examples flops_per_token counts, spread over the data's lengths
QUADRATIC_CHECKED = 4  # more distinct lengths than this: three counts give the rest, a fourth checks them
FLOOR_REPEAT_S = 0.02  # each product is repeated for at least this long, per timing
FLOOR_TIMINGS = 3  # timings per product; the fastest stands


def _keeping_grads(module: torch.nn.Module, work: Callable[[], float]) -> float:
    """``work()`` with the module's gradients and the RNG left as they were."""
    params = list(module.parameters())
    saved = [p.grad for p in params]
    for p in params:
        p.grad = None
    try:
        with torch.random.fork_rng(devices=[]):
            return work()
    finally:
        for p, grad in zip(params, saved):
            p.grad = grad


def step_flops(module: torch.nn.Module, loss: Callable[[], torch.Tensor]) -> float:
    """FLOPs of ``loss()`` (a forward of ``module`` to a scalar) and its backward, as torch runs them."""
    from torch.utils.flop_counter import FlopCounterMode

    def count() -> float:
        with FlopCounterMode(display=False) as counter:
            loss().backward()
        return float(counter.get_total_flops())

    return _keeping_grads(module, count)


def spread_examples(data: Encoded, count: int = COUNT_EXAMPLES) -> list[int]:
    """Indices of up to ``count`` examples spread evenly over the data's lengths (shortest to longest)."""
    order = np.argsort(data.lengths(), kind="stable")
    if len(order) <= count:
        return [int(i) for i in order]
    return [int(order[round(k * (len(order) - 1) / (count - 1))]) for k in range(count)]


def flops_by_length(count_at: Callable[[int], float], lengths: list[int]) -> dict[int, float]:
    """``count_at(length)`` for each distinct length, counting as few as the shape of the count allows.

    A step's counted FLOPs depend on an example's length only (every counted product's shape is set by it), and
    as a polynomial of degree at most two: linear layers grow with the length, attention's two products with its
    square. So where more than :data:`QUADRATIC_CHECKED` lengths are asked, three (the shortest, the longest and
    one between) are counted, the quadratic through them gives the rest, and one more count checks it exactly
    (the counts are whole numbers); a model whose count is not such a quadratic fails the check, and every length
    is counted."""
    distinct = sorted(set(lengths))
    if len(distinct) <= QUADRATIC_CHECKED:
        return {n: count_at(n) for n in distinct}
    fitted = [distinct[0], distinct[len(distinct) // 2], distinct[-1]]
    check = distinct[len(distinct) // 4] if distinct[len(distinct) // 4] not in fitted else distinct[1]
    counted = {n: count_at(n) for n in (*fitted, check)}

    def quadratic(n: int) -> Fraction:  # Lagrange's form through the three fitted counts, in exact arithmetic
        total = Fraction(0)
        for a in fitted:
            term = Fraction(counted[a])
            for b in fitted:
                if b != a:
                    term *= Fraction(n - b, a - b)
            total += term
        return total

    if quadratic(check) != counted[check]:
        return {n: counted[n] if n in counted else count_at(n) for n in distinct}
    return {n: counted[n] if n in counted else float(quadratic(n)) for n in distinct}


def flops_per_token(module: torch.nn.Module, forward: Callable[[Batch], torch.Tensor], data: Encoded,
                    device: str = "cpu", count: int = COUNT_EXAMPLES) -> float:
    """Training FLOPs a real token of ``data``: :func:`step_flops` of ``forward`` (batch -> logits, summed as the
    loss: a loss's own arithmetic is no product) on each of ``count`` examples alone, over their tokens.

    Examples of one length count the same, so each length is counted once (:func:`flops_by_length`)."""
    picked = spread_examples(data, count)
    lengths = data.lengths()
    example_of = {int(lengths[i]): i for i in reversed(picked)}  # the first picked example of each length

    def count_at(length: int) -> float:
        batch = collate(data, np.array([example_of[length]]), device)
        return step_flops(module, lambda: forward(batch).float().sum())

    per_length = flops_by_length(count_at, list(example_of))
    total = sum(per_length[int(lengths[i])] for i in picked)
    tokens = float(sum(lengths[i] for i in picked))
    return total / tokens if tokens else 0.0


# ------------------------------------------------------------------------------------------ GEMM floor
# The three products of a linear layer y = x W^T (x [M, K], W [N, K]) in a training step, with the operands'
# layouts the step itself uses (a product's speed depends on which operand is transposed).
PRODUCTS = ("forward", "input gradient", "weight gradient")


@dataclass(frozen=True)
class LinearCall:
    """One linear layer's product in a forward: x [rows, inputs] times the weight [outputs, inputs] transposed."""

    rows: int
    inputs: int
    outputs: int
    trained: bool  # its weight trains: the backward computes the weight-gradient product too

    def products(self) -> list[tuple[str, int, int, int]]:
        """(product, M, K, N) of a training step: forward and input gradient, and the weight gradient if trained.

        Every one is 2 M K N FLOPs."""
        kinds = PRODUCTS if self.trained else PRODUCTS[:2]
        return [(kind, self.rows, self.inputs, self.outputs) for kind in kinds]


def linear_calls(module: torch.nn.Module, run: Callable[[], object]) -> list[LinearCall]:
    """The linear-layer products ``run()`` (a forward of ``module``) makes, in order, with their shapes."""
    calls: list[LinearCall] = []

    def record(layer: torch.nn.Module, args: tuple, _output: object) -> None:
        x = args[0]
        rows = x.numel() // x.shape[-1]
        calls.append(LinearCall(rows, layer.in_features, layer.out_features, layer.weight.requires_grad))

    handles = [m.register_forward_hook(record) for m in module.modules() if isinstance(m, torch.nn.Linear)]
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            run()
    finally:
        for handle in handles:
            handle.remove()
    return calls


@dataclass(frozen=True)
class GemmFloor:
    """What a step's linear-layer products alone take: ``seconds`` a step for ``flops`` of products."""

    seconds: float
    flops: float
    products: int

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds if self.seconds > 0 else 0.0


def _product(kind: str, m: int, k: int, n: int, dtype: torch.dtype, device: str) -> Callable[[], torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(m, k, device=device, dtype=dtype, generator=generator)
    weight = torch.randn(n, k, device=device, dtype=dtype, generator=generator)
    grad = torch.randn(m, n, device=device, dtype=dtype, generator=generator)
    if kind == "forward":
        return lambda: torch.nn.functional.linear(x, weight)
    if kind == "input gradient":
        return lambda: grad @ weight
    return lambda: grad.t() @ x


def time_products(shapes: list[tuple[str, int, int, int]], precision: str, device: str = "cpu") -> list[float]:
    """Seconds of each product, alone: the fastest of :data:`FLOOR_TIMINGS` rounds over all of them (a busy
    moment slows one round, not the figure), each timing the mean over repeats of at least :data:`FLOOR_REPEAT_S`."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    products = [_product(*shape, dtype, device) for shape in shapes]
    cuda = device.startswith("cuda")
    best = [float("inf")] * len(products)
    for _ in range(FLOOR_TIMINGS):
        for i, product in enumerate(products):
            product()
            repeats, start = 0, time.perf_counter()
            while True:
                product()
                repeats += 1
                if cuda:
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - start
                if elapsed >= FLOOR_REPEAT_S:
                    break
            best[i] = min(best[i], elapsed / repeats)
    return best


def gemm_floor(calls: list[LinearCall], precision: str, device: str = "cpu") -> GemmFloor:
    """The step's linear products timed alone, each distinct one once, times how often the step makes it."""
    shapes = Counter(p for call in calls for p in call.products())
    seconds = time_products(list(shapes), precision, device)
    flops = sum(times * 2.0 * m * k * n for (_, m, k, n), times in shapes.items())
    return GemmFloor(sum(t * times for t, times in zip(seconds, shapes.values())), flops, sum(shapes.values()))
