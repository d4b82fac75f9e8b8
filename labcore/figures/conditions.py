"""The Compare page's figures and tables: conditions (runs grouped by every spec field but the seed, see
:mod:`labcore.results.compare`) as curves with std bands, bars with error bars, and the papers' table shapes."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from labcore.results.compare import (REPEAT_FIELDS, by_condition, condition_fields, condition_label, condition_stats,
                             group_by_condition)
from labcore.figures.curves import mean_std_curves
from labcore.figures.style import BASELINE, distinct_roles, layout, role_colors, role_of
from labcore.results.record import RunRecord


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

    The statistics are :func:`labcore.results.compare.condition_stats`', as in the CLI's sweep table (NaN where
    none finished). ``fields`` overrides which spec fields name a condition (default: those that vary,
    discipline apart).
    """
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
        layout(fig, title)
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
    layout(fig, title)
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
