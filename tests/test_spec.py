"""RunSpec: defaults in one place, validation errors that list choices, stable keys, round trips."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labcore.errors import LabError
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec, make_spec, train_defaults
from labcore.runspec.resolved import resolve_fields as resolve


def test_key_is_stable_across_processes():
    spec = resolve(make_spec(discipline="dna-splice", seed=3), "tokens")
    code = ("from labcore.runspec import make_spec; from labcore.runspec.resolved import resolve_fields as resolve;"
            "print(resolve(make_spec(discipline='dna-splice', seed=3), 'tokens').key)")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == spec.key


def test_key_changes_with_anything_that_decides_the_result():
    base = resolve(make_spec(), "tokens")
    assert resolve(make_spec(seed=1), "tokens").key != base.key
    assert resolve(make_spec(init="random"), "tokens").key != base.key
    assert resolve(make_spec(mapping="shift", mapping_k=7), "tokens").key != \
        resolve(make_spec(mapping="shift", mapping_k=8), "tokens").key


def test_unused_fields_are_normalised_away():
    # A mapping seed means nothing to vector inputs: two such specs are the same run.
    a = resolve(make_spec(discipline="bits-xor", mapping_seed=1), "vectors")
    b = resolve(make_spec(discipline="bits-xor", mapping_seed=2), "vectors")
    assert a.key == b.key and a.mapping == "none" and a.input_adapter == "linear"


def test_a_run_spec_has_an_optional_field_per_hyper_parameter_and_a_resolved_one_a_decided_field():
    import dataclasses
    import typing

    from labcore.runspec import BUDGET_PARAMS
    from labcore.runspec.resolved import ResolvedSpec

    budget = [(f.name, f.type) for f in BUDGET_PARAMS]
    run_fields = dataclasses.fields(RunSpec)
    assert [(f.name, f.type) for f in run_fields[-len(budget):]] == [(name, f"{kind} | None") for name, kind in budget]
    assert all(f.default is None for f in run_fields[-len(budget):])
    # the same fields, every one declared where a reader and a type checker see it
    assert {f.name for f in dataclasses.fields(ResolvedSpec)} == {f.name for f in run_fields}
    assert typing.get_type_hints(RunSpec)["lr"] == float | None and typing.get_type_hints(ResolvedSpec)["lr"] is float


def test_budget_defaults_fill_only_missing_fields():
    spec = resolve(make_spec(lr=0.123), "tokens")
    assert spec.lr == 0.123
    assert spec.batch_size == train_defaults("quick", "full")["batch_size"]
    frozen = resolve(make_spec(protocol="frozen"), "tokens")
    assert frozen.lr == train_defaults("quick", "frozen")["lr"] == 1e-3


@pytest.mark.parametrize("field,value,needle", [
    ("init", "pretrianed", "pretrained, random, stats"),
    ("budget", "fast", "quick, standard, paper"),
    ("precision", "fp16", "auto, bf16, fp32"),
    ("train_size", "a few", "a count like 500"),
    ("lr", -1.0, "lr must be positive"),
])
def test_validation_errors_name_the_fix(field, value, needle):
    with pytest.raises(LabError, match=needle):
        make_spec(**{field: value})


def test_unknown_field_lists_valid_fields():
    with pytest.raises(LabError, match="valid fields"):
        make_spec(modle="minilm")


def test_vector_discipline_refuses_vocab_adapter():
    with pytest.raises(LabError, match="linear"):
        resolve(make_spec(input_adapter="vocab"), "vectors")


def test_spec_round_trips_through_json():
    spec = make_spec(protocol="reinit_block", protocol_params={"start": 1, "size": 2},
                     discipline_params={"n_bits": 5}, mapping="table", mapping_table=(("A", 5), ("C", 6)))
    again = RunSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.key == spec.key


def test_the_results_revision_is_part_of_the_key(monkeypatch):
    from labcore import runspec as spec_module

    spec = resolve(make_spec(), "tokens")
    before = spec.key
    monkeypatch.setattr(spec_module, "RESULTS_REVISION", spec_module.RESULTS_REVISION + 1)
    assert spec.key != before and len(spec.key) == len(before)


def test_record_round_trips_identically():
    record = RunRecord(key="k", spec={"a": 1}, status="done", metric="accuracy", test={"accuracy": 0.5},
                       train_loss=[[1, 0.7], [2, 0.6]], val_curve=[[2, 0.5]], versions={"torch": "x"},
                       steps_to_converge=2, notes=["n"])
    assert RunRecord.from_json(record.to_json()) == record
    assert RunRecord.from_json(record.to_json()).to_json() == record.to_json()


def test_training_hyper_parameters_are_declared_once():
    import dataclasses

    from labcore import runspec as spec_module
    from labcore.runspec import BudgetParams, TrainParams

    budget_fields = dataclasses.fields(BudgetParams)
    names = tuple(f.name for f in budget_fields)
    assert spec_module.TRAIN_FIELDS == names
    # RunSpec ends with one optional field per hyper-parameter, typed as declared, defaulting to None.
    tail = dataclasses.fields(RunSpec)[-len(names):]
    assert [(f.name, f.type, f.default) for f in tail] == [(f.name, f"{f.type} | None", None) for f in budget_fields]
    # Every budget table entry gives every field a value of the declared type.
    for budget, families in spec_module._TRAIN_DEFAULTS.items():
        for family, params in families.items():
            assert isinstance(params, BudgetParams), (budget, family)
            for f in budget_fields:
                assert type(getattr(params, f.name)).__name__ == f.type, (budget, family, f.name)
            for f in budget_fields:
                if "choices" in f.metadata:
                    assert getattr(params, f.name) in f.metadata["choices"]
    assert set(f.name for f in dataclasses.fields(TrainParams)) < set(names)


def test_train_config_takes_every_loop_hyper_parameter_from_the_spec():
    import dataclasses

    from labcore.engine.run import train_config
    from labcore.runspec import TrainParams

    spec = resolve(make_spec(lr=0.5, batch_size=24, patience=3, protocol="frozen"), "tokens")
    cfg = train_config(spec, loss="ce", precision="fp32", device="cpu")
    for f in dataclasses.fields(TrainParams):
        assert getattr(cfg, f.name) == getattr(spec, f.name)
    assert (cfg.seed, cfg.loss, cfg.precision, cfg.checkpoint_every) == (spec.seed, "ce", "fp32", 0)
    assert cfg.eval_batch_size == 48
    assert dataclasses.replace(cfg, batch_size=8).eval_batch_size == 32


def test_optimizer_and_schedule_choices_are_checked():
    with pytest.raises(LabError, match="adam, adamw"):
        make_spec(optimizer="sgd")
    with pytest.raises(LabError, match="linear, constant"):
        make_spec(schedule="cosine")


def test_spec_choices_are_the_registries_names():
    # spec is the bottom layer (no torch, no models or data), so it spells the names out; these must match.
    from labcore import mapping, runspec as spec_module
    from labcore.engine import train
    from labcore.models import INITS, INPUT_ADAPTERS, POOLINGS
    from labcore.protocols import PROTOCOLS

    assert spec_module.INITS == tuple(INITS.names())
    assert spec_module.INPUT_ADAPTERS == ("auto", *INPUT_ADAPTERS.names())
    assert spec_module.POOLINGS == ("auto", *POOLINGS.names())
    assert spec_module.MAPPING_KINDS == ("auto", *mapping.KINDS.names(), "none")
    assert spec_module.OPTIMIZERS == tuple(train.OPTIMIZERS)
    assert set(spec_module.FROZEN_FAMILY) <= set(PROTOCOLS.names())
    assert set(spec_module._TAMKIN) <= set(PROTOCOLS.names())
    assert RunSpec.protocol in PROTOCOLS and RunSpec.init in INITS


def test_spec_imports_no_torch_models_or_data():
    code = ("import sys, labcore.runspec; bad = [m for m in sys.modules if m == 'torch' or m == 'streamlit' or "
            "m.startswith(('labcore.models', 'labcore.data', 'labcore.protocols'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_quick_budget_has_floors_that_explicit_choices_turn_off():
    from labcore.runspec import RESULTS_REVISION, make_spec

    assert RESULTS_REVISION == 3  # the floors change what a quick run does
    quick = resolve(make_spec(budget="quick"), "tokens")
    assert (quick.min_steps, quick.min_evals, quick.min_train_examples) == (150, 8, 500)
    frozen = resolve(make_spec(budget="quick", protocol="frozen"), "tokens")
    assert (frozen.min_steps, frozen.min_evals) == (150, 8)
    standard = resolve(make_spec(budget="standard"), "tokens")
    assert (standard.min_steps, standard.min_evals, standard.min_train_examples) == (0, 8, 0)
    paper = resolve(make_spec(budget="paper"), "tokens")
    assert (paper.min_steps, paper.min_evals) == (0, 0)
    chosen = resolve(make_spec(budget="quick", epochs=1.0, eval_every=5, train_token_budget=1000), "tokens")
    assert (chosen.min_steps, chosen.min_evals, chosen.min_train_examples) == (0, 0, 0)
    capped = resolve(make_spec(budget="quick", max_steps=10, min_steps=20), "tokens")
    assert capped.min_steps == 20  # given explicitly: kept


def test_the_time_a_quick_run_takes_follows_the_data():
    from labcore.runspec import MINILM_TOKENS_PER_S_BF16, estimate, make_spec

    quick = resolve(make_spec(budget="quick"), "tokens")
    splice = estimate(quick, (2868, 319, 319), 62.0)  # measured in fp32 on 2 cores: 172 s
    assert (splice.kept, splice.steps, splice.evaluations) == (2258, 284, 8) and 150 < splice.seconds < 220
    native = estimate(quick, (2868, 319, 319), 62.0, tokens_per_s=MINILM_TOKENS_PER_S_BF16)  # measured: 76-90 s
    assert 70 < native.seconds < 110
    small = estimate(quick, (86, 10, 10), 22.0)  # the 106-row CSV: 150 steps, not 12
    assert small.steps == 150 and small.evaluations >= 8 and small.seconds < 60
    long = estimate(quick, (1920, 240, 240), 512.0)  # 1,200 sequences of 1,000 symbols, in windows
    assert long.kept == 500 and long.steps == 150 and long.seconds > 240  # minutes, and the page says so


def test_the_old_import_path_gives_the_same_objects_with_a_deprecation_warning(monkeypatch):
    import importlib
    import sys

    import labcore.runspec
    import labcore.runspec.resolved

    for name in ("labcore.spec", "labcore.spec.budgets", "labcore.spec.resolved"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.warns(DeprecationWarning, match="labcore.spec is now labcore.runspec"):
        old = importlib.import_module("labcore.spec")
    assert old.RunSpec is labcore.runspec.RunSpec and old.make_spec is labcore.runspec.make_spec
    assert importlib.import_module("labcore.spec.resolved").ResolvedSpec is labcore.runspec.resolved.ResolvedSpec
    from labcore.spec.budgets import BUDGETS

    assert BUDGETS is labcore.runspec.BUDGETS
