"""Every figure and table the pages and reports show, as pure functions: plain data in, Plotly or pandas out.

Nothing here imports Streamlit or torch, and nothing from the layers above (recipes, atlas, analysis, api):
they read their records and results into plain shapes and pass those in, so each function is unit-tested
on plain data. The one home of Plotly in labcore.

* :mod:`~labcore.figures.style`: the papers' colours, colour by role, the shared layout;
* :mod:`~labcore.figures.curves`: training curves (a curve is a list of ``(step, value)`` pairs);
* :mod:`~labcore.figures.conditions`: the Compare page's conditions (grouped by :mod:`labcore.results.compare`);
* :mod:`~labcore.figures.data`, :mod:`~labcore.figures.attention`, :mod:`~labcore.figures.analysis`: the Data,
  Mapping, Pretrain, Attention and Analysis pages;
* :mod:`~labcore.figures.recipes`, :mod:`~labcore.figures.atlas`: the recipes' reports and the atlas grid.

The names below are the ones pages, tests and other modules import from ``labcore.figures`` itself.
"""

from __future__ import annotations

# Grouping and naming conditions is labcore.results.compare's; kept importable from here, where pages found it.
from labcore.results.compare import condition_fields, condition_label, group_by_condition
from labcore.figures.analysis import (analysis_figure, analysis_table, distributions, layer_lines, noise_lines,
                                      similarity_heatmap)
from labcore.figures.attention import attention_compare, attention_grid, layer_distance_lines
from labcore.figures.conditions import (SUMMARY_COLUMNS, bars_with_error, condition_curves, paper_table,
                                        steps_to_converge_table, summary_table)
from labcore.figures.curves import (MAX_POINTS, Curve, RunCurves, decimate, loss_curves, mean_std, mean_std_curves,
                                    smooth, stage_curves_figure)
from labcore.figures.data import (SPLIT_COLORS, class_balance, corpus_figure, length_histogram, mapping_diff,
                                  mapping_table)
from labcore.figures.style import (BASELINE, PALETTE, PRETRAINED, ROLE_COLORS, SCRATCH, Figure, distinct_roles,
                                   figure_html, role_colors, role_of)

__all__ = [
    "BASELINE", "MAX_POINTS", "PALETTE", "PRETRAINED", "ROLE_COLORS", "SCRATCH", "SPLIT_COLORS", "SUMMARY_COLUMNS",
    "Curve", "Figure", "RunCurves", "analysis_figure", "analysis_table", "attention_compare", "attention_grid",
    "bars_with_error", "class_balance", "condition_curves", "condition_fields", "condition_label", "corpus_figure",
    "decimate", "distinct_roles", "distributions", "figure_html", "group_by_condition", "layer_distance_lines",
    "layer_lines", "length_histogram", "loss_curves", "mapping_diff", "mapping_table", "mean_std",
    "mean_std_curves", "noise_lines", "paper_table", "role_colors", "role_of", "similarity_heatmap", "smooth",
    "stage_curves_figure", "steps_to_converge_table", "summary_table",
]
