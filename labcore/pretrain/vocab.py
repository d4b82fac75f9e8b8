"""The one vocabulary every L1 corpus draws from: MiniLM's uncased WordPiece (30,522 ids), and a small
helper that keeps derived arrays (unigram table, tokenised texts) under ``cache/corpora/``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from labcore import assets, durable
from labcore.errors import LabError

VOCAB_ASSET = "minilm"
VOCAB_SIZE = 30_522


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """MiniLM's WordPiece tokens by id (needs the ``minilm`` asset)."""
    folder = assets.require(VOCAB_ASSET)
    tokens = tuple((folder / "vocab.txt").read_text(encoding="utf-8").splitlines())
    if len(tokens) != VOCAB_SIZE:
        raise LabError(f"{folder / 'vocab.txt'} has {len(tokens)} tokens, expected {VOCAB_SIZE}; fetch the "
                       f"minilm asset again (python -m labcore assets fetch minilm)")
    return tokens


def is_special(token: str) -> bool:
    return token.startswith("[") and token.endswith("]")


@lru_cache(maxsize=1)
def sampleable_ids() -> np.ndarray:
    """The ids a corpus may draw: every token that is not a special one."""
    return np.asarray([i for i, t in enumerate(vocabulary()) if not is_special(t)], dtype=np.int64)


def wordpiece_tokenizer() -> Any:
    """MiniLM's fast WordPiece tokenizer (the ``tokenizers`` package, no transformers), no padding or cut."""
    from tokenizers import Tokenizer

    fast = Tokenizer.from_file(str(assets.require(VOCAB_ASSET) / "tokenizer.json"))
    fast.no_padding()
    fast.no_truncation()
    return fast


def cached_array(path: Path, build: Callable[[], np.ndarray]) -> np.ndarray:
    """The array saved at ``path``, built by ``build()`` and saved there the first time (atomically)."""
    if path.is_file():
        return np.load(path)
    array = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    durable.write_file(path, lambda tmp: _save(tmp, array))
    return array


def _save(path: Path, array: np.ndarray) -> None:
    # Through a handle: given a name, np.save appends ".npy" to one that lacks it, and the temporary's ends in .tmp.
    with open(path, "wb") as handle:
        np.save(handle, array)


def held_out_tail(stream: np.ndarray, held_out: bool, share: float = 0.05) -> np.ndarray:
    """A text stream split for pretraining: its first ``1 - share`` for training, the rest held out."""
    cut = int(len(stream) * (1 - share))
    return stream[cut:] if held_out else stream[:cut]
