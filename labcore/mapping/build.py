"""The entry point, :func:`build_mapping`: a spec's rule applied to an alphabet (or a text vocabulary), and
the one check every rule's result goes through, :func:`validate`."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from labcore.errors import MappingError
from labcore.mapping.common import listing
from labcore.mapping.result import TokenMapping
from labcore.mapping.spec import KINDS, MappingSpec
from labcore.mapping.vocab import Vocab



# What to do about symbols that land on special tokens. In code a MappingSpec may allow it; a run (its
# RunSpec, the command line, the pages) never does, so the run's advice names the fixes a run has.
SPECIAL_FIX = "pick other ids, or set allow_special=True if that is really meant"
RUN_SPECIAL_FIX = ("give those symbols other ids (not special tokens), or use the mapping random, shift or unused, "
                   "which never pick special tokens; a run never maps symbols onto them")


def validate(spec: MappingSpec, alphabet: tuple[str, ...] | None, ids: np.ndarray, vocab: Vocab, *,
             special_fix: str = SPECIAL_FIX) -> None:
    """Raise :class:`MappingError` unless ``ids`` is a usable mapping.

    Checks, in this order so the first message is the most basic problem: one id per symbol (or per
    vocabulary id, for text); every id inside ``[0, D)``; no special id as a target unless
    ``spec.allow_special`` (for text a special id mapping to itself is fine: that keeps [CLS]/[SEP]);
    injective (two symbols never share an id, or the model could not tell them apart).
    """
    text = alphabet is None
    symbols: Sequence[str] = vocab.tokens if text else alphabet
    expected = vocab.size if text else len(alphabet)
    where = f"{spec.kind} mapping onto vocabulary {vocab.label}"
    if ids.shape != (expected,):
        raise MappingError(f"{where}: {ids.shape[0] if ids.ndim == 1 else ids.shape} ids for {expected} "
                           f"{'vocabulary ids' if text else 'symbols'}; give exactly one id per symbol")
    outside = np.flatnonzero((ids < 0) | (ids >= vocab.size))
    if outside.size:
        named = [f"{symbols[j]!r} -> {ids[j]}" for j in outside.tolist()]
        raise MappingError(f"{where}: ids outside [0, {vocab.size}): {listing(named)}; use ids below "
                           f"{vocab.size} (the vocabulary size)")
    # A kind that reads symbols as the model's tokenizer does may send the ones it cannot spell to the
    # tokenizer's unknown token, several of them: exactly what that tokenizer does with them.
    unknown = vocab.unknown_id if spec.kind in KINDS and KINDS[spec.kind].shares_unknown else None
    if not spec.allow_special and vocab.special_ids:
        special = np.isin(ids, np.fromiter(vocab.special_ids, dtype=np.int64))
        if text:
            special &= ids != np.arange(vocab.size)
        if unknown is not None:
            special &= ids != unknown
        hits = np.flatnonzero(special)
        if hits.size:
            named = [f"{symbols[j]!r} -> {vocab.tokens[ids[j]]} (id {ids[j]})" for j in hits.tolist()]
            raise MappingError(f"{where}: symbols land on special tokens: {listing(named)}; {special_fix}")
    unique, counts = np.unique(ids, return_counts=True)
    shared_ids = [i for i in unique[counts > 1].tolist() if i != unknown]
    if shared_ids:
        groups = []
        for shared in shared_ids:
            owners = [repr(symbols[j]) for j in np.flatnonzero(ids == shared).tolist()]
            groups.append(f"{' and '.join(owners)} share id {shared} ({vocab.tokens[shared]})")
        raise MappingError(f"{where} is not one-to-one: {listing(groups)}; give each symbol its own id")


def _check_alphabet(alphabet: tuple[str, ...]) -> None:
    if not alphabet:
        raise MappingError("the alphabet is empty; pass the discipline's info.alphabet (or None for text)")
    bad = [repr(s) for s in alphabet if not isinstance(s, str) or not s]
    if bad:
        raise MappingError(f"alphabet symbols must be non-empty strings, got {listing(bad)}; fix the "
                           f"discipline's alphabet")
    seen, twice = set(), []
    for s in alphabet:
        if s in seen:
            twice.append(repr(s))
        seen.add(s)
    if twice:
        raise MappingError(f"the alphabet lists {listing(twice)} more than once; each symbol must be distinct")


def build_mapping(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab, *,
                  special_fix: str = SPECIAL_FIX) -> TokenMapping:
    """Build and validate the mapping of ``alphabet`` (``None``: text, the vocabulary itself) onto ``vocab``;
    ``special_fix`` is the advice when symbols land on special tokens (:data:`RUN_SPECIAL_FIX` for runs)."""
    if alphabet is not None:
        alphabet = tuple(alphabet)
        _check_alphabet(alphabet)
    ids = np.asarray(KINDS[spec.kind].build(spec, alphabet, vocab), dtype=np.int64)
    validate(spec, alphabet, ids, vocab, special_fix=special_fix)
    id_list = tuple(int(i) for i in ids.tolist())
    tokens = vocab.tokens if alphabet is None else tuple(vocab.tokens[i] for i in id_list)
    return TokenMapping(spec=spec, alphabet=alphabet, ids=id_list, tokens=tokens, vocab_name=vocab.name,
                        vocab_fingerprint=vocab.fingerprint, vocab_size=vocab.size)
