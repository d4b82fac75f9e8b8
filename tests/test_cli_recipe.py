"""``python -m labcore recipe list|run|report`` in process, on stores of their own: an empty one, and one holding
a finished tiny recipe (every job real, shrunk by ``tests/recipe_helpers.tiny``)."""

from __future__ import annotations

import re

import pytest
from recipe_store import ADJUST, SEEDS, finished_recipe

from labcore.cli.main import main
from labcore.fmt import fmt_duration
from labcore.recipes import RECIPES
from labcore.recipes.drive import ADJUST_VARIABLE, named_adjust, paper_first, plan_of, step_key
from labcore.store import Store

SEEDS_ARG = ",".join(map(str, SEEDS))


def first_stage_jobs(plan) -> int:
    """Jobs of the plan's first stage (shrunk, two of its steps can be one job: both models become tiny:bert)."""
    return len({step_key(step) for step in plan.stages[0]})


@pytest.fixture(scope="module")
def finished(tmp_path_factory, fetched_assets):
    return finished_recipe("kao", tmp_path_factory)


@pytest.fixture
def tiny_plans(monkeypatch):
    """The CLI builds its plans shrunk as the finished store's were."""
    monkeypatch.setenv(ADJUST_VARIABLE, ADJUST)


def test_recipe_list_names_each_recipe_its_claims_and_its_jobs_and_time_per_budget(tmp_path, capsys):
    assert main(["recipe", "list", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    for name in RECIPES.names():
        recipe = RECIPES[name]
        assert f"{name}: {recipe.title}" in out
        for claim in recipe.claims:
            assert f"{claim.id} ({claim.section}): {claim.text}" in out
    kao = RECIPES["kao"]
    quick = plan_of(kao, "quick")
    line = next(l for l in out.splitlines() if l.strip().startswith("quick") and f"{len(quick.steps)} jobs" in l)
    # nothing measured in an empty store: the recipe's own figure per job times the jobs
    assert f"about {fmt_duration(len(quick.steps) * kao.prior_step_s)} of CPU time" in line
    assert f"{kao.prior_step_s:g} s a job" in line
    assert re.search(r"paper +seeds 0,1,2,3,4 .*not known yet", out)


def test_recipe_report_on_an_empty_store_is_a_report_of_nothing_measured(tmp_path, capsys):
    assert main(["recipe", "report", "kao", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    total = len(paper_first(RECIPES["kao"], plan_of(RECIPES["kao"], "quick")).steps)  # the rule's first look
    assert f"0 of {total} jobs finished" in out
    assert "NOT MEASURED" in out and "HOLDS" not in out
    assert "The paper's numbers: Kao & Lee, table 6" in out


def test_recipe_report_writes_the_html_with_its_figures_and_the_csv(finished, tiny_plans, tmp_path, capsys):
    html, csv = tmp_path / "kao.html", tmp_path / "kao.csv"
    assert main(["recipe", "report", "kao", "--seeds", SEEDS_ARG, "--store", str(finished.store.root),
                 "--html", str(html), "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    recipe = RECIPES["kao"]
    report = recipe.report(finished.plan, finished.results)
    assert f"{report.done} of {report.total} jobs finished" in out and report.done == report.total
    assert "NOT MEASURED" not in out
    for claim, verdict in report.claims:
        assert f"{verdict.word.upper()}: {verdict.claim}: {verdict.sentence()}" in out
    for title, _ in report.tables:
        assert title in out
    page = html.read_text(encoding="utf-8")
    assert page.count('class="plotly-graph-div"') == len(report.figures) > 0
    assert "plotly.js" in page.lower()  # embedded: the file opens without a network
    text = csv.read_text(encoding="utf-8")
    assert "# verdicts" in text and text.count("\n") > len(finished.plan.steps)


def test_recipe_run_of_a_finished_recipe_prints_its_verdicts_and_headline_table(finished, tiny_plans, capsys):
    assert main(["recipe", "run", "kao", "--seeds", SEEDS_ARG, "--no-start", "--store",
                 str(finished.store.root)]) == 0
    out = capsys.readouterr().out
    report = RECIPES["kao"].report(finished.plan, finished.results)
    assert f"{len(finished.plan.steps)} of {len(finished.plan.steps)} done" in out
    assert "Claims and verdicts:" in out
    assert report.tables[0][0] in out and report.tables[1][0] not in out  # the headline table only
    assert finished.store.queued() == []  # every job came from the store


def test_recipe_run_no_wait_queues_the_first_stage_and_returns(tmp_path, tiny_plans, capsys):
    store = Store(tmp_path / "store")
    try:
        assert main(["recipe", "run", "kao", "--seeds", "0", "--no-wait", "--no-start", "--store",
                     str(store.root)]) == 0
        out = capsys.readouterr().out
        plan = plan_of(RECIPES["kao"], "quick", (0,))
        assert plan.group in store.groups() and plan.group.endswith(f":{ADJUST}")
        assert len(store.queued()) == first_stage_jobs(plan)
        assert f"0 of {len(plan.steps)} done, {len(plan.stages[0])} queued" in out and "Queued." in out
    finally:
        store.close()


def test_ctrl_c_while_waiting_leaves_the_jobs_queued(tmp_path, tiny_plans, monkeypatch, capsys):
    from labcore.cli import recipe as cli_recipe

    def interrupt(_seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_recipe.time, "sleep", interrupt)
    store = Store(tmp_path / "store")
    try:
        assert main(["recipe", "run", "kao", "--seeds", "0", "--no-start", "--store", str(store.root)]) == 130
        captured = capsys.readouterr()
        assert "Stopped waiting; the recipe's jobs stay queued" in captured.err
        assert len(store.queued()) == first_stage_jobs(plan_of(RECIPES["kao"], "quick", (0,)))
    finally:
        store.close()


def test_errors_name_the_problem_and_the_fix(tmp_path, monkeypatch, capsys):
    assert main(["recipe", "report", "nope", "--store", str(tmp_path / "store")]) == 2
    assert f"unknown recipe 'nope'; valid names: {', '.join(RECIPES.names())}" in capsys.readouterr().err
    assert main(["recipe", "report", "kao", "--seeds", "0,x", "--store", str(tmp_path / "store")]) == 2
    assert "--seeds takes whole numbers separated by commas" in capsys.readouterr().err
    monkeypatch.setenv(ADJUST_VARIABLE, "no_such_module:tiny")
    assert main(["recipe", "report", "kao", "--store", str(tmp_path / "store")]) == 2
    assert f"{ADJUST_VARIABLE}='no_such_module:tiny' names no importable function" in capsys.readouterr().err
    assert named_adjust("") == ("", None)


def test_a_finished_step_that_records_no_time_is_not_still_to_go():
    """An analysis's result has no wall time: it is guessed for the total, but it has run."""
    from labcore.recipes.base import Plan, Step
    from labcore.recipes.drive import expected_seconds
    from labcore.results.record import RunRecord
    from labcore.runspec import make_spec

    runs = [Step(make_spec(discipline="dna-splice", seed=s), "pretrained", s) for s in (0, 1)]
    analysis = Step(make_spec(discipline="listops"), "pwcca")  # stands for a kind that records no time
    plan = Plan("x", "quick", (0, 1), (tuple(runs), (analysis,)))
    done = {runs[0]: RunRecord(key="a", spec={}, status="done", wall_time_s=30.0),
            analysis: {"last": 0.5}}
    assert expected_seconds(plan, done, 50.0) == (30.0 + 30.0 + 30.0, 30.0)
