"""The lab on a GPU, in one command: four measurements, one line of figures each, with an MFU for each.

    python bench/gpu.py                  # on a CUDA machine: (a)-(d) below; without CUDA it says so and exits 0
    python bench/gpu.py --profile        # and, after each, torch.profiler's table of the top kernels
    python bench/gpu.py --pack DIR       # here: what a bare GPU machine needs, into DIR (under 64 MiB)
    python bench/gpu.py --carried DIR    # there: with DIR instead of the lab's assets and data registry
    python bench/gpu.py --try-on-cpu     # tiny versions of (a)-(e) on this CPU, to check the code paths

(a) finetune: the lab's fine-tune step (MiniLM on dna-splice, the GPU ``standard`` batch of 64) against
    ``transformers.Trainer`` at the same precision on the same model and examples (full vocabulary, as a
    Trainer user feeds them); samples/s after a warm-up, and the ratio (target: lab >= 1.3x).
(b) bert-base: a BERT-base sized model (12 x 768, randomly initialised: weights do not change speed) in the
    lab's loop at batch 32 x 128 tokens; tokens/s and MFU (target: >= 35 % of the measured bf16 matmul rate).
(c) splice-standard: MiniLM on dna-splice end to end at the ``standard`` budget as a GPU resolves it (batch
    64, lr 1e-4): test accuracy, wall time, training tokens/s against the CPU quick run's typical tokens/s
    (target: >= 20x).
(d) mlm: the MLM pretraining step (RoBERTa-base's shape, ``--size paper``) of labcore.pretrain against a plain
    transformers RobertaForMaskedLM step, tokens/s and MFU; on CUDA the lab's step replayed from graphs (a spec's
    ``step: graphs``, its masked positions in fixed slots) and, side by side, without (target: lab >= 1.5x plain).
(e) compile: (a) and (b) again with torch.compile on (the lab's regional compile of each block, as
    TRANSFERLAB_COMPILE=1 does; the Trainer's ``torch_compile``), against the same loops eager: the rates and
    the compile seconds (time to the first timed step, compiled minus eager).

(f) fused (only on request, ``--only f``): (b) with each block compiled (fused kernels) inside the step's CUDA graph,
    against the graph of eager kernels, side by side; the rate, MFU and the compile's seconds. On one H200
    (2026-11-28, torch 2.11) the compiled model's first eager step failed in the embeddings' dropout ("Offset
    increment outside graph capture encountered unexpectedly"): the line then says so.

MFU is training FLOPs per token (labcore.machine.device: 6 per trained matrix parameter, 4 per frozen one, plus
attention; the MLM step's own count, labcore.pretrain.engine) times tokens/s, over the device's matrix-product
rate measured in the same precision (kept in the machine's device-rates.json, labcore.paths.device_rates_path).

The GPU machines this project borrows have torch, transformers and numpy but not the lab's other
requirements (streamlit, diskcache, datasets, music21) and reach no registry: ``--pack DIR`` writes MiniLM
in bf16 (config, tokenizer, weights: ~44 MB), dna-splice as the lab encodes it (JSON: the run's random
mapping applied, the vocabulary sliced) and the MLM batches, and ``--carried DIR`` reads them there. Only
torch, transformers, numpy (and the Trainer's accelerate) are imported in that mode.
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
from types import SimpleNamespace
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_data import (CPU_TRY, GPU, SPLICE_CLASSES, Scale, Splice, mlm_batches, pack, splice_from_lab,  # noqa: E402
                      splice_from_pack, use_carried_vocabulary)


# ------------------------------------------------------------------------------------------ helpers
def lab_minilm(splice: Splice, device: str, seed: int = 0):
    """MiniLM as a run builds it for dna-splice: sliced vocabulary, a 3-class head, the full protocol."""
    from labcore import models, protocols
    from labcore.models.cpu_kernels import kernels_for

    base, tokenizer, info = models.load_backbone(f"local:{splice.model_folder}", "pretrained", seed=seed)
    model = models.build_lab_model_from(base, tokenizer, info, adapter="vocab", num_outputs=SPLICE_CLASSES,
                                        vocab_rows=splice.vocab_rows, seed=seed)
    protocols.PROTOCOLS["full"].apply(model, protocols.parse_protocol_params("full", {}), seed)
    model.to(device)
    kernels_for(model.backbone, device)
    return model


def config(device: str, precision: str, **values: Any):
    """The loop's configuration: the standard budget as a GPU resolves it, then ``values``."""
    from labcore.runspec import TrainParams, train_defaults
    from labcore.engine.train import TrainConfig

    budget = train_defaults("standard", "full", "cuda")
    params = {f.name: budget[f.name] for f in dataclasses.fields(TrainParams)}
    return TrainConfig(**{**params, "seed": 0, "loss": "ce", "precision": precision, "device": device, **values})


