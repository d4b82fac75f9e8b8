"""Pure functions that turn run records into comparison tables (CLI sweep, Compare page). No torch."""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from labcore.record import RunRecord

# Fields that distinguish repetitions of one condition rather than conditions.
REPEAT_FIELDS = ("seed",)


def condition(record: RunRecord, repeat_fields: Sequence[str] = REPEAT_FIELDS) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in record.spec.items() if k not in repeat_fields))


def varying_fields(records: Sequence[RunRecord], repeat_fields: Sequence[str] = REPEAT_FIELDS) -> list[str]:
    """Spec fields whose value differs between the records' conditions (what a table must show)."""
    keys = sorted({k for r in records for k in r.spec} - set(repeat_fields))
    return [k for k in keys if len({str(r.spec.get(k)) for r in records}) > 1]


def sweep_table(records: Iterable[RunRecord], repeat_fields: Sequence[str] = REPEAT_FIELDS) -> pd.DataFrame:
    """One row per condition: the varying fields, n, mean ± std and the 95 % t-interval of the test metric.

    Runs that did not finish (`failed`, `cancelled`, ...) are counted in `not_done` and left out of
    the statistics, so a table never mixes half-trained models into a mean.
    """
    from labcore import metrics

    records = list(records)
    if not records:
        return pd.DataFrame()
    shown = varying_fields(records, repeat_fields) or ["model", "init", "discipline", "protocol"]
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(condition(record, repeat_fields), []).append(record)
    rows = []
    for members in groups.values():
        done = [r for r in members if r.status == "done" and r.test_value is not None]
        first = members[0]
        row = {field: first.spec.get(field) for field in shown}
        row["metric"] = first.metric
        row["n"] = len(done)
        row["not_done"] = len(members) - len(done)
        if done:
            agg = metrics.aggregate([r.test_value for r in done])
            row.update(mean=agg.mean, std=agg.std, ci_low=agg.ci_low, ci_high=agg.ci_high)
            steps = [r.steps_to_converge for r in done if r.steps_to_converge is not None]
            row["steps_to_converge"] = sum(steps) / len(steps) if steps else None
            majority = [r.baseline.get("majority") for r in done if r.baseline.get("majority") is not None]
            row["majority"] = majority[0] if majority else None
            row["wall_time_s"] = sum(r.wall_time_s for r in done) / len(done)
        rows.append(row)
    return pd.DataFrame(rows)
