"""Turn a discipline's split into model inputs, and batch them with dynamic padding.

Three input paths (the spec's resolved ``input_adapter``):

* ``vocab``: token indices -> the token mapping -> ids in the model's vocabulary (Kao & Lee), wrapped in
  the model's [CLS] ... [SEP] when it has them. Text is tokenised by the model's own tokenizer first and
  then mapped over the vocabulary (Kao's synthetic text).
* ``embedding``: token indices as they are, for a new input embedding (FPT).
* ``linear``: vectors as they are, for a new linear input layer (FPT).

Vocabulary slicing: the ids that occur anywhere in the data are collected once and renumbered 0..R-1;
the model then holds only those R embedding rows. Outputs and gradients are identical to the full table
(rows never looked up get no gradient), and a 30,522-row table shrinks to a few dozen rows for DNA.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from labcore.errors import LabError
from labcore.runspec import TEXT_MAX_LENGTH, kept_by_budget  # noqa: F401  (TEXT_MAX_LENGTH: encoders' default)


@dataclass
class Encoded:
    """One split, ready to batch. `inputs[i]` is int64 ids [L] or float32 vectors [L, d]."""

    inputs: list[np.ndarray]
    labels: np.ndarray
    groups: list[str] | None = None

    def __len__(self) -> int:
        return len(self.inputs)

    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.inputs), dtype=np.int64, count=len(self.inputs))

    def subset(self, index: Sequence[int]) -> "Encoded":
        index = list(index)
        return Encoded([self.inputs[i] for i in index], self.labels[index],
                       [self.groups[i] for i in index] if self.groups is not None else None)


def _labels(column: list[Any], output_kind: str) -> np.ndarray:
    if output_kind == "class":
        return np.asarray(column, dtype=np.int64)
    if output_kind == "multilabel":
        return np.asarray(column, dtype=np.float32)
    return np.asarray(column, dtype=np.float32)


def _column(split, name: str) -> list[Any]:
    """A split's whole column as one list: one Arrow conversion, where iterating a ``datasets`` column
    formats it row by row (a tenth of a second per thousand rows, paid by every run on every split)."""
    return split[name][:]


def encode_split(split, info, *, adapter: str, max_length: int, mapping=None, tokenizer=None,
                 cls_id: int | None = None, sep_id: int | None = None) -> Encoded:
    """Encode one `datasets.Dataset` split. `max_length` counts special tokens."""
    labels = _labels(_column(split, "label"), info.output_kind)
    groups = _column(split, "group") if "group" in split.column_names else None
    inputs: list[np.ndarray] = []
    if info.input_kind == "vectors":
        for vectors in _column(split, "vectors"):
            inputs.append(np.asarray(vectors, dtype=np.float32)[:max_length])
    elif info.input_kind == "text":
        if tokenizer is None or mapping is None:
            raise LabError("text disciplines need the model's tokenizer and a token mapping")
        pairs = _column(split, "text_pair") if "text_pair" in split.column_names else None
        encoded = tokenizer(_column(split, "text"), pairs, truncation=True, max_length=max_length)["input_ids"]
        for ids in encoded:
            inputs.append(mapping.apply(np.asarray(ids, dtype=np.int64)).astype(np.int64))
    elif adapter == "embedding":
        for tokens in _column(split, "tokens"):
            inputs.append(np.asarray(tokens[:max_length], dtype=np.int64))
    else:
        if mapping is None:
            raise LabError("the vocab input adapter needs a token mapping")
        specials = [i for i in (cls_id, sep_id) if i is not None]
        room = max_length - len(specials)
        head = [cls_id] if cls_id is not None else []
        tail = [sep_id] if sep_id is not None else []
        for tokens in _column(split, "tokens"):
            ids = mapping.apply(np.asarray(tokens[:room], dtype=np.int64))
            inputs.append(np.concatenate([np.asarray(head, dtype=np.int64), np.asarray(ids, dtype=np.int64),
                                          np.asarray(tail, dtype=np.int64)]))
    return Encoded(inputs, labels, groups)


# Encoded splits a process keeps, newest last: a worker's next run of the same data under the same
# tokenizer and mapping (the random-init twin, another seed, an analysis of the run) then skips the
# tokenising, which on text costs about a second per 10,000 examples. Three runs' worth of splits.
ENCODED_KEPT = 9
_ENCODED: OrderedDict[str, Encoded] = OrderedDict()


def _tokenizer_digest(tokenizer) -> str | None:
    """What decides a fast tokenizer's ids (vocabulary, normaliser, pre-tokeniser); None where unknown."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    return hashlib.sha256(backend.to_str().encode()).hexdigest()