def timed_loop(model, data, cfg, warmup: int) -> tuple[float, float, float]:
    """(samples/s, real tokens/s, seconds to the first timed step) of the lab's loop after ``warmup`` steps,
    timed between step events (each reads the losses, so the device has finished the steps before it)."""
    from labcore.engine.train import train
    from pretrain import step_sizes

    counted = step_sizes(data.lengths(), cfg)  # a replayed graph calls no forward to count in
    marks: dict[int, float] = {}

    def forward(batch):
        return model(batch.inputs, batch.mask)

    started = time.perf_counter()
    for event in train(model, forward, data, cfg, evaluate=lambda: {"value": 0.0}):
        if event["type"] == "step":
            marks[event["step"]] = time.perf_counter()
        elif event["type"] == "train_end" and event.get("step_note"):
            print(f"    {event['step_note']}", flush=True)
    first, last = min(s for s in marks if s >= warmup), max(marks)
    elapsed = marks[last] - marks[first]
    done = counted[first:last]
    return sum(n for n, _ in done) / elapsed, sum(t for _, t in done) / elapsed, marks[first] - started


def peak(device: str, precision: str) -> float:
    from labcore.machine import device as devices

    return devices.peak_flops(device, precision)


def profile(label: str, device: str, run: Callable[[], Any], rows: int = 15) -> None:
    """torch.profiler's top kernels (by time on the device) while ``run`` runs."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with torch_profile(activities=activities) as prof:
        run()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    print(f"--- profile of {label}: top {rows} by {key}")
    print(prof.key_averages().table(sort_by=key, row_limit=rows), flush=True)


def report(line: str, profiled: tuple | bool) -> None:
    """Print a measurement's line; then, where ``profiled`` is (label, model, data, cfg), :func:`profile` two
    loss-read intervals of that loop."""
    print(line, flush=True)
    if profiled:
        label, model, data, cfg = profiled
        short = dataclasses.replace(cfg, max_steps=min(cfg.max_steps, 2 * cfg.read_every))
        profile(label, cfg.device, lambda: timed_loop(model, data, short, 0))


# ------------------------------------------------------------------------------------ (a) fine-tune
def trainer_rate(splice: Splice, batch: int, warmup: int, timed: int, precision: str, device: str,
                 compiled: bool = False) -> tuple[float, float]:
    """(samples/s, seconds to the first timed step) of transformers.Trainer on the same examples (full
    vocabulary), after ``warmup`` steps; ``compiled``: with its ``torch_compile``."""
    import torch
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainerCallback, TrainingArguments)

    cuda = device.startswith("cuda")
    rows = [{"input_ids": ids, "attention_mask": [1] * len(ids), "labels": int(y)}
            for ids, y in zip(splice.full_ids("train"), splice.splits["train"].labels)]
    model = AutoModelForSequenceClassification.from_pretrained(splice.model_folder, num_labels=SPLICE_CLASSES,
                                                               dtype=torch.float32)
    marks: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                if cuda:
                    torch.cuda.synchronize()
                marks["start"] = time.perf_counter()

        def on_train_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            marks["end"] = time.perf_counter()

    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=batch, max_steps=warmup + timed,
                                 learning_rate=1e-4, warmup_steps=0.06, report_to="none", save_strategy="no",
                                 logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0,
                                 bf16=precision == "bf16", tf32=cuda and precision == "fp32" or None,
                                 use_cpu=not cuda, torch_compile=compiled)
        tokenizer = AutoTokenizer.from_pretrained(splice.model_folder)
        trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=DataCollatorWithPadding(tokenizer),
                          callbacks=[Clock()])
        marks["train"] = time.perf_counter()
        trainer.train()
    return timed * batch / (marks["end"] - marks["start"]), marks["start"] - marks["train"]


def bench_finetune(splice: Splice, scale: Scale, device: str, precision: str, profiled: bool) -> None:
    from labcore.machine import device as devices

    data = splice.splits["train"]
    cfg = config(device, precision, batch_size=scale.finetune_batch, max_steps=scale.warmup + scale.timed,
                 eval_every=10**9, patience=0, min_evals=0)
    eager_cfg, graph_cfg = dataclasses.replace(cfg, graphs=False), dataclasses.replace(cfg, graphs=True)
    eagers, labs, trainers = [], [], []
    tokens_per_sample = float(data.lengths().mean())
    for _ in range(scale.rounds):  # side by side, round by round: graphs off, graphs on, the Trainer
        eagers.append(timed_loop(lab_minilm(splice, device), data, eager_cfg, scale.warmup))
        labs.append(timed_loop(lab_minilm(splice, device), data, graph_cfg, scale.warmup))
        trainers.append(trainer_rate(splice, scale.finetune_batch, scale.warmup, scale.timed, precision, device)[0])
    eager_samples = statistics.median(s for s, _, _ in eagers)
    lab_samples = statistics.median(s for s, _, _ in labs)
    lab_tokens = statistics.median(t for _, t, _ in labs)
    trainer = statistics.median(trainers)
    model = lab_minilm(splice, device)
    flops, rate = devices.module_flops_per_token(model, tokens_per_sample), peak(device, precision)
    line = (f"(a) finetune minilm dna-splice batch {scale.finetune_batch} {precision}: lab graphs on "
            f"{lab_samples:,.1f} samples/s ({lab_tokens:,.0f} tokens/s), graphs off {eager_samples:,.1f} "
            f"({lab_samples / eager_samples:.2f}x), Trainer {trainer:,.1f} samples/s, lab/Trainer "
            f"{lab_samples / trainer:.2f}x (target >= 2), MFU lab {devices.mfu(lab_tokens, flops, rate):.1%} Trainer "
            f"{devices.mfu(trainer * tokens_per_sample, flops, rate):.1%}; {scale.rounds} rounds, medians")
    report(line, profiled and ("(a) the lab's fine-tune step", model, data, graph_cfg))


# ------------------------------------------------------------------------------------ (b) BERT-base
def bench_bert_base(scale: Scale, device: str, precision: str, profiled: bool) -> None:
    from labcore.machine import device as devices

    rows = {}
    for graphs in (False, True):  # side by side in this process
        model, data, cfg, bert = bert_base_setup(scale, device, precision)
        rows[graphs] = timed_loop(model, data, dataclasses.replace(cfg, graphs=graphs), scale.warmup)[1]
    tokens = rows[True]
    flops, rate = devices.module_flops_per_token(model, scale.bert_length), peak(device, precision)
    sheet = datasheet_peak(device)
    against_sheet = f", {devices.mfu(tokens, flops, sheet):.1%} of the datasheet's {sheet / 1e12:,.0f} TFLOP/s " \
        "(target >= 25 %)" if sheet else ""
    report(f"(b) bert-base-sized ({bert.num_hidden_layers} x {bert.hidden_size}, random init) batch {scale.bert_batch} "
           f"x {scale.bert_length} {precision}: graphs on {tokens:,.0f} tokens/s, graphs off {rows[False]:,.0f} "
           f"({tokens / rows[False]:.2f}x), {flops / 1e6:,.0f} MFLOP/token, measured peak {rate / 1e12:,.1f} TFLOP/s, "
           f"MFU {devices.mfu(tokens, flops, rate):.1%} (target >= 35 %; graphs off "
           f"{devices.mfu(rows[False], flops, rate):.1%}){against_sheet}, memory peak "
           f"{devices.peak_memory_mb(device):,.0f} MB", profiled and ("(b) the bert-base step", model, data,
                                                                    dataclasses.replace(cfg, graphs=True)))


# The datasheet's dense bf16 tensor rate of the GPUs this lab has measured on (H100 and H200 SXM: 989 TFLOP/s).
DATASHEETS_BF16 = {"H100": 989e12, "H200": 989e12}


def datasheet_peak(device: str) -> float:
    """The datasheet's dense bf16 rate of ``device``'s GPU, or 0 where this table has none."""
    import torch

    if not device.startswith("cuda"):
        return 0.0
    name = torch.cuda.get_device_name(torch.device(device))
    return next((rate for model, rate in DATASHEETS_BF16.items() if model in name), 0.0)


def bert_base_setup(scale: Scale, device: str, precision: str):
    """(b)'s model, examples, loop configuration and BertConfig."""
    import numpy as np
    import torch
    from transformers import BertConfig, BertModel

    from labcore import models
    from labcore.data.encode import Encoded
    from labcore.models.backbones import backbone_info
    from labcore.models.cpu_kernels import kernels_for

    torch.manual_seed(0)
    bert = BertConfig(**scale.bert)
    bert._attn_implementation = "sdpa"
    base = BertModel(bert, add_pooling_layer=False)
    info = backbone_info("bert-base (random init)", base, None, init="random")
    model = models.build_lab_model_from(base, None, info, adapter="vocab", num_outputs=2)
    model.to(device)
    kernels_for(model.backbone, device)
    steps = scale.warmup + scale.timed
    rng = np.random.default_rng(0)
    n = steps * scale.bert_batch
    rows = [np.concatenate([[101], rng.integers(1000, bert.vocab_size, scale.bert_length - 2), [102]]) for _ in range(n)]
    data = Encoded(rows, rng.integers(0, 2, n))
    cfg = config(device, precision, batch_size=scale.bert_batch, max_steps=steps, eval_every=10**9, patience=0,
                 min_evals=0, lr=1e-4)
    return model, data, cfg, bert


