"""The ORCA recipe's plan and its report, from tiny finished runs through a real store."""

from __future__ import annotations

import pytest

from labcore.recipes import RECIPES
from labcore.recipes.drive import progress
from labcore.recipes.orca import ALIGNED, BUDGETS, CONDITIONS, DISCIPLINES, FULL
from labcore.recipes.export import to_csv, to_html
from labcore.recipes.verdict import NOT_MEASURED, WORDS
from labcore.engine.resolve import resolve_spec
from recipe_store import finished_recipe


def test_the_quick_plan_aligns_short_and_long_and_lets_no_alignment_be_full_fine_tuning():
    plan = RECIPES["orca"].plan("quick")
    assert plan.seeds == (0, 1, 2) and len(plan.steps) == len(DISCIPLINES) * len(CONDITIONS) * 3
    assert len({resolve_spec(s.spec).key for s in plan.steps}) == len(plan.steps)
    steps = {dict(s.spec.protocol_params).get("align_steps") for s in plan.steps if s.condition in ALIGNED}
    assert steps == {0, BUDGETS["quick"].align_short, BUDGETS["quick"].align_long}
    full = [s for s in plan.steps if s.condition == FULL]
    assert all(s.spec.protocol == "align_refine" and dict(s.spec.protocol_params)["align_steps"] == 0 for s in full)
    assert any("instead of" in cut for cut in plan.cuts)


@pytest.mark.integration  # DNA, MNIST and the text source are fetched assets
def test_orca_report_from_tiny_runs(tmp_path_factory, one_torch_thread, fetched_assets):
    recipe = RECIPES["orca"]
    finished = finished_recipe("orca", tmp_path_factory)
    plan, results = finished.plan, finished.results
    assert progress(plan, finished.store).ended
    report = recipe.report(plan, results)
    assert report.done == report.total == len(plan.steps)
    words = {v.claim: v.word for _, v in report.claims}
    assert set(words) >= {"beats-full/dna-splice", "beats-fpt/image-mnist", "beats-scratch/bits-xor",
                          "distance-tracks-score", "some-alignment-1d/bits-xor", "more-not-better-1d/dna-splice",
                          "no-help-2d/image-mnist"}
    assert set(words.values()) <= set(WORDS)
    assert not [c for c, w in words.items() if w == NOT_MEASURED and c != "distance-tracks-score"]
    tables = dict(report.tables)
    after = tables["OTDD to the text source after alignment (what the refine stage starts from)"]
    assert list(after.columns) == list(DISCIPLINES) and all("(n = 2)" in c for c in after.loc[FULL])
    assert all("(n = 2)" in c for c in tables["Test metric by discipline (mean ± std [95 % interval] (n) over seeds)"]
               .loc["align-refine (ORCA)"])
    page = to_html(report)
    assert page.count("class=\"plotly-graph-div\"") == len(report.figures)
    assert "# verdicts" in to_csv(report, plan, results)
