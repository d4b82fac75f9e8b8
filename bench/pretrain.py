"""MLM pretraining step: the lab's against a plain transformers RoBERTa MLM step, same data and precision.

Both train the CPU default size (4 layers x 256 hidden, 4 heads, feed-forward 1,024, MiniLM's 30,522-id
vocabulary) on the same batches of the ``nested`` corpus (32 sequences of 92-122 tokens), the same 15 %
masking (80/10/10) and the same precision (bf16 autocast where the hardware has it, else fp32):

* lab: :mod:`labcore.pretrain` through the lab's training loop: the decoder, and the last block's queries
  and feed-forward, on the masked positions only; fused AdamW, and on the CPU the fused dropout and plain
  attention of ``labcore.models.cpu_kernels``;
* plain: ``RobertaForMaskedLM`` as a transformers user writes it: labels -100 on unmasked positions, so
  the decoder runs on every position; torch's AdamW; SDPA attention.

Each figure is real (non-padding) tokens per second of wall time over the timed steps (after warm-up
steps), the median over rounds that alternate the two. MFU is each step's FLOP/s over this device's
measured peak (labcore.machine.device.measure_matmul_flops: large products in the same precision on the same
threads, best of several readings), its FLOPs a token counted as the step computes them (labcore.engine.flops, on
the data's own sequences unpadded): the lab's decoder and last block's queries and feed-forward run on the
masked rows only, the plain step's on every row. The lab's count (which its records use too,
labcore.pretrain.engine.counted_flops_per_token) is printed beside the analytic one
(:func:`useful_flops_per_token`, 6 per parameter a row meets plus attention).

Last line: lab_tokens_s=<x> plain_tokens_s=<y> ratio=<x/y> mfu=<m> plain_mfu=<p>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import machine  # noqa: E402


def batches(n_steps: int, batch: int, seed: int = 0):
    """The same padded batches for both: (ids [B, L], attention mask [B, L], real tokens)."""
    from labcore.data.encode import iterate
    from labcore.pretrain.engine import corpus_data
    from labcore.pretrain.spec import PretrainSpec

    data = corpus_data(PretrainSpec(corpus="nested"), n_steps * batch, seed)
    return [(b.inputs, b.mask, int(b.mask.sum())) for b in iterate(data, batch, shuffle=True, seed=seed)]


def lab_parts(data, precision: str, device: str, size: str = "cpu", graphs: bool = False):
    """The lab's MLM model (its CPU kernels on), the loop's configuration, the batches as the loop's data (one
    Encoded row per sequence) and the objective whose forward the loop calls. ``graphs``: the step a pretraining
    spec's ``step: graphs`` takes (fixed prediction slots; replayed CUDA graphs on CUDA)."""
    import dataclasses

    import torch

    from labcore.data.encode import Encoded
    from labcore.models.cpu_kernels import kernels_for
    from labcore.pretrain.engine import MlmObjective, train_config
    from labcore.pretrain.mlm import build_masked_lm
    from labcore.pretrain.spec import SIZES, PretrainSpec

    spec = PretrainSpec(steps=len(data), sequences=sum(len(ids) for ids, _, _ in data), batch_size=len(data[0][0]),
                        step="graphs" if graphs else "eager")
    model = build_masked_lm(SIZES[size], 0).to(device)
    kernels_for(model.body, device)
    cfg = dataclasses.replace(train_config(spec, device, 0), precision=precision, eval_every=10**9)
    rows = [ids[i, :int(mask[i].sum())].numpy() for ids, mask, _ in data for i in range(len(ids))]
    encoded = Encoded(rows, torch.zeros(len(rows), dtype=torch.long).numpy())
    return model, cfg, encoded, MlmObjective(model, encoded, cfg, 0)


def step_sizes(lengths, cfg) -> list[tuple[int, int]]:
    """(examples, real tokens) of each step the training loop takes, from its own batch order: counted on the host,
    since a step replayed from a CUDA graph calls no forward to count in."""
    from labcore.data.encode import batch_order

    sizes: list[tuple[int, int]] = []
    for epoch in range(cfg.max_steps):
        sizes += [(len(i), int(lengths[i].sum())) for i in batch_order(lengths, cfg.batch_size, shuffle=True,
                                                                       seed=cfg.seed, epoch=epoch)]
        if len(sizes) >= cfg.max_steps:
            return sizes[:cfg.max_steps]
    return sizes


def lab_rate(data, warmup: int, precision: str, device: str, size: str = "cpu", graphs: bool = False) -> float:
    """Real tokens per second of the lab's MLM steps after the first ``warmup`` (timed between the loop's
    step events, whose loss read waits for the device: every step on a CPU, every 25 on CUDA)."""
    from labcore.engine.train import train

    model, cfg, encoded, objective = lab_parts(data, precision, device, size, graphs)
    sizes = step_sizes(encoded.lengths(), cfg)
    marks: dict[int, float] = {}
    for event in train(model, objective.forward, encoded, cfg, evaluate=lambda: {"value": 0.0}):
        if event["type"] == "step":
            marks[event["step"]] = time.perf_counter()
        elif event["type"] == "train_end" and event.get("step_note"):
            print(f"    {event['step_note']}", flush=True)
    first = min(s for s in marks if s >= warmup)
    if first == max(marks):
        raise SystemExit(f"too few steps to time: step events at {sorted(marks)}; give more --steps")
    return sum(t for _, t in sizes[first:max(marks)]) / (marks[max(marks)] - marks[first])