# ------------------------------------------------------------------------- (c) splice, standard, end to end
def bench_splice_standard(splice: Splice | None, scale: Scale, device: str, precision: str, carried: bool) -> None:
    from labcore.machine import device as devices
    from labcore.runspec import MINILM_TOKENS_PER_S

    started = time.perf_counter()
    if not carried:  # the lab's own run, exactly as a worker runs it
        from labcore.engine.run import run
        from labcore.runspec import make_spec

        extra = {"max_steps": scale.e2e_max_steps, "train_size": "64"} if scale.e2e_max_steps else {}
        record = run(make_spec(model="minilm", discipline="dna-splice", budget="standard", **extra), device=device)
        accuracy, tokens, wall, mfu = (record.test.get("accuracy"), record.tokens_per_s, record.wall_time_s,
                                       record.mfu)
        batch, lr, steps = record.spec["batch_size"], record.spec["lr"], record.steps_done
    else:  # the same steps from the carried data: model, loop, best-on-validation, test
        from labcore.engine.evaluate import evaluate_logits, predict
        from labcore.engine.train import train

        info = SimpleNamespace(output_kind="class", metric="accuracy", vote_by_group=False)
        model = lab_minilm(splice, device)
        from labcore.machine.device import graphs_wanted

        cfg = config(device, precision, graphs=graphs_wanted(device),
                     **({"max_steps": scale.e2e_max_steps} if scale.e2e_max_steps else {}))
        validation = splice.splits["validation"]
        if scale.e2e_max_steps:
            validation = validation.subset(range(min(64, len(validation))))

        def evaluate() -> dict[str, float]:
            result = evaluate_logits(predict(model, validation, cfg.eval_batch_size, device, precision), validation, info)
            return {"value": result["accuracy"], "loss": result["loss"]}

        end: dict[str, Any] = {}
        for event in train(model, lambda b: model(b.inputs, b.mask), splice.splits["train"], cfg, evaluate=evaluate):
            if event["type"] == "train_end":
                end = event
        test = splice.splits["test"]
        accuracy = evaluate_logits(predict(model, test, cfg.eval_batch_size, device, precision), test, info)["accuracy"]
        tokens = end["samples_per_s"] * float(splice.splits["train"].lengths().mean())
        wall = time.perf_counter() - started
        flops = devices.module_flops_per_token(model, float(splice.splits["train"].lengths().mean()))
        mfu = devices.mfu(tokens, flops, peak(device, precision))
        batch, lr, steps = cfg.batch_size, cfg.lr, end["steps_done"]
        print(f"(c) {end.get('step_note') or 'training step: eager'}", flush=True)
    print(f"(c) splice-standard minilm dna-splice batch {batch} lr {lr:g} {precision}: test accuracy {accuracy:.3f}, "
          f"{steps} steps, wall {wall:.1f} s, {tokens:,.0f} tokens/s = {tokens / MINILM_TOKENS_PER_S:.1f}x the CPU quick "
          f"run's typical {MINILM_TOKENS_PER_S:,} tokens/s (target >= 20x), MFU {mfu:.1%}", flush=True)


