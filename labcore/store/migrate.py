"""Stores of earlier formats are upgraded in place when they are opened.

Format 3 keeps every value as JSON (:mod:`.disk`); earlier formats let diskcache pickle them. The
upgrade converts each pickled value with an unpickler that builds only plain containers, and deletes
any value or key that needs more (the lab never wrote one; someone else did).

Format 1 (training runs and a side queue of attention jobs) kept ``run/<key>`` records listed in
``index/runs`` and attention jobs at ``job/attention:<key>:<split>:<index>`` with a queue of their own.
Format 2 keeps every job at ``job/<key>`` with its ``kind``. The upgrade moves each run record to its
new name (adding ``kind: run``), drops the old attention job records and their queue (they only said
whether maps were computed; the maps they wrote stay in the runs' folders and the Attention page still
finds them), and then writes the format number, all in one transaction.
"""

from __future__ import annotations

import os
import pickle
from typing import Callable, ContextManager

import diskcache
from diskcache.core import MODE_PICKLE, MODE_RAW

from labcore.store.disk import json_blob, plain_unpickle
from labcore.store.job_record import LEGACY_CHECKPOINT, LEGACY_KIND

FORMAT = 3
_FORMAT_ENTRY = "meta/format"


def upgrade(cache: diskcache.Cache, transaction: Callable[[], ContextManager[None]]) -> int:
    """Bring the store in ``cache`` to :data:`FORMAT` inside ``transaction()`` (the store's write lock);
    returns how many entries were converted or moved."""
    if cache.get(_FORMAT_ENTRY) == FORMAT:  # a raw integer: reading it unpickles nothing
        return 0
    with transaction():
        found = cache.get(_FORMAT_ENTRY)
        if found == FORMAT:  # another process upgraded it meanwhile
            return 0
        changed = 0
        if found is None or found < 3:
            changed += _pickles_to_json(cache)
        if found is None or found < 2:
            changed += _jobs_with_kinds(cache)
        cache.set(_FORMAT_ENTRY, FORMAT)
    return changed


def _pickles_to_json(cache: diskcache.Cache) -> int:
    """Rewrite every pickled value as JSON in SQLite (inside the caller's transaction)."""
    sql = cache._sql  # diskcache's own connection: the rows change under the transaction it holds
    sql("DELETE FROM Cache WHERE raw = 0")  # pickled keys: the lab only ever used string keys
    converted = 0
    rows = sql("SELECT rowid, filename, value FROM Cache WHERE mode = ?", (MODE_PICKLE,)).fetchall()
    for rowid, filename, value in rows:
        path = os.path.join(cache.directory, filename) if filename else None
        try:
            if path:
                with open(path, "rb") as handle:
                    value = handle.read()
            plain = plain_unpickle(bytes(value))
        except (pickle.UnpicklingError, EOFError, OSError, ValueError, TypeError, AttributeError, IndexError):
            sql("DELETE FROM Cache WHERE rowid = ?", (rowid,))
        else:
            sql("UPDATE Cache SET mode = ?, filename = NULL, size = 0, value = ? WHERE rowid = ?",
                (MODE_RAW, json_blob(plain), rowid))
            converted += 1
        if path and os.path.exists(path):
            os.remove(path)
    return converted


def _jobs_with_kinds(cache: diskcache.Cache) -> int:
    """Format 1 -> 2: run records become job records of kind ``run``; the attention side queue goes."""
    moved = 0
    old_keys = list(cache.get("index/runs", []))
    for key in old_keys:
        record = cache.get(f"run/{key}")
        if record is None:
            continue
        record = dict(record, kind=LEGACY_KIND, requires=list(record.get("requires") or []),
                      checkpoint=record.get("checkpoint", LEGACY_CHECKPOINT))
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
    return moved
