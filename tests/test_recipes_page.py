"""The Recipes page under Streamlit's AppTest: on an empty store (the recipes, their claims, budgets, seeds and
expected time; the run button queues the plan), and on a store holding a finished tiny recipe (verdicts,
tables, the paper's numbers, figures and the two downloads). AppTest never fires ``run_every``: the live
view is checked at its first draw (the browser test sees the page served)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from recipe_store import ADJUST, SEEDS, finished_recipe
from streamlit.testing.v1 import AppTest
from test_pages import TIMEOUT, no_exception, page, texts

from labcore.recipes import RECIPES
from labcore.recipes.drive import ADJUST_VARIABLE, paper_first, plan_of, step_key
from labcore.recipes.verdict import WORDS
from labcore.store import open_store

REPO = Path(__file__).resolve().parent.parent
APP = str(REPO / "app.py")
PAGE = "pages/recipes.py"


def recipes_page(**query) -> AppTest:
    return page(PAGE, **query)


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def finished(tmp_path_factory, fetched_assets):
    return finished_recipe("kao", tmp_path_factory)


def test_the_page_lists_every_recipe_with_its_paper_claims_budget_seeds_and_time(empty_cache):
    at = recipes_page()
    no_exception(at)
    assert at.radio(key="w:rec.recipe").options == [RECIPES[n].title for n in RECIPES.names()]
    kao = RECIPES["kao"]
    shown = texts(at)
    assert "Kao & Lee 2021, Is BERT a cross-disciplinary knowledge learner?" in shown
    for claim in kao.claims:
        assert claim.text in shown and claim.section in shown
    assert at.multiselect(key="w:rec.seeds.kao.quick").value == list(kao.default_seeds["quick"])
    jobs = len(paper_first(kao, plan_of(kao, "quick")).steps)  # the sequential rule's first look
    assert f"**Expected on this machine:** {jobs} jobs" in shown and f"at {kao.prior_step_s:g} s a job" in shown
    assert "Nothing of this recipe has run in this store yet" in shown
    assert at.query_params["recipe"] in ("kao", ["kao"]) and at.query_params["budget"] in ("quick", ["quick"])
    # by default the sequential rule chooses the seeds (3 first) and says so; the lab's questions are labelled
    assert at.toggle(key="w:rec.sequential").value and at.query_params["seeds"] in ("sequential", ["sequential"])
    assert "chosen by the sequential rule: looks at 3, 5, 8 pairs" in shown
    assert "*the lab’s question:* " + next(c.text for c in kao.claims if not c.headline) in shown
    at.radio(key="w:rec.budget").set_value("paper").run()
    no_exception(at)
    assert at.multiselect(key="w:rec.seeds.kao.paper").value == list(kao.default_seeds["paper"])
    assert "not known yet" in texts(at)


def test_an_unknown_recipe_in_the_address_says_which_there_are(empty_cache):
    at = recipes_page(recipe="nope")
    no_exception(at)
    assert f"There is no recipe 'nope'; the recipes are {', '.join(RECIPES.names())}" in texts(at)


def test_the_home_page_points_each_demo_to_its_papers_recipe(empty_cache):
    from labcore.recipes import demos

    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    no_exception(at)
    links = [link for link in at.get("page_link") if "The full experiment: Recipes" in link.proto.label]
    papers = {RECIPES[n].paper for n in RECIPES.names()}
    with_recipe = [d for d in demos.DEMOS.names() if demos.DEMOS[d].paper in papers]
    assert len(links) == len(with_recipe) > 0
    assert "The full experiment: Recipes → Kao & Lee" in [link.proto.label for link in links]
    assert [b.label for b in at.button].count("▶ Run this demo") == len(demos.DEMOS)  # the demos stay


def test_the_run_button_queues_the_plan_in_the_session_s_name(tmp_path, monkeypatch, fetched_assets):
    from helpers import share_assets

    from labcore.execution.pool import stop_workers

    # A store of its own on a cache with the fetched weights and data sets: a plan whose jobs could not load
    # them is refused before anything is queued.
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(share_assets(tmp_path / "cache")))
    monkeypatch.setenv(ADJUST_VARIABLE, ADJUST)
    store = open_store()
    try:
        at = recipes_page(recipe="kao", seeds="0")
        no_exception(at)
        assert "With fewer than three seeds no claim gets a look" in texts(at)
        at.button(key="btn.rec.run").click().run()
        no_exception(at)
        plan = plan_of(RECIPES["kao"], "quick", (0,))
        assert plan.group in store.groups()
        records = [store.get(step_key(s)) for s in plan.stages[0]]
        assert all(r is not None for r in records)
        assert {r.status for r in records} <= {"queued", "running", "done", "failed"}
        assert all(r.requesters and r.requesters[0].startswith("session-") for r in records)
        shown = texts(at)
        assert "Progress" in [h.value for h in at.subheader]
        assert f"of {len(plan.steps)}** jobs done" in "\n".join(p.proto.text for p in at.get("progress"))
        assert "Nothing of this recipe has run" not in shown
    finally:
        stop_workers(store, timeout_s=30)  # the page's executor started one


def test_the_queue_cap_holds_jobs_back_without_an_error(tmp_path, fetched_assets):
    """One person may have only so many jobs waiting; the rest of the stage waits, and the page says so."""
    from labcore.execution.executor import LocalExecutor
    from labcore.recipes.drive import advance

    from labcore.store import Store, StoreSettings

    store = Store(tmp_path / "store", settings=StoreSettings(max_queued_per_requester=3))
    try:
        plan = plan_of(RECIPES["kao"], "quick", (0,))
        now = advance(plan, LocalExecutor(store, autostart=False), who="session-x")
        assert len(store.queued()) == 3 and now.held == len(plan.stages[0]) - 3 and now.errors == ()
        store.cancel(store.queued()[0], "session-x")  # one leaves the queue: the next advance fills its place
        later = advance(plan, LocalExecutor(store, autostart=False), who="session-x")
        assert len(store.queued()) == 3 and later.held == now.held - 1
    finally:
        store.close()


def test_a_finished_recipe_shows_its_report_and_downloads(finished, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(finished.cache))
    monkeypatch.setenv(ADJUST_VARIABLE, ADJUST)
    at = recipes_page(recipe="kao", seeds=",".join(map(str, SEEDS)))
    no_exception(at)
    report = RECIPES["kao"].report(finished.plan, finished.results)
    shown = texts(at)
    assert report.complete and "Report" in [h.value for h in at.subheader]
    for claim, verdict in report.claims:
        colour = {"holds": "green", "does not hold": "red", "inconclusive": "orange",
                  "not tested": "gray"}[verdict.word]
        assert f":{colour}[**{verdict.word}**] · `{verdict.claim}`: {verdict.sentence()}" in shown
        assert verdict.word in WORDS
    for title, _ in report.tables:
        assert f"#### {title}" in shown
    for numbers in report.paper_numbers:
        assert f"**{numbers.source}**" in shown
    assert len(at.get("plotly_chart")) == len(report.figures)
    assert len(at.dataframe) == len(report.tables) + len(report.paper_numbers)
    downloads = [b.proto.label for b in at.get("download_button")]
    assert downloads == ["Report (HTML, figures included)", "Every number and verdict (CSV)"]
    total = len(finished.plan.steps)
    assert f"**{total} of {total}** jobs done" in "\n".join(p.proto.text for p in at.get("progress"))
    assert at.button(key="btn.rec.run").label == "▶ Run again (every job comes from the store)"


def test_the_recipes_page_imports_no_torch(finished):
    script = textwrap.dedent(f"""
        import sys
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({APP!r}, default_timeout={TIMEOUT}).run()
        at.query_params["recipe"] = "kao"
        at.query_params["seeds"] = {",".join(map(str, SEEDS))!r}
        at.switch_page({PAGE!r}).run()
        assert not at.exception, at.exception
        assert at.get("plotly_chart"), "the report was not drawn"
        print("TORCH" if "torch" in sys.modules else "NO-TORCH")
    """)
    env = dict(os.environ, TRANSFERLAB_CACHE=str(finished.cache), PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}",
               **{ADJUST_VARIABLE: ADJUST})
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "NO-TORCH", "the Recipes page (or a record it read) imported torch"
