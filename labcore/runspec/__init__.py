"""RunSpec: everything that decides a result, in one frozen dataclass.

The key of a run is the sha256 of the canonical JSON of its *resolved* spec (every default filled in
from the budget table, labcore.runspec.budgets: a :class:`labcore.runspec.resolved.ResolvedSpec`, made once, at
submission, by labcore.engine.resolve.resolve). Two specs with the same key give the same result, so the second is
served from the store. Defaults live only in this module and labcore.runspec.budgets (whose names it re-exports): the
CLI, the worker and the pages all build specs through :func:`make_spec`, which validates in one place and
lists valid choices in its errors.

This module imports no torch: the pages build and show specs without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcore.runspec.budgets import (  # noqa: F401  (re-exported: callers read the budgets here)
    _TAMKIN, _TRAIN_DEFAULTS, BUDGET_PARAMS, BUDGETS, DEVICE_BUDGETS, DEVICE_KINDS, DEVICE_TEXT_MAX_LENGTH,
    FROZEN_FAMILY, MIN_EVALS, OPTIMIZERS, QUICK_MIN_EXAMPLES, QUICK_MIN_STEPS, SCHEDULES, TEXT_MAX_LENGTH,
    TRAIN_FIELDS, BudgetParams, TrainParams, _family, check_choice, kept_by_budget, text_max_length, train_defaults)
from labcore.errors import LabError

INITS = ("pretrained", "random", "stats")
INPUT_ADAPTERS = ("auto", "vocab", "embedding", "linear")
POOLINGS = ("auto", "cls", "mean", "last")
PRECISIONS = ("auto", "bf16", "fp32")
# How a run takes its training steps (labcore.engine.step): ``graphs`` pads batches to length buckets and keeps the
# learning rate on the device, and on CUDA replays each step from a CUDA graph; ``eager`` is the plain step; ``auto``
# resolves to graphs where the run will train on CUDA, else eager. The key names ``graphs`` only: eager keys (every
# CPU run's) are what they were before the field existed.
STEPS = ("auto", "eager", "graphs")
KEYLESS_STEPS = ("auto", "eager")


def keyed_step(values: dict[str, Any]) -> dict[str, Any]:
    """A spec's fields as its key reads them (a run's, a pretraining's): ``step`` only where it is ``graphs``, so an
    eager key is the key it had before steps could differ."""
    return {k: v for k, v in values.items() if not (k == "step" and v in KEYLESS_STEPS)}

# Part of every result key, so the store never serves a result that this engine would compute differently.
# Bump it with a fix that changes what results are (not with a speed-up that leaves them as they were);
# records under older keys stay in the store and on the pages, and a resubmitted spec runs again.
#   2: validation and test predictions of the best checkpoint in eval mode (dropout had been left on).
#   3: budgets fit the data: the quick budget trains at least 150 steps and keeps at least 500 examples
#      under its token cap; quick and standard evaluate at least 8 times a run.
RESULTS_REVISION = 3
MAPPING_KINDS = ("auto", "identity", "shift", "random", "unused", "letters", "native", "table", "none")
TRAIN_SIZES = ("full", "1%", "500", "5000")  # the choices the pages offer; any N or P% is accepted

# The shortest max_length a run accepts (0 aside: the discipline's own): room for [CLS] and [SEP] and at
# least 6 symbols. Below it the model sees the specials alone (2) or a negative slice of the input (1).
MIN_MAX_LENGTH = 8
# The whole-number fields and their bound: a shift moves within the model's non-special ids (k and k mod
# their count are the same mapping), so 2**31, far above any vocabulary, loses nothing and keeps numpy from
# wrapping a huge k around int64 silently; seeds and lengths get the same plain 32-bit range.
COUNTS = ("mapping_k", "mapping_seed", "max_length", "seed")
COUNT_LIMIT = 2**31

# What a quick run costs, for the time the pages promise: MiniLM's training speed on a CPU without native bf16
# (fp32) and on one with it (AVX-512 BF16 or AMX, where ``auto`` precision is bf16), the typical figures where no
# run was measured on this machine yet (labcore.engine.speed measures the runs that finished here). They are
# measurements, so they live in priors.json beside this module, each with the machine and date it came from.
# Evaluating is a forward pass, about a third of a training step; preparing (data from the cache, the model)
# takes a few seconds.
PRIORS_FILE = Path(__file__).with_name("priors.json")


def prior(name: str) -> float:
    """The measured figure ``name`` of priors.json (its ``value``; the file says the machine and date of each)."""
    return json.loads(PRIORS_FILE.read_text(encoding="utf-8"))[name]["value"]


MINILM_TOKENS_PER_S = prior("minilm_tokens_per_s_fp32")
MINILM_TOKENS_PER_S_BF16 = prior("minilm_tokens_per_s_bf16")
EVAL_SPEED_UP = 3.0
PREPARE_S = 5.0


@dataclass(frozen=True)
class Estimate:
    seconds: float
    kept: int  # training examples the token budget keeps
    steps: int
    evaluations: int


def estimate(spec: "RunSpec", sizes: tuple[int, int, int], mean_tokens: float,
             tokens_per_s: float = MINILM_TOKENS_PER_S) -> Estimate:
    """About how long a resolved spec takes on splits of ``sizes`` examples of ``mean_tokens`` tokens (with
    the specials): its steps at ``tokens_per_s``, its evaluations at a third of the cost, and preparing."""
    n_train, n_validation, n_test = sizes
    params = TrainParams(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(TrainParams)})
    kept = kept_by_budget(n_train, spec.train_token_budget, mean_tokens, spec.min_train_examples)
    steps = params.total_steps(kept)
    evaluations = math.ceil(steps / params.evaluate_every(kept))
    train_s = steps * min(spec.batch_size, kept) * mean_tokens / tokens_per_s
    # every evaluation, then the best checkpoint again on validation and on test
    eval_s = ((evaluations + 1) * n_validation + n_test) * mean_tokens / (tokens_per_s * EVAL_SPEED_UP)
    return Estimate(PREPARE_S + train_s + eval_s, kept, steps, evaluations)


Pairs = tuple[tuple[str, Any], ...]


def _pairs(values: dict[str, Any] | Pairs | None) -> Pairs:
    if not values:
        return ()
    items = values.items() if isinstance(values, dict) else values
    return tuple(sorted((str(k), _freeze(v)) for k, v in items))


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class RunSpec:
    """What a user chose for one run; None and ``auto`` leave a choice to the lab, which
    :func:`labcore.engine.resolve.resolve` makes once, at submission (a :class:`labcore.runspec.resolved.ResolvedSpec`)."""

    model: str = "minilm"
    init: str = "pretrained"
    discipline: str = "dna-splice"
    discipline_params: Pairs = ()
    mapping: str = "auto"  # auto: identity for text, random for symbols (Kao's random table)
    mapping_k: int = 1000  # shift amount (Kao: T(i) = (i + 1000) mod D)
    mapping_seed: int = 0  # seed of a random mapping
    mapping_table: tuple[tuple[str, int], ...] = ()  # kind "table": (symbol, vocabulary id) rows
    input_adapter: str = "auto"  # auto: vocab for tokens and text, linear for vectors
    protocol: str = "full"
    protocol_params: Pairs = ()
    pooling: str = "auto"
    budget: str = "quick"
    train_size: str = "full"  # "full", "N" examples, or "P%" of the training split (seeded subsample)
    max_length: int = 0  # 0: the discipline's own maximum (text: 64 tokens)
    precision: str = "auto"  # auto: bf16 where the CPU or GPU has native bf16, else fp32
    slice_vocab: bool = True  # train only the embedding rows the data uses (identical results, faster)
    # one CPU thread throughout (cores.DETERMINISTIC_THREADS) and torch's deterministic algorithms: a rerun
    # gives bit-identical weights; otherwise a run trains on the cores it finds free, which may change
    deterministic: bool = False
    step: str = "auto"  # auto: CUDA graphs where the run trains on CUDA, else the eager step (STEPS)
    seed: int = 0
    # The training hyper-parameters, None where the budget decides: BudgetParams' fields in its order, each
    # optional here (labcore.runspec.budgets says what each means; tests/test_spec.py checks the two agree).
    optimizer: str | None = None
    lr: float | None = None
    schedule: str | None = None
    warmup_ratio: float | None = None
    batch_size: int | None = None
    epochs: float | None = None
    max_steps: int | None = None
    grad_clip: float | None = None
    weight_decay: float | None = None
    eval_every: int | None = None
    patience: int | None = None
    min_steps: int | None = None
    min_evals: int | None = None
    train_token_budget: int | None = None
    min_train_examples: int | None = None

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["discipline_params"] = dict(self.discipline_params)
        out["protocol_params"] = dict(self.protocol_params)
        out["mapping_table"] = [list(row) for row in self.mapping_table]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RunSpec":
        return make_spec(**values)

    @property
    def key(self) -> str:
        """Stable identity of the result this spec produces (the spec must be resolved), under the
        engine's :data:`RESULTS_REVISION`."""
        text = json.dumps(keyed_step(self.to_dict()), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(f"r{RESULTS_REVISION}:{text}".encode()).hexdigest()[:20]

    @property
    def is_resolved(self) -> bool:
        return all(getattr(self, f) is not None for f in TRAIN_FIELDS) and self.mapping != "auto" \
            and self.input_adapter != "auto"

    def replace(self, **changes: Any) -> "RunSpec":
        return make_spec(**{**self.to_dict(), **changes})

    def label(self) -> str:
        """Short human name for tables and legends."""
        extra = ""
        if self.protocol_params:
            extra = "(" + ",".join(f"{k}={v}" for k, v in self.protocol_params) + ")"
        mapping = f" map={self.mapping}" if self.mapping not in ("none", "identity") else ""
        if self.mapping == "shift":
            mapping += f"{self.mapping_k}"
        data = dict(self.discipline_params)
        fold = f" fold={data.get('fold', 0)}/{data['folds']}" if data.get("folds") else ""  # k-fold (uploads)
        return f"{self.model}/{self.init} {self.discipline} {self.protocol}{extra}{mapping} seed={self.seed}{fold}"

    def cli(self) -> str:
        """The command line that runs this spec."""
        defaults = RunSpec()
        parts = ["python -m labcore run"]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name) and f.name in ("model", "init", "discipline", "protocol",
                                                               "seed", "budget"):
                parts.append(f"--{f.name.replace('_', '-')} {value}")
            elif value != getattr(defaults, f.name) and value is not None:
                if f.name in ("discipline_params", "protocol_params"):
                    for k, v in value:
                        parts.append(f"--{'dparam' if f.name.startswith('d') else 'pparam'} {k}={v}")
                elif f.name == "mapping_table":
                    parts.append("--mapping-table " + ",".join(f"{s}:{i}" for s, i in value))
                else:
                    parts.append(f"--{f.name.replace('_', '-')} {value}")
        return " ".join(parts)


