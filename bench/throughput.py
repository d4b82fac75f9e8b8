"""Training throughput: the lab's loop against a plain transformers.Trainer, same model, data, batch, length,
each against this machine's measured limit.

MiniLM, batch 16, full fine-tune, in one process, on dna-splice (fixed length) or text-sentiment (variable
length, ``--discipline``). Each measurement is the wall time of ``--steps`` optimizer steps after ``--warmup``
steps (data loading included, evaluation excluded):

* lab: the lab's loop as a run on this device trains (sliced vocabulary, the precision ``auto`` gives here
  or ``--precision``, length bucketing, dynamic padding, fused AdamW, the pooled-row last block, and on the
  CPU the fused dropout and plain attention of labcore.models.cpu_kernels);
* trainer: transformers.Trainer with its defaults (fp32, full vocabulary);
* trainer_same_precision: the Trainer given the lab's precision (bf16=True where the lab uses bf16).

Each is reported as samples/s, real tokens/s, FLOPs a real token as its step computes them (labcore.engine.flops:
counted, so the lab's pooled-row last block counts only what it computes), GFLOP/s and MFU against this
machine's kept peak (labcore.machine.device.peak_flops: large products at the threads in use, best of several
readings, measured once; the figure every run's record uses). The peak is also read again in each round, after
its measurements, and each round's MFU against that reading is printed with their median: a busy host lowers
both the step and the reading, so this MFU is the step against the limit it met. The lab's GEMM floor is the
time its step's linear products alone take (labcore.engine.flops.gemm_floor): the samples/s no change outside the
matrix products can pass.

A shared machine's speed drifts by 10-20 % over minutes, so the three are measured in turn for several
rounds and each figure is the median over the rounds; every round is printed too.

``--breakdown`` instead prints where the lab's step spends its time, operator by operator (torch.profiler).

Last line: throughput lab=<samples/s> trainer=<samples/s> ratio=<x> trainer_same_precision=<samples/s>
ratio_same_precision=<y> lab_mfu=<m> trainer_mfu=<t> peak_gflops=<p> lab_mfu_round=<r> trainer_mfu_round=<s>
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass(frozen=True)
class Setting:
    """What one measurement trains: the discipline, batch, steps timed after the warm-up, and precision."""

    discipline: str = "dna-splice"
    batch: int = 16
    steps: int = 30
    warmup: int = 3
    precision: str = "auto"


@dataclass(frozen=True)
class Measured:
    """One measurement's speed, the FLOPs a real token its step computes, and its first steps' seconds."""

    samples_per_s: float
    tokens_per_s: float
    flops_per_token: float
    precision: str
    warmup_s: float  # seconds of the warm-up steps (compiling shows here)
    step_s: float  # seconds of one timed step

    def gflops(self) -> float:
        return self.tokens_per_s * self.flops_per_token / 1e9


def machine() -> str:
    """The CPU's name, whether it has native bf16 (AVX-512 BF16, AMX), and the load average: every figure's
    conditions."""
    from labcore.machine import device as devices

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    has = [f for f in ("avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return f"{devices.describe('cpu')} ({', '.join(has) or 'no avx512_bf16/amx'}); {load}"


def lab_prepared(setting: Setting):
    """The lab's run preparation for ``setting`` (model on the device, its CPU kernels) and its precision."""
    from labcore.machine import device as devices
    from labcore import protocols
    from labcore.engine.resolve import resolve_spec
    from labcore.engine.run import Prepared, device_kernels
    from labcore.runspec import make_spec

    device = devices.choose_device()
    spec = make_spec(model="minilm", discipline=setting.discipline, batch_size=setting.batch,
                     max_steps=setting.steps + setting.warmup)
    prepared = Prepared(resolve_spec(spec))
    protocols.PROTOCOLS["full"].apply(prepared.model, protocols.parse_protocol_params("full", {}), 0)
    prepared.model.to(device)
    device_kernels(prepared.model, device)
    precision = devices.resolve_precision(setting.precision, device)
    devices.setup(device, precision)
    return prepared, device, precision


def timed_config(prepared, precision: str, device):
    """The run's own training configuration, less evaluation and early stopping (not part of a step's cost)."""
    from labcore.engine.run import train_config

    return dataclasses.replace(train_config(prepared.spec, loss="ce", precision=precision, device=device),
                               eval_every=10**9, patience=0, seed=0)


