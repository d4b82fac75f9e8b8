"""The FPT and Tamkin recipes: their plans' shape at every budget, and each report from tiny runs."""

from __future__ import annotations

import pytest

from labcore.recipes import RECIPES
from labcore.recipes.drive import step_key

from recipe_helpers import tiny, tiny_report
from recipe_store import finished_recipe


# ------------------------------------------------------------------------------------------ FPT


def test_fpt_freezes_on_the_bit_body_of_the_adjusted_stage_one_run():
    plan = RECIPES["fpt"].plan("standard", (0, 1), adjust=tiny)
    first, frozen = plan.stages
    # stage one: the bit bodies, and table 1's fully trained transformers (they build on nothing either)
    bodies = [s for s in first if s.part == "bit body"]
    assert [s.condition for s in bodies] == ["bit body", "bit body"]  # one body per seed
    assert [(s.condition, s.facet) for s in first if s not in bodies] == [("fully trained", "image-mnist")] * 2
    assert all(s.spec.protocol == "full" and s.spec.init == "random" for s in first)
    body_model = {s.seed: f"run:{step_key(s)}" for s in bodies}
    bit = [s for s in frozen if s.condition == "bit"]
    assert bit and all(s.spec.model == body_model[s.seed] for s in bit)
    assert all(s.spec.protocol == "frozen" and s.spec.pooling == "mean" and s.spec.lr == 1e-3 for s in frozen)
    # quick too: the claims about the bit body repeat at the level they are about, one body a seed
    quick = RECIPES["fpt"].plan("quick", (0, 1, 2))
    assert len([s for s in quick.stages[0] if s.part == "bit body"]) == 3
    assert len({s.spec.model for s in quick.steps if s.condition == "bit"}) == 3


def test_fpt_ablation_switches_add_parameter_groups_one_by_one():
    plan = RECIPES["fpt"].plan("quick", (0,))
    switches = {s.condition: dict(s.spec.protocol_params) for s in plan.steps if s.part == "table 15"}
    assert switches == {"output only": dict(input=False, positions=False, layernorm=False),
                        "+ layer norm": dict(input=False, positions=False, layernorm=True),
                        "+ input": dict(input=True, positions=False, layernorm=True)}


@pytest.mark.integration  # MNIST's fetched images
def test_fpt_report_from_tiny_runs(tmp_path_factory, one_torch_thread, fetched_assets):
    _, _, report = tiny_report(RECIPES["fpt"], finished_recipe("fpt", tmp_path_factory))
    assert {v.claim for _, v in report.claims} >= {
        "pretrained-beats-random/listops", "bit-beats-random/image-mnist", "pretrained-converges-faster/bits-xor",
        "layernorm-matters", "layernorm-most-important/vs + input", "layernorm-most-important/vs + positions"}
    tables = dict(report.tables)
    table2 = next(t for title, t in tables.items() if title.startswith("Table 2 shape"))
    assert list(table2.columns) == ["bits-xor", "bits-memory", "listops", "image-mnist"]
    assert all("(n = 2)" in c for c in table2.loc["bit"])
    steps = next(t for title, t in tables.items() if title.startswith("Table 6 shape"))
    assert "speed-up (random / pretrained)" in steps.index
    ablation = next(t for title, t in tables.items() if title.startswith("Table 15 shape"))
    assert list(ablation.columns) == ["output only", "+ layer norm", "+ input", "+ positions"]
    assert all("(n = 2)" in c for c in ablation.loc["bits-xor"])
    assert len(report.paper_numbers) == 3


# ------------------------------------------------------------------------------------------ Tamkin


def test_tamkin_permutations_are_five_trials_against_the_unpermuted_model():
    plan = RECIPES["tamkin"].plan("standard", (0, 1, 2))
    permuted = [s for s in plan.steps if s.condition == "permuted"]
    assert [(s.seed, s.spec.seed, dict(s.spec.protocol_params)["seed"]) for s in permuted] == \
        [(i, i, i) for i in range(5)]
    assert {(s.facet, s.spec.train_size) for s in permuted} == {("5,000 examples", "5000")}
    unpermuted = [s for s in plan.steps if s.condition == "k=6" and s.facet == "5,000 examples"]
    assert sorted(s.seed for s in unpermuted) == [0, 1, 2]
    assert all(s.spec.protocol == "reinit_after" and dict(s.spec.protocol_params) == {"k": 6} for s in unpermuted)


def test_tamkin_quick_keeps_every_figure_at_500_examples():
    plan = RECIPES["tamkin"].plan("quick")
    # every figure at 500 examples; at 5,000 only k = 0 and k = 3, which the data-size question reads (3 epochs)
    assert {(s.facet, s.spec.train_size) for s in plan.steps if s.facet != "5,000 examples"} == \
        {("500 examples", "500")}
    large = [s for s in plan.steps if s.facet == "5,000 examples"]
    assert {(s.condition, s.part, s.spec.train_size, s.spec.epochs) for s in large} == \
        {("k=0", "fig. 2", "5000", 3.0), ("k=3", "fig. 2", "5000", 3.0)}
    assert {s.part for s in plan.steps} == {"fig. 2", "fig. 2 probes", "fig. 3", "fig. 4"}
    assert any("500 training examples for every figure" in c for c in plan.cuts)


@pytest.mark.integration  # the fetched movie reviews
def test_tamkin_report_from_tiny_runs(tmp_path_factory, one_torch_thread, fetched_assets):
    recipe = RECIPES["tamkin"]
    _, _, report = tiny_report(recipe, finished_recipe("tamkin", tmp_path_factory))
    # every claim on the 500 examples, but the data-size question, which reads both sizes
    assert {v.claim for _, v in report.claims} == {f"{claim.id}/500 examples" for claim in recipe.claims
                                                   if claim.id != "data-size-matters"} | {"data-size-matters"}
    permuting = next(v for _, v in report.claims if v.claim == "permuting-hurts/500 examples")
    # five trials against two seeds: permutation i runs with seed i, so the pairs are the seeds both sides have
    assert (permuting.n_a, permuting.n_b, permuting.paired, permuting.unpaired) == (5, 2, True, (2, 3, 4))
    tables = dict(report.tables)
    fig2 = next(t for title, t in tables.items() if title.startswith("Fig. 2 in numbers: test accuracy"))
    assert list(fig2.index) == ["k=0", "k=3", "k=6"] and all("(n = 2)" in c for c in fig2["500 examples"])
    fig4 = next(t for title, t in tables.items() if title.startswith("Fig. 4"))
    assert "(n = 5)" in fig4.loc["permutations, mean", "test accuracy"]
    assert len(report.figures) == 3
