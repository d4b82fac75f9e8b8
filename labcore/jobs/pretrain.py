"""The ``pretrain`` kind: MLM pretraining on an L1 corpus (:mod:`labcore.pretrain`), ending in the backbone
``lab:<name>``. The spec is frozen and keyed like a run's, so the same pretraining is never done twice; the
training loop checkpoints to ``resume.pt`` and handles stop requests itself."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from labcore.jobs.base import Event, JobContext, hash_key
from labcore.pretrain.spec import PretrainSpec, resolve_pretrain
from labcore.runspec import keyed_step

KIND = "pretrain"


def pretrain_key(spec: PretrainSpec) -> str:
    """The hash of the resolved spec; ``step`` enters it as a run's does (graphs only: every eager key, so every CPU
    one, is what it was before the field existed)."""
    return hash_key(KIND, keyed_step(dataclasses.asdict(spec)))


def pretrain(spec: PretrainSpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.pretrain.engine import iter_pretrain

    yield from iter_pretrain(spec, key=pretrain_key(spec), workdir=ctx.workdir, should_stop=ctx.should_stop,
                             resume=ctx.resume, checkpoint_every=ctx.checkpoint_every, threads=ctx.threads,
                             commit_file=ctx.commit_file)


def _warm_up() -> None:
    import labcore.pretrain.engine  # noqa: F401  (torch, transformers and the training loop)


def _register() -> None:
    from labcore.jobs import job_kind

    job_kind(KIND, PretrainSpec, description="MLM-pretrain a small RoBERTa-shaped model on an L1 corpus",
             resolve=resolve_pretrain, key=pretrain_key, label=PretrainSpec.label, checkpoint="resume.pt",
             stops_itself=True, warm_up=_warm_up)(pretrain)


_register()