def _encoding_key(split, info, *, adapter: str, max_length: int, mapping, tokenizer, cls_id, sep_id) -> str | None:
    """Everything :func:`encode_split` reads, as a digest; None where a part has no stable identity."""
    fingerprint = getattr(split, "_fingerprint", None)
    if not fingerprint:
        return None
    # The data files' modification times too: a data set rebuilt in place must never be served stale.
    files = [(f["filename"], os.path.getmtime(f["filename"])) for f in getattr(split, "cache_files", [])
             if os.path.exists(f["filename"])]
    tokenizer_digest = None
    if info.input_kind == "text":
        tokenizer_digest = _tokenizer_digest(tokenizer)
        if tokenizer_digest is None:
            return None
    parts = dict(fingerprint=fingerprint, files=files, input_kind=info.input_kind, output_kind=info.output_kind,
                 adapter=adapter, max_length=max_length, cls=cls_id, sep=sep_id,
                 mapping=mapping.key if mapping is not None else None, tokenizer=tokenizer_digest)
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def encode_split_kept(split, info, **kwargs: Any) -> Encoded:
    """:func:`encode_split`, served from this process's recent encodings where everything it reads is the
    same. The caller gets its own lists (``slice_vocabulary`` and ``subset`` rebind them); the arrays are
    shared and never written to."""
    key = _encoding_key(split, info, **kwargs)
    if key is None:
        return encode_split(split, info, **kwargs)
    kept = _ENCODED.get(key)
    if kept is None:
        kept = _ENCODED[key] = encode_split(split, info, **kwargs)
        while len(_ENCODED) > ENCODED_KEPT:
            _ENCODED.popitem(last=False)
    else:
        _ENCODED.move_to_end(key)
    return Encoded(list(kept.inputs), kept.labels.copy(), list(kept.groups) if kept.groups is not None else None)


def slice_vocabulary(splits: Sequence[Encoded]) -> tuple[int, ...]:
    """Renumber vocabulary ids to 0..R-1 in place across all splits; return the R original ids (sorted)."""
    used = np.unique(np.concatenate([np.concatenate(s.inputs) for s in splits if len(s)]))
    lookup = {int(v): i for i, v in enumerate(used)}
    table = np.full(int(used.max()) + 1, -1, dtype=np.int64)
    table[used] = np.arange(len(used))
    for split in splits:
        split.inputs = [table[x] for x in split.inputs]
    assert len(lookup) == len(used)
    return tuple(int(v) for v in used)


def subsample(n: int, train_size: tuple[str, float], token_budget: int, mean_length: float,
              seed: int, min_examples: int = 0) -> np.ndarray | None:
    """Indices of the training examples to keep (None = all), seeded.

    `train_size` is ("full"|"count"|"fraction", value); the token budget (0 = none) then caps the
    count so a quick run costs about the same on every discipline, but never below ``min_examples``
    (or what train_size keeps, if fewer): long sequences would otherwise leave too few to learn from.
    """
    kind, value = train_size
    keep = n
    if kind == "count":
        keep = min(n, int(value))
    elif kind == "fraction":
        keep = max(1, int(round(n * value)))
    keep = kept_by_budget(keep, token_budget, mean_length, min_examples)
    if keep >= n:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=keep, replace=False))


@dataclass(frozen=True)
class Batch:
    inputs: Any  # torch LongTensor [B, L] or FloatTensor [B, L, d]
    mask: Any  # LongTensor [B, L], 1 for real positions
    labels: Any
    index: np.ndarray  # positions in the Encoded split


def batch_order(lengths: np.ndarray, batch_size: int, *, shuffle: bool, seed: int, epoch: int,
                bucket: bool = True) -> list[np.ndarray]:
    """Batches of indices. Training: seeded shuffle, then length bucketing inside chunks of 50
    batches (less padding, still random), then the batches themselves shuffled. Evaluation: sorted
    by length (least padding), in a fixed order."""
    n = len(lengths)
    if not shuffle:
        order = np.argsort(lengths, kind="stable") if bucket else np.arange(n)
        return [order[i:i + batch_size] for i in range(0, n, batch_size)]
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n)
    if bucket:
        chunk = batch_size * 50
        order = np.concatenate([c[np.argsort(lengths[c], kind="stable")]
                                for c in np.array_split(order, max(1, -(-n // chunk)))])
    batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def to_device(array: np.ndarray, device: Any) -> Any:
    """A numpy array as a tensor on ``device``. For CUDA it goes through pinned (page-locked) memory and is
    copied without blocking, so the copy overlaps the GPU's work on the previous step instead of stalling it."""
    import torch

    tensor = torch.from_numpy(array)
    if str(device).startswith("cuda"):
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def collate(data: Encoded, index: np.ndarray, device: Any = "cpu") -> Batch:

    items = [data.inputs[i] for i in index]
    longest = max(len(x) for x in items)
    mask = np.zeros((len(items), longest), dtype=np.int64)
    if items[0].ndim == 2:
        padded = np.zeros((len(items), longest, items[0].shape[1]), dtype=np.float32)
    else:
        padded = np.zeros((len(items), longest), dtype=np.int64)  # pad value 0: masked out anyway
    for row, x in enumerate(items):
        padded[row, :len(x)] = x
        mask[row, :len(x)] = 1
    return Batch(to_device(padded, device), to_device(mask, device), to_device(data.labels[index], device), index)


def iterate(data: Encoded, batch_size: int, *, shuffle: bool, seed: int = 0, epoch: int = 0,
            device: Any = "cpu", skip: int = 0) -> Iterator[Batch]:
    for i, index in enumerate(batch_order(data.lengths(), batch_size, shuffle=shuffle, seed=seed, epoch=epoch)):
        if i >= skip:
            yield collate(data, index, device)
