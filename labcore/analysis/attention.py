"""Attention maps of one example under three sets of weights, and how similar two models' heads are.

:func:`compute_attention` (run by the worker as an ``attention`` job, :mod:`labcore.jobs.attention`, never by
a page) feeds one example
of a finished run's data through

* ``pretrained``: the backbone's pretrained weights, before any training;
* ``random``: the same architecture with the family's own random initialisation (the run's seed);
* ``finetuned``: the run's own best checkpoint (``best.safetensors``, its trainable parameters by name,
  loaded after the run's protocol is applied again, so frozen and permuted layers are as they trained),

and stores the per-layer, per-head maps in ``attention-<split>-<index>.npz`` in the run's folder, with
the example's tokens twice: as the discipline's own symbols (DNA letters, note names, words) and as the
model's vocabulary tokens they were mapped to. New input and output layers of the pretrained and random
models are at their seeded initial values, exactly as a run starts.

Reading a stored result (:func:`load_attention`) and comparing heads (:func:`match_heads`,
:func:`layer_distances`: Kao & Lee §4.4.1's minimum-L1 Hungarian matching) need numpy and scipy only,
so the pages use them without torch.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from labcore.errors import LabError

if TYPE_CHECKING:
    from labcore.engine.run import Prepared
    from labcore.store import JobRecord

FORMAT = 1
WEIGHTS = ("pretrained", "random", "finetuned")
SPLITS = ("train", "validation", "test")
WEIGHT_NOTES = {
    "pretrained": "pretrained backbone before training (new input/output layers at their seeded start)",
    "random": "same architecture, randomly initialised (the run's seed), before training",
    "finetuned": "this run's best checkpoint",
}


@dataclass
class AttentionMaps:
    """One example's maps: ``maps[weights]`` is [layers, heads, L, L]; rows are queries and sum to 1."""

    maps: dict[str, np.ndarray]
    symbols: list[str]  # the example as the discipline's symbols, one per position (specials included)
    vocab_tokens: list[str]  # the model-vocabulary token each position was fed as ("" for vector inputs)
    meta: dict[str, Any] = field(default_factory=dict)
    vectors: np.ndarray | None = None  # vector inputs [L, d] (image patches, bits), else None

    @property
    def layers(self) -> int:
        return int(next(iter(self.maps.values())).shape[0])

    @property
    def heads(self) -> int:
        return int(next(iter(self.maps.values())).shape[1])


def attention_path(workdir: Path | str, split: str = "test", index: int = 0) -> Path:
    """Where maps computed before attention became a job kind live in a run's folder (the page still
    shows them); new maps are ``attention.npz`` in the attention job's own folder."""
    return Path(workdir) / f"attention-{split}-{int(index)}.npz"


def save_attention(path: Path | str, result: AttentionMaps, commit_file=os.replace) -> Path:
    """Write atomically (temporary file, then ``commit_file`` renames it): a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {f"maps_{name}": np.asarray(m, dtype=np.float32) for name, m in result.maps.items()}
    arrays["symbols"] = np.asarray(result.symbols, dtype=str)
    arrays["vocab_tokens"] = np.asarray(result.vocab_tokens, dtype=str)
    arrays["meta"] = np.asarray(json.dumps({**result.meta, "format": FORMAT, "weights": list(result.maps)}))
    if result.vectors is not None:
        arrays["vectors"] = np.asarray(result.vectors, dtype=np.float32)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".attention-", suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez_compressed(out, **arrays)
        commit_file(Path(tmp), path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_attention(path: Path | str) -> AttentionMaps:
    """Read a stored result (numpy only, ``allow_pickle=False``)."""
    with np.load(Path(path), allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        if meta.get("format") != FORMAT:
            raise LabError(f"{path} was written by attention format {meta.get('format')}, this is {FORMAT}; "
                           f"delete it and compute the maps again")
        names = meta.get("weights") or [k[len("maps_"):] for k in data.files if k.startswith("maps_")]
        maps = {name: data[f"maps_{name}"] for name in names}
        vectors = data["vectors"] if "vectors" in data.files else None
        return AttentionMaps(maps=maps, symbols=[str(s) for s in data["symbols"]],
                             vocab_tokens=[str(s) for s in data["vocab_tokens"]], meta=meta, vectors=vectors)


# --------------------------------------------------------------------------------------------------
# pure comparisons of heads (no torch)


def head_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[heads_a, heads_b] distances between the heads of one layer of two models on one example.

    ``a``, ``b``: [heads, L, L]. The distance of two maps is the L1 distance of their attention rows
    (each a distribution over keys, so between 0 and 2), averaged over the query rows: independent of
    the sequence length, 0 for identical maps.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 3 or b.ndim != 3 or a.shape[1:] != b.shape[1:]:
        raise ValueError(f"head_distances needs [heads, L, L] maps of one example, got {a.shape} and {b.shape}")
    diff = np.abs(a[:, None] - b[None, :])  # [Ha, Hb, L, L]
    return diff.sum(axis=-1).mean(axis=-1)


def match_heads(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kao & Lee §4.4.1: the one-to-one matching of ``a``'s heads to ``b``'s with the least total L1
    distance (Hungarian algorithm). Returns ``(partner, distance)``: head ``i`` of ``a`` matches head
    ``partner[i]`` of ``b`` at ``distance[i]``."""
    from scipy.optimize import linear_sum_assignment

    cost = head_distances(a, b)
    rows, cols = linear_sum_assignment(cost)
    partner = np.full(cost.shape[0], -1, dtype=np.int64)
    distance = np.full(cost.shape[0], np.nan)
    partner[rows] = cols
    distance[rows] = cost[rows, cols]
    return partner, distance


