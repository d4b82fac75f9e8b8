"""The amino-acid L1: the protein disciplines' residues, one residue a token (Chiang & Lee's amino acids).

Each residue letter becomes the MiniLM id of that lower-case letter (the uncased vocabulary has every
single letter), so the corpus uses 20 ids and suits 50-substitute. Only the disciplines' training splits
feed the training stream and only their validation splits the held-out one: nothing of a protein
fine-tune's test set is ever seen in pretraining. Sequences are concatenated in their split order (a
window may span two of them, as a stream of text spans sentences); rare codes (X, B, Z, U, O) and the
malonylation windows' padding ("-") are dropped.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from labcore import paths
from labcore.pretrain.vocab import cached_array, vocabulary

DISCIPLINES = ("protein-malonylation", "protein-amp")
RESIDUES = "ACDEFGHIKLMNPQRSTVWY"
STREAM_FORMAT = 1


def _build(split: str) -> np.ndarray:
    from labcore import data

    ids = {t: i for i, t in enumerate(vocabulary())}
    letter_id = {r: ids[r.lower()] for r in RESIDUES}
    parts = []
    for name in DISCIPLINES:
        dataset, info = data.load(name, progress=lambda _message: None)
        table = np.asarray([letter_id.get(symbol, -1) for symbol in info.alphabet], dtype=np.int64)
        for tokens in dataset[split]["tokens"]:
            mapped = table[np.asarray(tokens, dtype=np.int64)]
            parts.append(mapped[mapped >= 0])
    return np.concatenate(parts).astype(np.int32)


@lru_cache(maxsize=2)
def residue_stream(held_out: bool) -> np.ndarray:
    """The training splits' residues as ids (``held_out``: the validation splits'), cached."""
    split = "validation" if held_out else "train"
    return cached_array(paths.cache_dir() / "corpora" / f"amino-{split}-v{STREAM_FORMAT}.npy",
                        lambda: _build(split))
