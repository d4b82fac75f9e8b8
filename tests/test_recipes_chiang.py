"""Chiang & Lee's recipe: its plan's two stages, and its report from tiny pretrainings and fine-tunes."""

from __future__ import annotations

import shutil

import pytest

from labcore.pretrain.spec import PretrainSpec
from labcore.recipes import RECIPES
from labcore.recipes.chiang import CONDITIONS, L1S, SCRATCH, TASKS, stage_minutes
from labcore.recipes.drive import expected_seconds, progress
from labcore.recipes.export import to_csv, to_html, verdict_table
from labcore.recipes.verdict import NOT_MEASURED
from labcore.runspec import RunSpec

from recipe_helpers import tiny
from recipe_store import finished_recipe


def _remove_lab_models(plan) -> None:
    """Lab model folders of the plan's pretrainings: one left by an earlier session may hold another key."""
    from labcore.pretrain.export import lab_folder

    for step in plan.stages[0]:
        shutil.rmtree(lab_folder(step.spec.name), ignore_errors=True)


def test_stage_two_fine_tunes_the_models_stage_one_names_after_adjusting():
    plan = RECIPES["chiang"].plan("quick", (0, 1), adjust=tiny)
    pretrainings, finetunes = plan.stages
    assert [s.condition for s in pretrainings] == list(L1S)
    assert all(isinstance(s.spec, PretrainSpec) and s.spec.size == "tiny" and s.spec.steps == 3 for s in pretrainings)
    names = {f"lab:{s.spec.name}" for s in pretrainings}
    assert all(isinstance(s.spec, RunSpec) and s.spec.model in names for s in finetunes)
    assert {(s.condition, s.facet, s.seed) for s in finetunes} == {(c, t, seed) for c in CONDITIONS for t in TASKS
                                                                   for seed in (0, 1)}
    scratch = [s.spec for s in finetunes if s.condition == SCRATCH]
    assert {s.init for s in scratch} == {"random"} and len({s.model for s in scratch}) == 1
    quick = RECIPES["chiang"].plan("quick")
    assert quick.stages[0][0].spec.name != pretrainings[0].spec.name  # the adjusted size names the model
    assert len(quick.stages[1]) == len(CONDITIONS) * len(TASKS) * 3


def test_the_report_counts_pretraining_time_apart_before_and_after_stage_one():
    recipe = RECIPES["chiang"]
    plan = recipe.plan("quick", (0, 1), adjust=tiny)
    empty = recipe.report(plan, {})
    assert empty.done == 0 and {v.word for _, v in empty.claims} == {NOT_MEASURED}
    assert any(note.startswith("Pretraining (0 of 5 finished) took 0.0 min") for note in empty.notes)
    # a finished pretraining's record keeps its time as wall_s: it counts in the report and in the estimate
    nested = plan.stages[0][0]
    results = {nested: {"corpus": "nested", "wall_s": 90.0, "tokens_seen": 2_000, "final_loss": 9.0,
                        "eval_accuracy": 0.05, "unigram_baseline_accuracy": 0.049, "losses": [[1, 10.0], [3, 9.0]],
                        "eval_curve": [[3, 0.05]]}}
    report = recipe.report(plan, results)
    assert stage_minutes(plan, results) == (1.5, 0.0) and report.wall_s == 90.0 and report.done == 1
    assert any("took 1.5 min, counted apart from the 0.0 min of fine-tunes" in note for note in report.notes)
    assert any(note.startswith("The pretrainings on nested ended within a point") for note in report.notes)
    assert dict(report.tables)["Stage 1: the pretrainings"].loc["nested", "minutes"] == 1.5
    total, left = expected_seconds(plan, results, prior_s=10.0)
    assert (total, left) == (5 * 90.0 + 24 * 10.0, 4 * 90.0 + 24 * 10.0)


@pytest.mark.integration
def test_chiang_report_from_tiny_runs(tmp_path_factory, one_torch_thread, fetched_assets):
    # One fine-tune seed: 17 jobs, a minute on a busy machine (a text run spends most of its seconds encoding
    # the whole data set); the verdicts' intervals over seeds are tested on constructed numbers elsewhere.
    recipe, seeds = RECIPES["chiang"], (0,)
    tiny_plan = recipe.plan("quick", seeds, adjust=tiny)
    _remove_lab_models(tiny_plan)
    try:
        finished = finished_recipe("chiang", tmp_path_factory, seeds)
        plan, results, store = finished.plan, finished.results, finished.store
        assert plan == tiny_plan and progress(plan, store).ended
        report = recipe.report(plan, results)
    finally:
        _remove_lab_models(tiny_plan)
    assert report.done == report.total == len(plan.steps)
    words = {v.claim: v.word for _, v in report.claims}
    assert set(words) >= {"l1-beats-scratch/the mean of uniform, zipf, nested vs no pretraining/text-sentiment",
                          "l1-beats-scratch/nested vs no pretraining/listops", "english-upper-bound/text-sentiment",
                          "zipf-vs-uniform/listops"}
    assert not [w for w in words.values() if w == NOT_MEASURED]
    tables = dict(report.tables)
    table = next(frame for title, frame in tables.items() if title.startswith("Table 1 shape"))
    assert list(table.columns) == list(TASKS) and list(table.index) == list(CONDITIONS)
    assert all("(n = 1)" in c for c in table.loc["nested"])
    stage1 = tables["Stage 1: the pretrainings"]
    assert list(stage1.index) == list(L1S) and (stage1["minutes"] > 0).all()
    assert any(note.startswith("Pretraining (5 of 5 finished) took") for note in report.notes)
    page = to_html(report)
    assert page.count("class=\"plotly-graph-div\"") == len(report.figures)
    csv = to_csv(report, plan, results)
    assert "# verdicts" in csv and len(verdict_table(report)) == len(report.claims)
