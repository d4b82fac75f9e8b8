"""Data as the pages see it: the disciplines and their examples, uploads, the L1 corpora, the assets on this
machine, and the token mappings that feed symbols to a model's vocabulary."""

from __future__ import annotations

from typing import Any

from labcore import assets
from labcore import data as disciplines
from labcore import mapping as mapping_lib
from labcore.data import base as data_base
from labcore.data import fields as upload_fields
from labcore.data import upload as uploads
from labcore.data.images import patches_image
from labcore.errors import LabError
from labcore.mapping import MappingSpec, TokenMapping, build_mapping, model_vocab, of_run
from labcore.pretrain import corpora
from labcore.spec import make_spec
from labcore.door.lab import Lab, store_of
from labcore.store import JobRecord

__all__ = ["assets", "corpora", "data_base", "discipline_info", "disciplines", "mapping_lib", "mapping_spec_of",
           "patches_image", "render_example", "run_mapping", "spec_info", "upload_fields", "uploads"]


def discipline_info(name: str, params: dict[str, Any] | None = None):
    discipline = disciplines.get(name)
    return discipline.info(disciplines.parse_params(discipline, dict(params or {})))


def spec_info(spec: dict[str, Any]):
    """The discipline a run's spec (as stored) trains on, with its parameters."""
    return discipline_info(spec["discipline"], spec.get("discipline_params"))


def render_example(info, row: dict[str, Any], limit: int = 200) -> str:
    """An example in its own symbols: :func:`labcore.data.render`, except that one-number vectors (bit
    strings) are written as their bits (bits-xor's two strings apart: ``info.bit_groups``), not as "10 vectors
    of dimension 1"."""
    if info.input_kind == "vectors" and info.vector_dim == 1 and row.get("vectors") is not None:
        return info.show_bits("".join(f"{float(v[0]):g}" for v in row["vectors"][:limit]))
    return disciplines.render(info, row, limit=limit)


def mapping_spec_of(spec: dict[str, Any]) -> MappingSpec:
    """The mapping rule a run's spec (as stored) names."""
    return of_run(make_spec(**spec))


def run_mapping(lab: Lab, record: JobRecord) -> TokenMapping | None:
    """The TokenMapping a run used: ``mapping.json`` in its folder when the engine wrote one, else rebuilt
    from its spec (same rule, same vocabulary); None for runs that feed vectors or own embeddings."""
    spec = record.spec
    if spec.get("input_adapter") != "vocab" or spec.get("mapping") in (None, "none"):
        return None
    saved = store_of(lab).workdir(record.key) / "mapping.json"
    if saved.is_file():
        try:
            return TokenMapping.from_json(saved.read_text(encoding="utf-8"))
        except LabError:
            pass  # an older format: rebuild below
    info = spec_info(spec)
    alphabet = None if info.input_kind == "text" else info.alphabet
    return build_mapping(mapping_spec_of(spec), alphabet, model_vocab(spec["model"]))
