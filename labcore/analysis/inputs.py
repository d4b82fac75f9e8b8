"""What every analysis of models starts from: a model (a backbone at an init, or a finished run's
fine-tuned weights) prepared on a discipline exactly as a run would be, and the same seeded examples
for every model compared. Imports torch (the worker runs analyses; the pages never do)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import torch

from labcore.errors import LabError


def prepare(ref: dict[str, Any], discipline: str, discipline_params: dict[str, Any], *, max_length: int = 0,
            run_input: Any = None, attn_implementation: str = "sdpa"):
    """A :class:`labcore.engine.run.Prepared` for ``ref`` (``{"model", "init", "seed", "mapping", "run"}``).

    With ``ref["run"]`` set, ``run_input`` is that finished run's :class:`labcore.jobs.JobInput`: its
    model comes back as it ended (:func:`labcore.engine.run.load_trained`), on its own discipline, which must be
    the analysis's. Otherwise the backbone is prepared as a ``full`` run of it would start.
    """
    from labcore.engine.resolve import resolve_spec
    from labcore.engine.run import BEST_WEIGHTS, Prepared, load_trained
    from labcore.runspec import make_spec

    if ref.get("run"):
        record = run_input.record
        spec = make_spec(**record.spec)
        if spec.discipline != discipline:
            raise LabError(f"run {ref['run']} was trained on {spec.discipline}, and this analysis looks at "
                           f"{discipline}: pick the run's discipline, or a run of this one")
        if not (Path(run_input.workdir) / BEST_WEIGHTS).is_file():
            raise LabError(f"run {ref['run']} has no trained weights ({BEST_WEIGHTS}); it is {record.status}")
        return load_trained(spec, Path(run_input.workdir), attn_implementation=attn_implementation)
    return Prepared(resolve_spec(_backbone_spec(ref, discipline, discipline_params, max_length)),
                    attn_implementation=attn_implementation)


def backbone_parameters(ref: dict[str, Any], discipline: str, discipline_params: dict[str, Any], *,
                        max_length: int = 0, run_input: Any = None) -> dict[str, torch.Tensor]:
    """The backbone's parameters by name: its layers hold what those of :func:`prepare`'s model hold.

    A backbone at an init is loaded alone: no data, no input adapter or head (its word table, which a
    lab model moves into its input adapter, is still in place). A finished run stores only its trainable
    parameters, and the rest are what its protocol made of a model built for its data, so its model is
    prepared in full, as :func:`prepare` does.
    """
    from labcore.models import load_backbone
    from labcore.engine.resolve import resolve_spec

    if ref.get("run"):
        prepared = prepare(ref, discipline, discipline_params, max_length=max_length, run_input=run_input)
        backbone = prepared.model.backbone
    else:
        # Resolved as a run's spec is: one that a run would refuse is refused here too.
        spec = resolve_spec(_backbone_spec(ref, discipline, discipline_params, max_length))
        backbone, _, _ = load_backbone(spec.model, spec.init, seed=spec.seed)
    return {name: p.detach() for name, p in backbone.named_parameters()}


def _backbone_spec(ref: dict[str, Any], discipline: str, discipline_params: dict[str, Any], max_length: int):
    """The spec of a ``full`` run of ``ref``'s backbone on the discipline."""
    from labcore.runspec import make_spec

    return make_spec(model=ref["model"], init=ref["init"], seed=int(ref.get("seed", 0)),
                     mapping=ref.get("mapping", "auto"), discipline=discipline,
                     discipline_params=discipline_params, max_length=max_length)


def pick(n_available: int, n: int, seed: int) -> np.ndarray:
    """The same ``n`` example positions (seeded) for every model: sorted, so batches pad little."""
    if n_available == 0:
        raise LabError("the split has no examples to analyse")
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(n_available)[:min(n, n_available)])


def batch(prepared, split: str, index: np.ndarray, device: str = "cpu"):
    """Examples ``index`` of ``split`` as one padded :class:`labcore.data.encode.Batch`."""
    from labcore.data.encode import collate

    data = prepared.splits[split]
    return collate(data, index, device)


def batches(prepared, split: str, index: np.ndarray, size: int = 32):
    """The examples in chunks of ``size`` (memory stays flat however many are analysed)."""
    for start in range(0, len(index), size):
        yield batch(prepared, split, index[start:start + size])


class Packed(torch.nn.Module):
    """The lab model taking one tensor per example, its inputs and its mask side by side, so that
    per-example gradients (each example alone through ``vmap``) still mask the padding. It pools the full
    last layer: the rows-only shortcut of training swaps modules for a pass, which ``vmap`` cannot trace."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    @staticmethod
    def pack(inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """tokens [B, L] -> [B, L, 2]; vectors [B, L, d] -> [B, L, d + 1]."""
        if inputs.ndim == 2:
            return torch.stack([inputs, mask.to(inputs.dtype)], dim=-1)
        return torch.cat([inputs, mask[..., None].to(inputs.dtype)], dim=-1)

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        adapter = self.model.adapter
        if packed.dtype == torch.long:
            inputs, mask = packed[..., 0], packed[..., 1]
            # The table itself: the adapters' range checks read values, which vmap cannot (the ids come
            # from the prepared data, so they are in range).
            embeds = adapter.embedding(inputs)
        else:
            inputs, mask = packed[..., :-1], packed[..., -1].long()
            embeds = adapter(inputs)
        return self.model.head(self.model.pooled_from_embeddings(embeds, mask))
