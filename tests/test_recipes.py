"""Recipes: a verdict on constructed numbers, plans and their keys, and each report from tiny runs (the rule
itself: tests/test_verdict_rule.py)."""

from __future__ import annotations

import pytest

from labcore.errors import LabError
from labcore.recipes import RECIPES
from labcore.recipes.drive import plan_keys, progress
from labcore.recipes.export import to_csv, to_html, verdict_table
from labcore.recipes.verdict import DOES_NOT_HOLD, HOLDS, NOT_MEASURED, decide

from recipe_store import SEEDS, finished_recipe


# ------------------------------------------------------------------------------------------ the verdict rule


def test_a_claim_holds_when_the_interval_of_the_difference_is_on_its_side():
    v = decide("c", "pretrained", "random", {0: 0.90, 1: 0.92, 2: 0.91}, {0: 0.80, 1: 0.83, 2: 0.81})
    assert v.word == HOLDS and v.paired and v.ci_low > 0
    assert v.difference == pytest.approx(0.0967, abs=1e-3)
    # the same numbers against a claim of "lower" do not hold
    assert decide("c", "pretrained", "random", {0: 0.90, 1: 0.92, 2: 0.91}, {0: 0.80, 1: 0.83, 2: 0.81},
                  direction=-1).word == DOES_NOT_HOLD


def test_a_recipe_refuses_an_unknown_budget_and_repeated_seeds():
    with pytest.raises(LabError, match="valid budgets"):
        RECIPES["kao"].plan("huge")
    with pytest.raises(LabError, match="distinct"):
        RECIPES["kao"].plan("quick", (1, 1))


def test_every_recipe_plans_distinct_jobs_at_every_budget():
    for name in RECIPES.names():
        recipe = RECIPES[name]
        for budget in ("quick", "standard", "paper"):
            plan = recipe.plan(budget)
            keys = plan_keys(plan)
            assert len(set(keys.values())) == len(plan.steps), (name, budget)
            assert plan.cuts or budget != "quick", f"{name}: the quick budget must say what it cuts"


# ------------------------------------------------------------------------------------------ reports from tiny runs


def test_kao_report_from_tiny_runs(tmp_path_factory, fetched_assets):
    # The tiny Kao recipe the CLI, page and browser tests read: one build of it per test process.
    finished = finished_recipe("kao", tmp_path_factory)
    recipe, plan, results = RECIPES["kao"], finished.plan, finished.results
    assert progress(plan, finished.store).ended
    report = recipe.report(plan, results)
    assert report.done == report.total == len(plan.steps)
    words = {v.claim: v.word for _, v in report.claims}
    assert set(words) >= {"beats-scratch/dna-splice", "shift-hurts", "similar-to-protein-model"}
    assert not [w for w in words.values() if w == NOT_MEASURED]
    # the runs keep which test examples they got right: the pooled per-example test reads them
    assert any(v.pooled for _, v in report.claims)
    table = dict(report.tables)["Table 6 shape: test metric by discipline (mean ± std [95 % interval] (n) over seeds)"]
    assert list(table.columns) == ["dna-splice", "protein-malonylation", "music-composer"]
    assert all(f"(n = {len(SEEDS)})" in c for c in table.loc["pretrained"])
    page = to_html(report)
    assert page.count("class=\"plotly-graph-div\"") == len(report.figures) and "plotly.js" in page.lower()
    csv = to_csv(report, plan, results)
    assert "# verdicts" in csv and len(verdict_table(report)) == len(report.claims)


def test_the_expected_time_comes_from_measured_steps_of_the_same_kind_and_facet():
    from labcore.recipes.base import Plan, Step
    from labcore.recipes.drive import expected_seconds
    from labcore.results.record import RunRecord
    from labcore.runspec import make_spec

    steps = [Step(make_spec(discipline=d, seed=s), "pretrained", s, "t", d) for d in ("dna-splice", "listops")
             for s in (0, 1)]
    plan = Plan("x", "quick", (0, 1), (tuple(steps),))
    assert expected_seconds(plan, {}, 50.0) == (200.0, 200.0)  # nothing measured: the prior for each
    done = {steps[0]: RunRecord(key="a", spec={}, status="done", wall_time_s=30.0)}
    total, left = expected_seconds(plan, done, 50.0)
    assert left == 30.0 + 30.0 + 30.0  # dna seed 1 from dna seed 0; listops from the kind's mean
    assert total == 30.0 + left
