"""Every figure and table the pages show, as pure functions: records and curves in, Plotly or pandas out.

Nothing here imports Streamlit or torch, so each function is unit-tested on plain data. Colours follow
the papers: pretrained runs blue, runs from scratch (random init) orange (Kao & Lee figs. 2-4, FPT);
other conditions take the next colours of the same palette.

Inputs are plain shapes, never store objects:

* a curve is a list of ``(step, value)`` pairs;
* :class:`RunCurves` bundles one run's train-loss and validation curves with its legend label and role;
* record-based tables take :class:`labcore.record.RunRecord` lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labcore.record import RunRecord

PRETRAINED = "#1f77b4"  # blue, as the papers draw pretrained models
SCRATCH = "#ff7f0e"  # orange, as the papers draw models trained from scratch
# The rest of the same (Plotly/D3 "category10") palette, for conditions that are neither; its red is kept
# for the baseline line (majority class, chance), as Kao & Lee draw reference lines in red.
PALETTE = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
BASELINE = "#d62728"

ROLE_COLORS = {"pretrained": PRETRAINED, "random": SCRATCH, "scratch": SCRATCH}

Curve = Sequence[tuple[float, float]]


# --------------------------------------------------------------------------------------------------
# colours and labels


def role_colors(roles: Sequence[str]) -> list[str]:
    """A colour per role: ``pretrained`` blue, ``random``/``scratch`` orange, others in palette order.

    Two different roles never share a colour (a second "pretrained"-like role takes the palette), and
    the same role always gets the same colour within one call.
    """
    out: dict[str, str] = {}
    used: set[str] = set()
    spare = iter(PALETTE * 4)
    for role in roles:
        if role in out:
            continue
        colour = ROLE_COLORS.get(role)
        if colour is None or colour in used:
            colour = next(c for c in spare if c not in used)
        out[role] = colour
        used.add(colour)
    return [out[r] for r in roles]


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def condition_label(spec: Mapping[str, Any], fields: Sequence[str]) -> str:
    """A short name for a condition from the spec fields that distinguish it (``pretrained``,
    ``random · map=shift1000``); ``fields`` usually comes from :func:`labcore.compare.varying_fields`."""
    parts = []
    for name in fields:
        value = spec.get(name)
        if name == "init":
            parts.append(str(value))
        elif name == "mapping":
            extra = spec.get("mapping_k") if value == "shift" else spec.get("mapping_seed") if value == "random" else ""
            parts.append(f"map={value}{extra if extra not in (None, '') else ''}")
        elif name in ("mapping_k", "mapping_seed") and "mapping" in fields:
            continue  # already part of map=…
        elif name in ("model", "protocol", "discipline"):
            parts.append(str(value))
        elif name == "discipline_params" or name == "protocol_params":
            items = value.items() if isinstance(value, Mapping) else (value or ())
            parts.append(",".join(f"{k}={v}" for k, v in items) or name)
        else:
            parts.append(f"{name}={value}")
    return " · ".join(parts) if parts else str(spec.get("init", "run"))


def role_of(spec: Mapping[str, Any]) -> str:
    """The colour role of a run: its init (``pretrained``, ``random``, ``stats``)."""
    return str(spec.get("init", ""))


# --------------------------------------------------------------------------------------------------
# curves


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
    _layout(fig, title)
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
                                     fill="toself", fillcolor=_rgba(colour, 0.18), line=dict(width=0),
                                     hoverinfo="skip", showlegend=False, legendgroup=label),
                          secondary_y=secondary)
            fig.add_trace(go.Scatter(x=steps, y=mean, mode="lines", line=dict(color=colour, width=2, dash=dash),
                                     name=f"{label}: {what} (mean of {n})", legendgroup=label),
                          secondary_y=secondary)
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="train loss", secondary_y=False)
    fig.update_yaxes(title_text=f"validation {metric}", secondary_y=True, showgrid=False)
    _layout(fig, title)
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
    _layout(fig, title)
    fig.update_layout(showlegend=True, height=300)
    return fig


# --------------------------------------------------------------------------------------------------
# comparison tables and bars


def condition_fields(records: Sequence[RunRecord], *, with_discipline: bool = False) -> list[str]:
    """The spec fields that name conditions among ``records``: those that differ between runs of one
    discipline (the seed never). Fields that only change with the discipline (its parameters, a demo's
    step budget) are part of that discipline's recipe, not of a condition; discipline itself only if asked.
    """
    from labcore.compare import varying_fields

    by_discipline: dict[str, list[RunRecord]] = {}
    for record in records:
        by_discipline.setdefault(str(record.spec.get("discipline")), []).append(record)
    shown: list[str] = []
    for members in by_discipline.values():
        shown += [f for f in varying_fields(members) if f not in shown]
    if with_discipline and len(by_discipline) > 1:
        shown = ["discipline"] + shown
    return shown or ["init"]


def distinct_roles(labels: Sequence[str], inits: Sequence[str]) -> list[str]:
    """Colour keys for conditions: the first condition of each init keeps its init (pretrained blue, random
    orange); later conditions with the same init take their own label, so they get colours of their own."""
    taken: set[str] = set()
    out = []
    for label, init in zip(labels, inits):
        out.append(init if init and init not in taken else label)
        taken.add(init)
    return out


def group_by_condition(records: Iterable[RunRecord], *, with_discipline: bool = False,
                       fields: Sequence[str] | None = None) -> dict[str, list[RunRecord]]:
    """Records grouped by condition (every spec field but the seed), keyed by a short label, in order."""
    from labcore.compare import by_condition

    records = list(records)
    shown = list(fields) if fields is not None else condition_fields(records, with_discipline=with_discipline)
    out: dict[str, list[RunRecord]] = {}
    for members in by_condition(records):
        label = condition_label(members[0].spec, shown)
        while label in out:  # two conditions that differ only in a field not shown: keep both
            label += "'"
        out[label] = members
    return out


def condition_curves(records: Sequence[RunRecord], *, smoothing: float = 0.6) -> go.Figure:
    """The Compare page's curves: each condition's mean train loss (solid) and validation metric (dashed)
    with std bands over its seeds, coloured by role (pretrained blue, random orange)."""
    records = list(records)
    grouped = group_by_condition(records, with_discipline=len({r.spec.get("discipline") for r in records}) > 1)
    train = {label: [[tuple(p) for p in r.train_loss] for r in members] for label, members in grouped.items()}
    validation = {label: [[tuple(p) for p in r.val_curve] for r in members] for label, members in grouped.items()}
    roles = dict(zip(grouped, distinct_roles(list(grouped), [role_of(m[0].spec) for m in grouped.values()])))
    metric = ", ".join(dict.fromkeys(r.metric for r in records))
    return mean_std_curves(train, roles=roles, validation=validation, smoothing=smoothing,
                           metric=metric.replace("_", " "),
                           title="Train loss (solid) and validation metric (dashed): mean ± std")


SUMMARY_COLUMNS = ["condition", "role", "discipline", "metric", "n", "not_done", "mean", "std", "ci_low",
                   "ci_high", "majority", "steps_to_converge"]


def summary_table(records: Iterable[RunRecord], fields: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per condition and discipline: n, mean ± std and the 95 % t-interval of the test metric.

    The statistics are :func:`labcore.compare.condition_stats`', as in the CLI's sweep table (NaN where
    none finished). ``fields`` overrides which spec fields name a condition (default: those that vary,
    discipline apart).
    """
    from labcore.compare import by_condition, condition_stats

    records = list(records)
    if not records:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    shown = list(fields) if fields is not None else condition_fields(records)
    rows = []
    for members in by_condition(records):
        first = members[0]
        row: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS, math.nan)
        row.update(condition=condition_label(first.spec, shown), role=role_of(first.spec),
                   discipline=first.spec.get("discipline"), metric=first.metric)
        row.update({k: math.nan if v is None else v for k, v in condition_stats(members).items()
                    if k in SUMMARY_COLUMNS})
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def paper_table(summary: pd.DataFrame, scale: float = 100.0, digits: int = 1) -> pd.DataFrame:
    """Kao & Lee table 5's shape: conditions as rows, disciplines as columns, cells "mean (std)".

    Values are scaled (accuracy in percent by default, as the paper prints it); a condition with no
    finished run shows "–".
    """
    if summary.empty:
        return pd.DataFrame()

    def cell(row: pd.Series) -> str:
        if not row["n"]:
            return "–"
        return f"{row['mean'] * scale:.{digits}f} ({row['std'] * scale:.{digits}f})"

    frame = summary.assign(cell=summary.apply(cell, axis=1))
    frame["column"] = frame["discipline"].astype(str) + " (" + frame["metric"].astype(str) + ")"
    table = frame.pivot_table(index="condition", columns="column", values="cell", aggfunc="first", sort=False)
    table.columns.name = None
    return table.fillna("–")