def layer_distances(maps_a: np.ndarray, maps_b: np.ndarray) -> np.ndarray:
    """Average matched-head L1 distance per layer ([layers]) between two models' maps [layers, heads, L, L]
    (Kao & Lee fig. 5): low means the two models attend alike, whatever order their heads come in."""
    maps_a, maps_b = np.asarray(maps_a), np.asarray(maps_b)
    if maps_a.shape[0] != maps_b.shape[0]:
        raise ValueError(f"the two models have {maps_a.shape[0]} and {maps_b.shape[0]} layers; compare models "
                         f"of one architecture")
    return np.array([float(np.nanmean(match_heads(maps_a[i], maps_b[i])[1])) for i in range(maps_a.shape[0])])


# --------------------------------------------------------------------------------------------------
# computing (the worker; imports torch)


def _example(prepared: "Prepared", split: str, index: int):
    data = prepared.splits[split]
    if not 0 <= index < len(data):
        raise LabError(f"the {split} split of {prepared.spec.discipline} has {len(data)} examples; pick an index "
                       f"from 0 to {len(data) - 1}")
    return np.asarray(data.inputs[index])


def _forward(prepared: "Prepared", inputs: np.ndarray) -> tuple[np.ndarray, Any]:
    """([layers, heads, L, L] maps, logits [outputs]) of one example."""
    import torch

    model = prepared.model
    model.eval()
    x = torch.from_numpy(inputs)[None]
    mask = torch.ones(x.shape[:2], dtype=torch.long)
    with torch.inference_mode():
        attentions = model.attentions(x, mask)
        logits = model(x, mask)[0].float()
    maps = np.stack([a[0].float().cpu().numpy() for a in attentions])
    return maps, logits.cpu().numpy()


def _prediction(info, logits: np.ndarray) -> str:
    from labcore import data as data_registry

    if info.output_kind == "class":
        return data_registry.label_name(info, int(np.argmax(logits)))
    if info.output_kind == "multilabel":
        return "".join("1" if v > 0 else "0" for v in logits)
    return f"{float(logits[0]):.3f}"


