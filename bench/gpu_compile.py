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
def bench_fused(scale: Scale, device: str, precision: str) -> None:
    """(b) with every block compiled (inductor fuses dropout, residual, LayerNorm and the bias-GELU) and the step
    replayed from a graph, against the graph of eager kernels; side by side in this process. The compile happens in
    the step's eager warm-up steps, outside any capture."""
    from labcore.machine import device as devices

    rows = {}
    for compiled in (False, True):
        model, data, cfg, bert = bert_base_setup(scale, device, precision)
        if compiled:
            devices.compile_blocks(model)
        try:
            rows[compiled] = timed_loop(model, data, dataclasses.replace(cfg, graphs=True), scale.warmup)
        except RuntimeError as error:
            print(f"(f) bert-base-sized, graphs on, {'compiled' if compiled else 'eager'} blocks: failed: "
                  f"{str(error).splitlines()[0]}", flush=True)
            return
    flops, rate = devices.module_flops_per_token(model, scale.bert_length), peak(device, precision)
    sheet = datasheet_peak(device)
    tokens = rows[True][1]
    against_sheet = f", {devices.mfu(tokens, flops, sheet):.1%} of the datasheet's {sheet / 1e12:,.0f}" if sheet else ""
    print(f"(f) bert-base-sized batch {scale.bert_batch} x {scale.bert_length} {precision}, graphs on: compiled blocks "
          f"{tokens:,.0f} tokens/s (MFU {devices.mfu(tokens, flops, rate):.1%}{against_sheet}), eager blocks "
          f"{rows[False][1]:,.0f} (MFU {devices.mfu(rows[False][1], flops, rate):.1%}), {tokens / rows[False][1]:.2f}x; "
          f"compile {rows[True][2] - rows[False][2]:.1f} s", flush=True)