def bars_with_error(summary: pd.DataFrame, *, title: str = "") -> go.Figure:
    """Mean test metric per condition with ±1 std error bars (Kao & Lee fig. 2), majority class dashed.

    One bar group per discipline; bars coloured by role (pretrained blue, scratch orange).
    """
    fig = go.Figure()
    if summary.empty:
        _layout(fig, title)
        return fig
    done = summary[summary["n"] > 0]
    conditions = list(dict.fromkeys(done["condition"]))
    inits = [done[done["condition"] == c]["role"].iloc[0] for c in conditions]
    colours = dict(zip(conditions, role_colors(distinct_roles(conditions, inits))))
    for cond in conditions:
        part = done[done["condition"] == cond]
        fig.add_trace(go.Bar(
            x=part["discipline"], y=part["mean"], name=cond, marker_color=colours[cond],
            error_y=dict(type="data", array=part["std"].fillna(0), color="black", thickness=1.5, width=6),
            customdata=np.stack([part["n"], part["std"].fillna(0)], axis=-1),
            hovertemplate="%{x}<br>mean %{y:.3f} ± %{customdata[1]:.3f} (n = %{customdata[0]})<extra>"
                          + cond + "</extra>"))
    metrics_shown = ", ".join(dict.fromkeys(done["metric"]))
    # The floor a model must beat: the majority class, or chance (0.5 a bit) for bit accuracy.
    floor = done.assign(floor=done["majority"].where(done["majority"].notna(),
                                                     np.where(done["metric"] == "bit_accuracy", 0.5, np.nan)))
    floor = floor.dropna(subset=["floor"]).drop_duplicates("discipline")
    disciplines = list(dict.fromkeys(done["discipline"]))
    for _, row in floor.iterrows():
        i = disciplines.index(row["discipline"])
        fig.add_shape(type="line", x0=i - 0.45, x1=i + 0.45, y0=row["floor"], y1=row["floor"],
                      xref="x", yref="y", line=dict(color=BASELINE, dash="dash", width=2))
    if not floor.empty:
        names = {"bit_accuracy": "chance (0.5 a bit)"}
        label = " / ".join(dict.fromkeys(names.get(m, "majority class") for m in floor["metric"]))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=label,
                                 line=dict(color=BASELINE, dash="dash", width=2)))
    fig.update_layout(barmode="group", bargap=0.35, bargroupgap=0.08)
    fig.update_yaxes(title_text=f"test {metrics_shown} (mean ± std over seeds)")
    fig.update_xaxes(title_text="discipline")
    _layout(fig, title)
    return fig


