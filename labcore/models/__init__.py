"""Backbones, their structure, and lab models (input adapter -> transformer -> pooling -> linear head).

* :mod:`.backbones`: :func:`load_backbone`, a backbone loaded offline in fp32, and its :class:`BackboneInfo`.
* :mod:`.model_names`: packaged / hub / local / tiny / lab / run backbone names, where each model comes from.
* :mod:`.conversion`: packaged checkpoints (a pickle, a GGUF) converted once into transformers folders.
* :mod:`.inits`: the inits ``pretrained``, ``random``, ``stats``.
* :mod:`.architectures`: where each family keeps its layers (:class:`Structure`), its initialiser.
* :mod:`.lab_model`: :class:`LabModel`, input adapters, pooling, :func:`build_lab_model`.
* :mod:`.pooled_rows`: the last block computed for the pooled rows only (one row per sequence).
* :mod:`.cpu_kernels`: the dropout and attention a lab model trains with on the CPU.

Names resolve on first use, so ``from labcore.models import BACKBONES, backbone_names`` (what the app needs
to list models) imports neither torch nor transformers; everything else loads torch when first touched.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "backbones": ("BackboneInfo", "backbone_info", "known_layers", "known_positions", "load_backbone",
                  "positions_of"),
    "model_names": ("BACKBONES", "MADE_HERE", "Source", "backbone_names", "made_here_names", "model_folder",
                    "read_card", "resolve_backbone", "TINY_VOCAB"),
    "conversion": ("install_folder", "models_dir"),
    "inits": ("INITS", "init_from_statistics"),
    "architectures": ("LAYOUTS", "Layout", "Structure", "structure"),
    "lab_model": ("INPUT_ADAPTERS", "POOLINGS", "DetachedEmbedding", "EmbeddingAdapter", "LabModel",
                  "LinearAdapter", "VocabAdapter", "build_lab_model", "build_lab_model_from", "count_parameters"),
    "seeding": ("derive_seed", "generator", "seeded"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'labcore.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"labcore.models.{_WHERE[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
