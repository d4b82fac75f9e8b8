"""Attention maps: one head of several models side by side, every head of one model, matched-head distances."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labcore.figures.style import PALETTE, layout


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
    layout(fig, title)
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
    layout(fig, title)
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
    layout(fig, title)
    return fig
