"""bench/gpu.py's compile measurements, (e) and (f): the lab's blocks compiled by ``torch.compile``, eager and inside
the step's CUDA graph, against the same loops uncompiled (run through ``python bench/gpu.py --only ef``)."""

from __future__ import annotations

import dataclasses

from gpu import bert_base_setup, config, datasheet_peak, lab_minilm, peak, timed_loop, trainer_rate
from gpu_data import Scale, Splice


# ------------------------------------------------------------------------------------------- (e) compile
def bench_compile(splice: Splice, scale: Scale, device: str, precision: str) -> None:
    """(a) and (b) eager and compiled, side by side in this process: rates and the compile's seconds."""
    from labcore.machine import device as devices

    data = splice.splits["train"]
    cfg = config(device, precision, batch_size=scale.finetune_batch, max_steps=scale.warmup + scale.timed,
                 eval_every=10**9, patience=0, min_evals=0)
    eager = timed_loop(lab_minilm(splice, device), data, cfg, scale.warmup)
    compiled = timed_loop(devices.compile_blocks(lab_minilm(splice, device)), data, cfg, scale.warmup)
    trainer_eager = trainer_rate(splice, scale.finetune_batch, scale.warmup, scale.timed, precision, device)
    trainer_compiled = trainer_rate(splice, scale.finetune_batch, scale.warmup, scale.timed, precision, device,
                                    compiled=True)
    print(f"(e) compile, (a) finetune {precision}: lab eager {eager[0]:,.1f} samples/s, compiled {compiled[0]:,.1f} "
          f"({compiled[0] / eager[0]:.2f}x, compile {compiled[2] - eager[2]:.1f} s); Trainer eager "
          f"{trainer_eager[0]:,.1f}, torch_compile {trainer_compiled[0]:,.1f} ({trainer_compiled[0] / trainer_eager[0]:.2f}x, "
          f"compile {trainer_compiled[1] - trainer_eager[1]:.1f} s); best lab / best Trainer "
          f"{max(eager[0], compiled[0]) / max(trainer_eager[0], trainer_compiled[0]):.2f}x", flush=True)
    model, bert_data, bert_cfg, _ = bert_base_setup(scale, device, precision)
    bert_eager = timed_loop(model, bert_data, bert_cfg, scale.warmup)
    model, bert_data, bert_cfg, _ = bert_base_setup(scale, device, precision)
    bert_compiled = timed_loop(devices.compile_blocks(model), bert_data, bert_cfg, scale.warmup)
    flops, rate = devices.module_flops_per_token(model, scale.bert_length), peak(device, precision)
    print(f"(e) compile, (b) bert-base-sized {precision}: eager {bert_eager[1]:,.0f} tokens/s (MFU "
          f"{devices.mfu(bert_eager[1], flops, rate):.1%}), compiled {bert_compiled[1]:,.0f} tokens/s (MFU "
          f"{devices.mfu(bert_compiled[1], flops, rate):.1%}, {bert_compiled[1] / bert_eager[1]:.2f}x, compile "
          f"{bert_compiled[2] - bert_eager[2]:.1f} s)", flush=True)


# ------------------------------------------------------------------------------- (f) fused blocks in the graph
# Each in a process of its own, so that one whose capture fails leaves no state behind for the next: on one H200
# (torch 2.11) a failed capture of compiled blocks left dropout's generator unusable ("Offset increment outside graph
# capture encountered unexpectedly") for every later step of the process.
FUSED_VARIANTS = {  # the graph of eager blocks is (b)'s "graphs on"
    "compiled-torch-rng": "compiled blocks, dropout drawn by torch's kernels (inductor fallback_random)",
    "compiled": "compiled blocks, inductor's own dropout draws",
    "compiled-thread-local": "compiled blocks, captured with capture_error_mode thread_local",
    "inductor-graphs": "blocks compiled with inductor's own CUDA graphs (mode reduce-overhead), the step's not captured",
    "eager": "eager blocks",
}
FUSED_TIMEOUT_S = 240


