"""How the pages show what they read: the figures and tables, comparisons across runs, the statistics that say
how far a test set carries, and durations, ages and speeds in words."""

from __future__ import annotations

from labcore import figures
from labcore.results import metrics
from labcore.results.compare import alignment_table, varying
from labcore.fmt import fmt_age, fmt_duration, fmt_speed

__all__ = ["alignment_table", "figures", "fmt_age", "fmt_duration", "fmt_speed", "metrics", "varying"]
