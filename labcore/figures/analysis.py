"""The Analysis page's figures and tables, one per analysis kind (similarity, heads, Jacobian, gradients,
noise, parameter stds, LogME), each from the analysis result's plain dict."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from labcore.figures.style import PALETTE, PRETRAINED, SCRATCH, role_colors, role_of


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


# Reference rows of a layer curve (its full fine-tunes) by name, in the papers' colours.
REFERENCE_COLORS = {"full fine-tune, pretrained": PRETRAINED, "full fine-tune, random": SCRATCH}


def layer_curve_figure(table: pd.DataFrame, *, name: str, title: str, x_label: str) -> go.Figure:
    """A layer curve (mean with its 95 % interval over seeds) and its reference runs as horizontal lines.

    ``table`` is :func:`labcore.analysis.curves.curve_table`'s: rows with an empty ``reference`` are the
    curve's points, the others its references."""
    points = table[table["reference"] == ""]
    fig = go.Figure(go.Scatter(x=points["x"], y=points["mean"], mode="lines+markers", name=name,
                               error_y={"type": "data", "symmetric": False,
                                        "array": (points["ci_high"] - points["mean"]).fillna(0),
                                        "arrayminus": (points["mean"] - points["ci_low"]).fillna(0)}))
    for _, row in table[table["reference"] != ""].iterrows():
        fig.add_hline(y=row["mean"], line_dash="dash", line_color=REFERENCE_COLORS.get(row["reference"], "#7f7f7f"),
                      annotation_text=f"{row['reference']} ({row['mean']:.3f})")
    metric = table["metric"].iloc[0] if len(table) else "metric"
    fig.update_layout(title=title, xaxis_title=x_label, yaxis_title=f"test {metric}", height=440)
    return fig
