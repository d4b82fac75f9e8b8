"""RunSpec: everything that decides a result, in one frozen dataclass.

The key of a run is the sha256 of the canonical JSON of its *resolved* spec (every default filled in
from the budget table below). Two specs with the same key give the same result, so the second is served
from the store. Defaults live only in this module: the CLI, the worker and the pages all build specs
through :func:`make_spec`, which validates in one place and lists valid choices in its errors.

This module imports no torch: the pages build and show specs without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from labcore.errors import LabError

INITS = ("pretrained", "random", "stats")
INPUT_ADAPTERS = ("auto", "vocab", "embedding", "linear")
POOLINGS = ("auto", "cls", "mean", "last")
OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("linear", "constant")
PRECISIONS = ("auto", "bf16", "fp32")
BUDGETS = ("quick", "standard", "paper")

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

# Protocols whose body stays frozen train a few parameters and want the FPT learning rate.
FROZEN_FAMILY = ("frozen", "output_only", "probe")


@dataclass(frozen=True)
class TrainParams:
    """The training loop's hyper-parameters, each declared once, here.

    :class:`labcore.train.TrainConfig` extends this class with what the run decides (seed, loss,
    precision, device); :class:`RunSpec` carries every field of :class:`BudgetParams` as an optional
    one (None: the budget's value); the New experiment page shows a widget per field. A field's
    ``choices`` metadata lists its valid values.
    """

    optimizer: str = field(metadata={"choices": OPTIMIZERS})
    lr: float
    schedule: str = field(metadata={"choices": SCHEDULES})
    warmup_ratio: float  # share of the steps over which the learning rate rises linearly from 0
    batch_size: int  # examples per training step
    epochs: float
    max_steps: int  # 0: run for `epochs`; > 0: stop after this many steps
    grad_clip: float  # 0: off
    weight_decay: float
    eval_every: int  # steps between validation evaluations (0: once per epoch)
    patience: int  # evaluations without improvement before stopping early (0: off), never before min_steps
    # floors that fit a budget to small data (0: off). An explicit epochs / max_steps turns min_steps off,
    # an explicit eval_every turns min_evals off (see resolve): the floors adapt a budget, not a choice.
    min_steps: int  # more epochs where `epochs` would give fewer optimiser steps than this
    min_evals: int  # validation evaluations per run at least: eval_every shortens to steps // min_evals

    def total_steps(self, n_train: int) -> int:
        """Optimiser steps of the run: ``epochs`` of the data, at least ``min_steps``, at most ``max_steps``."""
        per_epoch = max(1, math.ceil(n_train / self.batch_size))
        total = max(1, math.ceil(per_epoch * self.epochs), self.min_steps)
        return min(total, self.max_steps) if self.max_steps > 0 else total

    def epochs_run(self, n_train: int) -> float:
        """Epochs the run's steps amount to (more than ``epochs`` where ``min_steps`` raised them)."""
        return self.total_steps(n_train) / max(1, math.ceil(n_train / self.batch_size))

    def evaluate_every(self, n_train: int) -> int:
        """Steps between validation evaluations: ``eval_every`` (0: an epoch), shortened so the run
        evaluates at least ``min_evals`` times."""
        every = self.eval_every if self.eval_every > 0 else max(1, math.ceil(n_train / self.batch_size))
        total = self.total_steps(n_train)
        if self.min_evals > 0 and math.ceil(total / every) < self.min_evals:  # the last step evaluates too
            every = max(1, total // self.min_evals)
        return every


@dataclass(frozen=True)
class BudgetParams(TrainParams):
    """What a budget sets: the loop's hyper-parameters and how much training data the loop sees."""

    train_token_budget: int  # cap on train tokens per epoch (0: no cap), applied before the loop starts
    # the token cap keeps at least this many training examples (or all there are): long sequences would
    # otherwise leave a handful (0: off; an explicit train_token_budget turns it off)
    min_train_examples: int


BUDGET_PARAMS = dataclasses.fields(BudgetParams)  # for forms: name, type and metadata of each
TRAIN_FIELDS = tuple(f.name for f in BUDGET_PARAMS)

# Budget presets. "quick" is a teaching demo: one MiniLM run in about three minutes on a 2-core CPU. Training
# costs about the same per token on every discipline (MiniLM, fp32, 2 idle cores: about 1,850 tokens/s, see
# MINILM_TOKENS_PER_S), so the token budget caps the training set: 2 epochs of 140,000 tokens take about 150 s
# of steps (splice: 2,258 of its 2,868 examples; the whole run 172 s), leaving room for preparing and
# evaluating.
# "paper" is each paper's own recipe: Kao (Adam 1e-5, batch 32, no warm-up, linear decay), FPT (Adam
# 1e-3), Tamkin (Adam 2e-5, batch 8).
# Floors that fit the quick budget to small and long data (issue 13): 106 examples x 2 epochs were 12
# steps, and learned nothing; 1,000-symbol sequences under the 140k-token cap left 283 examples. 150 steps
# of batch 16 see 2,400 examples (a 106-example set: 25 epochs), and 500 examples are kept whatever the cap
# says. Every budget but the papers' own recipes evaluates at least 8 times a run (the last step counts),
# so a short run still draws a validation curve. A quick splice run (284 steps, 8 evaluations every 40
# steps, 2,258 examples kept) is as it was.
QUICK_MIN_STEPS = 150
QUICK_MIN_EXAMPLES = 500
MIN_EVALS = 8
_TRAIN_DEFAULTS: dict[str, dict[str, BudgetParams]] = {
    # quick, measured with MiniLM on dna-splice, seeds 0-2 (test accuracy; wall time of the run, which
    # drifts by 10-15 % with the machine):
    #   2 epochs at 1e-4, 140k tokens: 0.950 / 0.931 / 0.893, 78-90 s (random init 0.805-0.836) <- the preset
    #   2 epochs at 1e-4, 150k tokens: 0.987 / 0.950 / 0.931, 80-83 s, up to 90-95 s on a slower hour
    #   2 epochs at 5e-5, 140k tokens: 0.918 / 0.912 / 0.780, 75-76 s
    #   2 epochs at 5e-5, all 2,868 examples: 0.950 (seed 0), 98 s
    #   1 epoch at 1e-4, all examples: 0.937 / 0.862 / 0.704, 56-64 s (still improving at its last step)
    "quick": {
        "finetune": BudgetParams(
            optimizer="adamw", lr=1e-4, schedule="linear", warmup_ratio=0.06, batch_size=16,
            epochs=2.0, max_steps=0, grad_clip=1.0, weight_decay=0.01, eval_every=40,
            patience=0, min_steps=QUICK_MIN_STEPS, min_evals=MIN_EVALS, train_token_budget=140_000,
            min_train_examples=QUICK_MIN_EXAMPLES),
        "frozen": BudgetParams(
            optimizer="adam", lr=1e-3, schedule="constant", warmup_ratio=0.0, batch_size=32,
            epochs=3.0, max_steps=0, grad_clip=1.0, weight_decay=0.0, eval_every=40,
            patience=0, min_steps=QUICK_MIN_STEPS, min_evals=MIN_EVALS, train_token_budget=140_000,
            min_train_examples=QUICK_MIN_EXAMPLES),
    },
    "standard": {
        "finetune": BudgetParams(
            optimizer="adamw", lr=5e-5, schedule="linear", warmup_ratio=0.06, batch_size=16,
            epochs=5.0, max_steps=0, grad_clip=1.0, weight_decay=0.01, eval_every=100,
            patience=5, min_steps=0, min_evals=MIN_EVALS, train_token_budget=0, min_train_examples=0),
        "frozen": BudgetParams(
            optimizer="adam", lr=1e-3, schedule="constant", warmup_ratio=0.0, batch_size=32,
            epochs=10.0, max_steps=0, grad_clip=1.0, weight_decay=0.0, eval_every=100,
            patience=5, min_steps=0, min_evals=MIN_EVALS, train_token_budget=0, min_train_examples=0),
    },
    "paper": {
        "finetune": BudgetParams(
            optimizer="adam", lr=1e-5, schedule="linear", warmup_ratio=0.0, batch_size=32,
            epochs=10.0, max_steps=0, grad_clip=0.0, weight_decay=0.0, eval_every=200,
            patience=0, min_steps=0, min_evals=0, train_token_budget=0, min_train_examples=0),
        "frozen": BudgetParams(
            optimizer="adam", lr=1e-3, schedule="constant", warmup_ratio=0.0, batch_size=32,
            epochs=20.0, max_steps=0, grad_clip=0.0, weight_decay=0.0, eval_every=200,
            patience=0, min_steps=0, min_evals=0, train_token_budget=0, min_train_examples=0),
        # Tamkin et al. fine-tune reinitialised / permuted models with Adam 2e-5, batch 8.
        "tamkin": BudgetParams(
            optimizer="adam", lr=2e-5, schedule="constant", warmup_ratio=0.0, batch_size=8,
            epochs=3.0, max_steps=0, grad_clip=0.0, weight_decay=0.0, eval_every=200,
            patience=0, min_steps=0, min_evals=0, train_token_budget=0, min_train_examples=0),
    },
}
_TAMKIN = ("reinit_after", "reinit_block", "reinit_layer", "permute_layers")

# On a GPU the standard budget trains larger batches and longer text: a batch of 16 leaves an H100 mostly
# idle (a MiniLM step is launch-bound), 64 fills it better; the learning rate doubles with the batch's
# fourfold growth (square-root scaling, rounded). Quick keeps its CPU meaning (a teaching demo's time and
# result are the same anywhere); paper keeps each paper's own batches. What changes, budget by family:
DEVICE_BUDGETS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "cuda": {
        "standard": {
            "finetune": {"batch_size": 64, "lr": 1e-4},
            "frozen": {"batch_size": 128},
        },
    },
}
TEXT_MAX_LENGTH = 64  # tokens a text example keeps by default: snippets average ~19 words, quick runs stay quick
# ... and on a GPU under the standard budget, where longer inputs cost little
DEVICE_TEXT_MAX_LENGTH = {"cuda": {"standard": 128}}
DEVICE_KINDS = ("cpu", "cuda")


def kept_by_budget(n: int, token_budget: int, mean_length: float, min_examples: int = 0) -> int:
    """Training examples a token budget keeps of ``n`` (0: no budget), never fewer than ``min_examples``."""
    if token_budget > 0 and mean_length > 0:
        return min(n, max(1, int(token_budget // mean_length), min_examples))
    return n


# What a quick run costs, for the time the pages promise: MiniLM trains about 1,850 tokens/s on 2 idle cores in
# fp32 at batch 16 (the quick budget on dna-splice: 30.0 samples/s of 62 tokens in the engine's integration
# test; bench/throughput.py's lab loop 27.5-30.7 samples/s), the typical figure where no run was measured on
# this machine yet (labcore.speed measures the runs that finished here); evaluating is a forward pass, about a
# third of a training step; preparing (data from the cache, the model) takes a few seconds. A CPU with native
# bf16 (AVX-512 BF16 or AMX), where ``auto`` precision is bf16, trained the same run at 57-69 samples/s:
# 3,600-4,300 tokens/s.
MINILM_TOKENS_PER_S = 1_850
MINILM_TOKENS_PER_S_BF16 = 3_900
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


def _family(budget: str, protocol: str) -> str:
    if protocol in FROZEN_FAMILY:
        return "frozen"
    if budget == "paper" and protocol in _TAMKIN:
        return "tamkin"
    return "finetune"


def train_defaults(budget: str, protocol: str, device: str = "cpu") -> dict[str, Any]:
    """The training hyper-parameters a budget gives a protocol on a ``device`` kind (``cpu`` or ``cuda``):
    what `None` fields resolve to."""
    if budget not in _TRAIN_DEFAULTS:
        raise LabError(f"unknown budget {budget!r}; valid budgets: {', '.join(BUDGETS)}")
    _check("device kind", device, DEVICE_KINDS)
    family = _family(budget, protocol)
    changes = DEVICE_BUDGETS.get(device, {}).get(budget, {}).get(family, {})
    return dataclasses.asdict(dataclasses.replace(_TRAIN_DEFAULTS[budget][family], **changes))


def text_max_length(budget: str, device: str = "cpu") -> int:
    """Tokens a text example keeps where the spec leaves ``max_length`` at 0."""
    return DEVICE_TEXT_MAX_LENGTH.get(device, {}).get(budget, TEXT_MAX_LENGTH)


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


def _budget_fields(cls: type) -> type:
    """Give the class body an optional field per :class:`BudgetParams` field (``lr: float | None = None``),
    after its own fields, so every training hyper-parameter is declared once, in TrainParams."""
    annotations = cls.__dict__.get("__annotations__", {})
    for f in BUDGET_PARAMS:
        annotations[f.name] = f"{f.type} | None"  # a string, as `from __future__ import annotations` writes it
        setattr(cls, f.name, None)
    cls.__annotations__ = annotations
    return cls


@dataclass(frozen=True)
@_budget_fields
class RunSpec:
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
    seed: int = 0
    # Then one optional field per BudgetParams field, added by _budget_fields (None: the budget's value).

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
        return hashlib.sha256(f"r{RESULTS_REVISION}:{self.to_json()}".encode()).hexdigest()[:20]

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


def _check(name: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise LabError(f"unknown {name} {value!r}; valid choices: {', '.join(valid)}")


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
    _check("init", spec.init, INITS)
    _check("input adapter", spec.input_adapter, INPUT_ADAPTERS)
    _check("pooling", spec.pooling, POOLINGS)
    _check("precision", spec.precision, PRECISIONS)
    _check("budget", spec.budget, BUDGETS)
    _check("mapping", spec.mapping, MAPPING_KINDS)
    for f in BUDGET_PARAMS:
        if "choices" in f.metadata and getattr(spec, f.name) is not None:
            _check(f.name, getattr(spec, f.name), f.metadata["choices"])
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


def resolve(spec: RunSpec, input_kind: str, *, max_positions: int | None = None, device: str = "cpu") -> RunSpec:
    """Fill every `auto`/None field that the discipline decides, so the key names what will run.

    `max_positions` is the model's longest input where it is known: a longer `max_length` is cut to it, so
    the key names the length that runs.

    `input_kind` is the discipline's ("tokens" | "vectors" | "text"). Fields that do not apply (a
    mapping for vector inputs) are normalised, so two specs differing only in an unused field share a
    key. `pooling="auto"` and `precision="auto"` stay as they are: the engine turns them into the
    model's default pooling and the machine's precision, and the result records what it used.

    `device` is the kind (``cpu``, ``cuda``) the run will train on: the budget's values for it fill the
    unset fields (:data:`DEVICE_BUDGETS`), and a text length that differs from the CPU's is written out,
    so the key names what runs.
    """
    changes: dict[str, Any] = {}
    for name, value in train_defaults(spec.budget, spec.protocol, device).items():
        if getattr(spec, name) is None:
            changes[name] = value
    # A floor adapts the budget's own values; where the user chose the value it bounds, it is off.
    for floor, chosen in (("min_steps", ("epochs", "max_steps")), ("min_evals", ("eval_every",)),
                          ("min_train_examples", ("train_token_budget",))):
        if getattr(spec, floor) is None and any(getattr(spec, name) is not None for name in chosen):
            changes[floor] = 0
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
    changes["input_adapter"] = adapter
    if max_positions and spec.max_length > max_positions:
        changes["max_length"] = max_positions
    # Only at the first resolution: a spec resolved for a CPU keeps max_length 0 (64 tokens) when a GPU worker
    # resolves it again, so its key stays the one it was submitted under.
    if input_kind == "text" and spec.max_length == 0 and not spec.is_resolved and \
            text_max_length(spec.budget, device) != TEXT_MAX_LENGTH:
        changes["max_length"] = text_max_length(spec.budget, device)
    mapping = spec.mapping
    if adapter != "vocab":
        mapping = "none"
    elif mapping == "auto":
        mapping = "identity" if input_kind == "text" else "random"
    elif mapping == "none":
        raise LabError("the vocab input adapter needs a token mapping; choose identity, shift, random, "
                       "unused, letters or table")
    changes["mapping"] = mapping
    if mapping != "shift":
        changes["mapping_k"] = RunSpec.mapping_k
    if mapping != "random":
        changes["mapping_seed"] = RunSpec.mapping_seed
    if mapping != "table":
        changes["mapping_table"] = ()
    return dataclasses.replace(spec, **changes)

