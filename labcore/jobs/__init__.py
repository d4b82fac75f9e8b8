"""The job kinds: every kind of background work the lab runs, by name.

A kind is one registry entry and one module: a frozen spec dataclass and a handler registered with
:func:`job_kind`. Every kind then gets, from the store, the worker and the executor, what training runs
have: a durable queue with priorities, a result cache by key, live event streams, heartbeats, cancel,
dead detection, resume (from the kind's checkpoint, where it keeps one), per-job logs and groups. A
kind may need other jobs' results (``requires``): it is refused until they are finished.

Built in: ``run`` (:mod:`.run`, training), ``attention`` (:mod:`.attention`, attention maps),
``pretrain`` (:mod:`.pretrain`, MLM pretraining) and the analyses of trained and untrained models
(:mod:`.analyses`). More
kinds can live outside the package: name their modules in ``TRANSFERLAB_JOB_MODULES`` (comma separated)
and every process that resolves or runs jobs imports them.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

from labcore.errors import LabError
from labcore.jobs.base import Event, JobContext, JobInput, JobKind, Resources, describe_node, hash_key
from labcore.registry import Registry
from labcore.store import NewJob

KINDS: Registry[JobKind] = Registry("job kind")
MODULES_VARIABLE = "TRANSFERLAB_JOB_MODULES"


def job_kind(name: str, spec_type: type, **options: Any) -> Callable:
    """Register ``handler(spec, ctx)`` as the kind ``name`` for specs of ``spec_type`` (a decorator); the
    options are :class:`JobKind`'s fields."""

    def register(handler: Callable) -> Callable:
        KINDS.register(name, JobKind(name=name, spec_type=spec_type, handler=handler, **options))
        return handler

    return register


def kind_of(spec: Any) -> JobKind:
    """The kind whose spec type (or resolved spec type) ``spec`` is."""
    load_modules()
    for _, kind in KINDS.items():
        if type(spec) in (kind.spec_type, kind.resolved_type):
            return kind
    valid = ", ".join(f"{k.name} ({k.spec_type.__name__})" for _, k in KINDS.items())
    raise LabError(f"{type(spec).__name__} is not the spec of any job kind; kinds: {valid}")


def get_kind(name: str) -> JobKind:
    load_modules()
    return KINDS[name]


def new_job(spec: Any) -> NewJob:
    """Resolve and key a spec of any kind: what the store queues (torch-free; once per submission, and not
    at all for a spec resolved already)."""
    kind = kind_of(spec)
    resolved = kind.resolve(spec)
    return NewJob(kind=kind.name, key=kind.key_of(resolved), spec=kind.encode(resolved),
                  label=kind.label(resolved), requires=tuple(kind.requires(resolved)),
                  checkpoint=kind.checkpoint, resources=kind.resources(resolved).to_dict())


def key_of(spec: Any) -> str:
    """The key a spec's job has (whether or not it was ever submitted)."""
    return new_job(spec).key


_LOADED: set[str] = set()


def load_modules(names: str | None = None) -> None:
    """Import the kind modules named in ``TRANSFERLAB_JOB_MODULES`` (once each)."""
    text = os.environ.get(MODULES_VARIABLE, "") if names is None else names
    for name in (n.strip() for n in text.split(",")):
        if name and name not in _LOADED:
            _LOADED.add(name)
            importlib.import_module(name)


# The built-in kinds register themselves on import.
from labcore.jobs import analyses as _analyses  # noqa: E402,F401
from labcore.jobs import attention as _attention  # noqa: E402,F401
from labcore.jobs import pretrain as _pretrain  # noqa: E402,F401
from labcore.jobs import run as _run  # noqa: E402,F401

__all__ = ["Event", "JobContext", "JobInput", "JobKind", "KINDS", "MODULES_VARIABLE", "Resources",
           "describe_node", "get_kind", "hash_key", "job_kind", "key_of", "kind_of", "load_modules", "new_job"]
