"""The transfer atlas as a heat map: a cell per model and discipline, from cells the atlas has already
worked out (:mod:`labcore.recipes.atlas` says what a cell's gain, seeds and words are; this only draws them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import plotly.graph_objects as go

NO_RUNS = "#f3f3f3"  # a cell without runs
FEW_SEEDS = "#c8c8c8"  # a cell with runs, but fewer than the seeds an interval needs on a side


@dataclass(frozen=True)
class GridCell:
    """One cell as drawn: its measured gain (None where it has none), whether it has runs at all and whether
    they are too few for an interval (greyed), the text written in it and the text on hover."""

    model: str
    discipline: str
    gain: float | None
    has_runs: bool
    greyed: bool
    text: str
    hover: str


def gain_grid(models: Sequence[str], disciplines: Sequence[str], cells: Sequence[Sequence[GridCell]], *,
              highlight: tuple[str, str] | None = None, title: str = "") -> go.Figure:
    """The grid (``cells[i][j]`` is ``models[i]`` on ``disciplines[j]``): measured gain on a diverging scale
    centred at 0 (greyed cells grey), each cell's text written in it, its hover text on hover; ``highlight``
    (model, discipline) framed.

    A transparent marker sits at each cell's centre and answers hover and clicks for the whole cell (the
    nearest centre is the cell's own), so a chart that reports selected points reports the clicked cell;
    its ``customdata`` is ``[model, discipline]``.
    """
    models, disciplines = list(models), list(disciplines)
    gains = [[None if c.greyed else c.gain for c in row] for row in cells]
    span = max([abs(g) for row in gains for g in row if g is not None] + [0.05])
    grey = [[None if (c.gain is not None and not c.greyed) else (1 if c.has_runs else 0) for c in row]
            for row in cells]
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=grey, x=disciplines, y=models, colorscale=[[0, NO_RUNS], [1, FEW_SEEDS]], zmin=0,
                             zmax=1, showscale=False, hoverinfo="skip", xgap=2, ygap=2))
    fig.add_trace(go.Heatmap(z=gains, x=disciplines, y=models, colorscale="RdBu", zmid=0, zmin=-span, zmax=span,
                             hoverinfo="skip", xgap=2, ygap=2,
                             colorbar=dict(title=dict(text="measured gain<br>(pretrained − random)", side="right"))))
    flat = [c for row in cells for c in row]
    fig.add_trace(go.Scatter(
        x=[c.discipline for c in flat], y=[c.model for c in flat], mode="markers+text",
        text=[c.text for c in flat], textfont=dict(size=11, color=["#555" if c.greyed else "#111" for c in flat]),
        marker=dict(symbol="square", size=30, opacity=0), hovertext=[c.hover for c in flat], hoverinfo="text",
        customdata=[[c.model, c.discipline] for c in flat], showlegend=False,
        selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    if highlight:
        x, y = disciplines.index(highlight[1]), models.index(highlight[0])
        fig.add_shape(type="rect", x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5, xref="x", yref="y",
                      line=dict(color="#111", width=3))
    fig.update_layout(title=dict(text=title, x=0, xanchor="left") if title else None, template="plotly_white",
                      height=140 + 80 * len(models), margin=dict(l=20, r=20, t=50 if title else 20, b=40),
                      hoverdistance=-1, clickmode="event+select", dragmode=False,
                      xaxis=dict(side="top", type="category", showgrid=False),
                      yaxis=dict(autorange="reversed", type="category", showgrid=False))
    return fig
