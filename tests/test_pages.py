"""The app's pages under Streamlit's AppTest: on an empty store, and on a store of real finished runs.

The finished runs are real: a tiny random BERT (hidden 64, 2 layers) saved with save_pretrained and used as
``local:<dir>``, trained by a real worker process on small bits-xor and ListOps data; one run's attention
maps are computed by an attention job in a real worker process. AppTest never fires
``run_every``, so live views are checked at their first draw (the browser test watches them move).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from labcore.engine import run_results
from labcore.errors import LabError

from labcore.execution.executor import LocalExecutor
from labcore.jobs.attention import AttentionSpec
from labcore.runspec import make_spec
from labcore.store import ACTIVE, open_store

REPO = Path(__file__).resolve().parent.parent
APP = str(REPO / "app.py")
PAGES = ["pages/new_experiment.py", "pages/runs.py", "pages/compare.py", "pages/attention.py", "pages/mapping.py",
         "pages/data.py", "pages/analysis.py"]
SMALL_BITS = {"n_train": 64, "n_validation": 32, "n_test": 32}
SMALL_LISTOPS = {"n_train": 64, "n_validation": 16, "n_test": 16, "max_depth": 4, "max_args": 4, "min_length": 8,
                 "max_length": 40}
TIMEOUT = 120  # seconds a single page run may take on a busy 2-core machine (a guard, not a measurement)


def save_tiny_bert(folder: Path) -> Path:
    """A random BERT (hidden 64, 2 layers, 4 heads) and its WordPiece vocabulary of 60 tokens."""
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    words = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"[unused{i}]" for i in range(10)]
             + list("abcdefghijklmnopqrstuvwxyz") + [str(i) for i in range(10)]
             + ["the", "of", "and", "to", "in", "is", "it", "on", "at"])
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    config = BertConfig(vocab_size=len(words), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def tiny(model: Path, **values):
    base = dict(model=f"local:{model}", batch_size=16, epochs=100.0, precision="fp32")
    base.update(values)
    return make_spec(**base)


def run_worker_until_idle(store, cache: Path, timeout: float = 600.0) -> None:
    """A real worker process that exits once the queue is empty; killed (whole group) whatever happens."""
    env = dict(os.environ, TRANSFERLAB_CACHE=str(cache), PYTHONPATH=str(REPO))
    with open(cache / "worker.log", "ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "labcore", "worker", "--store", str(store.root),
                                    "--exit-when-idle"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A store of finished runs: a pretrained-vs-random pair (2 seeds each) on bits-xor, one ListOps run."""
    cache = tmp_path_factory.mktemp("lab-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("TRANSFERLAB_CACHE", str(cache))
    try:
        model = save_tiny_bert(cache / "tiny-bert")
        store = open_store()
        pair = [tiny(model, init=init, seed=seed, discipline="bits-xor", discipline_params=SMALL_BITS,
                     protocol="frozen", pooling="mean", lr=1e-3, max_steps=8, eval_every=4)
                for init in ("pretrained", "random") for seed in (0, 1)]
        executor = LocalExecutor(store, autostart=False)
        pair_keys = [s.key for s in executor.submit_group("pair:bits", pair)]
        listops = executor.submit(tiny(model, discipline="listops", discipline_params=SMALL_LISTOPS, max_steps=6,
                                       eval_every=3)).key
        run_worker_until_idle(store, cache)
        statuses = {k: store.get(k).status for k in pair_keys + [listops]}
        assert set(statuses.values()) == {"done"}, (statuses, (cache / "worker.log").read_text()[-3000:])
        # The attention page's maps come from an attention job, computed by a real worker like the runs.
        maps_job = executor.submit(AttentionSpec(run=pair_keys[0], split="test", index=0)).key
        run_worker_until_idle(store, cache)
        assert store.get(maps_job).status == "done", store.log(maps_job)
        yield SimpleNamespace(cache=cache, store=store, model=model, pair=pair_keys, listops=listops,
                              executor=executor, maps_job=maps_job)
    finally:
        from labcore.execution.pool import stop_workers

        stop_workers(open_store(), timeout_s=30)  # a page's run button starts workers: none outlives the tests
        patch.undo()


def app(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def page(path: str, **query) -> AppTest:
    at = app()
    for name, value in query.items():
        at.query_params[name] = value
    return at.switch_page(path).run()


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [i.value for i in at.info]
    parts += [w.value for w in at.warning] + [s.value for s in at.success] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


# ------------------------------------------------------------------------------------------ empty store
@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_home_renders_on_an_empty_store_with_every_demo(empty_cache):
    at = app()
    no_exception(at)
    labels = [b.label for b in at.button]
    assert labels.count("▶ Run this demo") == 3
    assert "Does a text model help on DNA?" in texts(at)
    assert "no worker yet" in texts(at)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_on_an_empty_store(empty_cache, path):
    at = page(path)
    no_exception(at)
    assert at.title and at.title[0].value


def test_a_demo_link_opened_before_it_ran_says_what_to_do(empty_cache):
    at = app(demo="bits")
    no_exception(at)
    assert "has not run in this store yet" in texts(at)
    at = app(demo="nope")
    assert "There is no demo 'nope'" in texts(at)


# --------------------------------------------------------------------------------------- finished runs
def test_home_shows_the_store(lab):
    at = app()
    no_exception(at)
    assert "5 runs in the store" in texts(at)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_on_a_store_with_finished_runs(lab, path):
    at = page(path, run=lab.pair[0])
    no_exception(at)


def test_runs_page_shows_a_group_live_view_with_its_curves(lab):
    at = page("pages/runs.py", group="pair:bits")
    no_exception(at)
    assert at.radio[0].value == "A group of runs"
    assert at.selectbox[0].value == "pair:bits"
    assert "train-loss points so far" in texts(at)
    assert len(at.get("plotly_chart")) == 1
    assert [b.label for b in at.button].count("Cancel") == 4  # one per run, each disabled: they finished
    assert all(b.disabled for b in at.button if b.label == "Cancel")


def test_runs_page_follows_the_run_in_the_address(lab):
    at = page("pages/runs.py", run=lab.listops)
    no_exception(at)
    assert at.selectbox[0].value == lab.listops
    assert "python -m labcore run" in "\n".join(c.value for c in at.code)


def test_compare_page_tables_bars_curves_and_speed_up(lab):
    at = page("pages/compare.py", groups="pair:bits")
    no_exception(at)
    frames = at.dataframe
    summary = frames[0].value
    assert set(summary["condition"]) == {"pretrained", "random"}
    assert list(summary["n"]) == [2, 2]
    assert all("±" in v for v in summary["mean ± std"])
    assert len(at.get("plotly_chart")) == 2
    steps = frames[-1].value
    assert "speed-up" in list(steps.index)
    assert [d.label for d in at.get("download_button")] == ["Summary (CSV)", "Per run (CSV)", "Everything (JSON)"]


def test_attention_page_draws_the_three_weight_sets(lab):
    at = page("pages/attention.py", run=lab.pair[0], split="test", index="0")
    no_exception(at)
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # the side-by-side panels and the head-matching lines
    assert "fine-tuned prediction" in texts(at)


def test_attention_maps_hold_three_weight_sets_and_the_tokens_both_ways(lab):
    from labcore.analysis.attention import compute_attention, load_attention
    from labcore.mapping import MappingSpec, build_mapping, model_vocab
    from labcore.door.data import discipline_info

    # Stored once, then served from the store: a second request does not queue the job again.
    assert lab.executor.submit(AttentionSpec(run=lab.pair[0], split="test", index=0)).outcome == "cached"
    record = lab.store.get(lab.listops)
    maps = compute_attention(record, lab.store.workdir(lab.listops), "test", 1)
    assert set(maps.maps) == {"pretrained", "random", "finetuned"}
    length = len(maps.symbols)
    assert all(m.shape == (2, 4, length, length) for m in maps.maps.values())
    assert all(np.allclose(m.sum(-1), 1, atol=1e-4) for m in maps.maps.values())  # rows are distributions
    assert not np.allclose(maps.maps["pretrained"], maps.maps["random"])
    assert maps.symbols[0] == "[CLS]" and maps.symbols[-1] == "[SEP]" and len(maps.vocab_tokens) == length
    # Each symbol was fed as the token its run's random mapping gives it.
    spec = record.spec
    info = discipline_info(spec["discipline"], spec["discipline_params"])
    mapping = build_mapping(MappingSpec("random", seed=spec["mapping_seed"]), info.alphabet,
                            model_vocab(spec["model"]))
    fed = dict(zip(mapping.alphabet, mapping.tokens))
    assert [fed[s] for s in maps.symbols[1:-1]] == maps.vocab_tokens[1:-1]
    with pytest.raises(LabError, match="pick an index from 0 to 15"):
        compute_attention(record, lab.store.workdir(lab.listops), "test", 99)


def test_mapping_page_shows_the_table_and_rejects_a_table_that_is_not_one_to_one(lab):
    at = page("pages/mapping.py", run=lab.listops)
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table.columns) == ["symbol", "id", "token"] and len(table) == 15  # ListOps' 15 symbols
    at.radio(key="w:map.kind").set_value("table").run()
    box = at.text_area(key=f"keep.map.table.{lab.listops}")
    rows = box.value.splitlines()
    first_id = rows[0].split()[1]
    rows[1] = f"{rows[1].split()[0]} {first_id}"  # two symbols, one id
    box.input("\n".join(rows)).run()
    no_exception(at)
    errors = [e.value for e in at.error]
    assert any("not one-to-one" in e and "give each symbol its own id" in e for e in errors), errors
    assert not [b for b in at.button if b.label.startswith("▶ Rerun")]  # nothing to submit


def test_mapping_page_reruns_an_unchanged_mapping_from_the_store(lab):
    at = page("pages/mapping.py", run=lab.listops)
    spec = lab.store.get(lab.listops).spec
    at.radio(key="w:map.kind").set_value("random").run()
    at.number_input(key=f"keep.map.seed.{lab.listops}").set_value(spec["mapping_seed"]).run()
    assert "This is the run's own mapping" in texts(at)
    at.button(key="btn.map.rerun").click().run()
    no_exception(at)
    assert at.query_params["rerun"] == [lab.listops] or at.query_params["rerun"] == lab.listops
    assert "nothing retrained" in texts(at)
    assert lab.store.queued() == []


def test_the_analysis_page_queues_an_analysis_of_two_runs_and_draws_it(lab):
    from labcore.execution.pool import stop_workers

    at = page("pages/analysis.py")
    no_exception(at)
    options = at.multiselect(key="an.models").options
    runs = [next(o for o in options if o.startswith(f"run {k[:8]}")) for k in (lab.pair[0], lab.pair[2])]
    at.multiselect(key="an.models").set_value(runs)
    at.selectbox(key="an.discipline").select("bits-xor")
    at.number_input(key="an.examples").set_value(16)
    try:
        at.button[0].click().run()  # the form's submit button
        no_exception(at)
        jobs = [r for r in lab.store.jobs(kind="similarity")]
        assert len(jobs) == 1 and jobs[0].requires == [lab.pair[0], lab.pair[2]]  # pretrained vs random, tuned
    finally:
        stop_workers(lab.store, timeout_s=30)  # the page's executor started one; this test runs its own
    run_worker_until_idle(lab.store, lab.cache)
    key = jobs[0].key
    assert lab.store.get(key).status == "done", lab.store.log(key)
    shown = page("pages/analysis.py", job=key)
    no_exception(shown)
    assert len(shown.get("plotly_chart")) == 1 and "PWCCA of the last layers" in texts(shown)


# -------------------------------------------------------------------------------------------- the form
def test_the_experiment_form_submits_a_spec(tmp_path, monkeypatch):
    from labcore.execution.pool import stop_workers

    cache = tmp_path / "cache"
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(cache))
    model = save_tiny_bert(tmp_path / "tiny-bert")
    store = open_store()
    try:
        at = page("pages/new_experiment.py")
        at.selectbox(key="w:exp.discipline").select("bits-xor").run()
        at.selectbox(key="w:exp.protocol").select("frozen").run()
        at.text_input(key="exp.adv.model").input(f"local:{model}").run()
        at.number_input(key="exp.adv.quick.frozen.max_steps").set_value(4).run()
        no_exception(at)
        code = "\n".join(c.value for c in at.code)
        assert f"--model local:{model}" in code and "--max-steps 4" in code and "--protocol frozen" in code
        at.button(key="btn.exp.run").click().run()
        no_exception(at)
        records = run_results.runs(store)
        assert len(records) == 1
        spec = records[0].spec
        assert (spec["model"], spec["discipline"], spec["protocol"], spec["max_steps"]) == \
            (f"local:{model}", "bits-xor", "frozen", 4)
        assert records[0].status in ACTIVE + ("done",)
    finally:
        stop_workers(store, timeout_s=30)


