"""Run a list of resolved specs in this process, serving any spec whose key already has a result from the store."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from labcore.errors import LabError
from labcore.engine import run_results
from labcore.events import RESULT
from labcore.results.record import RunRecord
from labcore.runspec.resolved import ResolvedSpec


def run_sweep(specs: Sequence[ResolvedSpec], *, progress: Callable[[str], None] = lambda _m: None,
              on_event: Callable[[dict[str, Any]], None] = lambda _e: None, store=None) -> list[RunRecord]:
    """Each spec as its caller resolved it (the CLI and the API resolve a sweep's specs once, before the first
    run loads anything): its key finds a finished result, and iter_run trains it as it is."""
    from labcore.engine.run import iter_run
    from labcore.store import Store

    unresolved = [spec.label() for spec in specs if not isinstance(spec, ResolvedSpec)]
    if unresolved:
        raise LabError(f"run_sweep takes resolved specs (labcore.engine.resolve.resolve), and {unresolved[0]} is not")
    store = store or Store()
    records: list[RunRecord] = []
    for number, resolved in enumerate(specs, 1):
        cached = run_results.result(store, resolved.key)
        if cached is not None and cached.status == "done":
            progress(f"[{number}/{len(specs)}] {resolved.label()}: from the store")
            records.append(cached)
            continue
        progress(f"[{number}/{len(specs)}] {resolved.label()}: running")
        record = None
        for event in iter_run(resolved, workdir=store.run_dir(resolved.key)):
            on_event(event)
            if event["type"] == RESULT:
                record = RunRecord.from_dict(event["record"])
        assert record is not None
        run_results.put_result(store, record, label=resolved.label())
        records.append(record)
    return records
