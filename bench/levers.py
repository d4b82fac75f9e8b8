"""What makes a training step faster here: each lever measured side by side, in interleaved rounds, medians.

MiniLM, batch 16, full fine-tune, on dna-splice (fixed length) and text-sentiment (variable length). Every
measurement runs in a process of its own (an allocator is chosen when a process starts, and a compiled
model must not warm the next measurement), and the rounds interleave every lever and discipline, so a
shared machine's drift spreads over all of them. The levers:

* the default transformers.Trainer, with and without ``group_by_length`` (its length-grouped sampler) and
  its ``torch_compile``;
* the lab as it is in fp32, and under bf16 autocast;
* the lab in fp32 with: torch.compile, regional (each block compiled on its own, so the pooled-row last
  block and the adapter stay eager; compile cache warm under cache/inductor); one fused QKV product (the
  three weights concatenated inside forward, so protocols and checkpoints still see three parameters); torch's
  keep masks instead of the fused C dropout (``TRANSFERLAB_NATIVE=0``, labcore.models.cpu_kernels), and those
  keep masks built by one ``torch.where``; the plain attention's scores by ``baddbmm`` (scale and mask
  folded into the product);
  jemalloc or tcmalloc (Debian's libjemalloc2, libtcmalloc-minimal4) preloaded; OpenMP threads bound to
  cores (OMP_PROC_BIND=close, OMP_PLACES=cores).

Each lever's gain is its median samples/s over its baseline's (the row it is compared with). Compile seconds
are the warm-up steps' time beyond what as many steady steps take, reported apart: a run pays them once per
process, the cache makes later processes' compiles shorter. ``--quick`` keeps each measurement short.

Last lines: one table, one row per lever: discipline, samples/s, baseline, gain, compile seconds, adopted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from throughput import Setting, TrainerOptions, lab_speed, machine, trainer_speed  # noqa: E402

from labcore.machine.device import compile_blocks  # noqa: E402
from labcore.machine.native import NATIVE_SETTING  # noqa: E402

ALLOCATORS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
              "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"}
BOUND_THREADS = (("OMP_PROC_BIND", "close"), ("OMP_PLACES", "cores"))
TORCH_KEEP_MASKS = ((NATIVE_SETTING, "0"),)  # the lab's dropout by torch's keep masks, not its C kernel
DISCIPLINES = ("dna-splice", "text-sentiment")
# A lever pays where it gains at least this much on each discipline measured: less is within a shared
# machine's drift between rounds.
ADOPT_GAIN = 1.05


@dataclass(frozen=True)
class Lever:
    """One way of training a step: which side, its switches, and what it is compared with."""

    name: str
    baseline: str  # the lever whose speed this one's gain is over ("" for the first)
    side: str = "lab"  # "lab" or "trainer"
    precision: str = "fp32"  # the lab's; the Trainer here is fp32 (its default)
    change: str = ""  # the lab's model change: a name in CHANGES
    trainer: TrainerOptions = TrainerOptions()
    env: tuple[tuple[str, str], ...] = ()
    adopted: str = ""  # what the lab does about it, where it is already decided


LEVERS = (
    Lever("trainer", "", "trainer"),
    Lever("trainer group_by_length", "trainer", "trainer", trainer=TrainerOptions(group_by_length=True)),
    Lever("trainer torch_compile", "trainer", "trainer", trainer=TrainerOptions(torch_compile=True)),
    Lever("lab fp32", "trainer", adopted=" (auto is fp32 where bf16 products measured slower: this CPU)"),
    Lever("lab bf16", "lab fp32", precision="bf16", adopted=" (bf16 only where its products measured faster)"),
    Lever("lab fp32 compiled blocks", "lab fp32", change="compile"),
    Lever("lab fp32 fused QKV", "lab fp32", change="fused-qkv"),
    Lever("lab fp32 torch keep masks", "lab fp32", env=TORCH_KEEP_MASKS,
          adopted=" (the lab's dropout is the fused C kernel wherever this machine's compiler builds it; this row is "
                  "the lab without it)"),
    Lever("lab fp32 keep mask by where", "lab fp32 torch keep masks", change="keep-mask-where",
          env=TORCH_KEEP_MASKS),
    Lever("lab fp32 attention by baddbmm", "lab fp32", change="baddbmm-attention"),
    Lever("lab fp32 jemalloc", "lab fp32", env=(("LD_PRELOAD", ALLOCATORS["jemalloc"]),)),
    Lever("lab fp32 tcmalloc", "lab fp32", env=(("LD_PRELOAD", ALLOCATORS["tcmalloc"]),)),
    Lever("lab fp32 OpenMP bound", "lab fp32", env=BOUND_THREADS),
)
BY_NAME = {lever.name: lever for lever in LEVERS}


# ------------------------------------------------------------------------------------ the lab's changes
def fused_qkv(model):
    """One [3H, H] product for a block's queries, keys and values instead of three [H, H]: the weights are
    concatenated inside forward, so the module keeps its three parameters (protocols, checkpoints)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward
    import torch

    def forward(self, hidden_states, attention_mask=None, past_key_values=None, **kwargs):
        shape = hidden_states.shape[:-1]
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        qkv = torch.nn.functional.linear(hidden_states, weight, bias).view(*shape, 3, -1, self.attention_head_size)
        query, key, value = (qkv.select(-3, i).transpose(1, 2) for i in range(3))
        function = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        out, weights = function(self, query, key, value, attention_mask,
                                dropout=self.dropout.p if self.training else 0.0, scaling=self.scaling, **kwargs)
        return out.reshape(*shape, -1).contiguous(), weights

    for block in model.structure.layers:
        attention = block.attention.self
        attention.forward = types.MethodType(forward, attention)
    return model