def counted_flops(data, device: str, size: str = "cpu") -> tuple[float, float]:
    """FLOPs a real token as each step computes them (labcore.engine.flops, on the data's own sequences, unpadded):
    the lab's MLM step and the plain RobertaForMaskedLM step."""
    import torch
    from transformers import RobertaForMaskedLM

    from labcore.engine import flops
    from labcore.pretrain import corpora
    from labcore.pretrain.mlm import mask_tokens, roberta_config
    from labcore.pretrain.spec import SIZES

    model, _, encoded, objective = lab_parts(data, "fp32", device, size)
    lab = flops.flops_per_token(model, objective.forward, encoded, device)
    plain = RobertaForMaskedLM(roberta_config(SIZES[size])).to(device).train()
    replacements = torch.from_numpy(corpora.sampleable_ids())

    def plain_loss(batch):
        inputs, positions, targets = mask_tokens(batch.inputs, batch.mask, replacements)
        labels = torch.full_like(batch.inputs, -100).view(-1)
        labels[positions] = targets
        return plain(input_ids=inputs, attention_mask=batch.mask, labels=labels.view_as(batch.inputs)).loss

    return lab, flops.flops_per_token(plain, plain_loss, encoded, device)


def plain_rate(data, warmup: int, precision: str, device: str, size: str = "cpu") -> float:
    """Real tokens per second of a plain transformers RoBERTa MLM loop after ``warmup`` steps."""
    import torch
    from transformers import RobertaForMaskedLM

    from labcore.machine.device import autocast
    from labcore.pretrain import corpora
    from labcore.pretrain.mlm import mask_tokens, roberta_config
    from labcore.pretrain.spec import SIZES

    torch.manual_seed(0)
    model = RobertaForMaskedLM(roberta_config(SIZES[size])).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    replacements = torch.from_numpy(corpora.sampleable_ids()).to(device)  # as the lab keeps them
    cuda = device.startswith("cuda")
    tokens, start = 0, None
    for step, (ids, mask, real) in enumerate(data, 1):
        ids, mask = ids.to(device), mask.to(device)
        inputs, positions, targets = mask_tokens(ids, mask, replacements)
        labels = torch.full_like(ids, -100).view(-1)
        labels[positions] = targets
        with autocast(precision, device):
            out = model(input_ids=inputs, attention_mask=mask, labels=labels.view_as(ids))
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step == warmup:
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        elif step > warmup:
            tokens += real
    if cuda:
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default="", help="cpu or cuda (default: cuda where there is one)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads (default: the cores other processes leave free, as a run chooses)")
    args = parser.parse_args()
    import torch

    from labcore.machine import cores
    from labcore.machine import device as devices
    from labcore.pretrain.engine import useful_flops_per_token

    requested = args.threads or os.cpu_count() or 1
    before = cores.sample()
    device = args.device or devices.choose_device()
    precision = devices.resolve_precision("auto", device)
    devices.setup(device, precision)
    data = batches(args.steps + args.warmup, args.batch)
    # As a run does: one thread fewer for each core other processes keep busy (unless --threads says).
    threads, busy = (requested, None) if args.threads else cores.choose_threads(requested, before)
    torch.set_num_threads(threads)
    print(cores.thread_note(threads, requested, busy), flush=True)
    length = sum(real for _, _, real in data) / sum(len(ids) for ids, _, _ in data)
    labs, plains = [], []
    for round_ in range(1, args.rounds + 1):
        lab = lab_rate(data, args.warmup, precision, device)
        plain = plain_rate(data, args.warmup, precision, device)
        labs.append(lab), plains.append(plain)
        print(f"round {round_}: lab {lab:,.0f} tokens/s, plain {plain:,.0f} tokens/s ({precision}, {device}, "
              f"{torch.get_num_threads()} threads)", flush=True)
    lab, plain = statistics.median(labs), statistics.median(plains)
    peak = devices.measure_matmul_flops(device, precision)
    flops = useful_flops_per_token("cpu", length)
    lab_counted, plain_counted = counted_flops(data, device)
    mfu, plain_mfu = lab * lab_counted / peak, plain * plain_counted / peak
    print(f"peak {peak / 1e9:,.1f} GFLOP/s ({precision} products of {devices.PEAK_SIDE['cpu']} at "
          f"{torch.get_num_threads()} threads, best of {devices.PEAK_READINGS} readings)")
    print(f"lab:   {lab:8,.0f} tokens/s {lab_counted / 1e6:6.1f} MFLOP a token counted ({flops / 1e6:.1f} by the "
          f"record's count) {lab * lab_counted / 1e9:6.1f} GFLOP/s MFU {mfu:.1%}")
    print(f"plain: {plain:8,.0f} tokens/s {plain_counted / 1e6:6.1f} MFLOP a token counted "
          f"{plain * plain_counted / 1e9:6.1f} GFLOP/s MFU {plain_mfu:.1%}")
    print(machine())
    print(f"lab_tokens_s={lab:.0f} plain_tokens_s={plain:.0f} ratio={lab / plain:.2f} mfu={mfu:.3f} "
          f"plain_mfu={plain_mfu:.3f}")

if __name__ == "__main__":
    main()
