"""Training curves: one run's loss and validation lines, several runs' mean with a std band, a protocol's
stage before training. A curve is a list of ``(step, value)`` pairs; :class:`RunCurves` bundles one run's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labcore.figures.style import layout, rgba, role_colors

Curve = Sequence[tuple[float, float]]


def smooth(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average with bias correction (TensorBoard's smoothing slider).

    ``weight`` in [0, 1): 0 returns the values unchanged; 0.9 averages over roughly the last ten points.
    The bias correction keeps the first points at the data instead of dragging them towards zero.
    """
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing weight must lie in [0, 1), got {weight}")
    out: list[float] = []
    avg = 0.0
    for i, value in enumerate(values, 1):
        avg = weight * avg + (1 - weight) * float(value)
        out.append(avg / (1 - weight ** i) if weight else float(value))
    return out


@dataclass
class RunCurves:
    """One run's curves for an overlay: train loss, a validation metric, its legend label and role."""

    label: str
    role: str = ""
    train_loss: Curve = field(default_factory=list)
    validation: Curve = field(default_factory=list)
    status: str = ""


MAX_POINTS = 1000  # points per trace of a live figure: what a browser draws smoothly and the wire carries fast


def decimate(points: Sequence[Sequence[float]], limit: int = MAX_POINTS) -> list:
    """At most ``limit`` of ``points`` (``(x, y, ...)`` in x order) that draw the same line: the first and
    the last, and from each of ``(limit - 2) // 2`` equal slices of the rest its lowest and highest y, in
    their order (min/max decimation: spikes and dips survive, unlike every-k-th thinning). Non-finite y
    never count as the extreme of a slice. Fewer than ``limit`` points come back unchanged."""
    if limit < 4:
        raise ValueError(f"decimate needs a limit of at least 4 points, got {limit}")
    points = list(points)
    if len(points) <= limit:
        return points
    inner = points[1:-1]
    slices = (limit - 2) // 2
    size = len(inner) / slices
    kept = [points[0]]
    for b in range(slices):
        chunk = inner[int(b * size):int((b + 1) * size)]
        if not chunk:
            continue
        finite = [i for i, p in enumerate(chunk) if math.isfinite(float(p[1]))] or [0]
        low = min(finite, key=lambda i: float(chunk[i][1]))
        high = max(finite, key=lambda i: float(chunk[i][1]))
        kept.extend(chunk[i] for i in sorted({low, high}))
    kept.append(points[-1])
    return kept


def loss_curves(runs: Sequence[RunCurves], *, smoothing: float = 0.0, metric: str = "metric",
                title: str = "", max_points: int = MAX_POINTS) -> go.Figure:
    """Train-loss curves overlaid (solid, left axis) with each run's validation metric (dashed, right axis).

    One legend entry per run (its two lines toggle together). With ``smoothing`` > 0 the raw loss stays
    as a faint line behind the smoothed one, so smoothing never hides a spike. Colours by role:
    pretrained blue, random orange (Kao & Lee fig. 3). Each trace keeps at most ``max_points`` points
    (:func:`decimate`; smoothing sees every point first), so a long run's figure stays small.
    """
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    colours = role_colors([r.role or r.label for r in runs])
    for run, colour in zip(runs, colours):
        steps = [p[0] for p in run.train_loss]
        losses = [p[1] for p in run.train_loss]
        name = run.label + (f" ({run.status})" if run.status and run.status not in ("done", "running") else "")
        if steps and smoothing > 0:
            raw = decimate(list(zip(steps, losses)), max_points)
            fig.add_trace(go.Scatter(x=[p[0] for p in raw], y=[p[1] for p in raw], mode="lines",
                                     line=dict(color=colour, width=1),
                                     opacity=0.25, name=f"{name} raw", legendgroup=run.label,
                                     showlegend=False, hoverinfo="skip"), secondary_y=False)
            losses = smooth(losses, smoothing)
        if len(steps) > max_points:
            thinned = decimate(list(zip(steps, losses)), max_points)
            steps, losses = [p[0] for p in thinned], [p[1] for p in thinned]
        if steps:
            fig.add_trace(go.Scatter(x=steps, y=losses, mode="lines", line=dict(color=colour, width=2),
                                     name=name, legendgroup=run.label,
                                     hovertemplate="step %{x}: train loss %{y:.4f}<extra>" + name + "</extra>"),
                          secondary_y=False)
        validation = decimate(run.validation, max_points)
        if validation:
            fig.add_trace(go.Scatter(x=[p[0] for p in validation], y=[p[1] for p in validation],
                                     mode="lines+markers", line=dict(color=colour, width=2, dash="dash"),
                                     marker=dict(size=6), name=f"{name}: validation {metric}",
                                     legendgroup=run.label, showlegend=not steps,
                                     hovertemplate="step %{x}: validation " + metric + " %{y:.4f}<extra>" + name
                                                   + "</extra>"), secondary_y=True)
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="train loss (solid)", secondary_y=False)
    fig.update_yaxes(title_text=f"validation {metric} (dashed)", secondary_y=True, showgrid=False,
                     range=_metric_range([p[1] for run in runs for p in run.validation]))
    layout(fig, title)
    fig.update_layout(showlegend=True)  # a single run still names itself
    return fig