def steps_to_converge_table(records: Iterable[RunRecord], *, reference: str = "pretrained",
                            baseline: str = "random") -> pd.DataFrame:
    """FPT table 6's shape: steps until convergence for pretrained vs random init, and the speed-up.

    Rows ``pretrained``, ``random``, ``speed-up`` (random steps / pretrained steps) and each init's
    mean test metric (so an early plateau at a poor value is not read as fast learning); one column per
    condition that has both inits (everything but init and seed equal). Steps are the mean over
    finished seeds of the engine's ``steps_to_converge``: the first evaluation within 0.01 of the run's
    own best validation value.
    """
    from labcore.compare import REPEAT_FIELDS, by_condition

    records = [r for r in records if r.status == "done"]
    shown = [f for f in condition_fields(records) if f != "init"]
    columns: dict[str, dict[str, float]] = {}
    for members in by_condition(records, ("init", *REPEAT_FIELDS)):
        by_init: dict[str, list[RunRecord]] = {}
        for r in members:
            by_init.setdefault(str(r.spec.get("init")), []).append(r)
        if reference not in by_init or baseline not in by_init:
            continue
        first = by_init[reference][0]
        name = condition_label(first.spec, ["discipline"] + shown)
        column: dict[str, float] = {}
        for init in (reference, baseline):
            steps = [r.steps_to_converge for r in by_init[init] if r.steps_to_converge is not None]
            column[f"{init} steps"] = float(np.mean(steps)) if steps else math.nan
            values = [r.test_value for r in by_init[init] if r.test_value is not None]
            column[f"{init} test {first.metric}"] = float(np.mean(values)) if values else math.nan
        ref, base = column[f"{reference} steps"], column[f"{baseline} steps"]
        column["speed-up"] = base / ref if ref and not math.isnan(ref) and not math.isnan(base) else math.nan
        columns[name] = column
    if not columns:
        return pd.DataFrame()
    order = [f"{reference} steps", f"{baseline} steps", "speed-up"]
    frame = pd.DataFrame(columns)
    rest = [i for i in frame.index if i not in order]
    return frame.loc[order + rest]