def _tokens(prepared: "Prepared", split: str, index: int, inputs: np.ndarray) -> tuple[list[str], list[str]]:
    """The example's positions as discipline symbols and as the vocabulary tokens fed to the model."""
    info, spec, tokenizer = prepared.info, prepared.spec, prepared.tokenizer
    row = prepared.dataset[split][index]
    if info.input_kind == "vectors":
        if info.vector_dim == 1:
            symbols = [f"{float(v[0]):g}" for v in inputs]
        else:
            symbols = [f"patch {i}" if info.vectors_are_patches else f"v{i}" for i in range(len(inputs))]
        return symbols, ["" for _ in symbols]
    if spec.input_adapter == "embedding":
        symbols = [info.alphabet[int(t)] for t in inputs]
        return symbols, ["(own embedding)" for _ in symbols]
    ids = np.asarray(prepared.vocab_rows, dtype=np.int64)[inputs] if prepared.vocab_rows is not None else inputs
    vocab_tokens = [str(t) for t in tokenizer.convert_ids_to_tokens([int(i) for i in ids])]
    if info.input_kind == "text":
        pair = row.get("text_pair")
        original = tokenizer(row["text"], pair, truncation=True, max_length=prepared.max_length)["input_ids"]
        symbols = [str(t) for t in tokenizer.convert_ids_to_tokens(list(original))]
        return symbols, vocab_tokens
    binfo = prepared.backbone_info
    head = [tokenizer.convert_ids_to_tokens(binfo.cls_id)] if binfo.cls_id is not None else []
    tail = [tokenizer.convert_ids_to_tokens(binfo.sep_id)] if binfo.sep_id is not None else []
    body = len(inputs) - len(head) - len(tail)
    symbols = [str(s) for s in head] + [info.alphabet[int(t)] for t in row["tokens"][:body]] + [str(s) for s in tail]
    if len(symbols) != len(inputs):  # a model without [CLS]/[SEP]: positions are the symbols alone
        symbols = [info.alphabet[int(t)] for t in row["tokens"][:len(inputs)]]
    return symbols, vocab_tokens


def load_finetuned(record: "JobRecord", run_dir: Path, *, attn_implementation: str = "eager") -> "Prepared":
    """A finished run's model as it ended (see :func:`labcore.engine.run.load_trained`), with a clear error when
    its weights are not there."""
    from labcore.engine.run import BEST_WEIGHTS, load_trained
    from labcore.runspec import make_spec

    weights = run_dir / BEST_WEIGHTS
    if not weights.is_file():
        raise LabError(f"run {record.key} has no trained weights yet ({weights.name} is written when a run "
                       f"ends, and it is {record.status}); let it finish, or resume it, then ask again")
    return load_trained(make_spec(**record.spec), run_dir, attn_implementation=attn_implementation)


def compute_attention(record: "JobRecord", run_dir: Path, split: str = "test", index: int = 0) -> AttentionMaps:
    """The maps of example ``index`` of ``split`` for the finished run ``record`` (its folder ``run_dir``).

    Needs the run's ``best.safetensors`` (written when a run ends: done, diverged or cancelled). Raises
    :class:`LabError` naming the fix otherwise.
    """
    from labcore.engine.run import Prepared
    from labcore.runspec import make_spec

    if split not in SPLITS:
        raise LabError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    index = int(index)
    spec = make_spec(**record.spec)
    maps: dict[str, np.ndarray] = {}
    for init in ("pretrained", "random"):
        prep = Prepared(spec.replace(init=init), attn_implementation="eager")
        maps[init], _ = _forward(prep, _example(prep, split, index))
        del prep  # one model in memory at a time
    base = load_finetuned(record, run_dir)
    inputs = _example(base, split, index)
    maps["finetuned"], logits = _forward(base, inputs)
    symbols, vocab_tokens = _tokens(base, split, index, inputs)
    info = base.info
    row = base.dataset[split][index]
    from labcore import data as data_registry

    result = record.result or {}
    meta = {
        "key": record.key, "split": split, "index": index, "label": data_registry.label_name(info, row["label"]),
        "prediction": _prediction(info, logits), "model": spec.model, "init": spec.init,
        "discipline": spec.discipline, "protocol": spec.protocol, "input_kind": info.input_kind,
        "input_adapter": spec.input_adapter, "mapping": spec.mapping, "best_step": result.get("best_step"),
        "notes": dict(WEIGHT_NOTES),
    }
    vectors = inputs.astype(np.float32) if info.input_kind == "vectors" else None
    return AttentionMaps(maps=maps, symbols=symbols, vocab_tokens=vocab_tokens, meta=meta, vectors=vectors)


__all__ = ["AttentionMaps", "FORMAT", "SPLITS", "WEIGHTS", "WEIGHT_NOTES", "attention_path", "compute_attention",
           "head_distances", "layer_distances", "load_attention", "match_heads", "save_attention"]
