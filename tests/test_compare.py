"""The CLI's sweep table and the Compare page's summary share one grouping and one set of statistics."""

from __future__ import annotations

import math

from labcore import figures
from labcore.results import compare
from test_figures import record


def test_sweep_and_summary_tables_agree_on_every_statistic():
    records = [record("pretrained", 0, 0.9), record("pretrained", 1, 0.7, steps=None), record("random", 0, 0.6),
               record("random", 1, 0.5, status="failed")]
    sweep = compare.sweep_table(records).set_index("init")
    summary = figures.summary_table(records).set_index("condition")
    assert list(sweep.index) == list(summary.index) == ["pretrained", "random"]
    for column in ("n", "not_done", "mean", "std", "ci_low", "ci_high", "majority", "steps_to_converge"):
        assert sweep[column].tolist() == summary[column].tolist(), column
    assert sweep.loc["random", "not_done"] == 1 and sweep.loc["pretrained", "steps_to_converge"] == 40
    assert math.isclose(sweep.loc["pretrained", "mean"], 0.8)


def test_varying_reads_plain_specs_and_records_alike():
    specs = [{"init": "pretrained", "seed": 0, "lr": 1}, {"init": "random", "seed": 1, "lr": 1, "extra": 2}]
    assert compare.varying(specs) == ["extra", "init"]
    assert compare.varying(specs, ignore=()) == ["extra", "init", "seed"]
    assert compare.varying_fields([record("pretrained", 0, 0.9), record("random", 1, 0.6)]) == ["init"]


def test_conditions_group_in_order_of_first_appearance():
    records = [record("random", 0, 0.6), record("pretrained", 0, 0.9), record("random", 1, 0.5)]
    groups = compare.by_condition(records)
    assert [[r.spec["seed"] for r in g] for g in groups] == [[0, 1], [0]]
    assert len(compare.by_condition(records, ("init", "seed"))) == 1
