"""The ``run`` kind: train one RunSpec (data -> mapping -> model -> protocol -> train -> evaluate -> record).

Its key is ``RunSpec.key`` of the resolved spec (what it has always been, so stored results keep their
keys); the training loop checkpoints to ``resume.pt`` and handles stop requests itself.
"""

from __future__ import annotations

from typing import Iterator

from labcore import protocols
from labcore.events import LogEvent
from labcore.jobs.base import Event, JobContext, Resources
from labcore.paths import env_number
from labcore.engine.resolve import resolve_spec
from labcore.spec import RunSpec, make_spec


def resolve_run(spec: RunSpec) -> RunSpec:
    """The resolved spec, its protocol and protocol parameters checked against the protocol registry.

    Torch-free, so an unknown protocol (or parameter) is refused when a run is submitted or started, not
    after its data and model have loaded. The check lives here rather than in :mod:`labcore.engine.resolve`,
    which sits beside the protocols in the layers and may not import them.
    """
    resolved = resolve_spec(spec)
    protocols.parse_protocol_params(resolved.protocol, dict(resolved.protocol_params))
    return resolved


def body_source(spec: RunSpec) -> tuple[str, ...]:
    """A run on ``run:<key>`` needs that run finished: it starts from its body."""
    return (spec.model[len("run:"):],) if spec.model.startswith("run:") else ()


def train_run(spec: RunSpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.engine.run import iter_run

    for key in body_source(spec):
        from labcore.pretrain.bodies import ensure_run_body

        source = ctx.inputs[key]
        yield LogEvent(message=f"the body of run {key}: {ensure_run_body(source.record, source.workdir)}").to_dict()

    yield from iter_run(spec, workdir=ctx.workdir, should_stop=ctx.should_stop, resume=ctx.resume,
                        checkpoint_every=ctx.checkpoint_every, threads=ctx.threads, commit_file=ctx.commit_file)


def run_resources(spec: RunSpec) -> Resources:
    """One CPU per run; on a cluster with GPUs, ``TRANSFERLAB_RUN_GPUS`` (default 0; 0.5 lets two runs share
    one) asks each run for that many. A run uses CUDA wherever it finds one, so this only decides where
    the scheduler puts it."""
    return Resources(num_cpus=1.0, num_gpus=env_number("TRANSFERLAB_RUN_GPUS", 0.0, "the GPUs each run asks for "
                                                                                  "(default 0)"))


def _warm_up() -> None:
    from labcore.engine.run import warm_up

    warm_up()


def _register() -> None:
    from labcore.jobs import job_kind

    job_kind("run", RunSpec, description="train one model on one discipline under one protocol",
             resolve=resolve_run, encode=RunSpec.to_dict, decode=lambda values: make_spec(**values),
             key=lambda spec: spec.key, label=RunSpec.label, requires=body_source, checkpoint="resume.pt",
             stops_itself=True, warm_up=_warm_up, resources=run_resources)(train_run)


_register()
