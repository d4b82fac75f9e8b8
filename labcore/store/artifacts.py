"""Files a job writes (checkpoints, weights, maps, cached features) live in its own folder beside the
database: ``<store>/runs/<key>/`` (the folder kept the name of the first kind; every kind uses it)."""

from __future__ import annotations

from pathlib import Path


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
