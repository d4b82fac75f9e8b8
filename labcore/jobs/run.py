"""The ``run`` kind: train one RunSpec (data -> mapping -> model -> protocol -> train -> evaluate -> record).

A RunSpec is resolved once, when it is submitted (:func:`resolve_run`); the store keeps the
:class:`~labcore.runspec.resolved.ResolvedSpec`, the worker decodes it as it is and trains it, resolving nothing.
Its key is ``RunSpec.key`` of the resolved values (what it has always been, so stored results keep their keys);
the training loop checkpoints to ``resume.pt`` and handles stop requests itself. What a run's job record holds
as its result, and how it reads, is :mod:`labcore.engine.run_results`' (below the kinds: the engine's in-process
sweep writes it too).
"""

from __future__ import annotations

from typing import Iterator

from labcore.events import LogEvent
from labcore.jobs.base import Event, JobContext, Resources
from labcore.machine import device as devices
from labcore.paths import env_number
from labcore.engine import run_results
from labcore.engine.resolve import resolve
from labcore.runspec import RunSpec
from labcore.runspec.resolved import ResolvedSpec


def resolve_run(spec: RunSpec | ResolvedSpec) -> ResolvedSpec:
    """The spec resolved for where a job submitted from this process trains; a resolved one as it is (the
    page and the Python API resolve before they submit, and a resume submits the stored resolution).

    Torch-free, so an unknown discipline, protocol (or parameter) is refused when a run is submitted, not
    after its data and model have loaded.
    """
    if isinstance(spec, ResolvedSpec):
        return spec
    return resolve(spec, devices.budget_device())


def body_source(spec: ResolvedSpec) -> tuple[str, ...]:
    """A run on ``run:<key>`` needs that run finished: it starts from its body."""
    return (spec.model[len("run:"):],) if spec.model.startswith("run:") else ()


def train_run(spec: ResolvedSpec, ctx: JobContext) -> Iterator[Event]:
    """Train the stored resolution (the worker decoded it with :meth:`ResolvedSpec.from_dict`)."""
    from labcore.engine.run import iter_run

    for key in body_source(spec):
        from labcore.pretrain.bodies import ensure_run_body

        source = ctx.inputs[key]
        yield LogEvent(message=f"the body of run {key}: {ensure_run_body(source.record, source.workdir)}").to_dict()

    yield from iter_run(spec, workdir=ctx.workdir, should_stop=ctx.should_stop, resume=ctx.resume,
                        checkpoint_every=ctx.checkpoint_every, threads=ctx.threads, commit_file=ctx.commit_file)


def run_resources(spec: ResolvedSpec) -> Resources:
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

    job_kind(run_results.KIND, RunSpec, resolved_type=ResolvedSpec,
             description="train one model on one discipline under one protocol",
             resolve=resolve_run, encode=ResolvedSpec.to_dict, decode=ResolvedSpec.from_dict,
             key=lambda spec: spec.key, label=ResolvedSpec.label, requires=body_source,
             checkpoint=run_results.CHECKPOINT,
             stops_itself=True, warm_up=_warm_up, resources=run_resources)(train_run)


_register()
