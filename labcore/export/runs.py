"""Which runs an export (or a table of the API) reads, and a run's curves from wherever they are most
complete: its event stream (every step, for runs a worker ran), else its record's curves (runs computed in
this process keep no stream)."""

from __future__ import annotations

from typing import Any, Iterable

from labcore.engine import run_results
from labcore.errors import LabError
from labcore.events import curves_from_events
from labcore.results.record import RunRecord


def run_curves(store: Any, key: str) -> dict[str, list[tuple[int, float]]]:
    """``{name: [(step, value), ...]}``: ``train_loss``, ``lr``, ``validation_<metric>`` ... (see
    :func:`labcore.events.curves_from_events`) of the run ``key`` (a full key)."""
    found = curves_from_events(store.events(key))
    if found:
        return found
    stored = store.get(key)
    result = stored.result if stored is not None else None
    if not result:
        return {}
    record = RunRecord.from_dict(result)
    return {"train_loss": [(int(s), float(v)) for s, v in record.train_loss],
            f"validation_{record.metric}": [(int(s), float(v)) for s, v in record.val_curve]}


def run_keys(store: Any, keys: str | Iterable[str] | None = None, group: str | None = None) -> list[str]:
    """The full keys of the runs ``keys`` (prefixes will do) and of the training runs of the stored group
    ``group``, in order; a key of another kind of job is refused."""
    chosen = [keys] if isinstance(keys, str) else list(keys or [])
    out = [store.resolve_key(k) for k in chosen]
    for key in out:
        kind = store.record(key).kind
        if kind != run_results.KIND:
            raise LabError(f"{key[:12]} is a {kind} job, not a training run: it has no curves or run record")
    if group:  # a recipe's group holds its analyses too: only its runs
        out += [k for k in store.group(group)["keys"]
                if k not in out and (r := store.get(k)) is not None and r.kind == run_results.KIND]
    if not out:
        raise LabError("name the runs: give keys (or key prefixes) or a group; `python -m labcore status` lists them")
    return out


def finished_records(store: Any, keys: str | Iterable[str] | None = None, group: str | None = None) -> list[RunRecord]:
    """The result records of those runs; runs without a result (queued, running) are left out."""
    found = [run_results.result(store, k) for k in run_keys(store, keys, group)]
    return [r for r in found if r is not None]
