"""The look every figure shares: the papers' colours, colour by role, the common layout and HTML export.

Colours follow the papers: pretrained runs blue, runs from scratch (random init) orange (Kao & Lee figs. 2-4,
FPT); other conditions take the next colours of the same palette.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import plotly.graph_objects as go

Figure = go.Figure  # what every function of labcore.figures returns, for annotations in the layers above

PRETRAINED = "#1f77b4"  # blue, as the papers draw pretrained models
SCRATCH = "#ff7f0e"  # orange, as the papers draw models trained from scratch
# The rest of the same (Plotly/D3 "category10") palette, for conditions that are neither; its red is kept
# for the baseline line (majority class, chance), as Kao & Lee draw reference lines in red.
PALETTE = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
BASELINE = "#d62728"

ROLE_COLORS = {"pretrained": PRETRAINED, "random": SCRATCH, "scratch": SCRATCH}


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


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def role_of(spec: Mapping[str, Any]) -> str:
    """The colour role of a run: its init (``pretrained``, ``random``, ``stats``)."""
    return str(spec.get("init", ""))


def distinct_roles(labels: Sequence[str], inits: Sequence[str]) -> list[str]:
    """Colour keys for conditions: the first condition of each init keeps its init (pretrained blue, random
    orange); later conditions with the same init take their own label, so they get colours of their own."""
    taken: set[str] = set()
    out = []
    for label, init in zip(labels, inits):
        out.append(init if init and init not in taken else label)
        taken.add(init)
    return out


def layout(fig: go.Figure, title: str) -> None:
    # The legend sits under the plot: above it, long legends would cover the title.
    fig.update_layout(title=dict(text=title, x=0, xanchor="left") if title else None, template="plotly_white",
                      margin=dict(l=50, r=50, t=50 if title else 20, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.18, x=0))


def report_layout(fig: go.Figure, *, height: int, top: int = 20, legend_y: float | None = None) -> None:
    """The recipes' report figures: white, compact margins, a fixed height (a report stacks several);
    ``legend_y`` puts the legend across under the plot, that far down."""
    legend = {} if legend_y is None else {"legend": dict(orientation="h", y=legend_y)}
    fig.update_layout(template="plotly_white", height=height, margin=dict(l=50, r=20, t=top, b=40), **legend)


def figure_html(fig: go.Figure, *, with_script: bool) -> str:
    """A figure as an HTML fragment; ``with_script`` inlines plotly.js (once a page, so it opens offline)."""
    return fig.to_html(full_html=False, include_plotlyjs=True if with_script else False)