# --------------------------------------------------------------------------------------------------
# data


SPLIT_COLORS = ("#4c78a8", "#72b7b2", "#b279a2")  # train, validation, test: neutral, not the run colours


def class_balance(counts: Mapping[str, Mapping[str, int]] | Mapping[str, int], *, title: str = "") -> go.Figure:
    """Examples per class, one bar group per split (or one bar per class for a flat ``{class: n}``)."""
    fig = go.Figure()
    if counts and all(isinstance(v, Mapping) for v in counts.values()):
        for i, (split, by_class) in enumerate(counts.items()):
            fig.add_trace(go.Bar(x=list(by_class), y=list(by_class.values()), name=split,
                                 marker_color=SPLIT_COLORS[i % len(SPLIT_COLORS)]))
        fig.update_layout(barmode="group")
    else:
        fig.add_trace(go.Bar(x=list(counts), y=list(counts.values()), marker_color=SPLIT_COLORS[0], name="examples"))
    fig.update_xaxes(title_text="class", type="category")
    fig.update_yaxes(title_text="examples")
    _layout(fig, title)
    return fig


def length_histogram(lengths: Sequence[int], *, unit: str = "tokens", title: str = "",
                     max_bins: int = 40) -> go.Figure:
    """Histogram of sequence lengths in whole-number bins; one length shows as one narrow bar."""
    values = np.asarray(list(lengths), dtype=float)
    fig = go.Figure()
    if values.size:
        low, high = float(values.min()), float(values.max())
        size = max(1.0, math.ceil((high - low + 1) / max_bins))
        fig.add_trace(go.Histogram(x=values, xbins=dict(start=low - 0.5, end=high + 0.5, size=size),
                                   marker_color=SPLIT_COLORS[0], name="examples"))
        if high - low < 10:  # a fixed length (DNA: 60) would otherwise fill the whole axis
            fig.update_xaxes(range=[low - 10, high + 10])
        fig.update_layout(bargap=0.05)
    fig.update_xaxes(title_text=f"length ({unit})")
    fig.update_yaxes(title_text="examples")
    _layout(fig, title)
    return fig


# --------------------------------------------------------------------------------------------------
# attention


def _tick_labels(tokens: Sequence[str], limit: int) -> dict[str, Any]:
    n = len(tokens)
    if n == 0 or n > limit:
        return {}
    return dict(tickmode="array", tickvals=list(range(n)), ticktext=[str(t) for t in tokens])


