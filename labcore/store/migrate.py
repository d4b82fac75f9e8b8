"""Stores written before jobs had kinds are upgraded in place when they are opened.

Format 1 (training runs and a side queue of attention jobs) kept ``run/<key>`` records listed in
``index/runs`` and attention jobs at ``job/attention:<key>:<split>:<index>`` with a queue of their own.
Format 2 keeps every job at ``job/<key>`` with its ``kind``. The upgrade moves each run record to its
new name (adding ``kind: run``), drops the old attention job records and their queue (they only said
whether maps were computed; the maps they wrote stay in the runs' folders and the Attention page still
finds them), and then writes the format number, all in one transaction.
"""

from __future__ import annotations

import diskcache

FORMAT = 2
_FORMAT_ENTRY = "meta/format"


def upgrade(cache: diskcache.Cache) -> int:
    """Bring the store in ``cache`` to :data:`FORMAT`; returns how many records were moved."""
    if cache.get(_FORMAT_ENTRY) == FORMAT:
        return 0
    moved = 0
    with cache.transact(retry=True):
        if cache.get(_FORMAT_ENTRY) == FORMAT:  # another process upgraded it meanwhile
            return 0
        old_keys = list(cache.get("index/runs", []))
        for key in old_keys:
            record = cache.get(f"run/{key}")
            if record is None:
                continue
            record = dict(record, kind="run", requires=list(record.get("requires") or []),
                          checkpoint=record.get("checkpoint", "resume.pt"))
            cache.set(f"job/{key}", record)
            cache.delete(f"run/{key}")
            moved += 1
        if old_keys:
            jobs = list(cache.get("index/jobs", []))
            cache.set("index/jobs", jobs + [k for k in old_keys if k not in jobs])
            cache.delete("index/runs")
        for name in list(cache.iterkeys()):
            if isinstance(name, str) and name.startswith("job/attention:"):
                cache.delete(name)
        while cache.pull(prefix="jobs")[0] is not None:
            pass
        cache.set(_FORMAT_ENTRY, FORMAT)
    return moved