# ---------------------------------------------------------------------------------------- (d) MLM
def bench_mlm(scale: Scale, device: str, precision: str, carried: Path | None, profiled: bool) -> None:
    import pretrain as pretrain_bench

    from labcore.machine import device as devices
    from labcore.pretrain.engine import useful_flops_per_token

    data = mlm_batches(scale, carried)
    length = sum(real for _, _, real in data) / sum(len(ids) for ids, _, _ in data)
    graphs = devices.graphs_wanted(device)
    lab = pretrain_bench.lab_rate(data, scale.warmup, precision, device, scale.mlm_size, graphs=graphs)
    eager = pretrain_bench.lab_rate(data, scale.warmup, precision, device, scale.mlm_size) if graphs else lab
    plain = pretrain_bench.plain_rate(data, scale.warmup, precision, device, scale.mlm_size)
    flops = useful_flops_per_token(scale.mlm_size, length)
    rate = peak(device, precision)
    print(f"(d) mlm pretraining ({scale.mlm_size} size, batch {scale.mlm_batch}, nested corpus) {precision}: lab "
          f"{'graphs on' if graphs else 'eager'} {lab:,.0f} tokens/s, graphs off {eager:,.0f} ({lab / eager:.2f}x), "
          f"plain transformers {plain:,.0f} tokens/s, lab/plain {lab / plain:.2f}x (target >= 1.5), MFU lab "
          f"{devices.mfu(lab, flops, rate):.1%} (useful FLOPs: decoder on the masked 15 % only)", flush=True)
    if profiled:
        few = data[:scale.warmup + min(scale.timed, 25)]
        profile("(d) the lab's MLM step", device, lambda: pretrain_bench.lab_rate(few, scale.warmup, precision, device,
                                                                                 scale.mlm_size, graphs=graphs))