def attention_compare(maps: Mapping[str, np.ndarray], tokens: Sequence[str] = (), *, title: str = "",
                      max_labels: int = 40, query_tokens: Sequence[str] | None = None) -> go.Figure:
    """Several [L, L] maps of one example side by side (e.g. pretrained, random, fine-tuned weights).

    All panels share one colour scale from 0 to the largest weight shown, so panels compare directly.
    Rows are queries (the attending token), columns keys; row ``i`` sums to 1.
    """
    names = list(maps)
    fig = make_subplots(rows=1, cols=max(1, len(names)), subplot_titles=names, horizontal_spacing=0.06)
    top = max((float(np.max(m)) for m in maps.values() if np.size(m)), default=1.0) or 1.0
    queries = list(query_tokens or tokens)
    for i, name in enumerate(names, 1):
        matrix = np.asarray(maps[name], dtype=float)
        hover: dict[str, Any] = {"hovertemplate": "query %{y} → key %{x}: %{z:.3f}<extra>" + name + "</extra>"}
        if tokens and len(tokens) == matrix.shape[1] and len(queries) == matrix.shape[0]:
            # Hover names the tokens even where the axes are too crowded to label them.
            text = [[f"{q} ({r}) → {k} ({c})" for c, k in enumerate(tokens)] for r, q in enumerate(queries)]
            hover = {"text": text,
                     "hovertemplate": "%{text}: %{z:.3f}<extra>" + name + "</extra>"}
        fig.add_trace(go.Heatmap(z=matrix, zmin=0, zmax=top, colorscale="Blues", showscale=i == len(names),
                                 **hover), row=1, col=i)
        fig.update_xaxes(**_tick_labels(tokens, max_labels), tickangle=-90, tickfont=dict(size=9), row=1, col=i)
        fig.update_yaxes(**_tick_labels(query_tokens or tokens, max_labels), autorange="reversed",
                         tickfont=dict(size=9), scaleanchor="x" if i == 1 else f"x{i}", constrain="domain",
                         row=1, col=i)
        fig.update_xaxes(constrain="domain", row=1, col=i)
    _layout(fig, title)
    # Square panels: about as tall as a third of a wide page, plus room for token labels under them.
    fig.update_layout(height=400 + (50 if 0 < len(tokens) <= max_labels else 0))
    return fig


def attention_grid(maps: np.ndarray, *, layers: Sequence[int] | None = None, heads: Sequence[int] | None = None,
                   title: str = "") -> go.Figure:
    """Every (layer, head) map of one example as a grid: one row per layer, one column per head.

    ``maps`` is [layers, heads, L, L]. Each panel has its own colour range (heads differ a lot in
    sharpness); hover shows the weight. Axis labels are left out: at grid size they would not be legible.
    """
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 4:
        raise ValueError(f"attention maps must be [layers, heads, L, L], got shape {maps.shape}")
    layers = list(range(maps.shape[0])) if layers is None else list(layers)
    heads = list(range(maps.shape[1])) if heads is None else list(heads)
    titles = [f"L{layer} H{head}" for layer in layers for head in heads]
    fig = make_subplots(rows=max(1, len(layers)), cols=max(1, len(heads)), subplot_titles=titles,
                        horizontal_spacing=0.01, vertical_spacing=0.04 if len(layers) > 1 else 0.1)
    for r, layer in enumerate(layers, 1):
        for c, head in enumerate(heads, 1):
            fig.add_trace(go.Heatmap(z=maps[layer, head], colorscale="Blues", showscale=False, zmin=0,
                                     hovertemplate=f"layer {layer} head {head}<br>query %{{y}} → key %{{x}}: "
                                                   f"%{{z:.3f}}<extra></extra>"), row=r, col=c)
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_annotations(font_size=9)
    _layout(fig, title)
    fig.update_layout(height=max(300, 110 * len(layers) + 60), showlegend=False)
    return fig


def layer_distance_lines(distances: Mapping[str, Sequence[float]], *, title: str = "") -> go.Figure:
    """Matched-head L1 distance per layer for pairs of models (Kao & Lee fig. 5): one line per pair."""
    fig = go.Figure()
    names = list(distances)
    for name, colour in zip(names, PALETTE[1:] + PALETTE[:1]):
        values = list(distances[name])
        fig.add_trace(go.Scatter(x=list(range(len(values))), y=values, mode="lines+markers", name=name,
                                 line=dict(color=colour, width=2)))
    fig.update_xaxes(title_text="layer", dtick=1)
    fig.update_yaxes(title_text="mean L1 distance of matched heads", rangemode="tozero")
    _layout(fig, title)
    return fig


# --------------------------------------------------------------------------------------------------
# mappings


def mapping_table(rows: Iterable[tuple[str, int, str]]) -> pd.DataFrame:
    """A token mapping as a table: symbol -> vocabulary id -> that id's token string.

    ``rows`` is what :meth:`labcore.mapping.TokenMapping.rows` returns.
    """
    frame = pd.DataFrame(list(rows), columns=["symbol", "id", "token"])
    frame["id"] = frame["id"].astype("int64")
    return frame