def lab_speed(setting: Setting, prepare=lambda model: model, ready=lambda: None) -> Measured:
    """The lab's loop for ``setting``; ``prepare(model)`` gives the module the step calls (a lever's change);
    ``ready()`` is called once everything is prepared, before the first step (processes measured together
    wait there for each other)."""
    from labcore.engine import flops
    from labcore.engine.train import train

    prepared, device, precision = lab_prepared(setting)
    model = prepared.model
    stepped = prepare(model)
    cfg = timed_config(prepared, precision, device)
    data = prepared.splits["train"]
    marks: dict[int, float] = {}
    ready()
    start = time.perf_counter()
    for event in train(model, lambda b: stepped(b.inputs, b.mask), data, cfg, evaluate=lambda: {"value": 0.0}):
        if event["type"] == "step":  # the loss read there waits for the device
            marks[event["step"]] = time.perf_counter()
    total = setting.steps + setting.warmup
    elapsed = marks[total] - marks[setting.warmup]
    samples = setting.steps * setting.batch / elapsed
    per_token = flops.flops_per_token(model, lambda b: model(b.inputs, b.mask), data, device)
    return Measured(samples, samples * float(data.lengths().mean()), per_token, precision,
                    marks[setting.warmup] - start, elapsed / setting.steps)


def lab_floor(setting: Setting):
    """The GEMM floor of the lab's timed steps: the linear products of the very batches :func:`lab_speed` times
    (the loop's order: seed 0, first epoch, after the warm-up), timed alone and summed; with their samples."""
    from labcore.engine import flops
    from labcore.data.encode import iterate

    prepared, device, precision = lab_prepared(setting)
    model = prepared.model
    floors, samples = [], 0
    batches = iterate(prepared.splits["train"], setting.batch, shuffle=True, seed=0, device=device,
                      skip=setting.warmup)
    for _, batch in zip(range(setting.steps), batches):
        calls = flops.linear_calls(model, lambda: model(batch.inputs, batch.mask))
        floors.append(flops.gemm_floor(calls, precision, device))
        samples += len(batch.index)
    return flops.GemmFloor(sum(f.seconds for f in floors), sum(f.flops for f in floors),
                           sum(f.products for f in floors)), samples


@dataclass(frozen=True)
class TrainerOptions:
    """The default Trainer's switches a user might turn: precision, length grouping, its torch_compile."""

    bf16: bool = False
    group_by_length: bool = False
    torch_compile: bool = False


def trainer_speed(setting: Setting, options: TrainerOptions = TrainerOptions()) -> Measured:
    import torch
    from transformers import (AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer,
                              TrainerCallback, TrainingArguments)

    from labcore import assets
    from labcore.engine import flops
    from labcore.data.encode import Encoded
    from labcore.engine.resolve import resolve_spec
    from labcore.engine.run import Prepared
    from labcore.runspec import make_spec

    # The same examples, as full-vocabulary ids (no slicing): what a Trainer user would feed.
    prepared = Prepared(resolve_spec(make_spec(model="minilm", discipline=setting.discipline, slice_vocab=False)))
    train_split = prepared.splits["train"]
    rows = [{"input_ids": x.tolist(), "attention_mask": [1] * len(x), "labels": int(y)}
            for x, y in zip(train_split.inputs, train_split.labels)]
    folder = assets.require("minilm")
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=prepared.info.num_outputs)
    marks: dict[int, float] = {}

    class Marks(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks[state.global_step] = time.perf_counter()

    total = setting.steps + setting.warmup
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=setting.batch, max_steps=total,
                                 learning_rate=5e-5, warmup_steps=0.06, report_to="none", save_strategy="no",
                                 logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0,
                                 bf16=options.bf16, torch_compile=options.torch_compile,
                                 train_sampling_strategy="group_by_length" if options.group_by_length else "random",
                                 use_cpu=not torch.cuda.is_available())
        trainer = Trainer(model=model, args=args, train_dataset=rows,
                          data_collator=DataCollatorWithPadding(prepared.tokenizer), callbacks=[Marks()])
        start = time.perf_counter()
        trainer.train()
    elapsed = marks[total] - marks[setting.warmup]
    samples = setting.steps * setting.batch / elapsed
    data = Encoded(list(train_split.inputs), train_split.labels)
    per_token = flops.flops_per_token(model, lambda b: model(input_ids=b.inputs, attention_mask=b.mask).logits,
                                      data)
    return Measured(samples, samples * float(train_split.lengths().mean()), per_token,
                    "bf16" if options.bf16 else "fp32", marks[setting.warmup] - start, elapsed / setting.steps)