def keep_mask_where(model):
    """The CPU keep mask built by one ``torch.where`` from the 16-bit quarters: no bool-to-float copy and no
    separate scaling pass (the same mask, value for value). Patches the kernels module: this process only."""
    import math

    import torch

    from labcore.models import cpu_kernels

    def keep_mask(shape, p, dtype, device):
        n, threshold = math.prod(shape), round(p * 2 ** 16)
        words = torch.empty(-(-n // 4), dtype=torch.int64, device=device).random_(-2 ** 63, 2 ** 63 - 1)
        quarters = words.view(torch.int16)[:n].view(shape)
        return torch.where(quarters >= threshold - 2 ** 15, 2 ** 16 / (2 ** 16 - threshold), 0.0).to(dtype)

    cpu_kernels.keep_mask = keep_mask
    return model


def baddbmm_attention(model):
    """The plain attention's scores by one ``baddbmm`` per layer: the scaling and the additive mask folded into
    the product instead of two passes over the [batch, heads, L, L] scores (forward, and the scaling's backward)."""
    import torch
    from transformers import AttentionInterface

    from labcore.models import cpu_kernels

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
        b, h, lq, d = query.shape
        lk = key.shape[-2]
        q, kt = query.reshape(b * h, lq, d), key.transpose(-1, -2).reshape(b * h, d, lk)
        if attention_mask is None:
            scores = torch.bmm(q, kt) * scaling
        else:
            bias = attention_mask.to(query.dtype).expand(b, h, lq, lk).reshape(b * h, lq, lk)
            scores = torch.baddbmm(bias, q, kt, alpha=scaling)
        weights = torch.softmax(scores.view(b, h, lq, lk), dim=-1, dtype=torch.float32).to(value.dtype)
        weights = cpu_kernels.keep_mask_dropout(weights, dropout, module.training)
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights

    AttentionInterface.register(cpu_kernels.ATTENTION_NAME, attention)
    return model


CHANGES = {"": lambda model: model, "compile": lambda model: compile_blocks(model), "fused-qkv": fused_qkv,
           "keep-mask-where": keep_mask_where, "baddbmm-attention": baddbmm_attention}


def measure(lever: Lever, setting: Setting) -> dict:
    """One measurement of ``lever`` in this process."""
    if lever.side == "trainer":
        m = trainer_speed(setting, lever.trainer)
    else:
        m = lab_speed(dataclasses.replace(setting, precision=lever.precision), CHANGES[lever.change])
    return {**dataclasses.asdict(m), "compile_s": max(0.0, m.warmup_s - setting.warmup * m.step_s)}


def measure_apart(lever: Lever, setting: Setting, timeout: int) -> dict | None:
    """``lever`` measured in a process of its own, with its environment; None where it failed."""
    env = {**os.environ, **dict(lever.env)}
    command = [sys.executable, __file__, "--one", lever.name, "--discipline", setting.discipline,
               "--steps", str(setting.steps), "--warmup", str(setting.warmup), "--batch", str(setting.batch)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  {lever.name} on {setting.discipline}: over {timeout} s, left out", flush=True)
        return None
    for line in done.stdout.splitlines():
        if line.startswith("LEVER "):
            return json.loads(line[len("LEVER "):])
    print(f"  {lever.name} on {setting.discipline} failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
    return None


def table(results: dict[tuple[str, str], list[dict]], disciplines: list[str]) -> list[str]:
    """One row per lever and discipline: median samples/s, its baseline's, the gain, compile seconds."""
    medians = {key: statistics.median(r["samples_per_s"] for r in runs) for key, runs in results.items() if runs}
    gains: dict[str, list[float]] = {}
    rows = [f"{'lever':<30} {'discipline':<15} {'samples/s':>9} {'baseline':<22} {'gain':>6} {'x trainer':>9} "
            f"{'compile s':>9}"]
    for lever in LEVERS:
        for discipline in disciplines:
            if (lever.name, discipline) not in results:
                continue  # not asked for (--only)
            speed = medians.get((lever.name, discipline))
            if speed is None:
                rows.append(f"{lever.name:<30} {discipline:<15} {'failed':>9}")
                continue
            base = medians.get((lever.baseline, discipline))
            trainer = medians.get(("trainer", discipline))
            gain = speed / base if base else float("nan")
            gains.setdefault(lever.name, []).append(gain)
            compile_s = statistics.median(r["compile_s"] for r in results[(lever.name, discipline)])
            rows.append(f"{lever.name:<30} {discipline:<15} {speed:9.1f} {lever.baseline:<22} {gain:6.2f} "
                        f"{speed / trainer if trainer else float('nan'):9.2f} {compile_s:9.1f}")
    rows.append("")
    for lever in LEVERS[1:]:
        if lever.name not in gains:
            continue
        values = gains.get(lever.name, [])
        pays = bool(values) and all(g >= ADOPT_GAIN for g in values)
        rows.append(f"{lever.name:<30} gain {', '.join(f'{g:.2f}' for g in values) or '-':<12} "
                    f"{'pays' if pays else 'does not pay'} (>= {ADOPT_GAIN} on each discipline){lever.adopted}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurements: 8 timed steps, 2 rounds")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated lever names (default: all)")
    parser.add_argument("--disciplines", default=",".join(DISCIPLINES))
    parser.add_argument("--timeout", type=int, default=600, help="seconds a measurement may take")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)  # a measurement's own process
    parser.add_argument("--discipline", default="dna-splice", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.rounds = 8, 2
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    setting = Setting(args.discipline, args.batch, args.steps, args.warmup)
    if args.one:
        print("LEVER " + json.dumps(measure(BY_NAME[args.one], setting)), flush=True)
        return
    levers = [BY_NAME[n.strip()] for n in args.only.split(",")] if args.only else list(LEVERS)
    disciplines = [d.strip() for d in args.disciplines.split(",")]
    print(f"{machine()}; {torch.get_num_threads()} threads", flush=True)
    results: dict[tuple[str, str], list[dict]] = {}
    started = time.perf_counter()
    for round_ in range(1, args.rounds + 1):
        for discipline in disciplines:
            for lever in levers:
                got = measure_apart(lever, dataclasses.replace(setting, discipline=discipline), args.timeout)
                results.setdefault((lever.name, discipline), [])
                if got is not None:
                    results[(lever.name, discipline)].append(got)
                    print(f"round {round_} {discipline} {lever.name}: {got['samples_per_s']:.1f} samples/s "
                          f"({got['precision']}, warm-up {got['warmup_s']:.1f} s)", flush=True)
    print(f"{machine()}; {time.perf_counter() - started:.0f} s in all")
    for row in table(results, disciplines):
        print(row)


if __name__ == "__main__":
    main()
