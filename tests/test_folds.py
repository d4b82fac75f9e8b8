"""k-fold cross-validation for uploads too small for a fixed split (issue 13): folds disjoint, covering and
stratified; each fold a run of its own key; the folds of a condition counted as its repeats on Compare."""

from __future__ import annotations

import collections
import os
import re
import time

import pytest
from streamlit.testing.v1 import AppTest

from labcore import data as disciplines, figures
from labcore.results import compare
from labcore.data import upload
from labcore.data.base import fold_split, stratified_folds
from labcore.errors import LabError
from labcore.results.record import RunRecord
from labcore.engine import run_results
from labcore.engine.resolve import resolve_spec
from labcore.runspec import make_spec
from labcore.engine.speed import had_the_machine, measured_speed
from test_data_page_upload import APP, TIMEOUT, own_cache  # noqa: F401 - own_cache: an empty cache per test
from test_pages_trust import dna_rows, texts

LABELS = [0] * 50 + [1] * 30 + [2] * 20 + [3] * 7


def counts(labels, rows):
    return collections.Counter(labels[i] for i in rows)


def test_folds_are_disjoint_cover_the_data_and_keep_each_class_share():
    folds = stratified_folds(LABELS, 5, seed=3)
    members = [[i for i, f in enumerate(folds) if f == fold] for fold in range(5)]
    assert sorted(i for m in members for i in m) == list(range(len(LABELS)))  # a partition
    assert max(map(len, members)) - min(map(len, members)) <= 1
    for fold in members:  # every class within one of its share of a fold
        for klass, n in ((0, 50), (1, 30), (2, 20), (3, 7)):
            assert abs(counts(LABELS, fold)[klass] - n / 5) < 1
    assert stratified_folds(LABELS, 5, seed=3) == folds and stratified_folds(LABELS, 5, seed=4) != folds

    tested = []
    for fold in range(5):
        train, validation, test = fold_split(LABELS, 5, fold, seed=3, min_per_split=2)
        assert test == members[fold]
        assert not set(train) & set(validation) and not set(train) & set(test) and not set(validation) & set(test)
        assert sorted(train + validation + test) == list(range(len(LABELS)))
        for klass in range(3):  # a ninth of each class of the other folds validates, at least 2
            assert counts(LABELS, validation)[klass] >= 2 and counts(LABELS, train)[klass] > 0
        tested += test
    assert sorted(tested) == list(range(len(LABELS)))  # every row tested exactly once


def test_folds_never_cut_a_group_and_refuse_impossible_counts():
    groups = [f"g{i // 3}" for i in range(60)]  # MIDI files or windowed records: 20 groups of 3 rows
    labels = [int(g[1:]) % 2 for g in groups]
    for fold in range(4):
        parts = fold_split(labels, 4, fold, seed=0, groups=groups)
        seen = [{groups[i] for i in part} for part in parts]
        assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
        assert len(seen[2]) == 5
    with pytest.raises(ValueError, match="at least 2 folds"):
        stratified_folds(LABELS, 1, seed=0)
    with pytest.raises(ValueError, match="leave a fold empty"):
        stratified_folds([0, 1, 0], 4, seed=0)
    with pytest.raises(ValueError, match="not one of the 5 folds"):
        fold_split(LABELS, 5, 5, seed=0)


def test_each_fold_is_a_run_of_its_own_key_on_its_own_data():
    upload.save_upload("dna", "dna.csv", dna_rows())
    base = make_spec(model="tiny:bert", discipline="upload:dna", max_steps=4)
    specs = upload.fold_specs(base, 5)
    resolved = [resolve_spec(s) for s in specs]
    assert len({r.key for r in resolved}) == 5 and resolve_spec(specs[2]).key == resolved[2].key
    assert resolve_spec(base).key not in {r.key for r in resolved}
    assert [dict(r.discipline_params)["fold"] for r in resolved] == [0, 1, 2, 3, 4]
    assert resolved[2].label().endswith("seed=0 fold=2/5")

    discipline = disciplines.get("upload:dna")
    tests = []
    for spec in specs:
        params = disciplines.parse_params(discipline, dict(spec.discipline_params))
        built = discipline.build(params, lambda _m: None)
        tests.append(sorted(map(tuple, built["test"]["tokens"])))
        assert len(built["test"]) in (21, 22) and set(built["test"]["label"]) == {0, 1}
        info = discipline.info(params)
        assert f"tested on fold {params.fold} of 5" in info.run_notes[0] and "5-fold cross-validation" in info.notes
    assert sum(map(len, tests)) == 106


