"""Faithful miniatures: each records the paper's setting, the reason, the reference arm and the pilot behind it."""

from __future__ import annotations

from labcore.recipes import RECIPES
from labcore.recipes.miniature import EFFECT, pick, pilot_numbers
from labcore.recipes.miniatures import MINIATURES


def test_every_miniature_records_the_papers_setting_the_reason_and_a_reference_arm_no_headline_claim_compares():
    assert set(MINIATURES) >= {"fpt-memory", "fpt-xor", "chiang-sentiment"}
    for name in MINIATURES:
        miniature = MINIATURES[name]
        record = miniature.record()
        for field in ("paper", "reason", "reference arm", "rule", "ours"):
            assert record[field].strip(), f"{name} records no {field}"
        recipe = RECIPES[miniature.recipe]
        for claim_id in miniature.claims:
            assert recipe.claim(claim_id).headline, f"{name}: {claim_id} is no headline claim"
        assert "no headline claim" in miniature.reference or "in no headline claim" in miniature.reference
        assert len(miniature.sizes) >= 2 and len({s.label for s in miniature.sizes}) == len(miniature.sizes)
        assert 0 < miniature.floor < 1
        if miniature.chosen:  # a choice is one of the candidates and the rule's pick from the written pilot
            assert miniature.choice in miniature.sizes
            assert pick(miniature, pilot_numbers(name)) == miniature.chosen


def test_the_rule_picks_the_cheapest_size_whose_reference_arm_clears_the_floor_by_the_effect():
    miniature = MINIATURES["fpt-memory"]
    first, second, third = (s.label for s in miniature.sizes[:3])
    floor = miniature.floor
    numbers = {"sizes": {first: {"test": floor + EFFECT / 2}, second: {"test": floor + EFFECT},
                         third: {"test": 0.99}}}
    assert pick(miniature, numbers) == second
    assert pick(miniature, {"sizes": {first: {"test": 0.99}}}) == first
    assert pick(miniature, {"sizes": {first: {"test": floor}}}) == ""
    # a measured majority class higher than the stated floor is the floor the arm must clear
    assert pick(miniature, {"sizes": {first: {"test": floor + EFFECT, "floor": floor + 0.1}}}) == ""


def test_a_chosen_miniature_is_what_the_quick_plan_runs_and_fpts_bit_body_is_the_pilots_reference_arm():
    from labcore.recipes.keys import step_key
    from labcore.recipes.base import Step
    from labcore.runspec import make_spec

    for name in MINIATURES:
        miniature = MINIATURES[name]
        if miniature.choice is None:
            continue
        plan = RECIPES[miniature.recipe].plan("quick", (0,))
        on_task = [s for s in plan.steps if s.facet == miniature.task and s.part != "bit body"]
        run = dict(miniature.choice.run)
        for step in on_task:
            assert step.spec.max_steps == run["max_steps"] and step.spec.eval_every == run["eval_every"], step
            assert set(miniature.choice.discipline_params) <= set(step.spec.discipline_params), step
        assert any(miniature.chosen in cut for cut in plan.cuts) or not miniature.choice.discipline_params
        if name == "fpt-memory":  # the reference arm at the chosen size is the bit body, key for key
            reference = make_spec(**dict(miniature.arm), discipline=miniature.task, seed=0,
                                  **miniature.choice.fields())
            body = next(s for s in plan.steps if s.part == "bit body")
            assert step_key(body) == step_key(Step(reference, "reference"))
