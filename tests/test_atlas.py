"""The transfer atlas: its grid from a store of real tiny finished runs and LogME jobs (tiny:bert, a few
steps, run by an in-process worker), Kendall's tau on constructed numbers, the grouping rules on
constructed records, the figure, and the page under AppTest."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest
from streamlit.testing.v1 import AppTest

from labcore.recipes import atlas
from labcore.execution.executor import LocalExecutor
from labcore.recipes.verdict import difference_interval
from labcore.results.record import RunRecord
from labcore.engine.resolve import resolve_spec
from labcore.runspec import make_spec
from labcore.store import Store, open_store
from labcore.execution.worker import Worker

from kept import kept_store
from test_pages import APP, REPO, TIMEOUT, no_exception, texts

MODEL = "tiny:bert"
BITS = {"n_train": 48, "n_validation": 16, "n_test": 16}
LISTOPS = {"n_train": 48, "n_validation": 16, "n_test": 16, "max_depth": 3, "max_args": 3, "min_length": 8,
           "max_length": 24}
GRID = dict(models=[MODEL], disciplines=["bits-xor", "listops", "dna-splice"])


def tiny_run(discipline: str, params: dict, init: str, seed: int):
    return make_spec(model=MODEL, discipline=discipline, discipline_params=params, init=init, seed=seed, max_steps=4,
                     eval_every=2, precision="fp32")


def run_queue(store) -> None:
    Worker(store, exit_when_idle=True).serve()


def build_lab(root) -> None:
    """bits-xor with two seeds a side, ListOps with one (a greyed cell), and the LogME of both cells, finished
    in the store at ``root``, left closed."""
    store = Store(root)
    try:
        executor = LocalExecutor(store, autostart=False)
        specs = [tiny_run("bits-xor", BITS, init, seed) for init in atlas.SIDES for seed in (0, 1)]
        specs += [tiny_run("listops", LISTOPS, init, 0) for init in atlas.SIDES]
        keys = [s.key for s in executor.submit_group("atlas-test", specs)]
        run_queue(store)
        assert {store.get(k).status for k in keys} == {"done"}, [store.log(k) for k in keys]
        grid = atlas.build_atlas(atlas.finished_runs(store), **GRID)
        measured = [c.logme_spec for c in grid.cells.values() if c.comparison]
        logme = [s.key for s in executor.submit_group(atlas.LOGME_GROUP, measured)]
        run_queue(store)
        assert {store.get(k).status for k in logme} == {"done"}, [store.log(k) for k in logme]
    finally:
        store.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A store of its own holding :func:`build_lab`'s finished jobs (built once per change of the code)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    patch = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("atlas-cache")
    patch.setenv("TRANSFERLAB_CACHE", str(cache))
    try:
        kept_store("atlas-grid", cache / "store", build_lab, depends=("test_atlas.py",))
        yield open_store()
    finally:
        torch.set_num_threads(threads)
        patch.undo()


# ------------------------------------------------------------------------------------- the grid of tiny runs
def test_the_grid_from_tiny_runs_measures_greys_and_estimates(lab):
    records = atlas.finished_runs(lab)
    grid = atlas.build_atlas(records, **GRID)
    grid = grid.with_estimates(atlas.estimates_from_store(lab, grid.logme_specs()))

    bits = grid.cell(MODEL, "bits-xor")
    assert (bits.n_pretrained, bits.n_random, bits.greyed, bits.others) == (2, 2, False, 0)
    by_seed = {init: {r.spec["seed"]: r.test_value for r in records
                      if r.spec["discipline"] == "bits-xor" and r.spec["init"] == init} for init in atlas.SIDES}
    assert bits.difference == difference_interval(by_seed["pretrained"], by_seed["random"])
    assert bits.difference[3] is True  # the same seeds on both sides: paired
    assert bits.gain == pytest.approx(sum(by_seed["pretrained"].values()) / 2 - sum(by_seed["random"].values()) / 2)
    assert sorted(bits.keys) == sorted(r.key for r in records if r.spec["discipline"] == "bits-xor")
    assert bits.metric == "bit_accuracy"

    listops = grid.cell(MODEL, "listops")
    assert (listops.n_pretrained, listops.n_random, listops.greyed) == (1, 1, True)
    assert listops.gain is not None and math.isnan(listops.difference[1])  # a number, but no interval
    assert "no interval from fewer than 2 seeds" in atlas.hover_text(listops)

    empty = grid.cell(MODEL, "dna-splice")
    assert empty.comparison is None and empty.greyed and empty.gain is None and empty.logme is None

    # LogME of both bodies on the data each cell's runs used, read back from the finished jobs.
    for cell in (bits, listops):
        assert dict(cell.logme_spec.discipline_params) == resolve_spec(
            make_spec(discipline=cell.discipline, discipline_params=BITS if cell is bits else LISTOPS)
        ).to_dict()["discipline_params"]
        result = lab.get(atlas.logme_key(cell.logme_spec)).result["logme"]
        assert cell.logme == (result[f"{MODEL}/pretrained"], result[f"{MODEL}/random seed 0"])
        assert cell.estimate == pytest.approx(cell.logme[0] - cell.logme[1])
    # One cell has both a measured gain with seeds enough and an estimate: too few for a tau.
    assert grid.agreement.n == 1 and "too few cells" in grid.agreement.sentence()

    table = atlas.atlas_table(grid).set_index("discipline")
    assert table.loc["bits-xor", "n_pretrained"] == 2 and not table.loc["bits-xor", "greyed"]
    assert table.loc["listops", "greyed"] and math.isnan(table.loc["dna-splice", "estimated_gain"])


def test_a_grid_keeps_to_its_protocol_and_budget(lab):
    records = atlas.finished_runs(lab)
    assert atlas.present(records) == ([MODEL], [atlas.Protocol("full")])
    frozen = atlas.build_atlas(records, protocol=atlas.Protocol("frozen"), **GRID)
    assert all(c.comparison is None for c in frozen.cells.values())
    standard = atlas.build_atlas(records, budget="standard", **GRID)
    assert all(c.comparison is None for c in standard.cells.values())


def test_filling_a_cell_completes_its_condition_and_runs(lab):
    grid = atlas.build_atlas(atlas.finished_runs(lab), **GRID)
    listops = grid.cell(MODEL, "listops")
    specs = atlas.fill_specs(listops)
    assert sorted((s.init, s.seed) for s in specs) == [("pretrained", 1), ("pretrained", 2), ("random", 1),
                                                        ("random", 2)]
    assert {(s.max_steps, s.eval_every, dict(s.discipline_params)["n_train"]) for s in specs} == {(4, 2, 48)}
    assert atlas.fill_specs(grid.cell(MODEL, "bits-xor"), seeds=(0, 1)) == []  # both sides have both seeds
    # An empty cell gets the budget's plain runs of its model, discipline and protocol.
    empty = atlas.fill_specs(grid.cell(MODEL, "dna-splice"))
    assert sorted((s.init, s.seed) for s in empty) == [(i, s) for i in atlas.SIDES for s in atlas.FILL_SEEDS]
    assert {(s.budget, s.protocol, s.max_steps) for s in empty} == {("quick", "full", None)}


# ------------------------------------------------------------------------------------ Kendall's tau
def test_tau_on_constructed_numbers():
    perfect = atlas.agreement([0.1, 0.4, 0.2, 0.9], [1.0, 3.0, 2.0, 5.0])
    assert perfect.n == 4 and perfect.tau == pytest.approx(1.0)
    assert "Kendall's τ = +1.00" in perfect.sentence() and "n = 4" in perfect.sentence()
    reversed_ = atlas.agreement([1, 2, 3, 4, 5], [5, 4, 3, 2, 1])
    assert reversed_.tau == pytest.approx(-1.0) and reversed_.p < 0.05
    assert math.isnan(atlas.agreement([1, 2], [1, 2]).tau)
    assert "too few cells" in atlas.agreement([1, 2], [1, 2]).sentence()
    assert "all tied" in atlas.agreement([1, 1, 1], [1, 2, 3]).sentence()
    with pytest.raises(ValueError, match="3 estimates for 2"):
        atlas.agreement([1, 2, 3], [1, 2])


def record(init: str, seed: int, value: float, **values) -> RunRecord:
    spec = resolve_spec(make_spec(model=MODEL, init=init, seed=seed, **values))
    return RunRecord(key=spec.key, spec=spec.to_dict(), status="done", metric="accuracy",
                     test={"accuracy": value}, best_step=2, val_curve=[[2, value]])


def test_the_atlas_tau_counts_only_cells_with_seeds_enough_and_an_estimate():
    gains = {"dna-splice": 0.3, "protein-malonylation": 0.1, "text-sentiment": 0.2, "listops": 0.4}
    records = [record(init, seed, 0.5 + (gain if init == "pretrained" else 0) + 0.01 * seed, discipline=d)
               for d, gain in gains.items() for init in atlas.SIDES for seed in (0, 1)]
    records.append(record("pretrained", 0, 0.9, discipline="music-composer"))  # one side, one seed
    records.append(record("random", 0, 0.1, discipline="music-composer"))
    grid = atlas.build_atlas(records, models=[MODEL], disciplines=list(gains) + ["music-composer"])
    estimates = {grid.cell(MODEL, d).logme_spec: (gain * 10, 0.0) for d, gain in gains.items()}
    estimates[grid.cell(MODEL, "music-composer").logme_spec] = (-5.0, 0.0)  # greyed: left out of the tau
    grid = grid.with_estimates(estimates)
    assert grid.agreement.n == 4 and grid.agreement.tau == pytest.approx(1.0)


def test_repeats_pair_by_seed_and_mapping_seed_and_the_current_record_counts():
    # Kao's plan: one random mapping per seed, so mapping_seed follows the seed; one condition, two repeats.
    kao = [record(init, seed, 0.6 + 0.1 * (init == "pretrained"), discipline="dna-splice", mapping="random",
                  mapping_seed=seed) for init in atlas.SIDES for seed in (0, 1)]
    [comparison] = atlas.comparisons(kao)
    assert comparison.replicates == [(0, 0), (1, 1)]
    cell = atlas.build_atlas(kao, models=[MODEL], disciplines=["dna-splice"]).cell(MODEL, "dna-splice")
    assert not cell.greyed and cell.difference[3] is True
    new = atlas.fill_specs(cell)
    assert sorted((s.init, s.seed, s.mapping_seed) for s in new) == [("pretrained", 2, 2), ("random", 2, 2)]
    # A record of an older results revision (another key, the same spec) gives way to the current one.
    current = kao[0]
    old = RunRecord.from_dict({**current.to_dict(), "key": "0" * 20, "test": {"accuracy": 0.0}})
    [comparison] = atlas.comparisons([current, old] + kao[1:])
    assert comparison.pretrained[(0, 0)].key == current.key
    [comparison] = atlas.comparisons([old, current] + kao[1:])
    assert comparison.pretrained[(0, 0)].key == current.key
    # Other settings of the same cell are counted, and the one with most seeds on both sides is shown.
    other = [record(init, 0, 0.5, discipline="dna-splice", mapping="random", train_size="100")
             for init in atlas.SIDES]
    cell = atlas.build_atlas(kao + other, models=[MODEL], disciplines=["dna-splice"]).cell(MODEL, "dna-splice")
    assert cell.others == 1 and cell.n_pretrained == 2 and "1 other setting(s)" in atlas.hover_text(cell)


def test_the_figure_colours_measured_cells_and_greys_the_rest():
    records = [record(init, seed, 0.5 + 0.2 * (init == "pretrained") + 0.01 * seed, discipline="dna-splice")
               for init in atlas.SIDES for seed in (0, 1)]
    records.append(record("pretrained", 0, 0.4, discipline="listops"))
    grid = atlas.build_atlas(records, models=[MODEL], disciplines=["dna-splice", "listops", "bits-xor"])
    fig = atlas.atlas_figure(grid, highlight=(MODEL, "bits-xor"))
    grey, gains, cells = fig.data
    assert list(gains.z[0][:1]) == [pytest.approx(0.2)] and gains.z[0][1] is None and gains.z[0][2] is None
    assert gains.zmid == 0 and gains.zmin == -gains.zmax
    assert list(grey.z[0]) == [None, 1, 0]  # measured; runs but too few seeds; no runs
    assert [list(c) for c in cells.customdata] == [[MODEL, d] for d in grid.disciplines]
    assert "95 % interval" in cells.hovertext[0] and "needs a finished run on each side" in cells.hovertext[1]
    assert cells.text[0].startswith("+0.200<br>n 2/2")
    assert fig.layout.shapes[0].x0 == 1.5  # the picked cell, outlined


# ------------------------------------------------------------------------------------------------ the page
def atlas_page(**state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    for name, value in state.items():
        at.session_state[name] = value
    return at.switch_page("pages/atlas.py").run()


def click_and_run(at: AppTest, button: str, store, group: str) -> list[str]:
    """Press a page's button that queues jobs into ``group``; run them here, in-process, to the end."""
    # The test runs the queue itself, so the page must start no worker: workers held (as a teacher holds them),
    # the page queues the jobs and leaves them waiting. A worker the page started and the test then stopped was
    # seen, on a busy machine, to escape the stop and claim jobs beside this one.
    store.hold_workers("test")
    try:
        at.button(key=button).click().run()
        no_exception(at)
        keys = store.group(group)["keys"]
        assert not store.workers(), "the page started a worker while workers were held"
        run_queue(store)
    finally:
        store.release_workers()
    assert {store.get(k).status for k in keys} == {"done"}, [store.log(k) for k in keys]
    return keys


