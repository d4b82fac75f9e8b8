"""A model's vocabulary as the token mappings see it: token strings by id, its special and ``[unusedN]`` ids,
read from a tokenizer, a ``vocab.txt`` or a backbone's folder."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from labcore.errors import MappingError
from labcore.mapping.common import MAX_LISTED, sha256_of

# Special tokens recognised in a plain vocab.txt (which, unlike a tokenizer, does not say which tokens
# are special): BERT's five, and the angle-bracket forms RoBERTa- and GPT-style vocabularies use.
DEFAULT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                          "<s>", "</s>", "<pad>", "<unk>", "<mask>", "<|endoftext|>")

_UNUSED = re.compile(r"^\[unused(\d+)\]$")


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
            raise MappingError(f"vocabulary {self.label}: special/unused ids {bad[:MAX_LISTED]} lie outside "
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
        return sha256_of({"tokens": list(self.tokens), "special": sorted(self.special_ids)})

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
    the one the backbone loads from (:func:`labcore.models.model_names.model_folder`); a model that has never run
    here has none yet.
    """
    from labcore.models.model_names import model_folder

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
