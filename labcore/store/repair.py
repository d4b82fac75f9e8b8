"""Checking a store and repairing it (``python -m labcore store check|repair``): first its database (in place
where diskcache can, else set aside and rebuilt from the job folders), then every invariant
:mod:`.audit` reads, each broken one fixed where that is safe and named where it is not."""

from __future__ import annotations

import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from labcore.errors import LabError
from labcore.store import audit, health
from labcore.store.core import Store


@dataclass
class Report:
    """What a check or a repair found and did."""

    problems: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    findings: list[audit.Finding] = field(default_factory=list)  # the broken invariants among the problems

    @property
    def ok(self) -> bool:
        return not self.problems


def exists(root: Path) -> bool:
    """Whether a store was ever made at ``root`` (a lab that ran nothing yet has none to check)."""
    return (root / "db").exists() or (root / "runs").exists()


def check(root: Path) -> Report:
    """Check without changing anything: the database (SQLite's integrity check, diskcache's own check of its
    files and sizes, every record readable), then every invariant of :mod:`.audit`."""
    report = check_database(root)
    if report.ok:
        store = Store(root)
        try:
            report.findings = audit.audit(store)
        finally:
            store.close()
        report.problems += [f.line() for f in report.findings]
    return report


def check_database(root: Path) -> Report:
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
    """Repair the database (:func:`repair_database`), then fix every broken invariant that is safe to fix;
    the report names each problem found, each action taken, and what is left (``problems`` of a new check)."""
    report = check(root)
    if report.ok:
        report.actions.append("nothing to repair")
        return report
    if not check_database(root).ok:
        repair_database(root, report)
    store = Store(root)
    try:
        rebuilt = False
        for finding in audit.audit(store):
            if finding.action == "rebuild" and rebuilt:
                continue  # one rebuild adds back the job of every folder that holds a finished record
            rebuilt = rebuilt or finding.action == "rebuild"
            report.actions += fix(store, finding)
    finally:
        store.close()
    return report


def repair_database(root: Path, report: Report) -> Report:
    """Fix what diskcache can fix in place; if the database cannot be read, set it aside and rebuild a
    new one from the job folders (``record.json`` of every finished job)."""
    db_folder = root / "db"
    try:
        store = Store(root)
        try:
            store.cache.check(fix=True)
        finally:
            store.close()
        if check_database(root).ok:
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




# ------------------------------------------------------------------------------ fixing one invariant
def _drop_from_index(store: Store, f: audit.Finding) -> str:
    store.table.all.discard([f.key])
    return f"dropped {f.key[:12]} (no record) from the submission index"


def _drop_from_running(store: Store, f: audit.Finding) -> str:
    store.table.running.discard([f.key])
    return f"dropped {f.key[:12]} (not running) from the running index"


def _add_to_running(store: Store, f: audit.Finding) -> str:
    store.table.running.add(f.key)
    return f"added {f.key[:12]} to the running index (its liveness is checked from there)"


def _write_record(store: Store, f: audit.Finding) -> str:
    store.files.write_record(store.table.get(f.key))
    return f"wrote {audit.RECORD_FILE} of {f.key[:12]} again from the database"


def _mark_dead(store: Store, f: audit.Finding) -> str:
    record = store._mark_dead(f.key)
    return f"marked {f.key[:12]} {record['status']}: {record.get('error') or 'its worker is back'}"


def _drop_entry(store: Store, f: audit.Finding) -> str:
    store.cache.delete(f.target)
    return f"removed queue entry {f.target} (it named the missing job {f.key[:12]})"


def _queue_again(store: Store, f: audit.Finding) -> str:
    record = store.table.get(f.key)
    store.queue.push(f.key, record.get("priority") or "interactive", record.get("started_by") or None)
    return f"queued {f.key[:12]} again (it was queued with no entry a worker could claim)"


def _delete_file(store: Store, f: audit.Finding) -> str:
    Path(f.target).unlink(missing_ok=True)
    return f"deleted {f.target}"


def _set_aside(store: Store, f: audit.Finding) -> str:
    path = Path(f.target)
    aside = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    path.rename(aside)
    return f"moved the checkpoint that does not load to {aside} (the job resumes from the start)"


def _rebuild(store: Store, f: audit.Finding) -> str:
    added = health.rebuild(store)
    return f"added {added} job(s) back from the finished records in their folders"


def _lost_and_found(store: Store, f: audit.Finding) -> str:
    shelf = store.root / audit.LOST_AND_FOUND
    shelf.mkdir(exist_ok=True, mode=health.FOLDER_MODE)
    target = shelf / Path(f.target).name
    if target.exists():
        target = shelf / f"{target.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.move(f.target, target)
    return f"moved {f.target}, a folder of no job, to {target} (nothing deleted)"


ACTIONS = {"drop-from-index": _drop_from_index, "drop-from-running": _drop_from_running,
           "add-to-running": _add_to_running, "write-record": _write_record, "mark-dead": _mark_dead,
           "drop-entry": _drop_entry, "queue-again": _queue_again, "delete-file": _delete_file,
           "set-aside": _set_aside, "rebuild": _rebuild, "lost-and-found": _lost_and_found}


def fix(store: Store, finding: audit.Finding) -> list[str]:
    """Apply the finding's safe fix under the store's lock; what was done, or why nothing was."""
    if not finding.action:
        return [f"left as it is: {finding.line()}"]
    with store.transaction():
        try:
            return [ACTIONS[finding.action](store, finding)]
        except OSError as exc:
            return [f"could not fix ({exc}): {finding.line()}"]