def test_the_page_on_an_empty_store_shows_every_discipline_to_fill(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    at = atlas_page()
    no_exception(at)
    assert at.multiselect(key="keep.atlas.models").value == ["minilm"]
    assert at.multiselect(key="keep.atlas.disciplines").value == at.multiselect(key="keep.atlas.disciplines").options
    cells = len(at.multiselect(key="keep.atlas.disciplines").value)
    assert at.button(key="btn.atlas.estimate").label == f"Estimate the whole grid ({cells} LogME jobs)"
    assert at.button(key="btn.atlas.fill").label == "Fill this cell (6 runs at the quick budget)"
    assert "no finished runs yet" in texts(at)


def test_the_page_estimates_the_whole_grid(tmp_path, monkeypatch, one_torch_thread):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    store = open_store()
    at = atlas_page(**{"keep.atlas.more_models": MODEL, "keep.atlas.disciplines": ["bits-xor", "bits-memory"]})
    at.multiselect(key="keep.atlas.models").set_value([MODEL]).run()
    estimate = at.button(key="btn.atlas.estimate")
    assert estimate.label == "Estimate the whole grid (2 LogME jobs)"
    keys = click_and_run(at, "btn.atlas.estimate", store, atlas.LOGME_GROUP)
    assert len(keys) == 2 and {store.get(k).kind for k in keys} == {"logme"}
    at = atlas_page(**{"keep.atlas.more_models": MODEL, "keep.atlas.models": [MODEL],
                       "keep.atlas.disciplines": ["bits-xor", "bits-memory"]})
    no_exception(at)
    assert "2 of 2 cells estimated" in texts(at) and at.button(key="btn.atlas.estimate").disabled
    assert "estimated gain" in texts(at)


def test_the_page_draws_the_grid_fills_a_cell_and_opens_compare(lab, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(lab.root.parent))
    at = atlas_page(**{"keep.atlas.disciplines": GRID["disciplines"]})
    no_exception(at)
    assert at.multiselect(key="keep.atlas.models").value == [MODEL]
    assert len(at.get("plotly_chart")) == 1
    assert "too few cells to say how far the estimate can be trusted" in texts(at)
    assert at.button(key="btn.atlas.estimate").label == "Estimate the whole grid (1 LogME job)"
    assert "2 of 3 cells estimated" in texts(at)
    table = at.dataframe[0].value.set_index("discipline")
    assert table.loc["bits-xor", "n_random"] == 2 and table.loc["listops", "greyed"]

    # Fill the greyed cell: its missing seeds, with its own settings, queued in a group of the atlas.
    at.selectbox(key="keep.atlas.cell.discipline").select("listops").run()
    fill = at.button(key="btn.atlas.fill")
    assert fill.label == "Fill this cell (4 runs at the quick budget)" and not fill.disabled
    assert len(click_and_run(at, "btn.atlas.fill", lab, f"atlas:{MODEL}:listops:full")) == 4
    at = atlas_page(**{"keep.atlas.disciplines": GRID["disciplines"], "keep.atlas.cell.discipline": "listops"})
    no_exception(at)
    assert "pretrained" in texts(at) and "(n = 3)" in texts(at)
    assert at.button(key="btn.atlas.fill").disabled  # nothing left to fill

    # A click on a cell with runs opens Compare on them; on an empty cell it picks that cell.
    at = atlas_page(**{"keep.atlas.disciplines": GRID["disciplines"], "atlas.clicked": (MODEL, "dna-splice")})
    no_exception(at)
    assert at.selectbox(key="keep.atlas.cell.discipline").value == "dna-splice"
    assert at.button(key="btn.atlas.fill").label == "Fill this cell (6 runs at the quick budget)"
    at = atlas_page(**{"keep.atlas.disciplines": GRID["disciplines"], "atlas.clicked": (MODEL, "bits-xor")})
    no_exception(at)
    assert at.title[0].value.endswith("Compare")
    assert len(at.multiselect(key="w:cmp.runs").value) == 4


def test_the_page_offers_filling_only_at_the_quick_budget(lab, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(lab.root.parent))
    at = atlas_page(**{"keep.atlas.disciplines": GRID["disciplines"], "keep.atlas.budget": "standard"})
    no_exception(at)
    assert at.button(key="btn.atlas.fill").disabled
    assert "fills cells at the quick budget only" in texts(at)


def test_the_page_imports_no_torch(lab):
    script = textwrap.dedent(f"""
        import sys
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({APP!r}, default_timeout={TIMEOUT}).run()
        at.switch_page("pages/atlas.py").run()
        assert not at.exception, at.exception
        assert at.get("plotly_chart"), "no grid drawn"
        print("TORCH" if "torch" in sys.modules else "NO-TORCH")
    """)
    env = dict(os.environ, TRANSFERLAB_CACHE=str(lab.root.parent), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "NO-TORCH"


def test_a_cells_logme_spec_hashes_with_list_parameters_from_a_record():
    from labcore.jobs.analyses import LogMESpec

    params = atlas._frozen_params({"composers": ["Bach", "Palestrina"], "window": 128})
    assert params == (("composers", ("Bach", "Palestrina")), ("window", 128))
    assert hash(LogMESpec(discipline="music-composer", discipline_params=params))
