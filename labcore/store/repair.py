"""Checking a store's database, and repairing it: in place where diskcache can, else by setting it
aside and rebuilding a new one from the job folders (``python -m labcore store check|repair``)."""

from __future__ import annotations

import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from labcore.errors import LabError
from labcore.store.core import Store


@dataclass
class Report:
    """What a check or a repair found and did."""

    problems: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(root: Path) -> Report:
    """Check the database without changing it: SQLite's integrity check and diskcache's own consistency
    check (files and sizes), then whether every record can be read."""
    report = Report()
    db = root / "db" / "cache.db"
    if not db.is_file():
        report.problems.append(f"{db} is missing")
        return report
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            result = [row[0] for row in con.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            report.problems += [f"SQLite integrity: {line}" for line in result[:10]]
            return report
        store = Store(root)
        try:
            report.problems += [str(w.message) for w in store.cache.check(fix=False)]
            for key in store.table.keys():
                store.table.get(key)
        finally:
            store.close()
    except (sqlite3.DatabaseError, LabError) as exc:
        report.problems.append(f"{type(exc).__name__}: {exc}")
    return report


def repair(root: Path) -> Report:
    """Fix what diskcache can fix in place; if the database cannot be read, set it aside and rebuild a
    new one from the job folders (``record.json`` of every finished job)."""
    report = check(root)
    if report.ok:
        report.actions.append("nothing to repair")
        return report
    db_folder = root / "db"
    try:
        store = Store(root)
        try:
            store.cache.check(fix=True)
        finally:
            store.close()
        if check(root).ok:
            report.actions.append("diskcache fixed the database in place")
            return report
    except (sqlite3.DatabaseError, LabError):
        pass
    aside = root / f"db.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
    if db_folder.exists():
        shutil.move(str(db_folder), str(aside))
        report.actions.append(f"moved the damaged database to {aside}")
    store = Store(root)  # a blank database: opening it rebuilds from the folders
    try:
        report.actions.append(f"rebuilt the store from {len(store.table.keys())} job folder(s)")
    finally:
        store.close()
    return report


