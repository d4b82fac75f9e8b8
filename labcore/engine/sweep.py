"""Run a list of specs in this process, serving any spec whose key already has a result from the store."""

from __future__ import annotations

from typing import Any, Callable

from labcore.events import RESULT
from labcore.results.record import RunRecord
from labcore.spec import RunSpec


def run_sweep(specs: list[RunSpec], *, progress: Callable[[str], None] = lambda _m: None,
              on_event: Callable[[dict[str, Any]], None] = lambda _e: None, store=None) -> list[RunRecord]:
    from labcore.engine.resolve import resolve_spec
    from labcore.engine.run import iter_run
    from labcore.store import Store

    store = store or Store()
    records: list[RunRecord] = []
    for number, spec in enumerate(specs, 1):
        resolved = resolve_spec(spec)
        cached = store.get_result(resolved.key)
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
        store.put_result(record, label=resolved.label())
        records.append(record)
    return records