def bench_fused(scale: Scale, device: str, precision: str) -> None:
    """(b) with every block compiled (inductor fuses dropout, residual, LayerNorm and the bias-GELU) and the step
    replayed from a graph, against the graph of eager kernels: one process per :data:`FUSED_VARIANTS`, one after
    another; each prints its line."""
    import subprocess
    import sys
    from pathlib import Path

    from gpu_data import CPU_TRY

    for variant in FUSED_VARIANTS:  # each prints to this output as it goes: a variant cut short keeps its lines
        try:
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), variant,
                                   "cpu" if scale is CPU_TRY else "gpu"], timeout=FUSED_TIMEOUT_S)
            if done.returncode:
                print(f"(f) {FUSED_VARIANTS[variant]}: exit {done.returncode}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"(f) {FUSED_VARIANTS[variant]}: no result within {FUSED_TIMEOUT_S} s", flush=True)


def fused_variant(variant: str, scale: Scale, device: str, precision: str) -> None:
    """One of :data:`FUSED_VARIANTS`: (b)'s loop, graphs on, and its line; a failure's traceback, last lines."""
    import time
    import traceback

    import torch

    from labcore.engine import train as training
    from labcore.machine import device as devices

    model, data, cfg, _ = bert_base_setup(scale, device, precision)
    graphs = True
    if variant == "inductor-graphs":  # inductor's graphs own their outputs: a step begins with a mark, grads are freed
        for block in model.structure.layers:
            block.compile(mode="reduce-overhead")
        graphs, inner = False, model.forward

        def forward(*args, **kwargs):
            torch.compiler.cudagraph_mark_step_begin()
            return inner(*args, **kwargs)

        model.forward = forward
    elif variant != "eager":
        from labcore.engine import step

        torch._inductor.config.fallback_random = variant == "compiled-torch-rng"
        if variant == "compiled-thread-local":
            step.CAPTURE_ERROR_MODE = "thread_local"
        training.CAPTURE_COMPILED = True
        devices.compile_blocks(model)
    started = time.perf_counter()
    try:
        _, tokens, first = timed_loop(model, data, dataclasses.replace(cfg, graphs=graphs), scale.warmup)
    except Exception:  # the line says what failed and where
        print(f"(f) {FUSED_VARIANTS[variant]}: failed after {time.perf_counter() - started:.1f} s")
        lines = traceback.format_exc().strip().splitlines()  # the chain: the first error, then what followed
        print("\n".join("    " + line for line in (lines if len(lines) <= 60 else lines[:35] + ["..."] + lines[-20:])),
              flush=True)
        return
    flops, rate = devices.module_flops_per_token(model, scale.bert_length), peak(device, precision)
    sheet = datasheet_peak(device)
    against_sheet = f", {devices.mfu(tokens, flops, sheet):.1%} of the datasheet's {sheet / 1e12:,.0f}" if sheet else ""
    print(f"(f) bert-base-sized batch {scale.bert_batch} x {scale.bert_length} {precision}, graphs on, "
          f"{FUSED_VARIANTS[variant]}: {tokens:,.0f} tokens/s, MFU {devices.mfu(tokens, flops, rate):.1%}"
          f"{against_sheet}; {first:.1f} s to the first timed step", flush=True)


if __name__ == "__main__":  # one (f) variant, in a process of its own: VARIANT SCALE
    import sys

    from gpu_data import CPU_TRY, GPU
    from labcore.machine import device as devices

    chosen, scale_name = sys.argv[1], sys.argv[2]
    scale = {"cpu": CPU_TRY, "gpu": GPU}[scale_name]
    if scale is CPU_TRY:
        import os

        os.environ[devices.SETTING] = "cpu"
    where = devices.choose_device()
    exact = devices.resolve_precision("auto", where)
    devices.setup(where, exact)
    fused_variant(chosen, scale, where, exact)
