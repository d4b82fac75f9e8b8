"""Seeded randomness that leaves the global random state as it found it.

Every random draw the models and protocols make (random init, re-initialised layers, new heads and input
layers, permutations) happens inside :func:`seeded`, so a run depends only on its seed and a caller's own
random stream (data shuffling, dropout) is never shifted by building a model.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import Iterator

import torch


def derive_seed(seed: int, *tags: object) -> int:
    """A 63-bit seed from a run seed and tags, so separate draws (head, layer 3, ...) are independent.

    Tags make a draw independent of which other draws happen: re-initialising layer 5 gives the same weights
    whether layers 3 and 4 are re-initialised too, which keeps sweeps over k comparable.
    """
    digest = hashlib.sha256(repr((int(seed),) + tuple(tags)).encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def generator(seed: int, *tags: object) -> torch.Generator:
    """A CPU generator for draws that take one explicitly (permutations, statistics init)."""
    return torch.Generator().manual_seed(derive_seed(seed, *tags))


@contextmanager
def seeded(seed: int, *tags: object) -> Iterator[None]:
    """Seed torch's global generators for the block, then restore them.

    transformers' initialisers draw from the global generator and take no generator argument, hence the
    fork: the block sees a fixed stream, the caller's stream continues untouched afterwards.
    """
    with torch.random.fork_rng():
        torch.manual_seed(derive_seed(seed, *tags))
        yield