def mapping_diff(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Rows whose id changed between two mapping tables of the same symbols (for a rerun's preview)."""
    merged = before.merge(after, on="symbol", suffixes=(" before", " after"))
    return merged[merged["id before"] != merged["id after"]].reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# shared layout


def _layout(fig: go.Figure, title: str) -> None:
    # The legend sits under the plot: above it, long legends would cover the title.
    fig.update_layout(title=dict(text=title, x=0, xanchor="left") if title else None, template="plotly_white",
                      margin=dict(l=50, r=50, t=50 if title else 20, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.18, x=0))


__all__ = [
    "BASELINE", "PALETTE", "PRETRAINED", "SCRATCH", "RunCurves", "attention_compare", "attention_grid",
    "bars_with_error", "class_balance", "condition_fields", "condition_label", "distinct_roles",
    "group_by_condition", "layer_distance_lines", "length_histogram",
    "decimate", "loss_curves", "mapping_diff", "mapping_table", "mean_std", "mean_std_curves", "paper_table",
    "role_colors",
    "role_of", "smooth", "stage_curves_figure", "steps_to_converge_table", "summary_table",
]


# ------------------------------------------------------------------------------------------------ analyses
def similarity_heatmap(result: Mapping[str, Any], *, title: str = "") -> go.Figure:
    """PWCCA / CKA between every layer of two models (an analysis result): rows the first model's layers
    (0 = embedding output), columns the second's."""
    matrix = np.asarray(result["matrix"], dtype=float)
    a, b = result["models"]
    fig = go.Figure(go.Heatmap(z=matrix, x=list(range(matrix.shape[1])), y=list(range(matrix.shape[0])),
                               zmin=0, zmax=1, colorscale="Viridis", colorbar={"title": result["measure"]}))
    fig.update_layout(title=title or f"{result['measure'].upper()} between layers (last: {result['last']:.3f})",
                      xaxis={"title": f"{b}: layer", "dtick": 1}, yaxis={"title": f"{a}: layer", "dtick": 1},
                      height=420)
    return fig


def distributions(per_model: Mapping[str, Mapping[str, Any]], *, value: str, title: str = "") -> go.Figure:
    """Violin plots of a per-model distribution (Jacobian singular values, gradient cosines), one per model,
    pretrained blue and random orange as in the papers."""
    names = list(per_model)
    colors = role_colors([role_of({"init": "random" if "random" in n else "pretrained"}) for n in names])
    fig = go.Figure()
    for name, color in zip(names, colors):
        fig.add_trace(go.Violin(y=per_model[name]["values"], name=name, line_color=color, box_visible=True,
                                meanline_visible=True, points=False))
    fig.update_layout(title=title, yaxis_title=value, showlegend=False, height=420)
    return fig


def noise_lines(result: Mapping[str, Any], *, title: str = "") -> go.Figure:
    """Output change vs parameter-noise sigma, both on log axes (Kao & Lee figs. 12-13), mean ± std."""
    fig = go.Figure()
    names = list(result["variation"])
    colors = role_colors([role_of({"init": "random" if "random" in n else "pretrained"}) for n in names])
    for name, color in zip(names, colors):
        per_sigma = result["variation"][name]
        sigmas = sorted(float(s) for s in per_sigma)
        means = [per_sigma[str(s)]["mean"] for s in sigmas]
        stds = [per_sigma[str(s)]["std"] for s in sigmas]
        fig.add_trace(go.Scatter(x=sigmas, y=means, error_y={"type": "data", "array": stds}, name=name,
                                 mode="lines+markers", line={"color": color}))
    fig.update_layout(title=title, xaxis={"type": "log", "title": "noise std (sigma)"},
                      yaxis={"type": "log", "title": "L2 change of the output"}, height=420)
    return fig


def layer_lines(per_model: Mapping[str, Sequence[float]], *, value: str, title: str = "") -> go.Figure:
    """One line per model (or per weight kind) over layers: parameter stds, matched-head distances."""
    fig = go.Figure()
    names = list(per_model)
    for i, name in enumerate(names):
        fig.add_trace(go.Scatter(x=list(range(len(per_model[name]))), y=list(per_model[name]), name=name,
                                 mode="lines+markers", line={"color": PALETTE[i % len(PALETTE)]}))
    fig.update_layout(title=title, xaxis_title="layer", yaxis_title=value, height=420)
    return fig


def analysis_table(kind: str, result: Mapping[str, Any]) -> pd.DataFrame:
    """The numbers of an analysis result as a table (what the page shows and downloads as CSV)."""
    if kind == "similarity":
        matrix = np.asarray(result["matrix"], dtype=float)
        return pd.DataFrame(matrix, index=[f"{result['models'][0]} L{i}" for i in range(matrix.shape[0])],
                            columns=[f"{result['models'][1]} L{j}" for j in range(matrix.shape[1])])
    if kind == "heads":
        return pd.DataFrame({"layer": range(len(result["mean"])), "mean L1 distance": result["mean"],
                             "std": result["std"]})
    if kind in ("jacobian", "gradients"):
        key = "singular_values" if kind == "jacobian" else "cosines"
        return pd.DataFrame([{"model": name, **{k: v for k, v in d.items() if k != "values"}, "n": len(d["values"])}
                             for name, d in result[key].items()])
    if kind == "noise":
        return pd.DataFrame([{"model": name, "sigma": float(s), **v} for name, per in result["variation"].items()
                             for s, v in per.items()])
    if kind == "params":
        return pd.DataFrame([{"model": name, "weights": w, "layer": i, "std": v}
                             for name, kinds in result["stds"].items() for w, values in kinds.items()
                             for i, v in enumerate(values)])
    if kind == "logme":
        return pd.DataFrame([{"model": name, "LogME": v} for name, v in result["logme"].items()])
    raise ValueError(f"no table for analysis kind {kind!r}")


def analysis_figure(kind: str, result: Mapping[str, Any]) -> go.Figure:
    """The figure each analysis is read by."""
    if kind == "similarity":
        return similarity_heatmap(result)
    if kind == "heads":
        return layer_lines({" vs ".join(result["models"]): result["mean"]}, value="mean matched-head L1 distance",
                           title="Attention heads matched by least L1 distance (Kao & Lee §4.4.1)")
    if kind == "jacobian":
        return distributions(result["singular_values"], value="singular value",
                             title="Jacobian singular values of the pooled last layer (Kao & Lee F.1)")
    if kind == "gradients":
        return distributions(result["cosines"], value="cosine similarity",
                             title="Cosine similarity of per-example gradients (Kao & Lee F.2)")
    if kind == "noise":
        return noise_lines(result, title="Output change under parameter noise (Kao & Lee F.3)")
    if kind == "params":
        lines = {f"{name}: {w}": values for name, kinds in result["stds"].items() for w, values in kinds.items()}
        return layer_lines(lines, value="weight std", title="Weight std per layer (FPT §3.8, fig. 6)")
    if kind == "logme":
        names = list(result["logme"])
        return go.Figure(go.Bar(x=names, y=[result["logme"][n] for n in names]),
                         layout={"title": "LogME of frozen features (higher: more transferable)", "height": 380})
    raise ValueError(f"no figure for analysis kind {kind!r}")


# --------------------------------------------------------------------------------------------------
# L1 corpora (the Pretrain page)


def corpus_figure(stats: Mapping[str, Any], vocabulary: Sequence[str], *, title: str = "") -> go.Figure:
    """A corpus sample's most frequent tokens (share of all tokens) and, for the bracket grammars, how
    deep its positions are nested. ``stats`` is :func:`labcore.pretrain.corpora.corpus_stats`'s."""
    depths = stats.get("depths") or []
    cols = 2 if depths else 1
    fig = make_subplots(rows=1, cols=cols, column_widths=[0.65, 0.35][:cols],
                        subplot_titles=["most frequent tokens", "nesting depth"][:cols])
    top = stats.get("top") or []
    fig.add_trace(go.Bar(x=[f"{vocabulary[i]} ({i})" if i < len(vocabulary) else str(i) for i, _ in top],
                         y=[share for _, share in top], marker_color=PRETRAINED, name="share of tokens"),
                  row=1, col=1)
    fig.update_yaxes(title_text="share of tokens", row=1, col=1)
    if depths:
        total = sum(c for _, c in depths) or 1
        fig.add_trace(go.Bar(x=[d for d, _ in depths], y=[c / total for _, c in depths], marker_color=PALETTE[0],
                             name="positions"), row=1, col=2)
        fig.update_xaxes(title_text="open pairs", row=1, col=2)
    fig.update_layout(title=title or None, showlegend=False, height=340, margin=dict(t=60, b=40, l=50, r=20))
    return fig