def _metric_range(values: Sequence[float], pad: float = 0.05) -> list[float] | None:
    """An axis range around the values, inside [0, 1] when they all are (accuracies): a single early point
    would otherwise stretch the axis far below 0 and above 1."""
    values = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not values:
        return None
    low, high = min(values) - pad, max(values) + pad
    if high - low < 0.2:
        middle = (low + high) / 2
        low, high = middle - 0.1, middle + 0.1
    if all(0 <= v <= 1 for v in values):
        low, high = max(0.0, low), min(1.0, high)
    return [low, high]


def _grid(curves: Sequence[Curve], points: int = 200) -> np.ndarray:
    """A common step grid for curves logged at different steps: up to the shortest curve's last step."""
    ends = [c[-1][0] for c in curves if c]
    starts = [c[0][0] for c in curves if c]
    if not ends:
        return np.zeros(0)
    end, start = min(ends), max(starts)
    union = np.unique(np.concatenate([np.asarray([p[0] for p in c], dtype=float) for c in curves if c]))
    inside = union[(union >= start) & (union <= end)]
    if inside.size > points:
        inside = np.linspace(start, end, points)
    return inside


def mean_std(curves: Sequence[Curve], points: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(steps, mean, std)`` of several runs' curves on a common grid (linear interpolation).

    The grid stops at the shortest run's last step, so the band never averages over runs that already
    ended. One curve gives std 0; the std is the sample std (ddof 1) otherwise.
    """
    curves = [c for c in curves if c]
    grid = _grid(curves, points)
    if grid.size == 0:
        return grid, grid, grid
    values = np.stack([np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves])
    std = values.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(grid.size)
    return grid, values.mean(axis=0), std


def mean_std_curves(groups: Mapping[str, Sequence[Curve]], *, roles: Mapping[str, str] | None = None,
                    validation: Mapping[str, Sequence[Curve]] | None = None, smoothing: float = 0.0,
                    metric: str = "metric", title: str = "") -> go.Figure:
    """Mean train-loss curve per condition with a ±1 std band over its runs (Kao & Lee fig. 4).

    ``groups`` maps a condition label to its runs' train-loss curves; ``validation`` (optional) maps the
    same labels to validation-metric curves, drawn dashed on the right axis with their own bands.
    """
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    labels = list(groups)
    colours = role_colors([(roles or {}).get(label, label) for label in labels])
    for label, colour in zip(labels, colours):
        for secondary, curves, dash, what in ((False, groups[label], None, "train loss"),
                                              (True, (validation or {}).get(label, []), "dash",
                                               f"validation {metric}")):
            curves = [c for c in curves if c]
            if not curves:
                continue
            steps, mean, std = mean_std(curves)
            if smoothing > 0 and not secondary:
                mean = np.asarray(smooth(mean, smoothing))
            n = len(curves)
            fig.add_trace(go.Scatter(x=np.concatenate([steps, steps[::-1]]),
                                     y=np.concatenate([mean + std, (mean - std)[::-1]]), mode="lines",
                                     fill="toself", fillcolor=rgba(colour, 0.18), line=dict(width=0),
                                     hoverinfo="skip", showlegend=False, legendgroup=label),
                          secondary_y=secondary)
            fig.add_trace(go.Scatter(x=steps, y=mean, mode="lines", line=dict(color=colour, width=2, dash=dash),
                                     name=f"{label}: {what} (mean of {n})", legendgroup=label),
                          secondary_y=secondary)
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="train loss", secondary_y=False)
    fig.update_yaxes(title_text=f"validation {metric}", secondary_y=True, showgrid=False)
    layout(fig, title)
    return fig


def stage_curves_figure(runs: Mapping[str, Curve], *, metric: str, title: str = "") -> go.Figure:
    """A protocol's stage before training, a line per run: ORCA's alignment distance against its steps (it
    comes before the training curve, on steps of its own)."""
    fig = go.Figure()
    for (label, curve), colour in zip(runs.items(), role_colors(list(runs))):
        fig.add_trace(go.Scatter(x=[p[0] for p in curve], y=[p[1] for p in curve], mode="lines+markers",
                                 line=dict(color=colour, width=2), marker=dict(size=4), name=label,
                                 hovertemplate="step %{x}: " + metric + " %{y:.4f}<extra>" + label + "</extra>"))
    fig.update_xaxes(title_text="alignment step")
    fig.update_yaxes(title_text=metric)
    layout(fig, title)
    fig.update_layout(showlegend=True, height=300)
    return fig
