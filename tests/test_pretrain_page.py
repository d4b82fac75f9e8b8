"""The Pretrain page under AppTest: without the vocabulary it says what to fetch; with it, it samples the
corpus, submits a pretraining that a real worker finishes, shows the result, and New experiment opens with
the new model chosen."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from labcore.store import open_store

REPO = Path(__file__).resolve().parent.parent
APP = str(REPO / "app.py")
TIMEOUT = 120


def page(path: str, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    for name, value in query.items():
        at.query_params[name] = value
    return at.switch_page(path).run()


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [i.value for i in at.info]
    parts += [w.value for w in at.warning] + [s.value for s in at.success] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


def test_without_the_vocabulary_the_page_says_to_fetch_it(tmp_path, monkeypatch):
    from labcore.pretrain import vocab

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    vocab.vocabulary.cache_clear()  # read from another cache by an earlier test of this process
    vocab.sampleable_ids.cache_clear()
    st.cache_data.clear()
    at = page("pages/pretrain.py")
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value.endswith("Pretrain")
    assert "fetch the assets" in texts(at)


@pytest.mark.integration
def test_sample_start_watch_and_use_the_model(fetched_assets, tmp_path, monkeypatch):
    from labcore import paths
    from labcore.execution.pool import stop_workers
    from labcore.store import ACTIVE
    from test_job_kinds import wait_for
    from test_pages import run_worker_until_idle

    assets = paths.assets_dir()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "assets").symlink_to(assets, target_is_directory=True)
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(cache))
    store = open_store()
    try:
        at = page("pages/pretrain.py")
        at.selectbox(key="w:pre.corpus").select("flat").run()
        at.radio(key="w:pre.size").set_value("tiny").run()
        at.number_input(key="pre.steps").set_value(3).run()
        at.text_input(key="pre.name").input("page-test").run()
        assert not at.exception, [e.message for e in at.exception]
        assert "Sample of flat" in " ".join(e.label for e in at.expander)
        at.button(key="btn.pre.start").click().run()
        assert not at.exception, [e.message for e in at.exception]
        jobs = store.jobs(kind="pretrain")
        assert len(jobs) == 1 and jobs[0].spec["name"] == "page-test"
        key = jobs[0].key
        if not store.workers():  # the page starts one where it can; otherwise a worker of our own finishes it
            run_worker_until_idle(store, cache)
        wait_for("the pretraining to end", lambda: store.get(key).status not in ACTIVE, 300)
        assert store.get(key).status == "done", store.log(key)
        at = page("pages/pretrain.py", pretrain=key)
        assert not at.exception, [e.message for e in at.exception]
        assert "lab:page-test" in texts(at) and "held-out masked accuracy" in texts(at)
        at = page("pages/pretrain.py")  # no address: the store's latest pretraining is shown
        assert at.selectbox(key="w:pre.shown").value == key and "lab:page-test" in texts(at)
        at = page("pages/new_experiment.py", model="lab:page-test")
        assert not at.exception, [e.message for e in at.exception]
        assert at.selectbox(key="w:exp.model").value == "lab:page-test"
    finally:
        stop_workers(store, timeout_s=30)



@pytest.mark.integration
def test_the_data_page_shows_each_corpus_with_its_size_and_sample(fetched_assets):
    st.cache_data.clear()
    at = page("pages/data.py")
    assert not at.exception, [e.message for e in at.exception]
    assert "Sample of nested" in " ".join(e.label for e in at.expander)
    assert "generated on demand, seeded" in texts(at)
    at.selectbox(key="data.corpus").select("amino").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at)
    assert "held out" in shown and "Sample of amino" in " ".join(e.label for e in at.expander)