# ------------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's top kernels after each")
    parser.add_argument("--pack", metavar="DIR", help="write what a bare GPU machine needs into DIR, and exit")
    parser.add_argument("--carried", metavar="DIR", help="read the model and data from DIR (written by --pack)")
    parser.add_argument("--try-on-cpu", action="store_true", help="tiny versions on the CPU: check the code paths")
    parser.add_argument("--only", default="abcde", help="which measurements, e.g. ab (default abcde; f on request)")
    args = parser.parse_args(argv)
    if args.pack:
        pack(Path(args.pack))
        return 0
    import torch

    if not torch.cuda.is_available() and not args.try_on_cpu:
        print(f"no CUDA device here (torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}): the GPU "
              f"figures are measured on a machine with one. `--try-on-cpu` runs tiny versions here to check the code.")
        return 0
    from labcore.machine import device as devices

    if args.try_on_cpu:
        os.environ[devices.SETTING] = "cpu"
    device = devices.choose_device()
    precision = devices.resolve_precision("auto", device)
    scale = CPU_TRY if args.try_on_cpu else GPU
    for note in devices.setup(device, precision):
        print(note)
    carried = Path(args.carried) if args.carried else None
    if carried is not None:
        use_carried_vocabulary(carried)
    print(f"device {device} ({devices.describe(device)}), {precision}, torch {torch.__version__}; measured "
          f"{precision} matrix-product rate {peak(device, precision) / 1e12:,.2f} TFLOP/s", flush=True)
    splice = None
    if set(args.only) & set("ace") and (carried is not None or set(args.only) & set("ae")):
        splice = splice_from_pack(carried) if carried is not None else splice_from_lab(
            "256" if args.try_on_cpu else "full")
    if "a" in args.only:
        bench_finetune(splice, scale, device, precision, args.profile)
    if "b" in args.only:
        bench_bert_base(scale, device, precision, args.profile)
    if "c" in args.only:
        bench_splice_standard(splice, scale, device, precision, carried is not None)
    if "d" in args.only:
        bench_mlm(scale, device, precision, carried, args.profile)
    if "e" in args.only:
        from gpu_compile import bench_compile

        bench_compile(splice, scale, device, precision)
    if "f" in args.only:
        from gpu_compile import bench_fused

        bench_fused(scale, device, precision)
    return 0


if __name__ == "__main__":
    sys.exit(main())
