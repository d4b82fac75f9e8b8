"""The Data, Mapping and Pretrain pages' figures and tables: class balance, lengths, token mappings, corpora."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labcore.figures.style import PALETTE, PRETRAINED, layout


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
    layout(fig, title)
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
    layout(fig, title)
    return fig


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
