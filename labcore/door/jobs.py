"""The jobs beside training runs, as the pages ask for them and read them: attention maps, the analyses of
why transfer works and their layer curves, the transfer atlas, and pretraining a model here."""

from __future__ import annotations

from labcore.door.lab import Lab, store_of
from labcore.recipes import atlas
from labcore.analysis import attention as attn
from labcore.analysis.curves import CURVES, curve_figure, curve_specs, curve_table
from labcore.jobs.analyses import ANALYSES, SPEC_TYPES, ModelRef
from labcore.jobs.attention import RESULT_FILE, AttentionSpec
from labcore.pretrain.spec import SIZES, PretrainSpec, resolve_pretrain
from labcore.results.record import RunRecord

__all__ = ["ANALYSES", "CURVES", "RESULT_FILE", "SIZES", "SPEC_TYPES", "AttentionSpec", "ModelRef", "PretrainSpec",
           "atlas", "attn", "curve_figure", "curve_specs", "curve_table", "finished_runs", "resolve_pretrain"]


def finished_runs(lab: Lab) -> list[RunRecord]:
    """The results of the lab's finished runs, in submission order (what the atlas draws)."""
    return atlas.finished_runs(store_of(lab))
