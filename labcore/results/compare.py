"""Pure functions that group run records by condition, name the conditions and turn them into comparison
tables (CLI sweep, Compare page, the figures). No torch."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from labcore.results.record import RunRecord

# Fields that distinguish repetitions of one condition rather than conditions: the seed, and the fold of a
# k-fold cross-validation (a discipline parameter of uploads, see labcore.data.upload), so a condition's
# mean ± std and t-interval are over its seeds and folds. A dotted name is a key inside a field's mapping.
REPEAT_FIELDS = ("seed", "discipline_params.fold")


def _without(spec: Mapping[str, Any], repeat_fields: Sequence[str]) -> dict[str, Any]:
    """``spec`` less its ``repeat_fields``: a plain name drops a field, ``field.key`` a key of a mapping field."""
    out = {k: v for k, v in spec.items() if k not in repeat_fields}
    for name in repeat_fields:
        field, _, key = name.partition(".")
        if key and isinstance(out.get(field), Mapping):
            out[field] = {k: v for k, v in out[field].items() if k != key}
    return out


def _condition_of(spec: Mapping[str, Any], repeat_fields: Sequence[str]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in _without(spec, repeat_fields).items()))


def condition(record: RunRecord, repeat_fields: Sequence[str] = REPEAT_FIELDS) -> tuple:
    """The record's spec less its repeat fields, as sorted (field, text) pairs: what names its condition.

    Kept on the record itself (a frozen dataclass still has a ``__dict__``; fields, equality and ``to_dict``
    never see it): a page groups the same thousands of records several times and works each one out once."""
    memo = record.__dict__.setdefault("_conditions", {})
    found = memo.get(tuple(repeat_fields))
    if found is None:
        found = memo[tuple(repeat_fields)] = _condition_of(record.spec, repeat_fields)
    return found


def _varying_of(conditions: Sequence[tuple]) -> list[str]:
    """The fields, sorted, whose text differs between the conditions (a field one lacks reads "None")."""
    distinct = set(conditions)  # most runs repeat a condition: compare each distinct one once
    if len(distinct) < 2:
        return []
    pairs = [dict(c) for c in distinct]
    keys = sorted({k for c in pairs for k in c})
    return [k for k in keys if len({c.get(k, "None") for c in pairs}) > 1]


def varying(specs: Sequence[Mapping[str, Any]], ignore: Sequence[str] = REPEAT_FIELDS) -> list[str]:
    """The fields, sorted, whose value differs between ``specs`` (plain spec dicts), ``ignore`` apart."""
    return _varying_of([_condition_of(spec, ignore) for spec in specs])


def varying_fields(records: Sequence[RunRecord], repeat_fields: Sequence[str] = REPEAT_FIELDS) -> list[str]:
    """Spec fields whose value differs between the records' conditions (what a table must show)."""
    return _varying_of([condition(r, repeat_fields) for r in records])


def by_condition(records: Iterable[RunRecord], repeat_fields: Sequence[str] = REPEAT_FIELDS) -> list[list[RunRecord]]:
    """The records grouped by condition (every spec field but ``repeat_fields``), in order of first appearance."""
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(condition(record, repeat_fields), []).append(record)
    return list(groups.values())


def condition_label(spec: Mapping[str, Any], fields: Sequence[str]) -> str:
    """A short name for a condition from the spec fields that distinguish it (``pretrained``,
    ``random · map=shift1000``); ``fields`` usually comes from :func:`condition_fields`."""
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


def condition_fields(records: Sequence[RunRecord], *, with_discipline: bool = False) -> list[str]:
    """The spec fields that name conditions among ``records``: those that differ between runs of one
    discipline (the seed never). Fields that only change with the discipline (its parameters, a demo's
    step budget) are part of that discipline's recipe, not of a condition; discipline itself only if asked.
    """
    by_discipline: dict[str, list[RunRecord]] = {}
    for record in records:
        by_discipline.setdefault(str(record.spec.get("discipline")), []).append(record)
    shown: list[str] = []
    for members in by_discipline.values():
        shown += [f for f in varying_fields(members) if f not in shown]
    if with_discipline and len(by_discipline) > 1:
        shown = ["discipline"] + shown
    return shown or ["init"]


