"""A lesson's two figures: the class's predictions (a histogram of numbers, or a bar per answer) with the measured
answer drawn on it once revealed, and the measured conditions with their 95 % intervals.

Pure functions of plain values (the lessons layer passes them in), so the teacher's screen, a student's and the
handout draw the same thing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import plotly.graph_objects as go

from labcore.figures.style import BASELINE, PRETRAINED, layout, rgba, role_colors

BINS = 20  # a number's range in twentieths: 0.05 of accuracy per bar on [0, 1]


def _label(guess: Any) -> str:
    return " > ".join(guess) if isinstance(guess, (list, tuple)) else str(guess)


def number_histogram(guesses: Sequence[float], low: float, high: float, *, unit: str = "",
                     answer: float | None = None, answer_low: float | None = None,
                     answer_high: float | None = None, mine: float | None = None, title: str = "") -> go.Figure:
    """Numbers guessed, counted in :data:`BINS` bars over [low, high]; the measured value as a red line over its
    interval (shaded), and ``mine`` (a student's own guess) as a dashed line."""
    width = (high - low) / BINS
    counts = Counter(min(BINS - 1, max(0, int((g - low) // width))) for g in guesses)
    centres = [low + (i + 0.5) * width for i in range(BINS)]
    fig = go.Figure(go.Bar(x=centres, y=[counts.get(i, 0) for i in range(BINS)], width=width * 0.92,
                           marker_color=PRETRAINED, name="predictions",
                           hovertemplate="%{y} prediction(s) near %{x:.2f}<extra></extra>"))
    if answer is not None:
        if answer_low is not None and answer_high is not None:
            fig.add_vrect(x0=answer_low, x1=answer_high, fillcolor=rgba(BASELINE, 0.15), line_width=0)
        fig.add_vline(x=answer, line_color=BASELINE, line_width=3,
                      annotation_text=f"measured {answer:.2f}", annotation_position="top")
    if mine is not None:
        fig.add_vline(x=mine, line_color="#333333", line_dash="dash", annotation_text=f"you {mine:.2f}",
                      annotation_position="bottom right")
    layout(fig, title)
    fig.update_layout(xaxis=dict(range=[low, high], title=unit or None), yaxis=dict(title="students", dtick=1),
                      showlegend=False, bargap=0.05)
    return fig


def answer_bars(guesses: Sequence[Any], choices: Sequence[str], *, answer: str | None = None,
                mine: Any = None, title: str = "") -> go.Figure:
    """One bar per answer given (every choice offered shown, even with none); the measured answer's bar in red
    and named, the student's own outlined."""
    labels = [_label(g) for g in guesses]
    names = list(dict.fromkeys(list(choices) + labels))
    counts = Counter(labels)
    colours = [BASELINE if answer is not None and n == answer else PRETRAINED for n in names]
    widths = [3 if mine is not None and n == _label(mine) else 0 for n in names]
    fig = go.Figure(go.Bar(x=[counts.get(n, 0) for n in names], y=names, orientation="h", marker_color=colours,
                           marker_line=dict(width=widths, color="#333333"),
                           text=[("measured · " if answer == n else "") + str(counts.get(n, 0)) for n in names],
                           textposition="auto", hovertemplate="%{y}: %{x}<extra></extra>"))
    layout(fig, title)
    fig.update_layout(xaxis=dict(title="students", dtick=1), yaxis=dict(autorange="reversed"), showlegend=False,
                      height=120 + 40 * len(names))
    return fig


def measured_bars(roles: Sequence[str], means: Sequence[float], lows: Sequence[float], highs: Sequence[float], *,
                  metric: str = "", floor: float | None = None, title: str = "") -> go.Figure:
    """Each condition's measured value with its 95 % interval, and the floor (majority class, chance) dashed."""
    fig = go.Figure(go.Bar(x=list(roles), y=list(means), marker_color=role_colors(roles),
                           error_y=dict(type="data", symmetric=False, array=[h - m for h, m in zip(highs, means)],
                                        arrayminus=[m - lo for m, lo in zip(means, lows)]),
                           text=[f"{m:.2f}" for m in means], textposition="inside",
                           hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    if floor is not None:
        fig.add_hline(y=floor, line_color=BASELINE, line_dash="dash", annotation_text=f"floor {floor:.2f}")
    layout(fig, title)
    fig.update_layout(yaxis=dict(title=(metric or "value").replace("_", " ")), showlegend=False)
    return fig
