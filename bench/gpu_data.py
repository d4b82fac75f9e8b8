"""What bench/gpu.py measures on, apart from how it measures: the scale of each measurement (the GPU's, or
tiny ones that check the code on a CPU), dna-splice as a MiniLM run encodes it, the MLM batches, and
``pack``, which writes them with MiniLM in bf16 for a bare GPU machine that has only torch, transformers and
numpy (``--pack`` / ``--carried`` of bench/gpu.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACK_MODEL = "minilm-bf16"
PACK_SPLICE = "dna-splice.json"
PACK_MLM = "mlm-batches.json"
PACK_LIMIT = 64 * 2**20
SPLICE_CLASSES = 3


@dataclass(frozen=True)
class Scale:
    """How big each measurement is: the GPU's, or tiny ones that check the code on a CPU."""

    finetune_batch: int
    warmup: int  # steps before timing starts (kernels chosen, caches and allocator warm)
    timed: int  # steps timed
    bert: dict[str, int]  # BertConfig of (b)
    bert_batch: int
    bert_length: int
    mlm_size: str
    mlm_batch: int
    e2e_max_steps: int  # 0: the whole standard budget
    rounds: int


GPU = Scale(finetune_batch=64, warmup=25, timed=100,
            bert=dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
            bert_batch=32, bert_length=128, mlm_size="paper", mlm_batch=32, e2e_max_steps=0, rounds=2)
CPU_TRY = Scale(finetune_batch=8, warmup=2, timed=3,
                bert=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
                bert_batch=4, bert_length=32, mlm_size="tiny", mlm_batch=4, e2e_max_steps=4, rounds=1)


# ------------------------------------------------------------------------------------------ the data
@dataclass
class Splice:
    """dna-splice as a run of MiniLM encodes it, and the MiniLM folder it goes with."""

    splits: dict[str, Any]  # name -> labcore.data.encode.Encoded (sliced vocabulary ids)
    vocab_rows: tuple[int, ...]  # sliced id -> MiniLM id
    model_folder: str

    def full_ids(self, split: str) -> list[list[int]]:
        """The split's examples in MiniLM's own ids (what a Trainer user feeds)."""
        return [[self.vocab_rows[i] for i in x] for x in self.splits[split].inputs]


def splice_from_lab(train_size: str = "full") -> Splice:
    from labcore import assets
    from labcore.engine.resolve import resolve_spec
    from labcore.engine.run import Prepared
    from labcore.runspec import make_spec

    prepared = Prepared(resolve_spec(make_spec(model="minilm", discipline="dna-splice", budget="standard",
                                               train_size=train_size)))
    return Splice(prepared.splits, tuple(prepared.vocab_rows), str(assets.require("minilm")))


def splice_from_pack(folder: Path) -> Splice:
    import numpy as np

    from labcore.data.encode import Encoded

    data = json.loads((folder / PACK_SPLICE).read_text())
    splits = {name: Encoded([np.asarray(x, dtype=np.int64) for x in s["inputs"]], np.asarray(s["labels"], dtype=np.int64))
              for name, s in data["splits"].items()}
    return Splice(splits, tuple(data["vocab_rows"]), str(folder / PACK_MODEL))


def mlm_batches(scale: Scale, carried: Path | None):
    """The MLM batches of (d): (ids [B, L], mask [B, L], real tokens), the ``nested`` corpus."""
    import torch

    if carried is None:
        import pretrain as pretrain_bench

        return pretrain_bench.batches(scale.warmup + scale.timed, scale.mlm_batch)
    rows = json.loads((carried / PACK_MLM).read_text())["batches"]
    out = []
    for batch in rows:
        longest = max(len(x) for x in batch)
        ids = torch.zeros(len(batch), longest, dtype=torch.long)
        mask = torch.zeros(len(batch), longest, dtype=torch.long)
        for i, x in enumerate(batch):
            ids[i, :len(x)] = torch.tensor(x)
            mask[i, :len(x)] = 1
        out.append((ids, mask, int(mask.sum())))
    return out[:scale.warmup + scale.timed]


def use_carried_vocabulary(folder: Path) -> None:
    """The MLM corpus's vocabulary is MiniLM's (labcore.pretrain.vocab reads it from the minilm asset, which a
    bare machine has not): read it from the carried MiniLM folder instead."""
    from labcore.pretrain import vocab

    tokens = tuple((folder / PACK_MODEL / "vocab.txt").read_text(encoding="utf-8").splitlines())
    vocab.vocabulary = lambda: tokens
    vocab.sampleable_ids.cache_clear()


def pack(folder: Path, scale: Scale = GPU) -> None:
    """Write what a bare GPU machine needs for (a)-(d) into ``folder``."""
    import torch
    from safetensors.torch import load_file, save_file

    import pretrain as pretrain_bench

    folder.mkdir(parents=True, exist_ok=True)
    splice = splice_from_lab()
    model_dir = folder / PACK_MODEL
    model_dir.mkdir(exist_ok=True)
    source = Path(splice.model_folder)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (source / name).is_file():
            (model_dir / name).write_bytes((source / name).read_bytes())
    # bf16 halves the file; the lab loads backbones in fp32 (labcore.models.backbones), so the carried model
    # starts from the bf16-rounded weights, which changes speed in nothing and accuracy in the last digits.
    weights = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(str(source / "model.safetensors")).items()}
    save_file(weights, str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    splits = {name: {"inputs": [x.tolist() for x in s.inputs], "labels": s.labels.tolist()}
              for name, s in splice.splits.items()}
    (folder / PACK_SPLICE).write_text(json.dumps({"vocab_rows": list(splice.vocab_rows), "splits": splits}))
    batches = pretrain_bench.batches(scale.warmup + scale.timed, scale.mlm_batch)
    rows = [[ids[i, :int(mask[i].sum())].tolist() for i in range(len(ids))] for ids, mask, _ in batches]
    (folder / PACK_MLM).write_text(json.dumps({"corpus": "nested", "batches": rows}))
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"packed {folder}: MiniLM in bf16, dna-splice ({', '.join(f'{n} {len(s.inputs)}' for n, s in splice.splits.items())}), "
          f"{len(rows)} MLM batches; {size / 2**20:.1f} MiB" + (" (over the 64 MiB a device call carries)" if size > PACK_LIMIT
                                                              else ""))