def group_by_condition(records: Iterable[RunRecord], *, with_discipline: bool = False,
                       fields: Sequence[str] | None = None) -> dict[str, list[RunRecord]]:
    """Records grouped by condition (every spec field but the seed), keyed by a short label, in order."""
    records = list(records)
    shown = list(fields) if fields is not None else condition_fields(records, with_discipline=with_discipline)
    out: dict[str, list[RunRecord]] = {}
    for members in by_condition(records):
        label = condition_label(members[0].spec, shown)
        while label in out:  # two conditions that differ only in a field not shown: keep both
            label += "'"
        out[label] = members
    return out


def condition_stats(members: Sequence[RunRecord]) -> dict[str, Any]:
    """What a table row says of one condition's runs: ``n`` finished and ``not_done``; where any finished,
    the ``mean``, ``std`` and 95 % t-interval (``ci_low``, ``ci_high``) of their test metric, their mean
    ``steps_to_converge`` and ``wall_time_s``, and the ``majority`` baseline (None where unknown).

    Runs that did not finish (`failed`, `cancelled`, ...) count only in ``not_done``, so a statistic
    never mixes half-trained models into a mean.
    """
    from labcore.results import metrics

    done = [r for r in members if r.status == "done" and r.test_value is not None]
    row: dict[str, Any] = {"n": len(done), "not_done": len(members) - len(done)}
    if done:
        agg = metrics.aggregate([r.test_value for r in done])
        row.update(mean=agg.mean, std=agg.std, ci_low=agg.ci_low, ci_high=agg.ci_high)
        steps = [r.steps_to_converge for r in done if r.steps_to_converge is not None]
        row["steps_to_converge"] = sum(steps) / len(steps) if steps else None
        majority = [r.baseline.get("majority") for r in done if r.baseline.get("majority") is not None]
        row["majority"] = majority[0] if majority else None
        row["wall_time_s"] = sum(r.wall_time_s for r in done) / len(done)
    return row


def sweep_table(records: Iterable[RunRecord], repeat_fields: Sequence[str] = REPEAT_FIELDS) -> pd.DataFrame:
    """One row per condition: the varying fields, n, mean ± std and the 95 % t-interval of the test metric
    (:func:`condition_stats`)."""
    records = list(records)
    if not records:
        return pd.DataFrame()
    shown = varying_fields(records, repeat_fields) or ["model", "init", "discipline", "protocol"]
    rows = []
    for members in by_condition(records, repeat_fields):
        first = members[0]
        row = {field: first.spec.get(field) for field in shown}
        row["metric"] = first.metric
        row.update(condition_stats(members))
        rows.append(row)
    return pd.DataFrame(rows)


def alignment_table(records: Iterable[RunRecord], label: Callable[[RunRecord], str] = lambda r: r.key[:12]
                    ) -> pd.DataFrame:
    """One row per run whose protocol ran a stage before training (ORCA's alignment): its label, seed, test
    metric, and the stage's distance before and after; empty where no run has such a stage."""
    rows = []
    for record in records:
        stage = record.stage
        if not stage:
            continue
        rows.append({"run": label(record), "seed": record.spec.get("seed"), "metric": record.metric,
                     "test": record.test_value, "distance": f"{stage.get('distance', '')} to {stage.get('source', '')}",
                     "before": stage.get("before"), "after": stage.get("after"),
                     "steps": stage.get("steps_done"), "seconds": stage.get("seconds")})
    return pd.DataFrame(rows, columns=["run", "seed", "metric", "test", "distance", "before", "after", "steps",
                                       "seconds"])
