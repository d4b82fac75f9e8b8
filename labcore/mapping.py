"""Token mappings: which model vocabulary id each discipline symbol (or each text token) is fed as.

Kao & Lee ask what a text-pretrained model carries over when token meanings change. §2.1 permutes the
tokens of text with ``T(i) = (i + 1000) mod D``; §2.2 feeds non-text symbols (bases, amino acids,
pitches) as randomly chosen vocabulary tokens, and warns that mapping them to the ``[unused]`` tokens
makes the model no better than one trained from scratch. A :class:`MappingSpec` names one such rule,
:func:`build_mapping` turns it into a concrete, validated :class:`TokenMapping` for one vocabulary,
and the mapping's :attr:`TokenMapping.key` goes into a run's cache key, so changing the mapping reruns
exactly the work that depends on it.

Two shapes of mapping:

* **alphabet** (``alphabet`` is a tuple of symbols, e.g. ``("A", "C", "G", "T")``): one id per symbol;
  :meth:`TokenMapping.apply` turns symbol indices (the ``tokens`` column of a discipline) into ids.
* **text** (``alphabet is None``): the discipline's text is tokenised by the model's own tokenizer, so
  the "alphabet" is the vocabulary itself and the mapping is a permutation of all ``D`` ids.
  Special ids ([CLS], [SEP], [PAD], ...) always map to themselves there, so sequence structure is kept.

Kinds (see :data:`KINDS` and :func:`describe_kind`): ``identity``, ``shift``, ``random``, ``unused``,
``letters`` and ``table``. Every kind's result goes through one check, :func:`validate`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from labcore.errors import MappingError
from labcore.registry import Registry

# Bump when a builder's output changes for the same spec, alphabet and vocabulary, so cached runs that
# depended on the old mapping are not served for the new one.
MAPPING_VERSION = 1

# Special tokens recognised in a plain vocab.txt (which, unlike a tokenizer, does not say which tokens
# are special): BERT's five, and the angle-bracket forms RoBERTa- and GPT-style vocabularies use.
DEFAULT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                          "<s>", "</s>", "<pad>", "<unk>", "<mask>", "<|endoftext|>")

_UNUSED = re.compile(r"^\[unused(\d+)\]$")
_MAX_LISTED = 10  # offenders named in one error message; the rest are counted


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _sha256(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------------
# vocabulary


@dataclass(frozen=True)
class Vocab:
    """A model's vocabulary as the mappings need it: token strings by id, special and unused ids.

    ``tokens[i]`` is the string of id ``i`` (``""`` for an id the tokenizer leaves unnamed).
    ``unused_ids`` lists BERT-style ``[unusedN]`` ids ordered by ``N``; GPT-2- or Llama-style
    vocabularies have none.
    """

    tokens: tuple[str, ...]
    special_ids: frozenset[int] = frozenset()
    unused_ids: tuple[int, ...] = ()
    name: str = ""  # for messages only ("minilm"); not part of the fingerprint

    def __post_init__(self) -> None:
        if not self.tokens:
            raise MappingError("vocabulary is empty; load it from the model's tokenizer or vocab.txt")
        bad = sorted(i for i in set(self.special_ids) | set(self.unused_ids) if not 0 <= i < len(self.tokens))
        if bad:
            raise MappingError(f"vocabulary {self.label}: special/unused ids {bad[:_MAX_LISTED]} lie outside "
                               f"[0, {len(self.tokens)}); build it with Vocab.from_tokenizer or Vocab.from_file")
        # Callers hand over lists and sets; a frozen vocabulary holds tuples and frozensets (hashable).
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "special_ids", frozenset(int(i) for i in self.special_ids))
        object.__setattr__(self, "unused_ids", tuple(int(i) for i in self.unused_ids))

    @property
    def unknown_id(self) -> int | None:
        """The tokenizer's unknown token ([UNK] or <unk>), if it has one among its special tokens."""
        for name in ("[UNK]", "<unk>"):
            i = self.index.get(name)
            if i is not None and i in self.special_ids:
                return i
        return None

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def label(self) -> str:
        return repr(self.name) if self.name else f"of {self.size} tokens"

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the tokens and the special ids: a mapping built for one vocabulary never matches
        another, even one with the same size. (Unused ids follow from the tokens.)"""
        return _sha256({"tokens": list(self.tokens), "special": sorted(self.special_ids)})

    @cached_property
    def non_special_ids(self) -> np.ndarray:
        """Every id that is not special, ascending: the space that shift and random permute."""
        keep = np.ones(self.size, dtype=bool)
        keep[list(self.special_ids)] = False
        out = np.flatnonzero(keep).astype(np.int64)
        out.flags.writeable = False
        return out

    @cached_property
    def index(self) -> dict[str, int]:
        """Token string -> id (the first id where a string repeats; unnamed ids are left out)."""
        out: dict[str, int] = {}
        for i, token in enumerate(self.tokens):
            if token and token not in out:
                out[token] = i
        return out

    @classmethod
    def from_tokens(cls, tokens: Sequence[str], special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
                    name: str = "") -> "Vocab":
        """From token strings by id; specials are those of ``special_tokens`` present."""
        tokens = tuple(tokens)
        wanted = set(special_tokens)
        special = frozenset(i for i, t in enumerate(tokens) if t in wanted)
        return cls(tokens=tokens, special_ids=special, unused_ids=unused_ids(tokens), name=name)

    @classmethod
    def from_file(cls, vocab_txt: str | Path, special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
                  name: str = "") -> "Vocab":
        """From a WordPiece ``vocab.txt`` (one token a line, id = line number)."""
        path = Path(vocab_txt)
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except OSError as error:
            raise MappingError(f"cannot read vocabulary file {path}: {error}; pass the model's vocab.txt") from None
        if lines and lines[-1] == "":  # the final newline ends the last token, it is not an empty token
            lines.pop()
        return cls.from_tokens(lines, special_tokens, name or path.parent.name)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, name: str = "") -> "Vocab":
        """From a transformers tokenizer: ``get_vocab()`` for the strings, ``all_special_ids``."""
        table = tokenizer.get_vocab()
        if not table:
            raise MappingError("the tokenizer has an empty vocabulary; load the model's own tokenizer")
        tokens = [""] * (max(table.values()) + 1)
        for token, i in table.items():
            tokens[i] = token
        special = frozenset(int(i) for i in tokenizer.all_special_ids if i is not None and 0 <= i < len(tokens))
        label = name or Path(str(getattr(tokenizer, "name_or_path", "") or "")).name
        return cls(tokens=tuple(tokens), special_ids=special, unused_ids=unused_ids(tokens), name=label)


def unused_ids(tokens: Sequence[str]) -> tuple[int, ...]:
    """The ids of BERT-style ``[unusedN]`` tokens, ordered by ``N`` (not by id)."""
    found = []
    for i, token in enumerate(tokens):
        match = _UNUSED.match(token)
        if match:
            found.append((int(match.group(1)), i))
    return tuple(i for _, i in sorted(found))


def model_vocab(model: str) -> Vocab:
    """A backbone's vocabulary read from the files of its folder, without torch or transformers.

    ``tokenizer.json`` (any fast tokenizer; its special tokens are the special ids, as
    :meth:`Vocab.from_tokenizer` sees them) or else ``vocab.txt`` (WordPiece: BERT, AntiBERTy). The folder is
    the one the backbone loads from (:func:`labcore.models.backbones.model_folder`); a model that has never run
    here has none yet.
    """
    from labcore.models.backbones import model_folder

    folder = model_folder(model)
    if folder is None or not folder.is_dir():
        raise MappingError(f"the vocabulary of {model!r} is not on this machine yet; run any spec with this model "
                           f"once (it fetches or converts the weights), then open this page again")
    name = model.split(":", 1)[-1]
    tok_json = folder / "tokenizer.json"
    if tok_json.is_file():
        vocab = _tokenizer_json_vocab(tok_json, name)
        if vocab is not None:
            return vocab
    if (folder / "vocab.txt").is_file():
        return Vocab.from_file(folder / "vocab.txt", name=name)
    raise MappingError(f"{folder} has neither tokenizer.json nor vocab.txt, so {model!r} has no vocabulary to map "
                       f"symbols into; use the embedding input adapter with it")


def _tokenizer_json_vocab(path: Path, name: str) -> Vocab | None:
    """The vocabulary of a fast tokenizer's ``tokenizer.json`` (None when it names no tokens)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab = data.get("model", {}).get("vocab")
    table: dict[str, int] = {}
    if isinstance(vocab, dict):
        table = {str(k): int(v) for k, v in vocab.items()}
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], id = position
        table = {str(p[0]): i for i, p in enumerate(vocab)}
    for added in data.get("added_tokens", []):
        table[str(added["content"])] = int(added["id"])
    if not table:
        return None
    tokens = [""] * (max(table.values()) + 1)
    for token, i in table.items():
        tokens[i] = token
    special = frozenset(int(a["id"]) for a in data.get("added_tokens", []) if a.get("special"))
    return Vocab(tokens=tuple(tokens), special_ids=special, unused_ids=unused_ids(tokens), name=name)


