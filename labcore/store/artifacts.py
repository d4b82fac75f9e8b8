"""Files a job writes (checkpoints, weights, maps, cached features) live in its own folder beside the
database: ``<store>/runs/<key>/`` (the folder kept the name of the first kind; every kind uses it).
A finished job's record is kept there too, as ``record.json``, so the database can be rebuilt from the
folders alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labcore import durable

RECORD_FILE = "record.json"


class Artifacts:
    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, key: str) -> Path:
        return self.root / key

    def files(self, key: str) -> dict[str, Path]:
        """Every file in the job's folder by its path relative to the folder."""
        folder = self.folder(key)
        if not folder.is_dir():
            return {}
        return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}

    def write_record(self, record: dict[str, Any]) -> None:
        """The job's finished record as JSON in its folder (written whole, then renamed into place)."""
        folder = self.folder(record["key"])
        folder.mkdir(parents=True, exist_ok=True)
        durable.write_json(folder / RECORD_FILE, record, sort_keys=True, default=str)

    def records(self) -> dict[str, dict[str, Any]]:
        """The ``record.json`` of every job folder that has a readable one, by key."""
        out: dict[str, dict[str, Any]] = {}
        if not self.root.is_dir():
            return out
        for path in self.root.glob(f"*/{RECORD_FILE}"):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record.get("key") == path.parent.name:
                out[path.parent.name] = record
        return out