def test_the_form_shows_a_spec_error_with_its_fix(empty_cache):
    at = page("pages/new_experiment.py")
    at.selectbox(key="w:exp.discipline").select("bits-xor").run()
    at.selectbox(key="exp.adv.adapter").select("vocab").run()
    no_exception(at)
    errors = " ".join(e.value for e in at.error)
    assert "gives vectors: the input adapter must be linear" in errors
    assert at.button(key="btn.exp.run").disabled


# ------------------------------------------------------------------------------------------- no torch
def test_no_page_imports_torch(lab):
    script = textwrap.dedent(f"""
        import sys
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({APP!r}, default_timeout={TIMEOUT}).run()
        assert not at.exception, at.exception
        for path, query in [("pages/new_experiment.py", {{}}), ("pages/runs.py", {{"group": "pair:bits"}}),
                            ("pages/compare.py", {{"groups": "pair:bits"}}),
                            ("pages/attention.py", {{"run": {lab.pair[0]!r}}}),
                            ("pages/mapping.py", {{"run": {lab.listops!r}}}), ("pages/data.py", {{}})]:
            for name, value in query.items():
                at.query_params[name] = value
            at.switch_page(path).run()
            assert not at.exception, (path, at.exception)
        print("TORCH" if "torch" in sys.modules else "NO-TORCH")
    """)
    env = dict(os.environ, TRANSFERLAB_CACHE=str(lab.cache), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # A record must hold plain values: unpickling e.g. a TorchVersion (torch.__version__) imports torch.
    assert done.stdout.strip().splitlines()[-1] == "NO-TORCH", "a page (or a stored record it read) imported torch"
