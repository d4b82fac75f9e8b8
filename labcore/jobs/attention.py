"""The ``attention`` kind: attention maps of one example of a finished run, under its pretrained, random
and fine-tuned weights (:mod:`labcore.analysis.attention` computes them), written to ``attention.npz``
in the job's folder. The page submits it and polls; it never computes maps itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from labcore.errors import LabError
from labcore.events import LogEvent, ResultEvent
from labcore.jobs.base import Event, JobContext

RESULT_FILE = "attention.npz"


@dataclass(frozen=True)
class AttentionSpec:
    run: str  # the key of a finished run
    split: str = "test"
    index: int = 0  # the example's position in its split

    def label(self) -> str:
        return f"attention maps of {self.run[:8]}: {self.split} example {self.index}"


def resolve(spec: AttentionSpec) -> AttentionSpec:
    from labcore.analysis.attention import SPLITS  # numpy only

    if spec.split not in SPLITS:
        raise LabError(f"unknown split {spec.split!r}; valid splits: {', '.join(SPLITS)}")
    if int(spec.index) < 0:
        raise LabError(f"the example index must be 0 or more, got {spec.index}")
    return AttentionSpec(run=str(spec.run), split=spec.split, index=int(spec.index))


def attention_maps(spec: AttentionSpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.analysis.attention import compute_attention, save_attention

    source = ctx.inputs[spec.run]
    yield LogEvent(message=f"attention maps of {spec.split} example {spec.index} under the pretrained, "
                           f"random and fine-tuned weights").to_dict()
    maps = compute_attention(source.record, source.workdir, spec.split, spec.index)
    save_attention(ctx.workdir / RESULT_FILE, maps, commit_file=ctx.commit_file)
    yield ResultEvent(status="done",
                      record={"file": RESULT_FILE, "layers": maps.layers, "heads": maps.heads,
                              "label": maps.meta.get("label"), "prediction": maps.meta.get("prediction")}).to_dict()


def _register() -> None:
    from labcore.jobs import job_kind

    job_kind("attention", AttentionSpec, description="attention maps of one example of a finished run",
             resolve=resolve, label=AttentionSpec.label, requires=lambda spec: (spec.run,))(attention_maps)


_register()
