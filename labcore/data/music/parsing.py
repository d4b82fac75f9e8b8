"""Parsing pieces on worker processes, and the per-piece pitch cache under ``cache/music/``.

Parsing is the slow part (a Beethoven quartet takes seconds, a Bach chorale a fraction of one), so it runs on
:data:`WORKERS` processes, and every piece's pitches are kept in a compressed cache keyed by corpus path and
library versions.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import multiprocessing
import os
import tempfile
from pathlib import Path
from typing import Any

from labcore import paths
from labcore.data.base import ProgressFn
from labcore.data.music.corpus import corpus_root
from labcore.data.music.score import EXTRACTION_VERSION, TICKS_PER_QUARTER, pitches_from_score

WORKERS = 2  # the lab's machines have two cores; parsing is CPU-bound pure Python
_PROGRESS_STEPS = 20  # at most ~20 "parsed k/N" lines per round, whatever N is


def _extract(rel: str) -> tuple[str, list[int] | None, str]:
    """Worker entry point: (piece, pitches or None, reason for None). Never raises for a bad score."""
    try:
        pitches = pitches_from_score(corpus_root() / rel)
    except Exception as error:  # music21 raises many types; one bad score must not stop the build
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return rel, None, f"{type(error).__name__}: {message}"[:300]
    if not pitches:
        return rel, None, "no notes"
    return rel, pitches, ""


# --------------------------------------------------------------------------------------------------
# the per-piece pitch cache


def _versions() -> str:
    from importlib import metadata

    return (f"music21-{metadata.version('music21')}_pretty_midi-{metadata.version('pretty_midi')}"
            f"_tpq{TICKS_PER_QUARTER}_v{EXTRACTION_VERSION}")


def pitch_cache_path() -> Path:
    return paths.cache_dir() / "music" / f"pitches_{_versions()}.json.gz"


class PitchCache:
    """Corpus path -> pitch list (or the reason it failed), one gzipped JSON file per library version.

    Failures are kept too: a score music21 cannot read today it cannot read tomorrow with the same
    versions, and re-trying it would cost the parse each build.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pitches, self.failed = self._read()

    def _read(self) -> tuple[dict[str, list[int]], dict[str, str]]:
        if not self.path.is_file():
            return {}, {}
        try:
            with gzip.open(self.path, "rt", encoding="utf-8") as handle:
                data = json.load(handle)
            return dict(data["pitches"]), dict(data["failed"])
        except (OSError, ValueError, KeyError, TypeError):
            return {}, {}  # a damaged cache is only lost time: it is rewritten on the next save

    def save(self) -> None:
        # Another build (the app's worker, a test run) may have added pieces since this one read the
        # file: merge, so neither loses the other's work.
        pitches, failed = self._read()
        self.pitches = {**pitches, **self.pitches}
        self.failed = {rel: why for rel, why in {**failed, **self.failed}.items() if rel not in self.pitches}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pitches-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
                handle.write(json.dumps({"pitches": self.pitches, "failed": self.failed},
                                        sort_keys=True, separators=(",", ":")).encode())
            os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is as readable as the others
            os.replace(tmp, self.path)  # atomic: a concurrent reader sees the old or the new file
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


class PieceParser:
    """Parses pieces on up to WORKERS processes, started on first use and kept for later rounds."""

    def __init__(self, cache: PitchCache, progress: ProgressFn) -> None:
        self.cache = cache
        self.progress = progress
        self.lost: dict[str, str] = {}  # failures of this build only (a dead worker): never cached
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def __enter__(self) -> "PieceParser":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def parse(self, todo: list[str]) -> None:
        """Parse ``todo``, storing each result in the cache as it arrives."""
        root = corpus_root()
        # Largest files first: the long quartet movements then start at once instead of trailing at
        # the end on one busy core while the other idles.
        todo = sorted(todo, key=lambda rel: (-(root / rel).stat().st_size, rel))
        if self._pool is None:
            # 'spawn': a fresh interpreter per worker, safe even when the parent has torch or threads
            # loaded (fork would copy their locks); the workers import only music21 and pretty_midi.
            workers = max(1, min(WORKERS, os.cpu_count() or 1, len(todo)))
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        total = len(todo)
        step = max(1, total // _PROGRESS_STEPS)
        futures = {self._pool.submit(_extract, rel): rel for rel in todo}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            rel = futures[future]
            try:
                rel, pitches, reason = future.result()
            except Exception as error:  # the worker process died (killed, out of memory)
                self.lost[rel] = f"worker process failed ({type(error).__name__}: {error})"
                self.progress(f"skipped {rel}: {self.lost[rel]}")
            else:
                if pitches is None:
                    self.cache.failed[rel] = reason
                    self.progress(f"skipped {rel}: {reason}")
                else:
                    self.cache.pitches[rel] = pitches
            if done % step == 0 or done == total:
                self.progress(f"parsed {done}/{total} pieces")
                self.cache.save()  # an interrupted build keeps what it parsed
