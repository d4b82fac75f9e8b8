"""Data as the pages see it: the disciplines, their data sets and examples, the L1 corpora, the assets on this
machine, and the token mappings that feed symbols to a model's vocabulary. A discipline, a corpus or an asset is
asked for by name and answered in rows (its title, its info, a summary); no registry is handed out. The upload
form's part is :mod:`labcore.door.uploads`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from labcore import assets as asset_lib
from labcore import data as disciplines
from labcore.assets import Asset
from labcore.data.base import cache_path, example_lengths, label_counts, params_key
from labcore.data.images import patches_image
from labcore.errors import LabError
from labcore.mapping import RUN_SPECIAL_FIX, MappingSpec, TokenMapping, build_mapping, model_vocab, of_run
from labcore.mapping import describe_kind as describe_mapping
from labcore.pretrain import corpora
from labcore.pretrain.corpora import MAX_LENGTH as CORPUS_MAX_LENGTH
from labcore.pretrain.corpora import MIN_LENGTH as CORPUS_MIN_LENGTH
from labcore.pretrain.corpora import corpus_names, corpus_stats
from labcore.pretrain.corpora import text_size as corpus_text_size
from labcore.pretrain.corpora import vocabulary as corpus_vocabulary
from labcore.runspec import make_spec
from labcore.door.lab import Lab, store_of
from labcore.store import JobRecord

__all__ = ["CORPUS_MAX_LENGTH", "CORPUS_MIN_LENGTH", "RUN_SPECIAL_FIX", "CorpusAbout", "MappingSpec",
           "asset_available", "assets", "build_dataset", "build_mapping", "corpus_about",
           "corpus_names", "corpus_sample", "corpus_text_size", "corpus_vocabulary",
           "dataset_summary", "describe_mapping", "discipline_available", "discipline_info", "discipline_names",
           "discipline_presets", "discipline_title", "fetch_assets", "is_built", "label_name", "load_dataset",
           "mapping_spec_of", "model_vocab", "params_key", "patches_image", "preset_params", "render_example",
           "run_mapping", "spec_info"]

label_name = disciplines.label_name  # a label in the discipline's own words (a class name, bits, a number)
discipline_names = disciplines.names  # every fixed discipline, then the user's uploads


# ------------------------------------------------------------------------------------------- disciplines
def discipline_title(name: str) -> str:
    return disciplines.get(name).title


def discipline_available(name: str) -> tuple[bool, str]:
    """Whether ``name`` can be built here, and why not where it cannot (a missing asset, say)."""
    return disciplines.get(name).available()


def discipline_presets(name: str) -> dict[str, dict[str, Any]]:
    """The named variants of ``name``: preset -> the parameters it sets over the defaults."""
    return dict(disciplines.get(name).presets)


def preset_params(name: str, preset: str = "") -> Any:
    """``name``'s parameters (its frozen Params row) under ``preset`` ("": the defaults runs use)."""
    return disciplines.parse_params(disciplines.get(name), {}, preset)


def discipline_info(name: str, params: dict[str, Any] | None = None, preset: str = ""):
    discipline = disciplines.get(name)
    return discipline.info(disciplines.parse_params(discipline, dict(params or {}), preset))


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


# ------------------------------------------------------------------------------------------- data sets
def is_built(name: str, params: Any) -> bool:
    """Whether ``name``'s data set under ``params`` (its Params row) is in the cache already."""
    return (cache_path(name, params) / "dataset_dict.json").is_file()


def build_dataset(name: str, params: dict[str, Any], progress: Callable[[str], None]) -> None:
    """Build ``name``'s data set into the cache (the first time: music parses hundreds of scores)."""
    disciplines.load(name, params, progress=progress)


def load_dataset(name: str, params: dict[str, Any]):
    """``name``'s data set under ``params``, split by split (a table of examples per split), from the cache."""
    dataset, _ = disciplines.load(name, params, progress=lambda _m: None)
    return dataset


def dataset_summary(name: str, params: dict[str, Any], shown: int = 6) -> dict[str, Any]:
    """Sizes, class counts per split, every length, ``shown`` examples of the training split spread over it (in
    their own symbols) and, where examples are windows of longer items, the items per split: plain data."""
    dataset, info = disciplines.load(name, params, progress=lambda _m: None)
    sizes = {split: len(dataset[split]) for split in dataset}
    counts: dict[str, dict[str, int]] = {}
    lengths: list[int] = []
    for split in dataset:
        if info.output_kind == "class":
            counts[split] = dict(zip(info.class_names, label_counts(dataset[split], len(info.class_names))))
        lengths += example_lengths(dataset[split], info.input_kind)
    train = dataset["train"]
    picks = np.linspace(0, len(train) - 1, num=min(shown, len(train)), dtype=int).tolist() if len(train) else []
    examples = [{"label": label_name(info, train[i]["label"]), "shown": render_example(info, train[i]),
                 "vectors": train[i].get("vectors")} for i in picks]
    groups = None
    if "group" in train.column_names:
        groups = {split: len(set(dataset[split]["group"])) for split in dataset}
    return {"sizes": sizes, "counts": counts, "lengths": lengths, "examples": examples, "groups": groups}


# ------------------------------------------------------------------------------------------- L1 corpora
@dataclass(frozen=True)
class CorpusAbout:
    """What the pages say of an L1 corpus beside its sample."""

    name: str
    description: str
    licence: str
    few_ids: bool  # draws from a small part of the vocabulary: 50-substitute applies (Chiang §4.3)


def corpus_about(name: str) -> CorpusAbout:
    corpus = corpora.CORPORA[name]
    return CorpusAbout(corpus.name, corpus.description, corpus.licence, corpus.few_ids)


def corpus_sample(name: str, sequences: int, seed: int, *, shown: int = 3,
                  tokens: int = 40) -> tuple[dict[str, Any], list[list[str]]]:
    """A seeded sample of ``sequences`` sequences of ``name``: its statistics (:func:`corpus_stats`), and the
    first ``tokens`` tokens of its first ``shown`` sequences, as words of the vocabulary."""
    drawn = corpora.CORPORA[name].generate(sequences, seed, structure=True)
    vocab = corpus_vocabulary()
    return corpus_stats(drawn), [[vocab[i] for i in ids[:tokens]] for ids, _ in drawn[:shown]]


# ----------------------------------------------------------------------------------------------- assets
def assets() -> dict[str, Asset]:
    """Every asset the lab knows (weights and data), by name, in the catalogue's order."""
    return dict(asset_lib.ASSETS.items())


def asset_available(name: str) -> bool:
    """Whether ``name`` is on this machine, checked by sha256."""
    return asset_lib.is_available(name)


def fetch_assets(names: Iterable[str], progress: Callable[[str], None]) -> dict[str, str]:
    """Fetch ``names``: name -> "ok" or the error, so one failure stops none."""
    return asset_lib.fetch_all(names, progress=progress)


# --------------------------------------------------------------------------------------- token mappings
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
