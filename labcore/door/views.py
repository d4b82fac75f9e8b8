"""How the pages show what they read: the figures and tables, comparisons across runs, the statistics that say
how far a test set carries, and durations, ages and speeds in words. Each is handed out by name, so a page
draws with what is listed here and nothing else of the figures' or the metrics' packages."""

from __future__ import annotations

from labcore.figures import (RunCurves, analysis_figure, analysis_table, attention_compare, attention_grid,
                             bars_with_error, class_balance, condition_curves, condition_fields, condition_label,
                             corpus_figure, layer_distance_lines, length_histogram, loss_curves, mapping_diff,
                             mapping_table, paper_table, role_of, stage_curves_figure, steps_to_converge_table,
                             summary_table)
from labcore.fmt import fmt_age, fmt_duration, fmt_speed
from labcore.results.compare import alignment_table, varying
from labcore.results.metrics import SMALL_TEST, small_test_warning, wilson_interval

__all__ = ["SMALL_TEST", "RunCurves", "alignment_table", "analysis_figure", "analysis_table", "attention_compare",
           "attention_grid", "bars_with_error", "class_balance", "condition_curves", "condition_fields",
           "condition_label", "corpus_figure", "fmt_age", "fmt_duration", "fmt_speed", "layer_distance_lines",
           "length_histogram", "loss_curves", "mapping_diff", "mapping_table", "paper_table", "role_of",
           "small_test_warning", "stage_curves_figure", "steps_to_converge_table", "summary_table", "varying",
           "wilson_interval"]
