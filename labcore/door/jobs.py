"""The jobs beside training runs, as the pages ask for them and read them: attention maps, the analyses of
why transfer works and their layer curves, the transfer atlas, and pretraining a model here."""

from __future__ import annotations

from typing import Iterable

from labcore.door.lab import Lab, store_of
from labcore.recipes import atlas
from labcore.recipes.atlas import (FILL_BUDGET, FILL_SEEDS, LOGME_EXAMPLES, LOGME_GROUP, MIN_SEEDS, Atlas,
                                   atlas_figure, atlas_table, build_atlas, cell_lines, fill_specs, logme_key)
from labcore.recipes.atlas import Protocol as AtlasProtocol
from labcore.recipes.atlas import present as atlas_present
from labcore.analysis.attention import WEIGHT_NOTES, AttentionMaps, attention_path, layer_distances, load_attention
from labcore.analysis.attention import SPLITS as ATTENTION_SPLITS
from labcore.analysis.attention import WEIGHTS as ATTENTION_WEIGHTS
from labcore.analysis.curves import CURVES, curve_specs, curve_table
from labcore.figures.analysis import layer_curve_figure
from labcore.jobs.analyses import ANALYSES, SPEC_TYPES, ModelRef
from labcore.jobs.attention import RESULT_FILE, AttentionSpec
from labcore.pretrain.spec import SIZES, PretrainSpec, resolve_pretrain
from labcore.results.record import RunRecord

__all__ = ["ANALYSES", "ATTENTION_SPLITS", "ATTENTION_WEIGHTS", "CURVES", "FILL_BUDGET", "FILL_SEEDS",
           "LOGME_EXAMPLES", "LOGME_GROUP", "MIN_SEEDS", "RESULT_FILE", "SIZES", "SPEC_TYPES", "WEIGHT_NOTES",
           "AtlasProtocol", "AttentionMaps", "AttentionSpec", "ModelRef", "PretrainSpec", "atlas_estimates",
           "atlas_figure", "atlas_present", "atlas_table", "attention_path", "build_atlas", "cell_lines",
           "curve_figure", "curve_specs", "curve_table", "fill_specs", "finished_runs", "layer_distances",
           "load_attention", "logme_key", "resolve_pretrain"]


def finished_runs(lab: Lab) -> list[RunRecord]:
    """The results of the lab's finished runs, in submission order (what the atlas draws)."""
    return atlas.finished_runs(store_of(lab))


def atlas_estimates(lab: Lab, grid: Atlas) -> Atlas:
    """``grid`` with the LogME estimates of its cells that the lab's finished logme jobs hold."""
    return grid.with_estimates(atlas.estimates_from_store(store_of(lab), grid.logme_specs()))


def curve_figure(name: str, records: Iterable[RunRecord]):
    """The layer curve ``name`` of ``records`` (mean with its 95 % interval over seeds) and the full fine-tunes as
    horizontal lines: the analysis's table, drawn."""
    curve = CURVES[name]
    return layer_curve_figure(curve_table(name, records), name=curve.name, title=curve.title, x_label=curve.x_label)
