"""Training throughput: the lab's loop against a plain transformers.Trainer, same model, data, batch, length.

MiniLM on dna-splice, batch 16, full fine-tune, in one process. Three measurements, each the wall time
of N optimizer steps (data loading included, evaluation excluded):

* lab: the lab's loop as a run on this device trains (sliced vocabulary, bf16 autocast where the CPU or
  GPU has native bf16, length bucketing, dynamic padding, fused AdamW, and on the CPU the keep-mask
  dropout and plain attention of labcore.models.cpu_kernels);
* trainer: transformers.Trainer with its defaults (fp32, full vocabulary);
* trainer_same_precision: the Trainer given the lab's precision (bf16=True where the lab uses bf16).

A shared machine's speed drifts by 10-20 % over minutes, so the three are measured in turn for several
rounds and each figure is the median over the rounds; every round is printed too.

Last line: throughput lab=<samples/s> trainer=<samples/s> ratio=<x> trainer_same_precision=<samples/s>
ratio_same_precision=<y>
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def lab_throughput(steps: int, batch: int, precision: str = "auto") -> tuple[float, str, object]:
    from labcore import device as devices
    from labcore import protocols
    from labcore.run import Prepared, device_kernels, train_config
    from labcore.spec import make_spec
    from labcore.train import train

    device = devices.choose_device()
    spec = make_spec(model="minilm", discipline="dna-splice", batch_size=batch, max_steps=steps)
    prepared = Prepared(spec)
    model = prepared.model
    protocols.PROTOCOLS["full"].apply(model, protocols.parse_protocol_params("full", {}), 0)
    model.to(device)
    device_kernels(model, device)
    precision = devices.resolve_precision(precision, device)
    devices.setup(device, precision)
    # The run's own configuration, less evaluation and early stopping (not part of a step's cost).
    cfg = dataclasses.replace(train_config(prepared.spec, loss="ce", precision=precision, device=device),
                              eval_every=10**9, patience=0, seed=0)
    data = prepared.splits["train"]
    start = time.perf_counter()
    for event in train(model, lambda b: model(b.inputs, b.mask), data, cfg, evaluate=lambda: {"value": 0.0}):
        if event["type"] == "step" and event["step"] == steps:  # the loss read there waits for the device
            elapsed = time.perf_counter() - start
    return steps * batch / elapsed, precision, prepared


def trainer_throughput(steps: int, batch: int, bf16: bool) -> float:
    import torch
    from transformers import (AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer,
                              TrainingArguments)

    from labcore import assets
    from labcore.run import Prepared
    from labcore.spec import make_spec

    # The same examples, as full-vocabulary ids (no slicing): what a Trainer user would feed.
    prepared = Prepared(make_spec(model="minilm", discipline="dna-splice", slice_vocab=False))
    train_split = prepared.splits["train"]
    rows = [{"input_ids": x.tolist(), "attention_mask": [1] * len(x), "labels": int(y)}
            for x, y in zip(train_split.inputs, train_split.labels)]
    folder = assets.require("minilm")
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=3)
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=batch, max_steps=steps,
                                 learning_rate=5e-5, warmup_steps=0.06, report_to="none", save_strategy="no",
                                 logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0,
                                 bf16=bf16, use_cpu=not torch.cuda.is_available())
        trainer = Trainer(model=model, args=args, train_dataset=rows,
                          data_collator=DataCollatorWithPadding(prepared.tokenizer))
        start = time.perf_counter()
        trainer.train()
        elapsed = time.perf_counter() - start
    return steps * batch / elapsed


def compare_precisions(steps: int, batch: int, rounds: int) -> None:
    """The lab's step in bf16 autocast and in fp32, alternating; the median of each and what ``auto`` picks."""
    from labcore import device as devices

    rates: dict[str, list[float]] = {"bf16": [], "fp32": []}
    for round_ in range(1, rounds + 1):
        for precision in rates:
            rates[precision].append(lab_throughput(steps, batch, precision)[0])
        print(f"round {round_}: " + ", ".join(f"{p} {v[-1]:.1f}" for p, v in rates.items()) + " samples/s", flush=True)
    bf16, fp32 = (statistics.median(v) for v in rates.values())
    device = devices.choose_device()
    print(f"precisions bf16={bf16:.1f} fp32={fp32:.1f} bf16_over_fp32={bf16 / fp32:.2f} "
          f"auto={devices.resolve_precision('auto', device)} native_bf16={devices.native_bf16(device)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="lab, trainer, trainer-same-precision in turn")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: every core)")
    parser.add_argument("--precisions", action="store_true",
                        help="instead: the lab's step under bf16 autocast and in fp32, in turn (which is faster here)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    if args.precisions:
        compare_precisions(args.steps, args.batch, args.rounds)
        return
    labs, trainers, sames = [], [], []
    for round_ in range(1, args.rounds + 1):
        lab, precision, _ = lab_throughput(args.steps, args.batch)
        trainer = trainer_throughput(args.steps, args.batch, bf16=False)
        same = trainer_throughput(args.steps, args.batch, bf16=precision == "bf16")
        labs.append(lab), trainers.append(trainer), sames.append(same)
        print(f"round {round_}: lab {lab:.1f} ({precision}), trainer (defaults, fp32) {trainer:.1f}, "
              f"trainer ({precision}) {same:.1f} samples/s", flush=True)
    lab, trainer, same = (statistics.median(v) for v in (labs, trainers, sames))
    print(f"throughput lab={lab:.1f} trainer={trainer:.1f} ratio={lab / trainer:.2f} "
          f"trainer_same_precision={same:.1f} ratio_same_precision={lab / same:.2f}")


if __name__ == "__main__":
    main()
