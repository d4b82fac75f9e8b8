"""Standard deviation of the attention and feed-forward weight matrices, layer by layer (FPT §3.8, fig. 6).

Lu et al. ask whether a pretrained transformer helps only through better parameter statistics, and
plot each layer's standard deviation against the 0.02 of GPT-2's default initialiser. Here the std of
a (layer, kind) group is over all entries of all its weight matrices pooled (attention: query, key,
value and output projections together; feed-forward: both or all three projections), population std
(ddof 0), in float64. Pure numpy: tensors are only read.

Names are parsed for the families the lab uses (:func:`parse_name`):

* BERT / RoBERTa ``encoder.layer.{i}.attention.self.query.weight``, ``...intermediate.dense.weight``;
* ALBERT ``encoder.albert_layer_groups.{g}.albert_layers.{j}.attention.query.weight``, ``...ffn.weight``
  (the layer is the shared group ``g``);
* GPT-2 ``h.{i}.attn.c_attn.weight``, ``h.{i}.mlp.c_fc.weight``;
* Llama ``layers.{i}.self_attn.q_proj.weight``, ``layers.{i}.mlp.up_proj.weight``;

with any prefix (``backbone.``). Biases, norms and embeddings are not weight matrices and are skipped.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

import numpy as np

KINDS = ("attention", "feedforward")
_LAYER = re.compile(r"(?:^|\.)(?:layer|h|layers|albert_layer_groups)\.(\d+)\.")
_ATTENTION = {"attention", "attn", "self_attn", "crossattention"}
_FEEDFORWARD = {"mlp", "intermediate", "output", "ffn", "ffn_output"}


def parse_name(name: str) -> tuple[int, str] | None:
    """(layer, kind) of a weight-matrix parameter name, or None for anything else."""
    match = _LAYER.search(name)
    if match is None or not name.endswith(".weight") or "norm" in name.lower() or ".ln_" in name:
        return None
    parts = set(name[match.end():].split("."))
    # Attention first: BERT's attention.output.dense lies under both an attention and an output part.
    if parts & _ATTENTION:
        return int(match.group(1)), "attention"
    if parts & _FEEDFORWARD:
        return int(match.group(1)), "feedforward"
    return None


def _entries(weights) -> Iterable[tuple[int, str, np.ndarray]]:
    """(layer, kind, float64 array) from a name -> tensor mapping (parsed; 2-D only) or from triples."""
    if isinstance(weights, Mapping):
        weights = [(*parsed, t) for name, t in weights.items() if (parsed := parse_name(name))]
    for layer, kind, t in weights:
        a = t.detach().cpu().numpy() if hasattr(t, "detach") else t
        a = np.asarray(a, dtype=np.float64)
        if a.ndim == 2:  # a matrix; 1-D entries that slipped past the parser are biases or scales
            yield int(layer), kind, a


def layer_stds(weights) -> dict[str, np.ndarray]:
    """kind -> [layers] std of that kind's weight entries in each layer (nan where a layer has none).

    ``weights``: a list of (layer index, kind, tensor [rows, cols]) or a name -> tensor dict (e.g.
    ``model.state_dict()``) parsed with :func:`parse_name`; layers run from 0 to the largest seen.
    """
    groups: dict[tuple[int, str], list[np.ndarray]] = {}
    for layer, kind, a in _entries(weights):
        groups.setdefault((layer, kind), []).append(a.ravel())
    layers = 1 + max((layer for layer, _ in groups), default=-1)
    seen = {kind for _, kind in groups}
    kinds = [k for k in KINDS if k in seen] + sorted(seen - set(KINDS))  # the usual two first
    out = {kind: np.full(layers, np.nan) for kind in kinds}
    for (layer, kind), parts in groups.items():
        out[kind][layer] = np.concatenate(parts).std()
    return out
