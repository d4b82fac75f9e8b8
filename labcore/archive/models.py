"""The models an archive carries: folders the lab made that archived jobs' specs name as their model.

A spec may load a model pretrained here (``lab:NAME``, in ``cache/models/lab-NAME/``) or a finished run's body
(``run:KEY``, in ``cache/models/run-KEY/``). Those folders live outside the store's job folders, so without
them an imported recipe or run names a model the other lab does not have. They travel whole (weights too,
whatever the archive's weights choice: unlike a run's own weights they are another job's result, and a spec
that names one cannot run again without it) under ``models/<folder>/``, every file with its sha256 in the
manifest like any other member.

Import never overwrites a folder that is already here: the same files are kept as they are, different ones
refuse the whole archive before anything is written.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from labcore.errors import LabError
from labcore.models import MADE_HERE, model_folder, models_dir, read_card

KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # a key or name names a folder: nothing that climbs out
PREFIX = "models/"
# The spec fields that name a backbone: a run's or an analysed model's ``model``, a pretraining's ``start``.
MODEL_FIELDS = ("model", "start")


class ModelFolderConflict(LabError):
    """A model the archive carries is here already with other files: nothing of the archive was imported."""


def made_here(name: Any) -> bool:
    """Whether ``name`` is a ``lab:`` or ``run:`` model with a name that can be a folder's."""
    if not isinstance(name, str):
        return False
    prefix, _, value = name.partition(":")
    return prefix in MADE_HERE and bool(KEY_PATTERN.fullmatch(value))


def named_models(spec: Any) -> list[str]:
    """The lab-made models a stored spec names (nested too: an analysis's models), each once, in order."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for field, inner in value.items():
                if field in MODEL_FIELDS and made_here(inner):
                    found.append(inner)
                else:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(spec)
    return list(dict.fromkeys(found))


def maker_key(name: str) -> str:
    """The job that made model ``name``: a body's run, or a lab model's pretraining (its card keeps the key);
    "" where nothing says."""
    prefix, _, value = name.partition(":")
    if prefix == "run":
        return value
    return str(read_card(model_folder(name)).get("key") or "")


def folder_name(name: str) -> str:
    """The folder of model ``name`` under ``cache/models`` (``lab-NAME``, ``run-KEY``)."""
    return model_folder(name).name


def member_folder(name: str) -> str:
    """Where the files of model ``name`` lie in an archive."""
    return f"{PREFIX}{folder_name(name)}/"


def present(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """``names`` split into those whose folder is complete on this machine and those absent here."""
    here = [n for n in names if (models_dir() / folder_name(n) / "config.json").is_file()]
    return here, [n for n in names if n not in here]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def members(names: Iterable[str]) -> Iterator[tuple[str, Path]]:
    """(archive name, file) of every file of the models ``names``."""
    for name in names:
        folder = models_dir() / folder_name(name)
        for path in _files(folder):
            yield f"{member_folder(name)}{path.relative_to(folder).as_posix()}", path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def arriving(manifest: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The archive's models split into those to bring in and those already here with the same files.

    :class:`ModelFolderConflict` where a folder here differs: checked before the import writes anything."""
    listed = manifest.get("members") or {}
    new, same = [], []
    for name in manifest.get("models") or []:
        folder = models_dir() / folder_name(name)
        if not folder.exists():
            new.append(name)
            continue
        inside = member_folder(name)
        wanted = {m[len(inside):]: v["sha256"] for m, v in listed.items() if m.startswith(inside)}
        here = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
        if sorted(here) != sorted(wanted) or any(file_sha256(here[f]) != wanted[f] for f in wanted):
            raise ModelFolderConflict(
                f"the archive carries the model {name}, and this machine already has a different {name} in "
                f"{folder}; nothing of the archive was imported. That folder is never overwritten: move or rename "
                f"it (or import into a lab with another TRANSFERLAB_CACHE), then import again")
        same.append(name)
    return new, same
