"""L1 corpora: what a model is pretrained on before it ever sees the task (Chiang & Lee §3, §4.3).

Every corpus draws ids of one shared vocabulary, MiniLM's uncased WordPiece (30,522 ids), so the embedding
table has the same size whatever the L1, and a pretrained model fine-tunes on English text with MiniLM's
tokenizer and no new vocabulary. Special tokens ([PAD], [UNK], [CLS], [SEP], [MASK] and the 994
[unusedN] slots) are never drawn. Sequences are 90 to 120 tokens long (Chiang §3), seeded: the same
corpus name, size and seed give the same sequences on every machine.

* ``uniform``: every id equally likely.
* ``zipf``: ids drawn from the English unigram distribution: PyPI ``wordfreq``'s English word frequencies
  (its "best" list, words down to 1e-7), each word split by MiniLM's tokenizer and its frequency credited
  to every piece. Cached once under ``cache/corpora/``.
* ``nested``: Chiang's stack grammar (after Papadimitriou & Jurafsky): at each position, with p = 0.4 (or
  when the stack is empty) draw a token from the unigram distribution, emit it and push it; otherwise pop
  and emit the popped token. Positions are kept for closing what is open, so every sequence is balanced.
* ``nested-uniform``: the same grammar with uniformly drawn tokens (Chiang's "Artificial (Uniform)").
* ``flat``: the same tokens and pair counts, but a close emits a uniformly chosen open token, not the
  latest: pairs cross freely (Papadimitriou & Jurafsky's flat parentheses).
* ``nested-50``, ``nested-500``, ``nested-5000``: the nested grammar over the 50 / 500 / 5,000 most
  frequent ids only (Chiang §4.3: how many token types the L1 needs).
* ``english``: windows of Jane Austen's novels (:mod:`labcore.pretrain.english`, Debian
  ``r-cran-janeaustenr``), the upper bound, as Chiang's English Wikipedia.
* ``java``: windows of OpenJDK's Java class library, comments stripped (:mod:`labcore.pretrain.java`,
  Debian ``openjdk-17-source``).
* ``kannada``: windows of LibreOffice's Kannada interface strings, one Kannada character a token on ids of
  the vocabulary's ``[unused]`` rows (:mod:`labcore.pretrain.kannada`, Debian ``libreoffice-l10n-kn``).
* ``amino``: windows of the protein disciplines' residues (:mod:`labcore.pretrain.amino`), training splits
  only, so nothing leaks into a protein fine-tune's test set.

Held-out sequences (``held_out=True``) come from another seed for the generated corpora, from the last
5 % of the text for ``english``, ``java`` and ``kannada``, and from the validation splits for ``amino``, so a held-out accuracy never
scores memorised training text.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from labcore import paths
from labcore.errors import LabError
from labcore.pretrain.vocab import (VOCAB_SIZE, cached_array, is_special, sampleable_ids, vocabulary,
                                    wordpiece_tokenizer)
from labcore.registry import Registry

__all__ = ["CORPORA", "VOCAB_SIZE", "Corpus", "Distribution", "bracket_sequence", "corpus_names", "corpus_stats",
           "depths", "english_unigram", "is_special", "sampleable_ids", "text_size", "vocabulary"]

MIN_LENGTH, MAX_LENGTH = 90, 120  # tokens per sequence, both included (Chiang §3)
P_PUSH = 0.4  # the nested grammar's probability of opening a pair (Chiang §3)
WORDFREQ_MIN = 1e-7  # rarer words add < 2 % of the mass and would only slow the mapping
UNIGRAM_FORMAT = 1  # bump when the mapping from words to ids changes

DrawFn = Callable[[int], np.ndarray]


def _unigram_path() -> Path:
    from importlib import metadata

    version = metadata.version("wordfreq")
    return paths.cache_dir() / "corpora" / f"unigram-en-wordfreq{version}-v{UNIGRAM_FORMAT}.npy"


def _build_unigram() -> np.ndarray:
    import wordfreq

    freqs = {w: f for w, f in wordfreq.get_frequency_dict("en", wordlist="best").items() if f >= WORDFREQ_MIN}
    tokenizer = wordpiece_tokenizer()
    weights = np.zeros(VOCAB_SIZE, dtype=np.float64)
    words = list(freqs)
    for word, encoding in zip(words, tokenizer.encode_batch(words, add_special_tokens=False)):
        np.add.at(weights, np.asarray(encoding.ids, dtype=np.int64), freqs[word])
    special = np.ones(VOCAB_SIZE, dtype=bool)
    special[sampleable_ids()] = False
    weights[special] = 0.0  # [UNK] collects the mass of unknown characters: never drawn
    return weights / weights.sum()


@lru_cache(maxsize=1)
def english_unigram() -> np.ndarray:
    """P(id) over the vocabulary from ``wordfreq``'s English frequencies (0 for specials and ids no word
    of the list produces). Built once (about 3 s) and kept under ``cache/corpora/``."""
    return cached_array(_unigram_path(), _build_unigram)



# ------------------------------------------------------------------------------------------ distributions


@dataclass(frozen=True)
class Distribution:
    """A categorical distribution over some ids, sampled by inverting its cumulative sum."""

    ids: np.ndarray  # int64
    probs: np.ndarray  # float64, sums to 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cdf", np.cumsum(self.probs))  # once: sequences draw a few tokens at a time

    @classmethod
    def from_weights(cls, ids: np.ndarray, weights: np.ndarray) -> "Distribution":
        keep = weights > 0
        ids, weights = np.asarray(ids, dtype=np.int64)[keep], np.asarray(weights, dtype=np.float64)[keep]
        return cls(ids, weights / weights.sum())

    def top(self, n: int) -> "Distribution":
        """The ``n`` most likely ids, renormalised (ties broken by the smaller id)."""
        order = np.lexsort((self.ids, -self.probs))[:n]
        return Distribution.from_weights(self.ids[order], self.probs[order])

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        cdf = self._cdf
        index = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        return self.ids[np.minimum(index, len(self.ids) - 1)]


def uniform_distribution() -> Distribution:
    ids = sampleable_ids()
    return Distribution(ids, np.full(len(ids), 1.0 / len(ids)))


def zipf_distribution() -> Distribution:
    table = english_unigram()
    return Distribution.from_weights(np.arange(VOCAB_SIZE), table)


# ------------------------------------------------------------------------------------------ grammars


def bracket_sequence(rng: np.random.Generator, length: int, draw: DrawFn, *, nested: bool = True,
                     p_push: float = P_PUSH) -> tuple[np.ndarray, np.ndarray]:
    """One balanced sequence of ``length`` (even) tokens and its pairing: ``partner[t]`` is the position
    that closes the pair opened at ``t``, and the other way round.

    Opens with probability ``p_push`` (always on an empty stack, never when the remaining positions are
    needed to close what is open); a close emits the token of the latest open pair (``nested``) or of a
    uniformly chosen open pair (flat: pairs cross)."""
    if length % 2:
        raise LabError(f"a balanced sequence has an even length, got {length}")
    fresh = draw(length // 2)
    push = rng.random(length) < p_push
    pick = rng.random(length)
    tokens = np.empty(length, dtype=np.int64)
    partner = np.empty(length, dtype=np.int64)
    opened: list[int] = []
    drawn = 0
    for t in range(length):
        if opened and (len(opened) >= length - t or not push[t]):
            j = opened.pop() if nested else opened.pop(int(pick[t] * len(opened)))
            tokens[t], partner[t], partner[j] = tokens[j], j, t
        else:
            tokens[t] = fresh[drawn]
            drawn += 1
            opened.append(t)
    return tokens, partner


def depths(partner: np.ndarray) -> np.ndarray:
    """How many pairs are open at each position (after an open, before a close): nesting depth."""
    positions = np.arange(len(partner))
    step = np.where(partner > positions, 1, -1)
    return np.cumsum(step) + (step < 0)


# ------------------------------------------------------------------------------------------ the registry


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    distribution: Callable[[], Distribution]
    grammar: str = "none"  # "none" | "nested" | "flat" | "text" (windows of a real text)
    top: int = 0  # > 0: only the most frequent ``top`` ids
    # grammar "text": the text as one stream of ids, for training (False) or held out (True)
    text: Callable[[bool], np.ndarray] | None = None
    few_ids: bool = False  # draws from a small part of the vocabulary: 50-substitute applies (Chiang §4.3)
    licence: str = "generated here (no licence needed); token ids of MiniLM's vocabulary (Apache-2.0)"

    def tokens(self) -> Distribution:
        dist = self.distribution()
        return dist.top(self.top) if self.top else dist

    def lengths(self, rng: np.random.Generator, n: int) -> np.ndarray:
        lengths = rng.integers(MIN_LENGTH, MAX_LENGTH + 1, size=n)
        return lengths - lengths % 2 if self.grammar in ("nested", "flat") else lengths

    def generate(self, n: int, seed: int = 0, *, structure: bool = False, held_out: bool = False) -> list:
        """``n`` sequences (int64 arrays of ids); with ``structure``, ``(tokens, partner)`` pairs for the
        bracket grammars (``partner`` None for the others). ``held_out``: sequences for evaluation."""
        rng = np.random.default_rng([int(seed), zlib.crc32(self.name.encode()), int(held_out)])
        lengths = self.lengths(rng, n)
        if self.text is not None:
            sequences = stream_windows(self.text(held_out), rng, lengths)
            return [(s, None) for s in sequences] if structure else sequences
        dist = self.tokens()
        if self.grammar == "none":
            flat = dist.draw(rng, int(lengths.sum()))
            sequences = np.split(flat, np.cumsum(lengths)[:-1])
            return [(s, None) for s in sequences] if structure else sequences
        out = [bracket_sequence(rng, int(length), lambda k: dist.draw(rng, k), nested=self.grammar == "nested")
               for length in lengths]
        return out if structure else [tokens for tokens, _ in out]


CORPORA: Registry[Corpus] = Registry("L1 corpus")


def _register(corpus: Corpus) -> None:
    CORPORA.register(corpus.name, corpus)


_ZIPF_LICENCE = ("frequencies from PyPI wordfreq (code Apache-2.0, data CC BY-SA 4.0); ids of MiniLM's "
                 "vocabulary (Apache-2.0)")
_register(Corpus("uniform", "random tokens, every id equally likely (Chiang's random baseline)",
                 uniform_distribution))
_register(Corpus("zipf", "random tokens drawn from English unigram frequencies (Chiang's Zipf baseline)",
                 zipf_distribution, licence=_ZIPF_LICENCE))
_register(Corpus("nested", "nested parentheses: a stack grammar (push p=0.4, pop emits the matching token) "
                           "over English unigram tokens (Chiang §3)", zipf_distribution, "nested",
                 licence=_ZIPF_LICENCE))
_register(Corpus("nested-uniform", "nested parentheses over uniformly drawn tokens (Chiang's Artificial "
                                   "(Uniform))", uniform_distribution, "nested"))
_register(Corpus("flat", "flat parentheses: the same pairs, but a close repeats a random open token, so pairs "
                         "cross (Papadimitriou & Jurafsky)", zipf_distribution, "flat", licence=_ZIPF_LICENCE))
for _n in (50, 500, 5000):
    _register(Corpus(f"nested-{_n}", f"nested parentheses over the {_n:,} most frequent English ids only "
                                     f"(Chiang §4.3)", zipf_distribution, "nested", top=_n, licence=_ZIPF_LICENCE,
                     few_ids=True))


def stream_windows(stream: np.ndarray, rng: np.random.Generator, lengths: np.ndarray) -> list[np.ndarray]:
    """Windows of the given lengths at seeded random offsets of one stream of ids."""
    if len(stream) <= int(lengths.max()):
        raise LabError(f"the text has {len(stream):,} tokens, too few for sequences of {int(lengths.max())}")
    starts = rng.integers(0, len(stream) - int(lengths.max()), size=len(lengths))
    return [stream[s:s + n].astype(np.int64) for s, n in zip(starts, lengths)]


def _text_corpus(name: str, description: str, text: Callable[[bool], np.ndarray], licence: str,
                 few_ids: bool = False) -> Corpus:
    def unigram() -> Distribution:
        return Distribution.from_weights(np.arange(VOCAB_SIZE), np.bincount(text(False), minlength=VOCAB_SIZE))

    return Corpus(name, description, unigram, "text", text=text, licence=licence, few_ids=few_ids)


def _english(held_out: bool) -> np.ndarray:
    from labcore.pretrain.english import text_part

    return text_part(held_out)


def _java(held_out: bool) -> np.ndarray:
    from labcore.pretrain.java import text_part

    return text_part(held_out)


def _kannada(held_out: bool) -> np.ndarray:
    from labcore.pretrain.kannada import text_part

    return text_part(held_out)


def _amino(held_out: bool) -> np.ndarray:
    from labcore.pretrain.amino import residue_stream

    return residue_stream(held_out)


_register(_text_corpus("english", "Jane Austen's six novels, tokenised by MiniLM's tokenizer: the natural-language "
                                  "upper bound (Chiang's English)", _english,
                       licence="the novels are in the public domain; R package janeaustenr (MIT) via Debian "
                               "r-cran-janeaustenr"))
_register(_text_corpus("java", "OpenJDK 17's java.base sources, comments stripped, tokenised by MiniLM's tokenizer "
                               "(Chiang's Java)", _java, licence="GPL-2.0 with the Classpath Exception (OpenJDK), "
                                                                 "via Debian openjdk-17-source"))
_register(_text_corpus("kannada", "LibreOffice's Kannada interface strings, one Kannada character a token (ids of "
                                  "MiniLM's [unused] rows), the rest WordPiece (Chiang's other human language)",
                       _kannada, licence="MPL-2.0 (LibreOffice translations), via Debian libreoffice-l10n-kn"))
_register(_text_corpus("amino", "amino-acid sequences of the protein disciplines' training splits, one residue a "
                                "token (MiniLM's single-letter ids); held out: their validation splits",
                       _amino, licence="as the protein disciplines' data (iLearnPlus MIT, modlAMP BSD-3-Clause)",
                       few_ids=True))


def corpus_names() -> list[str]:
    return CORPORA.names()


def text_size(name: str) -> tuple[int, int] | None:
    """(training, held-out) tokens of a corpus that is a real text; None for a generated one (unbounded:
    a pretraining draws as many seeded sequences as it asks for). Builds the text's stream on first use."""
    corpus = CORPORA[name]
    if corpus.text is None:
        return None
    return len(corpus.text(False)), len(corpus.text(True))


def corpus_stats(sequences: list, top: int = 30) -> dict:
    """What the pages show of a corpus sample: its size, the most frequent ids with their share and, for
    the bracket grammars, the distribution of nesting depths. ``sequences`` is a ``structure=True`` sample."""
    tokens = np.concatenate([s for s, _ in sequences]) if sequences else np.zeros(0, dtype=np.int64)
    ids, counts = np.unique(tokens, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:top]
    stats = {"sequences": len(sequences), "tokens": int(len(tokens)), "distinct": int(len(ids)),
             "top": [(int(ids[i]), float(counts[i] / max(1, len(tokens)))) for i in order]}
    partners = [p for _, p in sequences if p is not None]
    if partners:
        values, counts = np.unique(np.concatenate([depths(p) for p in partners]), return_counts=True)
        stats["depths"] = [(int(v), int(c)) for v, c in zip(values, counts)]
    return stats

