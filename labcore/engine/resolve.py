"""The one resolution of a RunSpec: every default decided for where it will train, so its key names what runs.

:func:`resolve` is called once, where a run is submitted (the run kind's ``resolve``, so the page, the CLI, a
sweep and the Python API all pass through it, and the page's display is the same call); the store keeps the
:class:`~labcore.runspec.resolved.ResolvedSpec`, and whoever runs it reads it and never resolves it again.

It lives in the engine because it reads three registries: the discipline's (its input kind and parameters),
the backbones' (a model's positions) and the protocols' (their parameters). labcore.runspec sits below all three
and may import none of them; the engine sits above them, and the jobs, the CLI, the API and (through
labcore.door) the pages sit above the engine.

Torch-free (the registries load no torch to describe a discipline, a model or a protocol), so the executor
keys a submission in the page's process.
"""

from __future__ import annotations

import dataclasses

from labcore import data as data_registry
from labcore import protocols
from labcore.data.base import parse_params
from labcore.machine import device as devices
from labcore.models.backbones import known_positions
from labcore.runspec import RunSpec
from labcore.runspec.resolved import ResolvedSpec, resolve_fields


def resolve(spec: RunSpec | ResolvedSpec, where: str) -> ResolvedSpec:
    """``spec`` resolved for training on the device kind ``where`` (``cpu`` or ``cuda``: the budget's
    values for it fill the unset fields). A ResolvedSpec comes back as it is: nothing is resolved twice.

    Refuses, before any data or model loads, an unknown discipline, protocol or parameter of either."""
    if isinstance(spec, ResolvedSpec):
        return spec
    discipline = data_registry.get(spec.discipline)
    params = parse_params(discipline, dict(spec.discipline_params))
    info = discipline.info(params)
    # Every discipline parameter is written out, so the key changes when a default (or an uploaded
    # file's fingerprint) does, and a stale result is never served for new data.
    full = dataclasses.replace(spec, discipline_params=tuple(sorted(dataclasses.asdict(params).items())))
    resolved = resolve_fields(full, info.input_kind, device=where,
                              max_positions=known_positions(spec.model) if spec.max_length else None)
    protocols.parse_protocol_params(resolved.protocol, dict(resolved.protocol_params))
    resolved = dataclasses.replace(resolved, step=devices.resolve_step(resolved.step, where))
    return resolved


def resolve_spec(spec: RunSpec | ResolvedSpec) -> ResolvedSpec:
    """``spec`` resolved for where a job submitted from this process trains (:func:`devices.budget_device`)."""
    return resolve(spec, devices.budget_device())