def parse_train_size(text: str) -> tuple[str, float]:
    """("full", 0) | ("count", N) | ("fraction", p) from "full", "500", "1%"."""
    text = str(text).strip()
    if text == "full":
        return "full", 0.0
    try:
        if text.endswith("%"):
            fraction = float(text[:-1]) / 100
            if not 0 < fraction <= 1:
                raise ValueError
            return "fraction", fraction
        count = int(text)
        if count <= 0:
            raise ValueError
        return "count", float(count)
    except ValueError:
        raise LabError(f"train_size {text!r} is not understood; use full, a count like 500, "
                       f"or a percentage like 1%") from None


def make_spec(**values: Any) -> RunSpec:
    """Build a RunSpec from plain values (CLI, JSON, forms), normalising and validating them."""
    names = {f.name for f in dataclasses.fields(RunSpec)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise LabError(f"unknown RunSpec field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(names))}")
    values = dict(values)
    for key in ("discipline_params", "protocol_params"):
        values[key] = _pairs(values.get(key))
    values["mapping_table"] = _table_rows(values.get("mapping_table"))
    spec = RunSpec(**values)
    check_choice("init", spec.init, INITS)
    check_choice("input adapter", spec.input_adapter, INPUT_ADAPTERS)
    check_choice("pooling", spec.pooling, POOLINGS)
    check_choice("precision", spec.precision, PRECISIONS)
    check_choice("step", spec.step, STEPS)
    check_choice("budget", spec.budget, BUDGETS)
    check_choice("mapping", spec.mapping, MAPPING_KINDS)
    for f in BUDGET_PARAMS:
        if "choices" in f.metadata and getattr(spec, f.name) is not None:
            check_choice(f.name, getattr(spec, f.name), f.metadata["choices"])
    parse_train_size(spec.train_size)
    if spec.mapping == "table" and not spec.mapping_table:
        raise LabError("mapping 'table' needs mapping_table rows (symbol, id); give --mapping-table A:1012,C:1013,...")
    _check_numbers(spec)
    return spec


TABLE_FORM = "SYMBOL:ID,SYMBOL:ID (e.g. A:1012,C:1013)"


def _table_rows(rows: Any) -> tuple[tuple[str, int], ...]:
    """A mapping table as (symbol, vocabulary id) rows; anything else is an error naming the form."""
    out = []
    for row in rows or ():
        try:
            symbol, ident = row
            if isinstance(ident, bool) or isinstance(ident, float) and not ident.is_integer():
                raise ValueError
            ident = int(ident)
        except (TypeError, ValueError, OverflowError):
            raise LabError(f"mapping_table row {row!r} is not a symbol and a vocabulary id; write the table "
                           f"as {TABLE_FORM}") from None
        if not 0 <= ident < COUNT_LIMIT:
            raise LabError(f"mapping_table row {row!r}: vocabulary ids are counts from 0; write the table as "
                           f"{TABLE_FORM}")
        out.append((str(symbol), ident))
    return tuple(out)


def _check_numbers(spec: RunSpec) -> None:
    """Every number in range, so nothing trains on wrong input: each error states the valid range."""
    for f in BUDGET_PARAMS:
        value = getattr(spec, f.name)
        if value is None or "choices" in f.metadata:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise LabError(f"{f.name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise LabError(f"{f.name} must be a finite number, got {value}")
    for name in ("lr", "batch_size", "epochs"):
        value = getattr(spec, name)
        if value is not None and value <= 0:
            raise LabError(f"{name} must be positive (any finite number above 0), got {value}")
    for name in COUNTS:
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < COUNT_LIMIT:
            raise LabError(f"{name} must be a whole number from 0 to {COUNT_LIMIT - 1:,}, got {value!r}")
    if 0 < spec.max_length < MIN_MAX_LENGTH:
        raise LabError(f"max_length must be 0 (the discipline's own length) or at least {MIN_MAX_LENGTH} (room for "
                       f"[CLS], [SEP] and {MIN_MAX_LENGTH - 2} symbols), got {spec.max_length}")
