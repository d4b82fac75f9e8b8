"""The music21 corpus: which scores are a composer's pieces, the seeded order they are taken in, and the
seeded split of a composer's pieces into train, validation and test (see :mod:`labcore.data.music`)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Sequence

SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # as MAESTRO-v1's own split, roughly (954 / 105 / 125 pieces)

# Score formats worth reading, best first: when one movement exists in two formats, the first wins.
# MusicXML carries the editors' full encoding; the Humdrum copies are older transcriptions.
_FORMATS = (".mxl", ".musicxml", ".xml", ".krn", ".abc", ".mid", ".midi")


def corpus_root() -> Path:
    from music21 import corpus

    return Path(corpus.__file__).resolve().parent


def composer_pieces(composer: str) -> list[str]:
    """The composer's scores as corpus-relative paths, sorted, one copy per movement (see module doc)."""
    from music21 import corpus

    root = corpus_root()
    best: dict[str, tuple[int, str]] = {}
    for path in corpus.getComposer(composer):
        path = Path(path)
        if path.suffix.lower() not in _FORMATS:
            continue
        rel = path.resolve().relative_to(root).as_posix()
        stem = rel[: -len(path.suffix)]
        rank = _FORMATS.index(path.suffix.lower())
        if stem not in best or rank < best[stem][0]:
            best[stem] = (rank, rel)
    return sorted(rel for _, rel in best.values())


def corpus_composers() -> list[str]:
    """Folders of music21's corpus that hold scores: the names ``composers`` accepts."""
    root = corpus_root()
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(("_", ".")) and composer_pieces(p.name))


def _seed_for(seed: int, composer: str, purpose: int) -> list[int]:
    # Each composer draws from its own stream, so adding or reordering composers leaves the others'
    # samples and splits unchanged. crc32, unlike hash(), is stable across processes.
    return [seed, zlib.crc32(composer.encode()), purpose]


def candidate_order(pieces: Sequence[str], composer: str, seed: int) -> list[str]:
    """The seeded order in which a composer's pieces are taken until the cap is reached."""
    import numpy as np

    order = np.random.default_rng(_seed_for(seed, composer, 0)).permutation(len(pieces))
    return [pieces[i] for i in order]


def split_pieces(pieces: Sequence[str], composer: str, seed: int) -> tuple[list[str], list[str], list[str]]:
    """One composer's pieces into train/validation/test (80/10/10, each >= 1 piece where n >= 3)."""
    import numpy as np

    n = len(pieces)
    if n >= 3:
        n_val = max(1, int(n * SPLIT_FRACTIONS[1] + 0.5))
        n_test = max(1, int(n * SPLIT_FRACTIONS[2] + 0.5))
    else:  # too few for three splits: the first piece trains, a second one tests, validation is empty
        n_val, n_test = 0, 1 if n == 2 else 0
    order = np.random.default_rng(_seed_for(seed, composer, 1)).permutation(n)
    chosen = [pieces[i] for i in order]
    n_train = n - n_val - n_test
    return (sorted(chosen[:n_train]), sorted(chosen[n_train:n_train + n_val]),
            sorted(chosen[n_train + n_val:]))
