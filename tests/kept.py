"""Stores of finished tiny jobs kept between test processes, so a fixture that trains minutes of jobs trains
them once per change of the code rather than once per test run.

A kept store lives under the test cache (``kept-stores/``) with a name and a digest of everything that could
change what its jobs compute: the library's source, the test modules that build it and the versions of Python,
torch, transformers and numpy. A fixture with the same name and digest copies it into a folder of its own
(nothing ever writes to the kept copy); any change to the library builds the store again.
``TRANSFERLAB_TEST_REBUILD=1`` ignores kept stores (and keeps the fresh ones).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

KEPT = "kept-stores"
REBUILD_VARIABLE = "TRANSFERLAB_TEST_REBUILD"
_TESTS = Path(__file__).resolve().parent
# The test cache as the conftest set it, before any fixture points TRANSFERLAB_CACHE at a cache of its own.
_ROOT = Path(os.environ["TRANSFERLAB_CACHE"]).expanduser() / KEPT


@lru_cache(maxsize=None)
def source_digest(depends: tuple[str, ...] = ()) -> str:
    """A digest of what tiny jobs depend on: the library's files, the test modules that build them (``depends``,
    file names in tests/), the main packages."""
    import numpy
    import torch
    import transformers

    import labcore

    library = Path(labcore.__file__).resolve().parent
    digest = hashlib.sha256()
    files = sorted(p for p in library.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files + [_TESTS / name for name in depends]:
        digest.update(path.relative_to(path.parent.parent if path.parent == _TESTS else library.parent)
                      .as_posix().encode())
        digest.update(path.read_bytes())
    versions = (sys.version, platform.machine(), torch.__version__, transformers.__version__, numpy.__version__)
    digest.update(repr(versions).encode())
    return digest.hexdigest()[:16]


def _kept_root() -> Path:
    return _ROOT


def _kept(name: str, depends: tuple[str, ...]) -> Path:
    return _kept_root() / f"{name}-{source_digest(tuple(depends))}"


def restore(name: str, target: Path, depends: tuple[str, ...] = ()) -> bool:
    """Copy the kept store ``name`` (for the current code) to ``target``; False where there is none."""
    kept = _kept(name, depends)
    if os.environ.get(REBUILD_VARIABLE) or not kept.is_dir():
        return False
    shutil.copytree(kept, target)
    return True


def keep(name: str, source: Path, depends: tuple[str, ...] = ()) -> None:
    """Keep a copy of the closed store at ``source`` as ``name`` (whole or not at all); drop those kept for
    older code."""
    kept = _kept(name, depends)
    root = kept.parent
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{kept.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    shutil.rmtree(kept, ignore_errors=True)
    try:
        staging.rename(kept)
    except OSError:  # another process kept it first
        shutil.rmtree(staging, ignore_errors=True)
    for old in root.glob(f"{name}-*"):
        if old != kept and old.name.rpartition("-")[0] == name:
            shutil.rmtree(old, ignore_errors=True)


def kept_store(name: str, target: Path, build: Callable[[Path], None], depends: tuple[str, ...] = ()) -> bool:
    """Fill ``target`` (a store's folder) from the kept store ``name``, or run ``build(target)`` (which leaves
    the store there closed) and keep it. True where it was built.

    Test processes that run side by side (``pytest -n``) take turns per name: the first to need a store builds
    it while the others wait and then copy it, instead of each training the same jobs."""
    from filelock import FileLock

    _ROOT.mkdir(parents=True, exist_ok=True)
    with FileLock(_ROOT / f".{name}.lock"):
        if restore(name, target, depends):
            return False
        build(target)
        keep(name, target, depends)
        return True
