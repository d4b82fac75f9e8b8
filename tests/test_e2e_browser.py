"""End to end in a real browser: start the app, click a one-click demo, watch its live curve gain points,
reload and still see it, open Compare and Attention once it finished, and save a screenshot of every page
under ``test-artifacts/``.

Needs Debian's Chromium at /usr/bin/chromium (``make browser`` installs it where it can) and the fetched
MiniLM weights. The demo runs with ``TRANSFERLAB_DEMO_MAX_STEPS`` so the whole test stays within a few
minutes on two cores: the runs are real, only shorter. The server, and every worker it starts, are stopped
at the end whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port, share_assets, stop_process_group, wait_for

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
DEMO = "bits"
STEP_CAP = "60"


def _need_a_browser() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium (`make browser` does it as root with "
                    f"apt-get) to run the browser test")
    pytest.importorskip("playwright.sync_api", reason="the python playwright package is not installed")


@contextlib.contextmanager
def serving(cache: Path, log_path: Path, cwd: Path = REPO, **env: str):
    """The app on a free loopback port, on ``cache``, with ``env`` added to its environment, started in ``cwd``
    (whose ``.streamlit/secrets.toml`` it reads); the server and every worker it started are stopped afterwards
    whatever happens."""
    port = free_port()
    env = {**os.environ, "TRANSFERLAB_CACHE": str(cache), "PYTHONPATH": str(REPO), **env}
    log = open(log_path, "wb")
    process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port",
                                str(port), "--server.address", "127.0.0.1", "--server.headless", "true"],
                               cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                    if reply.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the app did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(process)
        log.close()
        from labcore.store import Store
        from labcore.execution.pool import stop_workers

        store = Store(cache / "store")
        stop_workers(store, timeout_s=30)
        store.close()


@pytest.fixture
def server(tmp_path, fetched_assets):
    """The app on a store of its own (assets and built data shared by symlink)."""
    _need_a_browser()
    cache = share_assets(tmp_path / "cache")
    with serving(cache, tmp_path / "server.log", TRANSFERLAB_DEMO_MAX_STEPS=STEP_CAP) as base:
        yield base, cache


@contextlib.contextmanager
def chromium_page(height: int):
    """A page of a fresh headless Chromium, 1400 pixels wide, closed afterwards whatever happens."""
    from playwright.sync_api import expect, sync_playwright

    # expect() waits 5 s by default, not the page's default timeout: on two busy cores a chart that Streamlit
    # was still laying out read as hidden for longer than that. Every condition gets the page's limit.
    expect.set_options(timeout=60_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": height})
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def _points(page) -> int:
    text = page.get_by_text(re.compile(r"\d+ train-loss points so far")).first.inner_text(timeout=60_000)
    return int(re.search(r"(\d+) train-loss points", text).group(1))


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.wait_for_timeout(1500)  # let charts finish their transition before the picture
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_demo_end_to_end_in_chromium(server):
    from playwright.sync_api import expect

    from labcore.recipes import demos

    base, cache = server
    demo = demos.DEMOS[DEMO]
    with chromium_page(2000) as page:
        page.goto(base + "/")
        expect(page.get_by_text(demo.title).first).to_be_visible()
        _shot(page, "01-home")

        # Click the demo: its runs queue, a worker starts, the live view appears and gains points.
        buttons = page.get_by_role("button", name="▶ Run this demo")
        buttons.nth(demos.DEMOS.names().index(DEMO)).click()
        page.wait_for_url(re.compile(rf"demo={DEMO}"))
        first = _points(page)
        deadline = time.monotonic() + 180
        later = first
        while later <= first and time.monotonic() < deadline:
            page.wait_for_timeout(2000)
            later = _points(page)
        assert later > first, f"the live curve did not gain points ({first} then {later})"
        _shot(page, "02-home-demo-live")

        # A reload keeps the view: the demo is named in the address, the runs in the store.
        page.reload()
        expect(page.get_by_text(f"Demo: {demo.title}")).to_be_visible()
        assert _points(page) >= later
        _shot(page, "03-home-demo-after-reload")

        # When both runs end, the summary is written from their numbers.
        summary = page.get_by_text(re.compile(r"What happened:.*\d\.\d\d")).first
        expect(summary).to_be_visible(timeout=240_000)
        assert "bit accuracy" in summary.inner_text()
        _shot(page, "04-home-demo-summary")

        page.get_by_role("link", name="Compare these runs").click()
        expect(page.get_by_text("Test metric per condition")).to_be_visible()
        expect(page.get_by_text("Steps to converge (FPT table 6)")).to_be_visible()
        _shot(page, "05-compare")

        page.goto(base + f"/?demo={DEMO}")
        page.get_by_role("link", name="Attention maps of the pretrained run").click()
        expect(page.get_by_role("heading", name=re.compile("Attention"))).to_be_visible()
        maps = page.get_by_text("fine-tuned prediction")
        unavailable = page.get_by_text("attention job is not available")
        expect(maps.or_(unavailable).first).to_be_visible(timeout=180_000)
        _shot(page, "06-attention")

        for path, name, heading in (("runs", "07-runs", "Runs"), ("new", "08-new-experiment", "New experiment"),
                                    ("mapping", "09-token-mapping", "Token mapping"), ("data", "10-data", "Data")):
            page.goto(f"{base}/{path}")
            expect(page.get_by_role("heading", name=re.compile(heading)).first).to_be_visible()
            page.wait_for_load_state("networkidle")
            _shot(page, name)


def test_an_analysis_in_chromium(server):
    """An analysis job of the tiny model (pretrained vs random, PWCCA between layers) computed by a real
    worker, then drawn by the Analysis page: the heat map and its table, and a screenshot."""
    from playwright.sync_api import expect

    from labcore.execution.executor import LocalExecutor
    from labcore.jobs.analyses import ModelRef, SimilaritySpec
    from labcore.store import Store

    base, cache = server
    store = Store(cache / "store")
    spec = SimilaritySpec(models=(ModelRef(model="tiny:bert"), ModelRef(model="tiny:bert", init="random")),
                          discipline="listops", examples=16,
                          discipline_params=(("n_test", 16), ("n_train", 48), ("n_validation", 16)))
    key = LocalExecutor(store).submit(spec).key  # starts a worker on the app's store
    store.close()
    with chromium_page(1800) as page:
        page.goto(f"{base}/analysis?job={key}")
        expect(page.get_by_role("heading", name=re.compile("Analysis")).first).to_be_visible(timeout=60_000)
        expect(page.get_by_text("PWCCA of the last layers")).to_be_visible(timeout=240_000)
        expect(page.locator(".js-plotly-plot").first).to_be_visible()
        _shot(page, "11-analysis")


def test_an_upload_with_split_fields_in_chromium(server, tmp_path):
    """Issue 13: a FASTA of ``>id|label|split`` headers, whose last field is the split. The preview offers
    the fields; picking field 2 as the label and field 3 as the split saves the right two classes."""
    from playwright.sync_api import expect

    base, _cache = server
    records = []
    for i, split in enumerate(["training"] * 16 + ["validation"] * 4 + ["testing"] * 4):
        records.append(f">seq{i}|{i % 2}|{split}\n{'ACGT' if i % 2 else 'TTGA'}{'C' * (i % 3)}\n")
    fasta = tmp_path / "transcripts.fasta"
    fasta.write_text("".join(records))

    def choose(page, label: str, option: str) -> None:
        page.get_by_test_id("stSelectbox").filter(has_text=label).click()
        page.get_by_role("option", name=option, exact=True).click()

    with chromium_page(2200) as page:
        page.goto(f"{base}/data")
        page.get_by_role("tab", name="Your own data").click()
        page.locator("input[type=file]").set_input_files(str(fasta))
        expect(page.get_by_text("Preview (all 24 records)")).to_be_visible()
        choose(page, "Label field", "field 3")  # the split as the label: the page says so
        expect(page.get_by_text(re.compile("are split names, not classes")).first).to_be_visible()
        choose(page, "Label field", "field 2")
        choose(page, "Split", "field 3: the file's own split (train / valid / test)")
        expect(page.get_by_text(re.compile("are split names, not classes"))).to_have_count(0)
        _shot(page, "12-data-upload-preview")
        name = page.get_by_label("Name (a-z, 0-9, -)")
        name.fill("transcripts")
        name.press("Enter")
        page.get_by_role("button", name="Check and save").click()
        saved = page.get_by_text(re.compile(r"Saved as discipline upload:transcripts: 24 examples, 2 classes \(0, 1\)"))
        expect(saved).to_be_visible(timeout=120_000)
        expect(page.get_by_text(re.compile("The file's own split: train 16, validation 4, test 4"))).to_be_visible()
        _shot(page, "13-data-upload-saved")


def test_the_transfer_atlas_in_chromium(server):
    """The atlas on a small store: tiny runs of three disciplines with two seeds a side and one with a single
    seed (greyed), their LogME jobs, all computed by a real worker; the page draws the grid with Kendall's tau,
    a hover shows a cell's interval (saved as ``atlas.png``), and a click on that cell opens Compare on its runs."""
    from playwright.sync_api import expect

    from labcore.recipes import atlas
    from labcore.execution.executor import LocalExecutor
    from labcore.runspec import make_spec
    from labcore.store import Store, TERMINAL

    base, cache = server
    store = Store(cache / "store")
    small = {"bits-xor": {"n_train": 48, "n_validation": 16, "n_test": 16},
             "bits-memory": {"n_train": 48, "n_validation": 16, "n_test": 16},
             "listops": {"n_train": 48, "n_validation": 16, "n_test": 16, "max_depth": 3, "max_args": 3,
                         "min_length": 8, "max_length": 24}}
    seeds = {"bits-xor": (0, 1), "bits-memory": (0, 1), "listops": (0, 1), "dna-splice": (0,)}
    specs = [make_spec(model="tiny:bert", discipline=d, discipline_params=small.get(d, {}), init=init, seed=seed,
                       train_size="full" if d in small else "48", max_steps=4, eval_every=2, precision="fp32")
             for d in seeds for init in atlas.SIDES for seed in seeds[d]]
    executor = LocalExecutor(store)  # starts a worker on the app's store

    def finish(keys: list[str]) -> None:
        wait_for("the atlas's jobs",
                 lambda: all((r := store.get(k)) is not None and r.status in TERMINAL for k in keys),
                 timeout=600, store=store)
        assert {store.get(k).status for k in keys} == {"done"}, [store.log(k)[-500:] for k in keys]

    finish([s.key for s in executor.submit_group("atlas-e2e", specs)])
    grid = atlas.build_atlas(atlas.finished_runs(store), models=["tiny:bert"], disciplines=list(seeds))
    finish([s.key for s in executor.submit_group(atlas.LOGME_GROUP, grid.logme_specs())])
    store.close()
    with chromium_page(1400) as page:
        page.goto(f"{base}/atlas")
        expect(page.get_by_role("heading", name=re.compile("Transfer atlas")).first).to_be_visible()
        expect(page.get_by_text(re.compile("Kendall's τ = .* over n = 3 cells"))).to_be_visible()
        plot = page.locator(".js-plotly-plot .nsewdrag").first
        expect(plot).to_be_visible()
        box = plot.bounding_box()
        columns = len(page.locator(".js-plotly-plot .xtick").all())
        first = (box["x"] + box["width"] / columns / 2, box["y"] + box["height"] / 2)  # tiny:bert x bits-xor
        page.mouse.move(*first)
        expect(page.locator(".hovertext").first).to_contain_text("95 % interval")
        _shot(page, "atlas")
        page.mouse.click(*first)
        expect(page.get_by_text("Test metric per condition")).to_be_visible()
        assert "runs=" in page.url


