"""Resolving a RunSpec against the registries: every default filled in, so its key names what will run.

Torch-free (the discipline registry loads no torch to describe a discipline), so the executor keys a
submission exactly as the engine keys its result, in the page's process.
"""

from __future__ import annotations

import dataclasses

from labcore import data as data_registry
from labcore.machine import device as devices
from labcore.data.base import parse_params
from labcore.models.backbones import known_positions
from labcore.spec import RunSpec, resolve


def resolve_spec(spec: RunSpec) -> RunSpec:
    """The resolved spec (its key names the result). Idempotent: resolving twice changes nothing."""
    discipline = data_registry.get(spec.discipline)
    params = parse_params(discipline, dict(spec.discipline_params))
    info = discipline.info(params)
    # Every discipline parameter is written out, so the key changes when a default (or an uploaded
    # file's fingerprint) does, and a stale result is never served for new data.
    full = dataclasses.replace(spec, discipline_params=tuple(sorted(dataclasses.asdict(params).items())))
    # The budget's values for the device the job will train on (standard trains larger batches on a GPU);
    # only unset fields follow it, so an already resolved spec keeps its key wherever it is resolved again.
    return resolve(full, info.input_kind, max_positions=known_positions(spec.model) if spec.max_length else None,
                   device=devices.budget_device())
