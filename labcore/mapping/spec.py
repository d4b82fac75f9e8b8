"""Which mapping rule, with its parameters (:class:`MappingSpec`), and the registry of rules (:data:`KINDS`).

The rules themselves register in :mod:`labcore.mapping.kinds`; a spec checks its kind against this registry,
and its key holds only the fields its kind reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np

from labcore.errors import MappingError
from labcore.mapping.common import MAPPING_VERSION, sha256_of
from labcore.mapping.vocab import Vocab
from labcore.registry import Registry
from labcore.runspec import RunSpec
from labcore.runspec.resolved import ResolvedSpec


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
        return sha256_of({"spec": self.canonical(), "v": MAPPING_VERSION})

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


def of_run(spec: RunSpec | ResolvedSpec) -> MappingSpec:
    """The mapping rule a run's spec names: the one conversion from a run's spec to its MappingSpec (the engine
    builds a run's mapping from it, the pages rebuild a stored run's from it)."""
    return MappingSpec(kind=spec.mapping, k=spec.mapping_k, seed=spec.mapping_seed,
                       table=spec.mapping_table if spec.mapping == "table" else ())


def default_spec(is_text: bool) -> MappingSpec:
    """The paper's default: text keeps its tokens (identity); other data maps randomly (Kao §2.2)."""
    return MappingSpec("identity") if is_text else MappingSpec("random")


# --------------------------------------------------------------------------------------------------
# the registry of kinds (each registers in labcore.mapping.kinds)

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


def register_kind(name: str, params: tuple[str, ...], description: str,
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