@pytest.fixture
def recipe_server(tmp_path, tmp_path_factory, fetched_assets):
    """The app on a cache whose store holds the finished tiny Kao recipe, building its plans the same tiny way."""
    _need_a_browser()
    from recipe_store import ADJUST, finished_recipe

    from labcore.recipes.drive import ADJUST_VARIABLE

    finished = finished_recipe("kao", tmp_path_factory)
    with serving(finished.cache, tmp_path / "server.log", PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}",
                 **{ADJUST_VARIABLE: ADJUST}) as base:
        yield base, finished


def test_a_finished_recipe_and_its_exported_report_in_chromium(recipe_server, tmp_path):
    """The Recipes page shows a finished tiny Kao recipe's verdicts, tables and figures (``recipes-page.png``);
    its HTML export, downloaded and opened in the browser with no server behind it, draws every figure
    (``recipe-report.png``)."""
    from playwright.sync_api import expect
    from recipe_store import SEEDS

    from labcore.recipes import RECIPES

    base, finished = recipe_server
    report = RECIPES["kao"].report(finished.plan, finished.results)
    with chromium_page(1600) as page:
        page.goto(f"{base}/recipes?recipe=kao&budget=quick&seeds={','.join(map(str, SEEDS))}")
        expect(page.get_by_role("heading", name="Report")).to_be_visible(timeout=120_000)
        for _claim, verdict in report.claims:
            expect(page.get_by_text(verdict.sentence(), exact=False).first).to_be_visible()
        total = len(finished.plan.steps)
        expect(page.get_by_text(f"{total} of {total} jobs done").first).to_be_visible()
        expect(page.locator(".js-plotly-plot")).to_have_count(len(report.figures), timeout=60_000)
        _shot(page, "recipes-page")

        with page.expect_download() as download:
            page.get_by_role("button", name=re.compile(r"Report \(HTML")).click()
        exported = tmp_path / "kao-report.html"
        download.value.save_as(exported)
    with chromium_page(1600) as page:  # a browser of its own: the file alone, no app behind it
        page.goto(exported.as_uri())
        expect(page.get_by_role("heading", name=report.title)).to_be_visible()
        drawn = page.locator(".plotly-graph-div .main-svg")
        expect(drawn.first).to_be_visible(timeout=60_000)
        assert page.locator(".plotly-graph-div").count() == len(report.figures)
        assert page.locator(".plotly-graph-div:has(.main-svg)").count() == len(report.figures)  # every one drawn
        words = page.locator(".holds, .does-not-hold, .inconclusive, .not-measured")
        assert words.count() == len(report.claims)
        _shot(page, "recipe-report")
