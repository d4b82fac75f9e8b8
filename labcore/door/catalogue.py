"""What there is to choose from, without torch: backbones, inits and protocols (their registries load names and
descriptions only), the spec's budgets and choices, what a model takes, and the speed measured here."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Iterable

from labcore import runspec as spec_lib
from labcore.engine import speed
from labcore.machine.device import budget_device
from labcore.models import BACKBONES, INITS, known_layers, known_positions, made_here_names, model_folder, read_card
from labcore.protocols import PROTOCOLS  # registers every protocol; loads no torch
from labcore.results.record import RunRecord
from labcore.runspec import (BUDGET_PARAMS, BUDGETS, COUNT_LIMIT, INPUT_ADAPTERS, MAPPING_KINDS, MIN_MAX_LENGTH, POOLINGS,
                          PRECISIONS, TRAIN_SIZES)
from labcore.runspec import estimate as estimate_time

__all__ = ["BUDGETS", "BUDGET_PARAMS", "COUNT_LIMIT", "INPUT_ADAPTERS", "MAPPING_KINDS", "MIN_MAX_LENGTH",
           "POOLINGS", "PRECISIONS", "TRAIN_SIZES", "MeasuredSpeed", "backbones", "budget_device",
           "defaults_family", "estimate_time", "has_stage", "inits", "known_layers", "known_positions",
           "made_here_names", "measured_speed", "protocols"]


@dataclass(frozen=True)
class MeasuredSpeed:
    """A training speed to promise a run, and where it comes from in the words the New experiment page uses."""

    tokens_per_s: float
    words: str


def measured_speed(records: Iterable[RunRecord], model: str, protocol: str, discipline: str, *,
                   mean_tokens: float = 0.0) -> MeasuredSpeed | None:
    """The speed the finished runs in ``records`` promise a run of ``model`` under ``protocol`` on
    ``discipline`` (examples of ``mean_tokens`` tokens), None where they promise none."""
    found = speed.measured_speed(records, model, protocol, discipline, mean_tokens=mean_tokens)
    return None if found is None else MeasuredSpeed(found.tokens_per_s, found.words())


def backbones() -> dict[str, str]:
    """Backbone name -> description: the packaged ones, then the models pretrained here (``lab:``)."""
    named = {name: BACKBONES[name].description for name in BACKBONES.names()}
    for name in made_here_names("lab"):
        named[name] = read_card(model_folder(name)).get("description", "pretrained in the lab")
    return named


def inits() -> dict[str, str]:
    return {name: INITS[name] for name in INITS.names()}


def protocols() -> dict[str, tuple[str, list[tuple[str, type, Any]]]]:
    """Protocol name -> (one-line description with paper section, [(switch, type, default), ...])."""
    out = {}
    for name in PROTOCOLS.names():
        protocol = PROTOCOLS[name]
        hints = typing.get_type_hints(protocol.Params)
        params = [(f.name, hints[f.name], f.default) for f in dataclasses.fields(protocol.Params)]
        out[name] = (protocol.description, params)
    return out


def has_stage(protocol: str) -> bool:
    """Does ``protocol`` train something before the training loop (ORCA's alignment)?"""
    return bool(PROTOCOLS[protocol].stage)


def defaults_family(budget: str, protocol: str) -> str:
    """Which family of training defaults a budget gives a protocol (``frozen``, ``tamkin``, ``finetune``): the
    defaults change only between families, so a form keyed by it keeps its edits within one."""
    return spec_lib._family(budget, protocol)  # the spec's own rule; it has no public name there
