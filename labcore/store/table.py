"""The job table: one record per job key, in submission order, and named groups of keys.

``job/<key>`` holds a job's record (kind, spec, label, status, attempt, owner, times, result, error);
``index/jobs`` lists the keys in submission order (no full scans); ``group/<name>`` is an ordered list
of keys (a sweep, a demo, a recipe) and ``index/groups`` their names. Callers that change more than one
entry hold the store's transaction; this class only reads and writes entries.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Iterable, Iterator

import diskcache

from labcore.errors import LabError
from labcore.store.job_record import stored_kind


SQL_CHUNK = 900  # keys a query names: under SQLite's oldest limit of 999 variables a statement
DECODED_MAX = 50_000  # decoded records a store keeps for get_many (about 5 KiB of JSON each); then it starts over
# the key range of the job records: "job/" up to, not including, "job0" ('0' follows '/')
JOB_ROWS = "raw = 1 AND key >= 'job/' AND key < 'job0'"


class IndexList:
    """A named list of items in one cache entry (append once, remove, read)."""

    def __init__(self, cache: diskcache.Cache, name: str) -> None:
        self.cache = cache
        self.entry = f"index/{name}"

    def items(self) -> list[Any]:
        return list(self.cache.get(self.entry, []))

    def add(self, item: Any) -> None:
        self.extend([item])

    def extend(self, new: Iterable[Any]) -> None:
        """Append the items not yet listed, in order: one read and one write however many there are (a
        group of 10,000 jobs appended one by one rewrote the whole list 10,000 times)."""
        items = self.items()
        seen = set(items)
        added = [i for i in dict.fromkeys(new) if i not in seen]
        if added:
            self.cache.set(self.entry, items + added)

    def remove(self, item: Any) -> None:
        self.discard([item])

    def discard(self, gone: Iterable[Any]) -> None:
        """Remove every listed item of ``gone`` (one read, at most one write)."""
        gone = set(gone)
        items = self.items()
        kept = [i for i in items if i not in gone]
        if len(kept) != len(items):
            self.cache.set(self.entry, kept)


class JobTable:
    """Job records by key, the submission-order index, the running index and groups."""

    def __init__(self, cache: diskcache.Cache) -> None:
        self.cache = cache
        self.all = IndexList(cache, "jobs")
        self.running = IndexList(cache, "running")
        self.group_names = IndexList(cache, "groups")
        self.decoded: dict[str, tuple[Any, dict[str, Any]]] = {}  # db key -> (version read, record)
        # db key -> (version read, kind, status); replaced whole, never changed in place (kinds_and_statuses)
        self.briefs: dict[str, tuple[Any, str, str]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(f"job/{key}")

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The records of ``keys`` that exist, by key: one SQL query a chunk instead of one a key, and a
        record unchanged since this process last decoded it is not decoded again (10,000 records took the
        Compare page 0.98 s read one query at a time, 0.92 s of it JSON decoding). Each record comes back a
        shallow copy, so a caller that sets a field changes no other reader's record; the store never sets an
        expiry, so none is checked."""
        out: dict[str, dict[str, Any]] = {}
        for db_key, version, fetch in self._rows([f"job/{k}" for k in keys]):
            kept = self.decoded.get(db_key)
            if kept is None or kept[0] != version:
                kept = (version, fetch())
                if len(self.decoded) >= DECODED_MAX:
                    self.decoded.clear()
                self.decoded[db_key] = kept
            out[db_key[len("job/"):]] = dict(kept[1])
        return out

    def _rows(self, db_keys: list[str]) -> Iterator[tuple[str, tuple[Any, Any, Any], Callable[[], Any]]]:
        """(db key, version, decode) of each of ``db_keys`` the database holds: one SQL query a chunk, the value
        decoded only when ``decode()`` is called. A rewrite changes the row's store_time; the value's length (or
        its file's name, for a value too large for its row) guards a rewrite within the same tick."""
        for start in range(0, len(db_keys), SQL_CHUNK):
            chunk = db_keys[start:start + SQL_CHUNK]
            # diskcache has no public many-key read: its own connection and table, as its get uses them
            rows = self.cache._sql(f"SELECT key, store_time, mode, filename, value FROM Cache WHERE raw = 1 AND "
                                   f"key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            for db_key, stored, mode, filename, value in rows:
                version = (stored, filename, len(value) if isinstance(value, (bytes, str)) else value)
                yield db_key, version, functools.partial(self.cache.disk.fetch, mode, filename, value, False)

    def kinds_and_statuses(self) -> dict[str, tuple[str, str]]:
        """Every job record's (kind, status), by key. What a status line reads every few seconds: one query of
        the rows' versions, and a record is decoded only where it changed since this process last read it. Only
        the pair is kept (a decoded record holds about 26 KiB, the pair about 200 bytes), so a server that shows
        the counts to every viewer does not grow with the store as :meth:`get_many`'s decoded records do."""
        # the versions as _rows reads them (a record's value is JSON bytes, or NULL where it lives in a file)
        versions = {db_key: (stored, filename, size) for db_key, stored, filename, size in self.cache._sql(
            f"SELECT key, store_time, filename, length(value) FROM Cache WHERE {JOB_ROWS}").fetchall()}
        # A process keeps one Store per folder, and threads read it (the app's sessions, an API user's own): the
        # kept pairs are never changed in place, where another thread reading them would meet a dict changing
        # under it, but built anew and swapped in whole when something changed. Two threads may both decode a
        # changed record; each keeps what the database held when it looked.
        briefs = self.briefs
        changed = [db_key for db_key, version in versions.items()
                   if db_key not in briefs or briefs[db_key][0] != version]
        if changed or len(briefs) != len(versions):
            briefs = {db_key: brief for db_key, brief in briefs.items() if db_key in versions}
            for db_key, version, fetch in self._rows(changed):
                record = fetch()
                briefs[db_key] = (version, stored_kind(record), record.get("status", ""))
            self.briefs = briefs
        return {db_key[len("job/"):]: (kind, status) for db_key, (_, kind, status) in briefs.items()}

    def put(self, record: dict[str, Any]) -> None:
        self.cache.set(f"job/{record['key']}", record)

    def drop(self, keys: Iterable[str]) -> None:
        """Delete job records and every index and group entry naming them (hold the store's transaction);
        a group left with no key goes too."""
        keys = set(keys)
        for key in keys:
            self.cache.delete(f"job/{key}")
            self.decoded.pop(f"job/{key}", None)  # a deleted job's record is not kept until the next clear
        self.all.discard(keys)
        self.running.discard(keys)
        for name in self.groups():
            group = self.cache.get(f"group/{name}")
            if group is None or not keys.intersection(group["keys"]):
                continue
            kept = [k for k in group["keys"] if k not in keys]
            if kept:
                self.cache.set(f"group/{name}", dict(group, keys=kept))
            else:
                self.drop_group(name)

    def drop_group(self, name: str) -> None:
        self.cache.delete(f"group/{name}")
        self.group_names.discard([name])

    def keys(self, kind: str | None = None) -> list[str]:
        keys = self.all.items()
        if kind is None:
            return keys
        return [k for k in keys if stored_kind(self.get(k) or {}) == kind]

    def resolve_key(self, prefix: str) -> str:
        """A full key from a unique prefix (keys are long; the CLI accepts their start)."""
        if self.get(prefix) is not None:
            return prefix
        matches = [k for k in self.all.items() if k.startswith(prefix)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise LabError(f"no run key starts with {prefix!r}; `python -m labcore status` lists the runs")
        raise LabError(f"{len(matches)} run keys start with {prefix!r}; give more characters")

    # ------------------------------------------------------------------------------------ groups
    def add_to_group(self, name: str, keys: Iterable[str]) -> None:
        group = self.cache.get(f"group/{name}")
        if group is None:
            group = {"name": name, "created_at": time.time(), "keys": []}
            self.group_names.add(name)
        have = set(group["keys"])
        new = [k for k in dict.fromkeys(keys) if k not in have]
        if new or f"group/{name}" not in self.cache:
            self.cache.set(f"group/{name}", dict(group, keys=group["keys"] + new))

    def group(self, name: str) -> dict[str, Any]:
        group = self.cache.get(f"group/{name}")
        if group is None:
            valid = ", ".join(self.group_names.items()) or "(none yet)"
            raise LabError(f"no sweep named {name!r}; sweeps in the store: {valid}")
        return group

    def groups(self) -> list[str]:
        return self.group_names.items()
