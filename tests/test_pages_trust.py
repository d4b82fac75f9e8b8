"""What the pages say about data they cannot be trusted on: inputs longer than the model's positions,
test sets too small to measure (issue 13). A tiny BERT saved on disk and small uploads the tests write."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from labcore.data import upload
from test_data_page_upload import APP, TIMEOUT, own_cache  # noqa: F401 - own_cache: an empty cache per test


@pytest.fixture
def tiny_bert(tmp_path):
    from test_pages import save_tiny_bert

    return save_tiny_bert(tmp_path / "tiny-bert")  # 128 positions


def page(path: str) -> AppTest:
    return AppTest.from_file(APP, default_timeout=TIMEOUT).run().switch_page(path).run()


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [w.value for w in at.warning]
    return "\n".join(str(p) for p in parts + [c.value for c in at.caption])


def long_fasta(n=12, length=300):
    return "".join(f">r{i}|{'ab'[i % 2]}\n{('ACGT' if i % 2 else 'TTGA') * (length // 4)}\n" for i in range(n)).encode()


def test_new_experiment_states_the_position_limit_where_inputs_are_longer(tiny_bert):
    upload.save_upload("long", "l.fasta", long_fasta(), max_length=300, windows=False)
    at = page("pages/new_experiment.py")
    at.selectbox(key="w:exp.discipline").select("upload:long").run()
    at.text_input(key="exp.adv.model").input(f"local:{tiny_bert}").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at)
    assert f"local:{tiny_bert} takes 128 positions (with [CLS] and [SEP])" in shown
    assert "The longest example has 300 symbols" in shown and "cut to 126 symbols" in shown
    assert "'cut into windows'" in shown


def dna_rows(n=106):
    """The issue's 106-row CSV: a seeded 80/10/10 split leaves 10 test examples."""
    rows = [f"{('ACGT' if i % 2 else 'TTGA') * 5},{'ab'[i % 2]}" for i in range(n)]
    return ("sequence,label\n" + "\n".join(rows) + "\n").encode()


def finished(store, key: str, accuracy: float, examples: int, classes: int):
    from labcore.engine import run_results
    from labcore.results.record import RunRecord
    from labcore.runspec import make_spec

    spec = make_spec(model="minilm", discipline="dna-splice", seed=int(key[-1]))
    record = RunRecord(key=spec.key, spec=spec.to_dict(), status="done", metric="accuracy",
                       test={"accuracy": accuracy, "loss": 0.7}, best_step=12, steps_done=12, total_steps=12,
                       val_curve=[[12, accuracy]], test_examples=examples, test_classes=classes)
    run_results.put_result(store, record, label=f"run {key}")
    return spec.key


def test_a_small_test_set_is_flagged_before_and_after_it_runs():
    info = upload.save_upload("dna", "dna.csv", dna_rows())
    assert upload.expected_test_size(info) == (10, 2)
    at = page("pages/new_experiment.py")
    at.selectbox(key="w:exp.discipline").select("upload:dna").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "the test set has 10 examples, fewer than 30" in texts(at)
    assert "About " in texts(at) and "150 steps" in texts(at)  # the floor, and the time it costs
    from labcore.engine.speed import typical_tokens_per_s

    typical = typical_tokens_per_s("minilm")
    assert f"at the speed no run measured yet: a typical figure, {typical:,.0f} tokens/s" in texts(at)

    from labcore.store import open_store

    store = open_store()
    small, fine = finished(store, "s0", 0.5, 10, 2), finished(store, "s1", 0.9, 300, 2)
    runs = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    runs.query_params["run"] = small
    runs = runs.switch_page("pages/runs.py").run()
    assert not runs.exception, [e.message for e in runs.exception]
    shown = texts(runs)
    assert "95 % Wilson interval 0.237–0.763 over 10 test examples" in shown and "Too small to compare" in shown
    compare = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    compare.query_params["runs"] = f"{small[:12]},{fine[:12]}"
    compare = compare.switch_page("pages/compare.py").run()
    assert not compare.exception, [e.message for e in compare.exception]
    warned = " ".join(w.value for w in compare.warning)
    assert "1 of 2 runs were tested on too few examples" in warned and "seed 0" in warned


def test_the_time_promised_comes_from_the_runs_measured_here():
    from labcore.engine import run_results
    from labcore.results.record import RunRecord
    from labcore.engine.resolve import resolve_spec
    from labcore.runspec import make_spec
    from labcore.store import open_store

    upload.save_upload("dna", "dna.csv", dna_rows())
    spec = resolve_spec(make_spec(model="minilm", discipline="upload:dna", seed=5))
    run_results.put_result(open_store(), RunRecord(key=spec.key, spec=spec.to_dict(), status="done",
                                                   metric="accuracy", test={"accuracy": 0.9}, val_curve=[[150, 0.9]],
                                                   best_step=150, samples_per_s=40.0, train_tokens=22.0),
                           label="measured")
    at = page("pages/new_experiment.py")
    at.selectbox(key="w:exp.discipline").select("upload:dna").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "at the speed from 1 full run of minilm on upload:dna here: 880 tokens/s" in texts(at)
    at.text_input(key="exp.adv.model").input("tiny:bert").run()
    assert "No run of tiny:bert (full) has finished here yet" in texts(at)


def test_runs_from_the_menu_shows_the_running_run_and_attention_the_run_looked_at():
    import os

    from labcore.execution.executor import LocalExecutor
    from labcore.runspec import make_spec
    from labcore.store import open_store

    store = open_store()
    older, newest = finished(store, "r0", 0.9, 300, 2), finished(store, "r1", 0.8, 300, 2)
    executor = LocalExecutor(store, autostart=False)
    running = executor.submit(make_spec(model="minilm", discipline="dna-splice", seed=7)).key
    assert store.claim(pid=os.getpid()).key == running
    executor.submit(make_spec(model="minilm", discipline="dna-splice", seed=8))  # queued last: the newest
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run().switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="w:runs.run").value == running
    charts = at.get("plotly_chart")
    assert charts and "pretrained blue" not in str(charts[0].proto.spec)  # one run: no colour legend in the title
    at.selectbox(key="w:runs.run").set_value(older).run()
    at.query_params.clear()  # the menu link carries no run
    try:
        at.switch_page("pages/attention.py").run()  # it asks for the run's maps: the executor starts a worker
        assert at.selectbox(key="w:att.run").value == older and older != newest
    finally:
        from labcore.execution.pool import stop_workers

        stop_workers(store, timeout_s=30)


def test_home_says_one_can_bring_ones_own_data():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("Bring your own data" in m.value for m in at.markdown)
