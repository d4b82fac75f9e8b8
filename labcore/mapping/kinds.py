"""The mapping rules (Kao & Lee §2.1 and §2.2): each builds the ids of an alphabet, or a permutation of a whole
text vocabulary, and registers in :data:`labcore.mapping.spec.KINDS`; :func:`labcore.mapping.build.validate`
then checks every result the same way."""

from __future__ import annotations

import numpy as np

from labcore.errors import MappingError
from labcore.mapping.common import listing
from labcore.mapping.spec import MappingSpec, register_kind
from labcore.mapping.vocab import Vocab


def _decimal_symbols(alphabet: tuple[str, ...]) -> bool:
    return all(s.isascii() and s.isdigit() for s in alphabet)


@register_kind("identity", ("allow_special",),
           "Every token keeps its own id: text as it was pretrained (Kao & Lee §2.1's 'normal data' "
           "baseline); an alphabet of decimal ids ('0', '17', ...) maps each symbol to that id.")
def _identity(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    if alphabet is None:
        return np.arange(vocab.size, dtype=np.int64)
    if not _decimal_symbols(alphabet):
        raise MappingError(
            f"identity needs text or symbols that are already vocabulary ids, but the alphabet is "
            f"{listing([repr(s) for s in alphabet])}; use 'letters' (each symbol as the token that spells "
            f"it) or 'random' (Kao & Lee §2.2)")
    return np.array([int(s) for s in alphabet], dtype=np.int64)


def _shifted(vocab: Vocab, positions: np.ndarray, k: int) -> np.ndarray:
    pool = vocab.non_special_ids
    return pool[(positions + k) % pool.size]


@register_kind("shift", ("k",),
           "T(i) = (i + k) mod D over the non-special ids, so no token keeps its meaning and none becomes "
           "[CLS]/[SEP] (Kao & Lee §2.1, k = 1000); symbol j of an alphabet is non-special id number j + k.")
def _shift(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    """Shift within the ascending list ``N`` of non-special ids (size ``M``).

    Text: non-special id ``N[j]`` becomes ``N[(j + k) mod M]``; special ids stay put. Where no special
    id lies between ``i`` and ``i + k`` and nothing wraps, this is exactly Kao & Lee's ``i + k``
    (on BERT: every id from 104 to ``D - k - 1``), e.g. '.' -> 'at' as in their footnote 2.

    Alphabet: symbol ``j`` (its position in the alphabet) takes ``N[(j + k) mod M]``, i.e. the alphabet
    is first laid on the first ``n`` non-special ids and then shifted by ``k``. That base does not
    depend on the symbols being spelled by tokens, so it works for every alphabet (pitches, bits).
    With ``k = 0`` on BERT that base is ``[unused0]...``; the default ``k = 1000`` leaves them.
    """
    pool = vocab.non_special_ids
    if alphabet is None:
        out = np.arange(vocab.size, dtype=np.int64)
        out[pool] = _shifted(vocab, np.arange(pool.size), spec.k)
        return out
    if len(alphabet) > pool.size:
        raise MappingError(f"shift needs {len(alphabet)} distinct non-special ids, vocabulary {vocab.label} has "
                           f"{pool.size}; use a model with a larger vocabulary")
    return _shifted(vocab, np.arange(len(alphabet)), spec.k)


@register_kind("random", ("seed",),
           "A seeded random one-to-one table onto non-special ids (Kao & Lee §2.2 for non-text data, "
           "appendix B's 'random mapping' for text); another seed gives another table.")
def _random(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    pool = vocab.non_special_ids
    rng = np.random.default_rng(spec.seed)
    if alphabet is None:
        out = np.arange(vocab.size, dtype=np.int64)
        out[pool] = rng.permutation(pool)
        return out
    if len(alphabet) > pool.size:
        raise MappingError(f"random needs {len(alphabet)} distinct non-special ids, vocabulary {vocab.label} "
                           f"has {pool.size}; use a model with a larger vocabulary")
    return rng.choice(pool, size=len(alphabet), replace=False).astype(np.int64)


@register_kind("unused", (),
           "Symbols go to the vocabulary's [unused0], [unused1], ... tokens, which pretraining never "
           "trained; Kao & Lee §2.2/§3.2 find this degenerates to training from scratch.")
def _unused(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    if alphabet is None:
        raise MappingError(f"unused maps an alphabet onto [unusedN] tokens and cannot permute a whole text "
                           f"vocabulary; for text use 'shift' or 'random'")
    have = len(vocab.unused_ids)
    if have < len(alphabet):
        why = "has no [unusedN] tokens" if have == 0 else f"has only {have} [unusedN] tokens"
        raise MappingError(f"vocabulary {vocab.label} {why}, the alphabet needs {len(alphabet)}; use 'random' "
                           f"(or a BERT-style model, which reserves [unused] tokens)")
    return np.array(vocab.unused_ids[:len(alphabet)], dtype=np.int64)


@register_kind("letters", ("allow_special",),
           "Each symbol goes to the vocabulary token that spells it, exactly or lower-cased (A -> 'a' on "
           "uncased BERT; residues on a protein model): does a letter's pretrained meaning help?")
def _letters(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    if alphabet is None:
        raise MappingError("letters maps an alphabet onto the tokens that spell it; text is already spelled "
                           "by its tokens: use 'identity'")
    index = vocab.index
    ids, missing = [], []
    for symbol in alphabet:
        found = index.get(symbol, index.get(symbol.lower()))
        if found is None:
            missing.append(repr(symbol))
        ids.append(-1 if found is None else found)
    if missing:
        raise MappingError(f"no token of vocabulary {vocab.label} spells {listing(missing)} (tried exact and "
                           f"lower-case); use 'table' to choose their ids, or 'random'")
    return np.array(ids, dtype=np.int64)


@register_kind("native", ("allow_special",),
           "Each symbol as the model's own tokenizer reads it: the token that spells it, and its unknown token "
           "for symbols it has none for (a protein model's 20 residues, with gaps and rare codes unknown).",
           shares_unknown=True)
def _native(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    if alphabet is None:
        raise MappingError("native maps an alphabet onto the tokens that spell it; text is already read by its "
                           "tokenizer: use 'identity'")
    index = vocab.index
    spelled = [index.get(symbol, index.get(symbol.lower())) for symbol in alphabet]
    if None in spelled and vocab.unknown_id is None:
        missing = [repr(s) for s, i in zip(alphabet, spelled) if i is None]
        raise MappingError(f"vocabulary {vocab.label} spells none of {listing(missing)} and has no unknown token "
                           f"to read them as; use 'letters' with a table, or 'random'")
    return np.array([vocab.unknown_id if i is None else i for i in spelled], dtype=np.int64)


@register_kind("table", ("table", "allow_special"),
           "Your own symbol -> id table, checked to be one-to-one, inside the vocabulary and off special "
           "tokens; for text, listed tokens move and every other token keeps its id.")
def _table(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    seen: dict[str, int] = {}
    twice = []
    for symbol, i in spec.table:
        if symbol in seen and seen[symbol] != i:
            twice.append(f"{symbol!r} ({seen[symbol]} and {i})")
        seen[symbol] = i
    if twice:
        raise MappingError(f"mapping table gives more than one id for {listing(twice)}; keep one id per symbol")
    if alphabet is None:
        # Text: symbols are vocabulary tokens; the rest of the vocabulary keeps its ids. validate() then
        # insists the result is still a permutation (the moved ids must swap among themselves).
        unknown = [repr(s) for s in seen if s not in vocab.index]
        if unknown:
            raise MappingError(f"mapping table names {listing(unknown)}, not tokens of vocabulary {vocab.label}; "
                               f"use the tokenizer's token strings (e.g. '##ing')")
        out = np.arange(vocab.size, dtype=np.int64)
        for symbol, i in seen.items():
            out[vocab.index[symbol]] = i
        return out
    unknown = [repr(s) for s in seen if s not in alphabet]
    missing = [repr(s) for s in alphabet if s not in seen]
    problems = []
    if missing:
        problems.append(f"has no id for {listing(missing)}")
    if unknown:
        problems.append(f"names {listing(unknown)}, not in the alphabet")
    if problems:
        raise MappingError(f"mapping table {' and '.join(problems)}; give exactly one (symbol, id) pair for each "
                           f"of the alphabet's symbols: {listing([repr(s) for s in alphabet])}")
    return np.array([seen[s] for s in alphabet], dtype=np.int64)
