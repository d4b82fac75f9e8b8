"""Every figure and table of the pages, tested as pure functions on small, hand-checked inputs (no Streamlit).

The records here are inputs with known numbers, so each statistic can be checked by hand; the pages'
own tests (test_pages.py) run the same functions on records of real runs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from labcore import figures
from labcore.analysis import attention as attn
from labcore.mapping import MappingSpec, Vocab, build_mapping
from labcore.fmt import fmt_duration
from labcore.results.record import RunRecord
from pages import state


def record(init: str, seed: int, test: float, *, discipline: str = "dna-splice", status: str = "done",
           steps: int | None = 40, majority: float = 0.52, mapping: str = "random") -> RunRecord:
    spec = {"model": "minilm", "init": init, "discipline": discipline, "protocol": "full", "seed": seed,
            "mapping": mapping, "mapping_k": 1000, "mapping_seed": 0}
    return RunRecord(key=f"{init}-{discipline}-{seed}-{mapping}", spec=spec, status=status, metric="accuracy",
                     test={"accuracy": test}, baseline={"majority": majority}, steps_to_converge=steps,
                     train_loss=[[1, 1.0], [2, 0.8], [3, 0.6]], val_curve=[[2, 0.5], [4, test]])


# -------------------------------------------------------------------------------------------- colours
def test_pretrained_is_blue_and_random_orange_and_others_distinct():
    colours = figures.role_colors(["pretrained", "random", "stats", "shift 1000", "pretrained"])
    assert colours[0] == figures.PRETRAINED == "#1f77b4"
    assert colours[1] == figures.SCRATCH == "#ff7f0e"
    assert colours[4] == colours[0]
    assert len(set(colours[:4])) == 4


def test_condition_labels_name_what_differs():
    spec = {"init": "random", "mapping": "shift", "mapping_k": 1000, "protocol": "frozen", "lr": 0.001}
    assert figures.condition_label(spec, ["init"]) == "random"
    assert figures.condition_label(spec, ["mapping", "mapping_k"]) == "map=shift1000"
    assert figures.condition_label(spec, ["protocol", "lr"]) == "frozen · lr=0.001"


def test_conditions_are_named_by_what_varies_within_a_discipline():
    dna = [record("pretrained", 0, 0.9), record("random", 0, 0.6)]
    text = [record("pretrained", 0, 0.8, discipline="text-sentiment", mapping="identity"),
            record("pretrained", 0, 0.6, discipline="text-sentiment", mapping="shift")]
    fields = figures.condition_fields(dna + text)  # the mapping differs with the discipline too, but varies in text
    assert fields == ["init", "mapping"]
    assert figures.condition_fields(dna + text, with_discipline=True) == ["discipline", "init", "mapping"]
    labels = figures.summary_table(dna + text)["condition"].tolist()
    assert labels == ["pretrained · map=random0", "random · map=random0", "pretrained · map=identity",
                      "pretrained · map=shift1000"]
    assert figures.distinct_roles(labels, ["pretrained", "random", "pretrained", "pretrained"]) == \
        ["pretrained", "random", "pretrained · map=identity", "pretrained · map=shift1000"]


# --------------------------------------------------------------------------------------------- curves
def test_smoothing_keeps_constants_and_zero_is_identity():
    values = [3.0, 1.0, 2.0, 5.0]
    assert figures.smooth(values, 0.0) == values
    assert figures.smooth([2.0] * 5, 0.9) == pytest.approx([2.0] * 5)
    smoothed = figures.smooth(values, 0.5)
    assert smoothed[0] == pytest.approx(3.0)  # bias-corrected: the first point is the data
    assert smoothed[1] == pytest.approx((0.25 * 3 + 0.5 * 1) / 0.75)
    with pytest.raises(ValueError, match="smoothing weight"):
        figures.smooth(values, 1.0)


def test_loss_curves_put_validation_on_the_second_axis_in_the_run_colour():
    runs = [figures.RunCurves("pretrained", "pretrained", [(1, 1.0), (2, 0.5)], [(2, 0.9)]),
            figures.RunCurves("random", "random", [(1, 1.1), (2, 1.0)], [(2, 0.6)])]
    fig = figures.loss_curves(runs, metric="accuracy")
    train = [t for t in fig.data if "validation" not in t.name]
    val = [t for t in fig.data if "validation" in t.name]
    assert [t.line.color for t in train] == [figures.PRETRAINED, figures.SCRATCH]
    assert all(t.yaxis == "y2" and t.line.dash == "dash" for t in val)
    assert all(t.yaxis == "y" for t in train)
    assert fig.layout.yaxis2.title.text == "validation accuracy (dashed)"
    assert [t.showlegend for t in fig.data] == [None, False, None, False]  # one legend entry per run
    smoothed = figures.loss_curves(runs, smoothing=0.5)
    assert len(smoothed.data) == len(fig.data) + 2  # the raw curves stay, faint, behind the smoothed ones


def test_mean_and_std_on_a_common_grid_stop_at_the_shortest_run():
    a = [(0, 1.0), (10, 0.0)]
    b = [(0, 3.0), (5, 2.0), (20, 0.0)]
    steps, mean, std = figures.mean_std([a, b])
    assert steps[-1] == 10
    assert list(steps) == [0, 5, 10]
    assert mean[0] == pytest.approx(2.0) and std[0] == pytest.approx(np.std([1, 3], ddof=1))
    assert mean[1] == pytest.approx((0.5 + 2.0) / 2)
    one = figures.mean_std([a])
    assert list(one[2]) == [0.0, 0.0]


def test_mean_curves_draw_a_band_per_condition():
    fig = figures.mean_std_curves({"pretrained": [[(0, 1.0), (4, 0.2)], [(0, 1.2), (4, 0.4)]],
                                   "random": [[(0, 1.1), (4, 0.9)]]},
                                  roles={"pretrained": "pretrained", "random": "random"},
                                  validation={"pretrained": [[(2, 0.8), (4, 0.9)]]}, metric="accuracy")
    bands = [t for t in fig.data if t.fill == "toself"]
    lines = [t for t in fig.data if t.fill != "toself"]
    assert len(bands) == 3 and len(lines) == 3
    assert lines[0].line.color == figures.PRETRAINED and "mean of 2" in lines[0].name
    assert any(t.yaxis == "y2" for t in lines)


# -------------------------------------------------------------------------------------- comparisons
def test_summary_table_has_mean_std_and_a_t_interval_per_condition():
    from scipy import stats

    records = [record("pretrained", s, v) for s, v in enumerate([0.90, 0.92, 0.94])]
    records += [record("random", s, v) for s, v in enumerate([0.70, 0.74])]
    records.append(record("random", 9, 0.1, status="failed"))
    table = figures.summary_table(records).set_index("condition")
    assert list(table.index) == ["pretrained", "random"]
    row = table.loc["pretrained"]
    assert row["n"] == 3 and row["mean"] == pytest.approx(0.92) and row["std"] == pytest.approx(0.02)
    half = stats.t.ppf(0.975, 2) * 0.02 / math.sqrt(3)
    assert row["ci_low"] == pytest.approx(0.92 - half) and row["ci_high"] == pytest.approx(0.92 + half)
    assert table.loc["random", "n"] == 2 and table.loc["random", "not_done"] == 1
    assert table.loc["random", "mean"] == pytest.approx(0.72)


def test_paper_table_prints_percent_mean_and_std_per_discipline():
    records = [record("pretrained", 0, 0.858), record("pretrained", 1, 0.862),
               record("random", 0, 0.777), record("pretrained", 0, 0.60, discipline="protein-amp")]
    table = figures.paper_table(figures.summary_table(records))
    assert table.loc["pretrained", "dna-splice (accuracy)"] == "86.0 (0.3)"
    assert table.loc["random", "dna-splice (accuracy)"] == "77.7 (0.0)"
    assert table.loc["random", "protein-amp (accuracy)"] == "–"


def test_bars_carry_std_error_bars_and_the_majority_line():
    records = [record("pretrained", s, v) for s, v in enumerate([0.9, 0.8])] + [record("random", 0, 0.6)]
    fig = figures.bars_with_error(figures.summary_table(records))
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == ["pretrained", "random"]
    assert bars[0].marker.color == figures.PRETRAINED and bars[1].marker.color == figures.SCRATCH
    assert list(bars[0].error_y.array) == pytest.approx([np.std([0.9, 0.8], ddof=1)])
    assert fig.layout.shapes[0].y0 == pytest.approx(0.52)


def test_steps_to_converge_table_gives_the_speed_up():
    records = [record("pretrained", 0, 0.9, steps=100), record("pretrained", 1, 0.9, steps=300),
               record("random", 0, 0.7, steps=800), record("random", 1, 0.7, steps=None)]
    table = figures.steps_to_converge_table(records)
    column = table["dna-splice"]
    assert column["pretrained steps"] == 200 and column["random steps"] == 800
    assert column["speed-up"] == pytest.approx(4.0)
    assert column["random test accuracy"] == pytest.approx(0.7)
    assert list(table.index[:3]) == ["pretrained steps", "random steps", "speed-up"]
    assert figures.steps_to_converge_table([record("pretrained", 0, 0.9)]).empty


# ---------------------------------------------------------------------------------------------- data
def test_class_balance_groups_by_split_and_lengths_histogram():
    fig = figures.class_balance({"train": {"EI": 5, "IE": 3}, "test": {"EI": 1, "IE": 1}})
    assert [t.name for t in fig.data] == ["train", "test"] and list(fig.data[0].y) == [5, 3]
    flat = figures.class_balance({"a": 2, "b": 7})
    assert list(flat.data[0].x) == ["a", "b"]
    hist = figures.length_histogram([60] * 10, unit="symbols")
    assert len(hist.data) == 1 and hist.layout.xaxis.title.text == "length (symbols)"


# ------------------------------------------------------------------------------------------ attention
def _maps(layers=2, heads=3, length=4, seed=0):
    rng = np.random.default_rng(seed)
    raw = rng.random((layers, heads, length, length))
    return raw / raw.sum(-1, keepdims=True)


def test_attention_grid_has_a_panel_per_layer_and_head():
    fig = figures.attention_grid(_maps(), layers=[0, 1], heads=[0, 2])
    assert len(fig.data) == 4
    assert [a.text for a in fig.layout.annotations] == ["L0 H0", "L0 H2", "L1 H0", "L1 H2"]
    with pytest.raises(ValueError, match="layers, heads"):
        figures.attention_grid(np.zeros((3, 3)))


def test_attention_panels_share_one_colour_scale_and_label_tokens():
    maps = _maps()
    fig = figures.attention_compare({"pretrained": maps[0, 0], "fine-tuned": maps[1, 1]}, ["[CLS]", "A", "C", "[SEP]"])
    top = max(maps[0, 0].max(), maps[1, 1].max())
    assert all(t.zmax == pytest.approx(top) and t.zmin == 0 for t in fig.data)
    assert list(fig.layout.xaxis.ticktext) == ["[CLS]", "A", "C", "[SEP]"]


def test_head_matching_recovers_a_permutation_and_distance_zero():
    maps = _maps(layers=1, heads=4, length=5)
    permuted = maps[:, [2, 0, 3, 1]]
    partner, distance = attn.match_heads(maps[0], permuted[0])
    assert list(partner) == [1, 3, 0, 2]
    assert distance == pytest.approx(np.zeros(4))
    other = _maps(layers=1, heads=4, length=5, seed=1)
    assert attn.layer_distances(maps, other)[0] > 0
    assert attn.head_distances(maps[0], maps[0]).shape == (4, 4)


def test_attention_results_round_trip_through_the_npz(tmp_path):
    result = attn.AttentionMaps(maps={w: _maps(seed=i) for i, w in enumerate(attn.WEIGHTS)},
                                symbols=["[CLS]", "A", "G", "[SEP]"], vocab_tokens=["[CLS]", "##x", "at", "[SEP]"],
                                meta={"key": "k", "label": "EI"})
    path = attn.save_attention(attn.attention_path(tmp_path, "test", 3), result)
    assert path.name == "attention-test-3.npz"
    loaded = attn.load_attention(path)
    assert loaded.symbols == result.symbols and loaded.vocab_tokens == result.vocab_tokens
    assert loaded.meta["label"] == "EI" and loaded.layers == 2 and loaded.heads == 3
    assert np.allclose(loaded.maps["finetuned"], result.maps["finetuned"])
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


# -------------------------------------------------------------------------------------------- mapping
def test_mapping_table_and_the_rows_a_rerun_changes():
    vocab = Vocab.from_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "c", "g", "t", "x", "y"])
    before = build_mapping(MappingSpec("letters"), ("A", "C", "G", "T"), vocab)
    after = build_mapping(MappingSpec("table", table=(("A", 9), ("C", 6), ("G", 7), ("T", 8))), ("A", "C", "G", "T"),
                          vocab)
    t0, t1 = figures.mapping_table(before.rows()), figures.mapping_table(after.rows())
    assert list(t0.columns) == ["symbol", "id", "token"]
    assert t0.iloc[0].tolist() == ["A", 5, "a"]
    diff = figures.mapping_diff(t0, t1)
    assert diff["symbol"].tolist() == ["A"] and diff["token after"].tolist() == ["x"]


# -------------------------------------------------------------------------------------------- progress
def test_progress_eta_comes_from_the_step_rate_of_the_current_attempt():
    events = [{"type": "attempt", "attempt": 1}, {"type": "step", "step": 1, "t": 100.0},
              {"type": "step", "step": 11, "t": 105.0}]
    prog = state.progress("running", 11, 111, events)
    assert prog.eta_s == pytest.approx(50.0) and "about 50 s left" in prog.text
    assert prog.fraction == pytest.approx(11 / 111)
    assert state.progress("running", 1, 10, events[:2]).eta_s is None
    assert state.progress("done", 0, 0).fraction == 1.0
    assert fmt_duration(125) == "2 min 05 s"


def test_figures_are_plotly_and_tables_pandas():
    import plotly.graph_objects as go

    assert isinstance(figures.loss_curves([]), go.Figure)
    assert isinstance(figures.summary_table([]), pd.DataFrame)
    assert figures.paper_table(figures.summary_table([])).empty


def test_the_validation_axis_stays_around_the_values_and_inside_zero_one():
    one = figures.loss_curves([figures.RunCurves("p", "pretrained", [(1, 0.7)], [(1, 0.5)])])
    assert list(one.layout.yaxis2.range) == pytest.approx([0.4, 0.6])
    wide = figures.loss_curves([figures.RunCurves("p", "pretrained", [(1, 0.7)], [(1, 0.02), (2, 0.99)])])
    assert list(wide.layout.yaxis2.range) == pytest.approx([0.0, 1.0])


def test_decimation_keeps_the_endpoints_and_the_extremes_and_bounds_the_count():
    points = [(step, math.sin(step / 50) + (5.0 if step == 7777 else 0.0)) for step in range(20_000)]
    kept = figures.decimate(points, 1000)
    assert len(kept) <= 1000
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert (7777, points[7777][1]) in kept  # a one-step spike survives
    assert [p[0] for p in kept] == sorted(p[0] for p in kept)  # still in step order
    assert max(p[1] for p in kept) == max(p[1] for p in points)
    assert min(p[1] for p in kept) == min(p[1] for p in points)
    assert figures.decimate(points[:10], 1000) == points[:10]  # short curves are untouched
    with_nan = [(i, float("nan") if i % 3 else float(i)) for i in range(5000)]
    assert len(figures.decimate(with_nan, 100)) <= 100


def test_a_long_runs_figure_has_bounded_traces():
    train = [(s, 1.0 / (1 + s)) for s in range(1, 30_001)]
    validation = [(s, 0.5) for s in range(0, 30_000, 10)]
    fig = figures.loss_curves([figures.RunCurves("p", "pretrained", train, validation)], smoothing=0.6)
    assert all(len(trace.x) <= figures.MAX_POINTS for trace in fig.data)
    assert fig.data[1].x[-1] == 30_000  # the smoothed curve still reaches the last step