# --------------------------------------------------------------------------------------------------
# spec


@dataclass(frozen=True)
class MappingSpec:
    """Which mapping rule, with its parameters. ``key`` identifies the rule (only the fields the kind
    uses), so a leftover ``k`` on a random mapping does not split the cache."""

    kind: str
    k: int = 1000  # shift: Kao & Lee §2.1 use T(i) = (i + 1000) mod D
    seed: int = 0  # random
    table: tuple[tuple[str, int], ...] = ()  # table: the user's (symbol, id) pairs
    allow_special: bool = False  # identity / letters / table: permit special ids as targets

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise MappingError(f"unknown mapping kind {self.kind!r}; valid kinds: {', '.join(KINDS.names())}")
        for name in ("k", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise MappingError(f"mapping {name} must be an integer, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.seed < 0:
            raise MappingError(f"mapping seed must be >= 0 (numpy's generator needs it), got {self.seed}")
        if not isinstance(self.allow_special, (bool, np.bool_)):
            raise MappingError(f"allow_special must be True or False, got {self.allow_special!r}")
        object.__setattr__(self, "allow_special", bool(self.allow_special))
        # JSON and UI forms hand over lists; a frozen spec must hold tuples to stay hashable.
        pairs = []
        for pair in self.table:
            if (not isinstance(pair, (tuple, list)) or len(pair) != 2 or not isinstance(pair[0], str)
                    or isinstance(pair[1], bool) or not isinstance(pair[1], (int, np.integer))):
                raise MappingError(f"mapping table entry {pair!r} is not a (symbol, id) pair; "
                                   f"write each entry as (str, int), e.g. ('A', 1037)")
            pairs.append((pair[0], int(pair[1])))
        object.__setattr__(self, "table", tuple(pairs))
        if self.kind == "table" and not self.table:
            raise MappingError("mapping kind 'table' needs a table of (symbol, id) pairs; give one, or pick "
                               "another kind (random, letters)")
        if self.kind != "table" and self.table:
            raise MappingError(f"a table is used only by kind 'table', not {self.kind!r}; set kind='table' or "
                               f"drop the table")

    def canonical(self) -> dict[str, Any]:
        """The fields this kind uses, in a canonical form (a table sorted by symbol)."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in KINDS[self.kind].params:
            value = getattr(self, name)
            out[name] = sorted([s, i] for s, i in value) if name == "table" else value
        return out

    @property
    def key(self) -> str:
        return _sha256({"spec": self.canonical(), "v": MAPPING_VERSION})

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "k": self.k, "seed": self.seed,
                "table": [[s, i] for s, i in self.table], "allow_special": self.allow_special}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MappingSpec":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise MappingError(f"mapping spec has unknown field(s) {', '.join(unknown)}; "
                               f"valid fields: {', '.join(sorted(known))}")
        if "kind" not in data:
            raise MappingError(f"mapping spec needs a kind; valid kinds: {', '.join(KINDS.names())}")
        values = dict(data)
        if "table" in values:
            values["table"] = tuple(tuple(p) if isinstance(p, list) else p for p in values["table"])
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> "MappingSpec":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise MappingError(f"mapping spec is not valid JSON ({error}); pass MappingSpec.to_json() output") from None
        if not isinstance(data, dict):
            raise MappingError("mapping spec JSON must be an object; pass MappingSpec.to_json() output")
        return cls.from_dict(data)


def default_spec(is_text: bool) -> MappingSpec:
    """The paper's default: text keeps its tokens (identity); other data maps randomly (Kao §2.2)."""
    return MappingSpec("identity") if is_text else MappingSpec("random")


# --------------------------------------------------------------------------------------------------
# result


@dataclass(frozen=True)
class TokenMapping:
    """A concrete mapping for one vocabulary.

    ``ids[j]`` is the model id of symbol ``alphabet[j]``; for text (``alphabet is None``) ``ids`` is a
    permutation of all ``vocab_size`` ids and ``ids[i]`` is what id ``i`` is fed as. ``tokens`` holds
    the strings needed to show the mapping without the vocabulary: for an alphabet the token of each
    target id, for text the whole vocabulary by id.
    """

    spec: MappingSpec
    alphabet: tuple[str, ...] | None
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    vocab_name: str
    vocab_fingerprint: str
    vocab_size: int

    @property
    def is_text(self) -> bool:
        return self.alphabet is None

    @cached_property
    def array(self) -> np.ndarray:
        """``ids`` as a read-only int64 array: the lookup table :meth:`apply` indexes."""
        out = np.asarray(self.ids, dtype=np.int64)
        out.flags.writeable = False
        return out

    @property
    def key(self) -> str:
        """Stable across processes: the spec's used fields, the alphabet and the vocabulary fingerprint."""
        return _sha256({"spec": self.spec.canonical(), "alphabet": None if self.alphabet is None
                        else list(self.alphabet), "vocab": self.vocab_fingerprint, "v": MAPPING_VERSION})

    def apply(self, token_indices: Any) -> np.ndarray:
        """Model ids for symbol indices (alphabet) or for the tokenizer's ids (text); any shape."""
        indices = np.asarray(token_indices)
        if indices.size == 0:
            return np.zeros(indices.shape, dtype=np.int64)
        if not np.issubdtype(indices.dtype, np.integer):
            raise MappingError(f"token indices must be integers, got dtype {indices.dtype}; pass the "
                               f"discipline's 'tokens' column (or the tokenizer's input_ids for text)")
        limit = len(self.ids)
        bad = indices[(indices < 0) | (indices >= limit)]
        if bad.size:
            what = (f"ids outside the vocabulary of {limit}: tokenise with {self.vocab_name or 'the'} model's "
                    f"own tokenizer") if self.is_text else (
                f"symbol indices outside the alphabet of {limit} symbols: the data does not match the "
                f"alphabet the mapping was built for; rebuild the mapping with the discipline's alphabet")
            raise MappingError(f"{_listing([str(v) for v in np.unique(bad).tolist()])} are {what}")
        return self.array[indices]

    def rows(self, limit: int | None = None) -> list[tuple[str, int, str]]:
        """(symbol, id, token) per symbol, for a table on screen; for text one row per vocabulary id."""
        count = len(self.ids) if limit is None else min(limit, len(self.ids))
        if self.is_text:
            return [(self.tokens[i], self.ids[i], self.tokens[self.ids[i]]) for i in range(count)]
        return [(self.alphabet[j], self.ids[j], self.tokens[j]) for j in range(count)]

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "alphabet": None if self.alphabet is None else list(self.alphabet),
                "ids": list(self.ids), "tokens": list(self.tokens), "vocab_name": self.vocab_name,
                "vocab_fingerprint": self.vocab_fingerprint, "vocab_size": self.vocab_size,
                "v": MAPPING_VERSION}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "TokenMapping":
        try:
            data = json.loads(text)
            mapping = cls(
                spec=MappingSpec.from_dict(data["spec"]),
                alphabet=None if data["alphabet"] is None else tuple(data["alphabet"]),
                ids=tuple(int(i) for i in data["ids"]), tokens=tuple(data["tokens"]),
                vocab_name=str(data["vocab_name"]), vocab_fingerprint=str(data["vocab_fingerprint"]),
                vocab_size=int(data["vocab_size"]))
            version = data["v"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            if isinstance(error, MappingError):
                raise
            raise MappingError(f"not a saved token mapping ({type(error).__name__}: {error}); pass "
                               f"TokenMapping.to_json() output") from None
        if version != MAPPING_VERSION:
            raise MappingError(f"token mapping saved by mapping version {version}, this is {MAPPING_VERSION}; "
                               f"rebuild it with build_mapping")
        expected = mapping.vocab_size if mapping.alphabet is None else len(mapping.alphabet)
        if len(mapping.ids) != expected or len(mapping.tokens) != (
                mapping.vocab_size if mapping.alphabet is None else expected):
            raise MappingError("saved token mapping is inconsistent (ids/tokens do not match the alphabet or "
                               "vocabulary size); rebuild it with build_mapping")
        return mapping


# --------------------------------------------------------------------------------------------------
# validation: one function for every kind


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
        raise MappingError(f"{where}: ids outside [0, {vocab.size}): {_listing(named)}; use ids below "
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
            raise MappingError(f"{where}: symbols land on special tokens: {_listing(named)}; {special_fix}")
    unique, counts = np.unique(ids, return_counts=True)
    shared_ids = [i for i in unique[counts > 1].tolist() if i != unknown]
    if shared_ids:
        groups = []
        for shared in shared_ids:
            owners = [repr(symbols[j]) for j in np.flatnonzero(ids == shared).tolist()]
            groups.append(f"{' and '.join(owners)} share id {shared} ({vocab.tokens[shared]})")
        raise MappingError(f"{where} is not one-to-one: {_listing(groups)}; give each symbol its own id")


# --------------------------------------------------------------------------------------------------
# kinds

Builder = Callable[[MappingSpec, "tuple[str, ...] | None", Vocab], np.ndarray]


@dataclass(frozen=True)
class Kind:
    """One mapping rule: its builder, the spec fields it reads (they make its key), and a line for the UI."""

    name: str
    build: Builder
    params: tuple[str, ...]
    description: str
    shares_unknown: bool = False  # symbols may share the tokenizer's unknown token, as its own tokenizer does


KINDS: Registry[Kind] = Registry("mapping kind")


def _register(name: str, params: tuple[str, ...], description: str,
              shares_unknown: bool = False) -> Callable[[Builder], Builder]:
    def wrap(builder: Builder) -> Builder:
        KINDS.register(name, Kind(name, builder, params, description, shares_unknown))
        return builder
    return wrap


def describe_kind(kind: str) -> str:
    """One line on what the kind does and where it comes from (for the UI)."""
    if kind not in KINDS:
        raise MappingError(f"unknown mapping kind {kind!r}; valid kinds: {', '.join(KINDS.names())}")
    return KINDS[kind].description


def _decimal_symbols(alphabet: tuple[str, ...]) -> bool:
    return all(s.isascii() and s.isdigit() for s in alphabet)


@_register("identity", ("allow_special",),
           "Every token keeps its own id: text as it was pretrained (Kao & Lee §2.1's 'normal data' "
           "baseline); an alphabet of decimal ids ('0', '17', ...) maps each symbol to that id.")
def _identity(spec: MappingSpec, alphabet: tuple[str, ...] | None, vocab: Vocab) -> np.ndarray:
    if alphabet is None:
        return np.arange(vocab.size, dtype=np.int64)
    if not _decimal_symbols(alphabet):
        raise MappingError(
            f"identity needs text or symbols that are already vocabulary ids, but the alphabet is "
            f"{_listing([repr(s) for s in alphabet])}; use 'letters' (each symbol as the token that spells "
            f"it) or 'random' (Kao & Lee §2.2)")
    return np.array([int(s) for s in alphabet], dtype=np.int64)


def _shifted(vocab: Vocab, positions: np.ndarray, k: int) -> np.ndarray:
    pool = vocab.non_special_ids
    return pool[(positions + k) % pool.size]


@_register("shift", ("k",),
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


@_register("random", ("seed",),
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


@_register("unused", (),
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


@_register("letters", ("allow_special",),
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
        raise MappingError(f"no token of vocabulary {vocab.label} spells {_listing(missing)} (tried exact and "
                           f"lower-case); use 'table' to choose their ids, or 'random'")
    return np.array(ids, dtype=np.int64)


@_register("native", ("allow_special",),
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
        raise MappingError(f"vocabulary {vocab.label} spells none of {_listing(missing)} and has no unknown token "
                           f"to read them as; use 'letters' with a table, or 'random'")
    return np.array([vocab.unknown_id if i is None else i for i in spelled], dtype=np.int64)


@_register("table", ("table", "allow_special"),
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
        raise MappingError(f"mapping table gives more than one id for {_listing(twice)}; keep one id per symbol")
    if alphabet is None:
        # Text: symbols are vocabulary tokens; the rest of the vocabulary keeps its ids. validate() then
        # insists the result is still a permutation (the moved ids must swap among themselves).
        unknown = [repr(s) for s in seen if s not in vocab.index]
        if unknown:
            raise MappingError(f"mapping table names {_listing(unknown)}, not tokens of vocabulary {vocab.label}; "
                               f"use the tokenizer's token strings (e.g. '##ing')")
        out = np.arange(vocab.size, dtype=np.int64)
        for symbol, i in seen.items():
            out[vocab.index[symbol]] = i
        return out
    unknown = [repr(s) for s in seen if s not in alphabet]
    missing = [repr(s) for s in alphabet if s not in seen]
    problems = []
    if missing:
        problems.append(f"has no id for {_listing(missing)}")
    if unknown:
        problems.append(f"names {_listing(unknown)}, not in the alphabet")
    if problems:
        raise MappingError(f"mapping table {' and '.join(problems)}; give exactly one (symbol, id) pair for each "
                           f"of the alphabet's symbols: {_listing([repr(s) for s in alphabet])}")
    return np.array([seen[s] for s in alphabet], dtype=np.int64)


# --------------------------------------------------------------------------------------------------
# entry point


def _check_alphabet(alphabet: tuple[str, ...]) -> None:
    if not alphabet:
        raise MappingError("the alphabet is empty; pass the discipline's info.alphabet (or None for text)")
    bad = [repr(s) for s in alphabet if not isinstance(s, str) or not s]
    if bad:
        raise MappingError(f"alphabet symbols must be non-empty strings, got {_listing(bad)}; fix the "
                           f"discipline's alphabet")
    seen, twice = set(), []
    for s in alphabet:
        if s in seen:
            twice.append(repr(s))
        seen.add(s)
    if twice:
        raise MappingError(f"the alphabet lists {_listing(twice)} more than once; each symbol must be distinct")


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
