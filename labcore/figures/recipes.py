"""The recipes' report figures, from numbers the recipes read out of their plans and results: bars per
condition and facet, lines of means with their intervals, OTDD scatters and alignment curves.

Which conditions, colours and reference lines a paper's figure has is the recipe's to say; these only draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labcore.figures.style import BASELINE, report_layout, role_colors

Interval = tuple[float, float, float]  # (mean, low, high) of a 95 % t-interval


def _mean_std(values: Sequence[float]) -> tuple[float | None, float]:
    """A bar's height and error bar: the mean (None: no bar) and the sample std (0 for one value)."""
    mean = float(np.mean(values)) if values else None
    return mean, float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def condition_bars(values: Mapping[str, Sequence[Sequence[float]]], facets: Sequence[str], *, title: str = "",
                   y_title: str = "test metric (mean ± std over seeds)",
                   floors: Mapping[str, float] | None = None) -> go.Figure:
    """Grouped bars: one group per facet, one bar per condition, ±1 std error bars. ``values`` maps each
    condition to its seeds' values per facet (in ``facets``' order); ``floors`` (facet -> value) draws the
    majority class or chance as a dashed line per group."""
    fig = go.Figure()
    conditions = list(values)
    for condition, colour in zip(conditions, role_colors(conditions)):
        stats = [_mean_std(list(v)) for v in values[condition]]
        means, stds = [m for m, _ in stats], [s for _, s in stats]
        ns = [len(v) for v in values[condition]]
        fig.add_trace(go.Bar(x=list(facets), y=means, name=condition, marker_color=colour,
                             error_y=dict(type="data", array=stds, color="black", thickness=1.5, width=6),
                             customdata=np.stack([ns, stds], axis=-1),
                             hovertemplate="%{x}<br>mean %{y:.3f} ± %{customdata[1]:.3f} (n = %{customdata[0]})"
                                           "<extra>" + condition + "</extra>"))
    for i, facet in enumerate(facets):
        floor = (floors or {}).get(facet)
        if floor is not None:
            fig.add_shape(type="line", x0=i - 0.45, x1=i + 0.45, y0=floor, y1=floor, xref="x", yref="y",
                          line=dict(color=BASELINE, dash="dash", width=2))
    fig.update_layout(barmode="group", title=title or None, template="plotly_white", height=420,
                      margin=dict(l=50, r=20, t=50 if title else 20, b=40))
    fig.update_yaxes(title_text=y_title)
    return fig


def column_bars(values: Mapping[str, Sequence[float]], *, name: str, colour: str, floor: float,
                y_title: str) -> go.Figure:
    """One bar per column (mean ± std of its seeds' values) and ``floor`` (chance) as a dashed line."""
    stats = [_mean_std(list(v)) for v in values.values()]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=list(values), y=[m for m, _ in stats],
                         error_y=dict(type="data", array=[s for _, s in stats]), marker_color=colour, name=name))
    fig.add_hline(y=floor, line_dash="dash", line_color=BASELINE)
    report_layout(fig, height=380)
    fig.update_yaxes(title_text=y_title)
    return fig


@dataclass(frozen=True)
class IntervalLine:
    """Means with their 95 % intervals against ``xs``; an interval of None (nothing finished) is left out."""

    name: str
    colour: str
    xs: tuple[Any, ...]
    intervals: tuple[Interval | None, ...]
    dash: str = "solid"
    mode: str = "lines+markers"


@dataclass(frozen=True)
class Reference:
    """A horizontal dashed line at a condition's mean (nothing where it has no interval yet)."""

    name: str
    colour: str
    interval: Interval | None


@dataclass(frozen=True)
class Dots:
    """Single values as points, one per named x (each permutation of Tamkin's fig. 4)."""

    name: str
    colour: str
    points: tuple[tuple[str, float], ...]


def _interval_line(fig: go.Figure, line: IntervalLine) -> None:
    points = [(x, i) for x, i in zip(line.xs, line.intervals) if i is not None]
    if not points:
        return
    fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[i[0] for _, i in points], name=line.name, mode=line.mode,
                             line=dict(color=line.colour, dash=line.dash), marker=dict(color=line.colour),
                             error_y=dict(type="data", symmetric=False, array=[i[2] - i[0] for _, i in points],
                                          arrayminus=[i[0] - i[1] for _, i in points], color=line.colour)))


def interval_figure(lines: Sequence[IntervalLine], *, x_title: str, y_title: str,
                    references: Sequence[Reference] = (), dots: Dots | None = None) -> go.Figure:
    """Lines (or markers) of means with asymmetric 95 % interval bars, the single values under them as dots,
    and reference conditions as labelled dashed lines across."""
    fig = go.Figure()
    if dots is not None and dots.points:
        fig.add_trace(go.Scatter(x=[x for x, _ in dots.points], y=[y for _, y in dots.points], mode="markers",
                                 name=dots.name, marker=dict(color=dots.colour, size=9)))
    for line in lines:
        _interval_line(fig, line)
    for ref in references:
        if ref.interval is not None:
            fig.add_hline(y=ref.interval[0], line_dash="dash", line_color=ref.colour, annotation_text=ref.name,
                          annotation_position="top left")
    report_layout(fig, height=420)
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return fig


def distance_scatter(panels: Mapping[str, Mapping[str, Sequence[tuple[float, float, int]]]]) -> go.Figure:
    """A panel per discipline, a point per run: final OTDD (x) against test metric (y). ``panels`` maps each
    discipline to each condition's ``(distance, value, seed)`` points, conditions in the same order in each."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels))
    conditions = list(next(iter(panels.values()), {}))
    colours = dict(zip(conditions, role_colors(conditions)))
    for col, (discipline, by_condition) in enumerate(panels.items(), start=1):
        for condition, points in by_condition.items():
            fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers",
                                     marker=dict(color=colours[condition], size=9), name=condition,
                                     legendgroup=condition, showlegend=col == 1,
                                     text=[f"seed {p[2]}" for p in points],
                                     hovertemplate="OTDD %{x:.3f}<br>test %{y:.3f}<br>%{text}<extra>" + condition
                                                   + "</extra>"), row=1, col=col)
        fig.update_xaxes(title_text="OTDD to text after alignment", row=1, col=col)
    fig.update_yaxes(title_text="test metric", row=1, col=1)
    report_layout(fig, height=380, top=40, legend_y=-0.25)
    return fig


@dataclass(frozen=True)
class StageCurve:
    """One run's distance at each step of its stage before training (ORCA's alignment)."""

    condition: str
    seed: int
    curve: tuple[tuple[float, float], ...]


def alignment_curves(runs: Sequence[StageCurve], conditions: Sequence[str]) -> go.Figure:
    """The OTDD of every alignment step, a line per run, coloured by its condition (one of ``conditions``);
    a condition's first run names it in the legend."""
    fig = go.Figure()
    colours = dict(zip(conditions, role_colors(list(conditions))))
    named: set[str] = set()
    for run in runs:
        fig.add_trace(go.Scatter(x=[p[0] for p in run.curve], y=[p[1] for p in run.curve], mode="lines",
                                 line=dict(color=colours[run.condition], width=2), name=run.condition,
                                 legendgroup=run.condition, showlegend=run.condition not in named,
                                 hovertemplate=f"seed {run.seed}, step " + "%{x}: OTDD %{y:.3f}<extra>"
                                               + run.condition + "</extra>"))
        named.add(run.condition)
    fig.update_xaxes(title_text="alignment step")
    fig.update_yaxes(title_text="OTDD to text (the step's target sample)")
    report_layout(fig, height=360, legend_y=-0.2)
    return fig
