"""A concrete token mapping for one vocabulary (:class:`TokenMapping`): its lookup, its key, its JSON form."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from labcore.errors import MappingError
from labcore.mapping.common import MAPPING_VERSION, listing, sha256_of
from labcore.mapping.spec import MappingSpec


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
        return sha256_of({"spec": self.spec.canonical(), "alphabet": None if self.alphabet is None
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
            raise MappingError(f"{listing([str(v) for v in np.unique(bad).tolist()])} are {what}")
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