def test_fold_parameters_are_checked_in_the_pages_words():
    upload.save_upload("dna", "dna.csv", dna_rows())
    base = make_spec(model="tiny:bert", discipline="upload:dna")
    for params, needle in (({"folds": 1}, "folds must be 0 (the fixed 80/10/10 split) or from 2 to 10"),
                           ({"folds": 5, "fold": 5}, "fold must be one of 0 to 4 for 5 folds"),
                           ({"fold": 2}, "fold 2 is given without folds"),
                           ({"folds": "5"}, "folds must be a whole number")):
        with pytest.raises(LabError, match=re.escape(needle)):
            resolve_spec(base.replace(discipline_params=params))
    own = "".join(f">r{i}|{'ab'[i % 2]}|{'train' if i < 16 else 'valid' if i < 20 else 'test'}\nACGT\n"
                  for i in range(24)).encode()
    upload.save_upload("own", "own.fasta", own, label_field="field 2", split_field="field 3")
    with pytest.raises(LabError, match="gives its own split .* leave folds at 0"):
        resolve_spec(make_spec(discipline="upload:own", discipline_params={"folds": 3}))


def fold_record(fold: int, accuracy: float, *, folds: int = 5, init: str = "pretrained") -> RunRecord:
    spec = {"model": "minilm", "init": init, "discipline": "upload:dna", "protocol": "full", "seed": 0,
            "discipline_params": {"fingerprint": "f", "fold": fold, "folds": folds, "seed": 0}}
    return RunRecord(key=f"{init}-{folds}-{fold}", spec=spec, status="done", metric="accuracy",
                     test={"accuracy": accuracy}, val_curve=[[4, accuracy]], best_step=4)


def test_compare_counts_the_folds_of_a_condition_as_its_repeats():
    assert "discipline_params.fold" in compare.REPEAT_FIELDS
    records = [fold_record(f, 0.6 + 0.05 * f) for f in range(5)] + [fold_record(f, 0.5, init="random") for f in
                                                                     range(5)]
    summary = figures.summary_table(records).set_index("condition")
    assert summary.loc["pretrained", "n"] == 5 and summary.loc["random", "n"] == 5
    assert summary.loc["pretrained", "mean"] == pytest.approx(0.7) and summary.loc["pretrained", "std"] > 0
    assert summary.loc["pretrained", "ci_low"] < 0.7 < summary.loc["pretrained", "ci_high"]
    assert compare.varying_fields(records) == ["init"]  # the fold names no condition
    assert compare.varying_fields(records, ("seed",)) == ["discipline_params", "init"]
    other_k = [fold_record(f, 0.7, folds=10) for f in range(10)]
    assert [len(m) for m in compare.by_condition(records[:5] + other_k)] == [5, 10]  # 5 and 10 folds differ


def test_a_106_row_csv_in_5_folds_gives_5_runs_whose_compare_row_has_n_5():
    from labcore.execution.pool import stop_workers
    from labcore.store import open_store

    upload.save_upload("dna", "dna.csv", dna_rows())
    store = open_store()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run().switch_page("pages/new_experiment.py").run()
    at.selectbox(key="w:exp.discipline").select("upload:dna").run()
    shown = texts(at)
    assert "the test set has 10 examples, fewer than 30" in shown and "tests every record once, in k runs" in shown
    assert "test set under 30 examples or of one class" in at.checkbox(key="exp.folds").help
    at.checkbox(key="exp.folds").check().run()
    at.text_input(key="exp.adv.model").input("tiny:bert").run()
    at.number_input(key="exp.adv.quick.finetune.max_steps").set_value(4).run()
    at.selectbox(key="exp.adv.precision").select("fp32").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at)
    assert "**5 runs:**" in shown and "fold=4/5" in shown
    assert "run i tests on fold i, about 21 records" in shown and "the 5 folds together test all 106" in " ".join(
        i.value for i in at.info)
    try:
        at.button(key="btn.exp.run").click().run()
        assert not at.exception, [e.message for e in at.exception]
        groups = [g for g in store.groups() if g.startswith("folds:upload:dna:")]
        assert len(groups) == 1
        keys = store.group(groups[0])["keys"]
        assert len(keys) == 5
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and any(store.get(k).status not in ("done", "failed") for k in keys):
            time.sleep(1)
    finally:
        stop_workers(store, timeout_s=30)
    assert [store.get(k).status for k in keys] == ["done"] * 5, [store.log(k)[-800:] for k in keys]
    records = [run_results.result(store, k) for k in keys]
    assert sum(r.test_examples for r in records) == 106  # every record tested once
    assert {r.train_tokens for r in records} == {22.0}  # 20 symbols, [CLS] and [SEP]: the speed New experiment uses
    # Every fold counts toward the speed New experiment promises; a fold that shared a busy machine (another
    # process on a core) is left out while any had it alone, whatever else runs beside the tests.
    alone = [r for r in records if had_the_machine(r, os.cpu_count() or 1)]
    assert measured_speed(records, "tiny:bert", "full", "upload:dna").runs == (len(alone) or 5)
    summary = figures.summary_table(records)
    assert len(summary) == 1 and summary["n"].tolist() == [5]

    page = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    page.query_params["groups"] = groups[0]
    page = page.switch_page("pages/compare.py").run()
    assert not page.exception, [e.message for e in page.exception]
    table = page.dataframe[0].value
    assert table["n"].tolist() == [5]