def compare_precisions(setting: Setting, rounds: int) -> None:
    """The lab's step in bf16 autocast and in fp32, alternating; the median of each and what ``auto`` picks."""
    from labcore.machine import device as devices

    rates: dict[str, list[float]] = {"bf16": [], "fp32": []}
    for round_ in range(1, rounds + 1):
        for precision in rates:
            rates[precision].append(lab_speed(dataclasses.replace(setting, precision=precision)).samples_per_s)
        print(f"round {round_}: " + ", ".join(f"{p} {v[-1]:.1f}" for p, v in rates.items()) + " samples/s", flush=True)
    bf16, fp32 = (statistics.median(v) for v in rates.values())
    device = devices.choose_device()
    print(f"precisions bf16={bf16:.1f} fp32={fp32:.1f} bf16_over_fp32={bf16 / fp32:.2f} "
          f"auto={devices.resolve_precision('auto', device)} native_bf16={devices.native_bf16(device)}")


MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def step_breakdown(setting: Setting, rows: int = 14) -> list[str]:
    """Where the lab's step spends its time, by operator: torch.profiler's self time per step over
    ``setting.steps`` steps after the warm-up, the matrix products together and then the largest of the rest,
    each with its share of the step (the profiled steps' own wall time, which the profiler lengthens a little)."""
    from torch.profiler import ProfilerActivity, profile

    from labcore.data.encode import iterate
    from labcore.engine.train import LoopHooks, TrainingLoop

    prepared, device, precision = lab_prepared(setting)
    model = prepared.model
    loop = TrainingLoop(model, lambda b: model(b.inputs, b.mask), prepared.splits["train"],
                        timed_config(prepared, precision, device),
                        LoopHooks(evaluate=lambda: {"value": 0.0}))
    model.train()
    batches = iterate(prepared.splits["train"], setting.batch, shuffle=True, seed=0, device=device)
    for _, batch in zip(range(setting.warmup), batches):
        loop.step(batch)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _, batch in zip(range(setting.steps), batches):
            loop.step(batch)
        step_ms = (time.perf_counter() - start) / setting.steps * 1e3
    per_op = sorted(((e.self_cpu_time_total / 1e3 / setting.steps, e.key, e.count // setting.steps)
                     for e in prof.key_averages() if e.self_cpu_time_total > 0), reverse=True)
    products = sum(ms for ms, name, _ in per_op if name in MATRIX_PRODUCTS)
    lines = [f"step {step_ms:.1f} ms ({precision}, profiled): matrix products ({', '.join(MATRIX_PRODUCTS)}) "
             f"{products:.1f} ms ({products / step_ms:.1%}); the largest of the rest:"]
    for ms, name, calls in [op for op in per_op if op[1] not in MATRIX_PRODUCTS][:rows]:
        lines.append(f"  {name:<40} {ms:6.1f} ms {ms / step_ms:6.1%} ({calls} calls a step)")
    return lines


def describe(name: str, m: Measured, peak: float) -> str:
    return (f"{name:<26} {m.samples_per_s:7.1f} samples/s {m.tokens_per_s:8,.0f} tokens/s "
            f"{m.flops_per_token / 1e6:6.1f} MFLOP/token {m.gflops():6.1f} GFLOP/s MFU {m.gflops() * 1e9 / peak:5.1%}")


def median_measured(values: list[Measured]) -> Measured:
    """Each field's median over the rounds (FLOPs a token and precision are the same in every round)."""
    return Measured(*(statistics.median(getattr(v, f.name) for v in values) if f.name != "precision"
                      else values[0].precision for f in dataclasses.fields(Measured)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=3, help="steps before the timing starts")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="lab, trainer, trainer-same-precision in turn")
    parser.add_argument("--discipline", default="dna-splice", help="dna-splice (fixed length) or text-sentiment")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"], help="the lab's precision")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: every core)")
    parser.add_argument("--precisions", action="store_true",
                        help="instead: the lab's step under bf16 autocast and in fp32, in turn (which is faster here)")
    parser.add_argument("--breakdown", action="store_true",
                        help="instead: where one lab step's time goes, by operator (torch.profiler, --steps steps)")
    args = parser.parse_args()
    import torch

    from labcore.machine import device as devices

    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    setting = Setting(args.discipline, args.batch, args.steps, args.warmup, args.precision)
    print(f"{machine()}; {torch.get_num_threads()} threads", flush=True)
    if args.precisions:
        compare_precisions(setting, args.rounds)
        return
    if args.breakdown:
        print("\n".join(step_breakdown(setting)))
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    labs, trainers, sames, floors = [], [], [], []
    round_mfus: dict[str, list[float]] = {"lab": [], "trainer": []}
    reads: dict[str, list[float]] = {}
    for round_ in range(1, args.rounds + 1):
        lab = lab_speed(setting)
        trainer = trainer_speed(setting)
        same = trainer_speed(setting, TrainerOptions(bf16=lab.precision == "bf16"))
        floors.append(lab_floor(setting))
        labs.append(lab), trainers.append(trainer), sames.append(same)
        # The machine's speed drifts with what else its host runs: a peak read in the same round is the limit
        # the round's steps met, where the kept peak is the machine's best moment.
        read = {p: devices.measure_matmul_flops(device, p) for p in sorted({lab.precision, "fp32"})}
        for p, rate in read.items():
            reads.setdefault(p, []).append(rate)
        round_mfus["lab"].append(lab.gflops() * 1e9 / read[lab.precision])
        round_mfus["trainer"].append(trainer.gflops() * 1e9 / read["fp32"])
        print(f"round {round_}: lab {lab.samples_per_s:.1f} ({lab.precision}), trainer (defaults, fp32) "
              f"{trainer.samples_per_s:.1f}, trainer ({lab.precision}) {same.samples_per_s:.1f} samples/s; "
              f"GEMM floor {floors[-1][0].seconds / floors[-1][1] * args.batch * 1e3:.0f} ms a step; peak read "
              f"{read[lab.precision] / 1e9:,.1f} GFLOP/s ({lab.precision}): MFU lab {round_mfus['lab'][-1]:.1%}, "
              f"trainer {round_mfus['trainer'][-1]:.1%}", flush=True)
    lab, trainer, same = (median_measured(v) for v in (labs, trainers, sames))
    lab_round_mfu, trainer_round_mfu = (statistics.median(round_mfus[k]) for k in ("lab", "trainer"))
    # The machine's kept peak (the best of its first measurements, the figure every run's record uses), beside
    # the rounds' own readings, which a busy moment lowers.
    peaks = {p: devices.peak_flops(device, p) for p in sorted({lab.precision, "fp32"})}
    for p, rate in peaks.items():
        print(f"peak {p}: {rate / 1e9:,.1f} GFLOP/s kept for this machine (products of {devices.PEAK_SIDE['cpu']}, "
              f"best of {devices.PEAK_READINGS} readings a measurement); read in the rounds: "
              f"{', '.join(f'{r / 1e9:,.1f}' for r in reads[p])}")
    floor, floor_samples = sorted(floors, key=lambda f: f[0].seconds / f[1])[len(floors) // 2]
    per_sample = floor.seconds / floor_samples
    print(describe(f"lab ({lab.precision})", lab, peaks[lab.precision]))
    print(describe("trainer (defaults, fp32)", trainer, peaks["fp32"]))
    print(describe(f"trainer ({same.precision})", same, peaks[same.precision]))
    print(f"lab GEMM floor: {per_sample * setting.batch * 1e3:.1f} ms a step of {setting.batch} (the timed steps' "
          f"{floor_samples} samples: {floor.flops / 1e9:.2f} GFLOP of linear products at "
          f"{floor.flops_per_s / 1e9:.1f} GFLOP/s, "
          f"{floor.flops_per_s / peaks[lab.precision]:.1%} of peak): at most {1 / per_sample:.1f} samples/s; the "
          f"step took {lab.step_s * 1e3:.1f} ms ({per_sample * setting.batch / lab.step_s:.1%} of it the floor)")
    print(f"MFU against each round's own peak reading (median over the rounds): lab {lab_round_mfu:.1%}, "
          f"trainer (defaults) {trainer_round_mfu:.1%}")
    print(f"{machine()}")
    print(f"throughput lab={lab.samples_per_s:.1f} trainer={trainer.samples_per_s:.1f} "
          f"ratio={lab.samples_per_s / trainer.samples_per_s:.2f} trainer_same_precision={same.samples_per_s:.1f} "
          f"ratio_same_precision={lab.samples_per_s / same.samples_per_s:.2f} "
          f"lab_mfu={lab.gflops() * 1e9 / peaks[lab.precision]:.3f} "
          f"trainer_mfu={trainer.gflops() * 1e9 / peaks['fp32']:.3f} peak_gflops={peaks[lab.precision] / 1e9:.1f} "
          f"lab_mfu_round={lab_round_mfu:.3f} trainer_mfu_round={trainer_round_mfu:.3f}")


if __name__ == "__main__":
    main()
