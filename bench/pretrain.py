"""MLM pretraining step: the lab's against a plain transformers RoBERTa MLM step, same data and precision.

Both train the CPU default size (4 layers x 256 hidden, 4 heads, feed-forward 1,024, MiniLM's 30,522-id
vocabulary) on the same batches of the ``nested`` corpus (32 sequences of 92-122 tokens), the same 15 %
masking (80/10/10) and the same precision (bf16 autocast where the hardware has it, else fp32):

* lab: :mod:`labcore.pretrain` through the lab's training loop: the decoder, and the last block's queries
  and feed-forward, on the masked positions only; fused AdamW, and on the CPU the keep-mask dropout and plain attention of ``labcore.models.cpu_kernels``;
* plain: ``RobertaForMaskedLM`` as a transformers user writes it: labels -100 on unmasked positions, so
  the decoder runs on every position; torch's AdamW; SDPA attention.

Each figure is real (non-padding) tokens per second of wall time over the timed steps (after warm-up
steps), the median over rounds that alternate the two. MFU is the lab step's useful FLOP/s over this
device's measured peak (a large matrix product in the same precision on the same threads); useful FLOPs
per token (:func:`useful_flops_per_token`): 6 per parameter a row meets, forward and backward, counting the
LM head and the last block's queries and feed-forward for the masked share of rows only, plus the
attention products. The peak is measured in the same run, so a busy machine lowers both.

Last line: lab_tokens_s=<x> plain_tokens_s=<y> ratio=<x/y> mfu=<m>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def batches(n_steps: int, batch: int, seed: int = 0):
    """The same padded batches for both: (ids [B, L], attention mask [B, L], real tokens)."""
    from labcore.encode import iterate
    from labcore.pretrain.engine import corpus_data
    from labcore.pretrain.spec import PretrainSpec

    data = corpus_data(PretrainSpec(corpus="nested"), n_steps * batch, seed)
    return [(b.inputs, b.mask, int(b.mask.sum())) for b in iterate(data, batch, shuffle=True, seed=seed)]


def lab_rate(data, warmup: int, precision: str, device: str) -> float:
    import dataclasses

    import torch

    from labcore.encode import Encoded
    from labcore.models.cpu_kernels import use_cpu_kernels
    from labcore.pretrain.engine import MlmObjective, train_config
    from labcore.pretrain.mlm import build_masked_lm
    from labcore.pretrain.spec import SIZES, PretrainSpec
    from labcore.train import train

    spec = PretrainSpec(steps=len(data), sequences=sum(len(ids) for ids, _, _ in data), batch_size=len(data[0][0]))
    model = build_masked_lm(SIZES["cpu"], 0).to(device)
    if device == "cpu":
        use_cpu_kernels(model.body)
    cfg = dataclasses.replace(train_config(spec, device, 0), precision=precision, eval_every=10**9)
    # The loop's own data path, fed the very batches the plain step gets (one Encoded row per sequence).
    rows = [ids[i, :int(mask[i].sum())].numpy() for ids, mask, _ in data for i in range(len(ids))]
    encoded = Encoded(rows, torch.zeros(len(rows), dtype=torch.long).numpy())
    objective = MlmObjective(model, encoded, cfg, 0)
    tokens = [0]
    marks: dict[int, float] = {}

    def forward(batch):
        tokens[0] += int(batch.mask.sum()) if len(marks) >= warmup else 0
        return objective.forward(batch)

    for event in train(model, forward, encoded, cfg, evaluate=lambda: {"value": 0.0}):
        if event["type"] == "step":
            marks[event["step"]] = time.perf_counter()
    elapsed = marks[max(marks)] - marks[warmup]  # steps warmup+1 .. end, whose tokens were counted
    return tokens[0] / elapsed


def plain_rate(data, warmup: int, precision: str, device: str) -> float:
    import torch
    from transformers import RobertaForMaskedLM

    from labcore.pretrain import corpora
    from labcore.pretrain.mlm import mask_tokens, roberta_config
    from labcore.pretrain.spec import SIZES
    from labcore.train import autocast

    torch.manual_seed(0)
    model = RobertaForMaskedLM(roberta_config(SIZES["cpu"])).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    replacements = torch.from_numpy(corpora.sampleable_ids())
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
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if step == warmup:
            start = time.perf_counter()
        elif step > warmup:
            tokens += real
    return tokens / (time.perf_counter() - start)


def peak_flops(precision: str, device: str, n: int = 2048, repeats: int = 10) -> float:
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = max(best, 2 * n ** 3 / (time.perf_counter() - start))
    return best


def useful_flops_per_token(length: float, masked_share: float) -> float:
    """Training FLOPs a token needs when only the masked positions are predicted: every block but the last
    for every row; the last block's keys and values for every row and the rest for the masked rows; the LM
    head for the masked rows (6 FLOPs a parameter and token: forward and backward)."""
    from labcore.pretrain.mlm import VOCAB_SIZE
    from labcore.pretrain.spec import SIZES

    size = SIZES["cpu"]
    h = size.hidden
    block = 4 * h * h + 2 * h * size.ffn  # attention projections and feed-forward
    last = 2 * h * h + (2 * h * h + 2 * h * size.ffn) * masked_share
    head = (h * VOCAB_SIZE + h * h) * masked_share
    attention = 2 * length * h * (size.layers - 1 + masked_share)  # scores and weighted sum
    return 6 * ((size.layers - 1) * block + last + head + attention)


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

    from labcore.train import resolve_precision

    from labcore import cores

    requested = args.threads or os.cpu_count() or 1
    before = cores.sample()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    precision = resolve_precision("auto", device)
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
    peak = peak_flops(precision, device)
    flops = useful_flops_per_token(length, 0.15)
    mfu = lab * flops / peak
    print(f"peak {peak / 1e9:,.0f} GFLOP/s ({precision} matrix product); {flops / 1e6:,.1f} MFLOP a token; "
          f"the 6N limit at that peak: {peak / flops:,.0f} tokens/s")
    print(f"lab_tokens_s={lab:.0f} plain_tokens_s={plain:.0f} ratio={lab / plain:.2f} mfu={mfu:.3f}")


if __name__ == "__main__":
    main()
