"""The figures of the recipes, the atlas and the layer curves, drawn from plain data as their modules pass it,
and the rule that keeps Plotly in one package: labcore.figures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labcore.results import compare
from labcore.figures import BASELINE, PRETRAINED, SCRATCH
from labcore.figures.atlas import FEW_SEEDS, GridCell, gain_grid
from labcore.figures.recipes import (Dots, IntervalLine, Reference, StageCurve, alignment_curves, column_bars,
                                     condition_bars, distance_scatter, interval_figure)
from labcore.results.record import RunRecord

LABCORE = Path(__file__).resolve().parent.parent / "labcore"


def test_only_labcore_figures_imports_plotly():
    importers = []
    for path in LABCORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "plotly" for n in names):
                importers.append(path.relative_to(LABCORE).as_posix())
    assert importers and all(p.startswith("figures/") for p in importers), importers


def test_condition_bars_take_each_conditions_seed_values_per_facet():
    fig = condition_bars({"pretrained": [[0.8, 0.9], [0.7]], "random": [[0.5, 0.6], []]}, ["a", "b"],
                         floors={"b": 0.5})
    pretrained, random = fig.data
    assert pretrained.marker.color == PRETRAINED and random.marker.color == SCRATCH
    assert list(pretrained.y) == pytest.approx([0.85, 0.7]) and random.y[1] is None
    assert list(pretrained.error_y.array)[1] == 0.0  # one seed: no spread
    assert [(s.x0, s.y0, s.line.color) for s in fig.layout.shapes] == [(0.55, 0.5, BASELINE)]
    bars = column_bars({"x": [0.5, 0.7], "y": []}, name="bits", colour=PRETRAINED, floor=0.5, y_title="acc")
    assert list(bars.data[0].y) == [pytest.approx(0.6), None] and len(bars.layout.shapes) == 1


def test_interval_lines_leave_out_what_has_not_finished_and_references_are_dashed():
    line = IntervalLine("k", PRETRAINED, (0, 1, 2), ((0.5, 0.4, 0.7), None, (0.6, 0.5, 0.7)))
    fig = interval_figure([line, IntervalLine("none", SCRATCH, (0,), (None,))], x_title="k", y_title="acc",
                          references=[Reference("full", "#444", (0.8, 0.7, 0.9)), Reference("no", "#999", None)],
                          dots=Dots("one", PRETRAINED, (("p0", 0.3), ("p1", 0.4))))
    dots, drawn = fig.data
    assert list(dots.x) == ["p0", "p1"] and list(drawn.x) == [0, 2]
    assert list(drawn.error_y.array) == pytest.approx([0.2, 0.1]) and list(drawn.error_y.arrayminus) == \
        pytest.approx([0.1, 0.1])
    assert [s.y0 for s in fig.layout.shapes] == [0.8]


def test_alignment_curves_and_scatter_name_each_condition_once():
    runs = [StageCurve("short", 0, ((0, 1.0), (1, 0.5))), StageCurve("short", 1, ((0, 1.1),)),
            StageCurve("long", 0, ((0, 0.9),))]
    fig = alignment_curves(runs, ("short", "long"))
    assert [t.showlegend for t in fig.data] == [True, False, True]
    scatter = distance_scatter({"a": {"short": [(0.2, 0.9, 0)], "long": []}, "b": {"short": [], "long": []}})
    assert [t.showlegend for t in scatter.data] == [True, True, False, False]


def test_the_gain_grid_greys_cells_without_an_interval_and_frames_the_highlight():
    def cell(discipline, gain, has_runs, greyed):
        return GridCell("m", discipline, gain, has_runs, greyed, "text", "hover")

    fig = gain_grid(["m"], ["a", "b", "c"], [[cell("a", 0.2, True, False), cell("b", 0.1, True, True),
                                             cell("c", None, False, False)]], highlight=("m", "b"))
    grey, gains, cells = fig.data
    assert list(grey.z[0]) == [None, 1, 0] and grey.colorscale[1][1] == FEW_SEEDS
    assert list(gains.z[0]) == [0.2, None, None] and gains.zmax == pytest.approx(0.2)
    assert [list(c) for c in cells.customdata] == [["m", "a"], ["m", "b"], ["m", "c"]]
    assert fig.layout.shapes[0].x0 == 0.5


def test_conditions_that_differ_only_in_a_field_not_shown_keep_separate_labels():
    records = [RunRecord(key=str(i), spec={"init": "pretrained", "lr": lr, "seed": 0}, status="done")
               for i, lr in enumerate((0.1, 0.2))]
    assert list(compare.group_by_condition(records, fields=["init"])) == ["pretrained", "pretrained'"]
    assert list(compare.group_by_condition(records)) == ["lr=0.1", "lr=0.2"]
