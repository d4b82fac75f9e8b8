"""ResolvedSpec: a RunSpec with every default decided for where it will train; what the store keeps.

A :class:`labcore.runspec.RunSpec` says what a user chose (None and ``auto`` where they left the choice to the
lab). Resolving it, once, at submission (:func:`labcore.engine.resolve.resolve`) decides the rest and gives a
:class:`ResolvedSpec`: the budget's hyper-parameters for the device the job will train on, the mapping and the
input adapter the discipline implies, the discipline's parameters written out. The store keeps it; the worker,
the CLI, a sweep and the pages read it and never resolve it again.

Its key is the one a resolved RunSpec always had (the same JSON, hashed the same way), so finished runs keep
theirs. :func:`resolve_fields` holds the rules that need no registry: the engine's ``resolve`` adds what the
discipline and the model say and calls it.

This module imports no torch: the pages build and show specs without it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from labcore.errors import LabError
from labcore.runspec import (TEXT_MAX_LENGTH, BudgetParams, Pairs, RunSpec, make_spec, text_max_length,
                          train_defaults)


@dataclass(frozen=True)
class ResolvedSpec(BudgetParams):
    """Every field of a run decided: the hyper-parameters are :class:`BudgetParams`' own fields, never None.

    Build one with :func:`labcore.engine.resolve.resolve` (a new spec) or :meth:`from_dict` (a stored one).
    """

    model: str
    init: str
    discipline: str
    discipline_params: Pairs  # every parameter of the discipline written out, its defaults too
    mapping: str  # never "auto"; "none" where the input adapter is not vocab
    mapping_k: int  # the default where the mapping is not a shift
    mapping_seed: int  # the default where the mapping is not random
    mapping_table: tuple[tuple[str, int], ...]  # empty where the mapping is not a table
    input_adapter: str  # never "auto"
    protocol: str
    protocol_params: Pairs
    pooling: str  # "auto" stays: the engine uses the model's own pooling, and the record says which
    budget: str
    train_size: str
    max_length: int  # 0: the discipline's own length; never above the model's positions where they are known
    precision: str  # "auto" stays: the machine that trains decides, and the record says which
    slice_vocab: bool
    deterministic: bool
    step: str  # "auto" stays only in a spec rebuilt from a record stored before the field (eager, as it ran)
    seed: int

    # ------------------------------------------------------------------ reading and writing
    @classmethod
    def of(cls, spec: RunSpec | ResolvedSpec) -> ResolvedSpec:
        """A RunSpec whose every field is decided (one rebuilt from a stored record), as it is: nothing is
        resolved again. A spec with a field still open is refused: resolve it where it enters."""
        if isinstance(spec, ResolvedSpec):
            return spec
        if not spec.is_resolved:
            raise LabError(f"{spec.label()} is not resolved: resolve it where it enters "
                           f"(labcore.engine.resolve.resolve)")
        return cls(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(cls)})

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ResolvedSpec:
        """A stored resolved spec (a job's or a record's ``spec``), validated as any spec is, read as it is."""
        return cls.of(make_spec(**values))

    def as_run_spec(self) -> RunSpec:
        """The same values as a RunSpec: its JSON, key, label and command line are this spec's."""
        return RunSpec(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

    def to_dict(self) -> dict[str, Any]:
        return self.as_run_spec().to_dict()

    def to_json(self) -> str:
        return self.as_run_spec().to_json()

    @property
    def key(self) -> str:
        """Stable identity of the result this spec produces (:attr:`RunSpec.key` of the same values)."""
        return self.as_run_spec().key

    @property
    def is_resolved(self) -> bool:
        return True

    def label(self) -> str:
        return self.as_run_spec().label()

    def cli(self) -> str:
        return self.as_run_spec().cli()


def resolve_fields(spec: RunSpec | ResolvedSpec, input_kind: str, *, max_positions: int | None = None,
                   device: str = "cpu") -> ResolvedSpec:
    """Fill every `auto`/None field that the budget and the discipline's input kind decide (the rules of
    :func:`labcore.engine.resolve.resolve`, which needs no registry). A ResolvedSpec comes back as it is.

    `max_positions` is the model's longest input where it is known: a longer `max_length` is cut to it, so
    the key names the length that runs.

    `input_kind` is the discipline's ("tokens" | "vectors" | "text"). Fields that do not apply (a
    mapping for vector inputs) are normalised, so two specs differing only in an unused field share a
    key. `pooling="auto"` and `precision="auto"` stay as they are: the engine turns them into the
    model's default pooling and the machine's precision, and the result records what it used.

    `device` is the kind (``cpu``, ``cuda``) the run will train on: the budget's values for it fill the
    unset fields (:data:`labcore.runspec.DEVICE_BUDGETS`), and a text length that differs from the CPU's is
    written out, so the key names what runs.
    """
    if isinstance(spec, ResolvedSpec):
        return spec
    changes: dict[str, Any] = {}
    for name, value in train_defaults(spec.budget, spec.protocol, device).items():
        if getattr(spec, name) is None:
            changes[name] = value
    # A floor adapts the budget's own values; where the user chose the value it bounds, it is off.
    for floor, chosen in (("min_steps", ("epochs", "max_steps")), ("min_evals", ("eval_every",)),
                          ("min_train_examples", ("train_token_budget",))):
        if getattr(spec, floor) is None and any(getattr(spec, name) is not None for name in chosen):
            changes[floor] = 0
    adapter = _input_adapter(spec, input_kind)
    changes["input_adapter"] = adapter
    if max_positions and spec.max_length > max_positions:
        changes["max_length"] = max_positions
    # A RunSpec rebuilt from a stored resolution (a recipe's template read from a record) has every field
    # decided already: it keeps max_length 0 (64 tokens) wherever it is submitted again, so its key stays.
    if input_kind == "text" and spec.max_length == 0 and not spec.is_resolved and \
            text_max_length(spec.budget, device) != TEXT_MAX_LENGTH:
        changes["max_length"] = text_max_length(spec.budget, device)
    changes.update(_mapping_fields(spec, adapter, input_kind))
    return ResolvedSpec.of(dataclasses.replace(spec, **changes))


def _input_adapter(spec: RunSpec, input_kind: str) -> str:
    """The input adapter the discipline's input kind implies (``auto``), or the chosen one where it fits."""
    adapter = spec.input_adapter
    if adapter == "auto":
        adapter = "linear" if input_kind == "vectors" else "vocab"
    if input_kind == "vectors" and adapter != "linear":
        raise LabError(f"discipline {spec.discipline!r} gives vectors: the input adapter must be linear "
                       f"(got {adapter!r})")
    if input_kind != "vectors" and adapter == "linear":
        raise LabError(f"discipline {spec.discipline!r} gives {input_kind}: use the vocab or embedding "
                       f"input adapter, not linear")
    if input_kind == "text" and adapter == "embedding":
        raise LabError("text is tokenised by the model's tokenizer: use the vocab input adapter")
    return adapter


def _mapping_fields(spec: RunSpec, adapter: str, input_kind: str) -> dict[str, Any]:
    """The mapping and its parameters: decided where ``auto``, the unused ones set to their defaults."""
    mapping = spec.mapping
    if adapter != "vocab":
        mapping = "none"
    elif mapping == "auto":
        mapping = "identity" if input_kind == "text" else "random"
    elif mapping == "none":
        raise LabError("the vocab input adapter needs a token mapping; choose identity, shift, random, "
                       "unused, letters or table")
    changes: dict[str, Any] = {"mapping": mapping}
    if mapping != "shift":
        changes["mapping_k"] = RunSpec.mapping_k
    if mapping != "random":
        changes["mapping_seed"] = RunSpec.mapping_seed
    if mapping != "table":
        changes["mapping_table"] = ()
    return changes

