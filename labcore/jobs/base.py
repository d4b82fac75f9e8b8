"""What a job kind is: a frozen spec dataclass, how to resolve and key it, and its handler.

A handler is a generator ``handler(spec, ctx)`` of JSON-able events (the dicts of :mod:`labcore.events`)
whose last is a ``result`` with a ``status`` and a ``record``, like :func:`labcore.engine.run.iter_run`'s. It
runs in a worker (local or on a cluster), so it may import torch inside its body; the module that
registers the kind must not, because the pages and the executor import it to resolve and key specs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from labcore import durable
from labcore.errors import LabError

if TYPE_CHECKING:
    from labcore.store import JobRecord

Event = dict[str, Any]
StopFn = Callable[[], "str | None"]


@dataclass(frozen=True)
class JobInput:
    """A finished job whose result this job reads: its record and its folder."""

    record: "JobRecord"
    workdir: Path


@dataclass(frozen=True)
class JobContext:
    """What a handler gets besides its spec (the same from every executor)."""

    workdir: Path  # the job's own folder: checkpoints and artifacts go here
    should_stop: StopFn = lambda: None  # "cancelled" | "interrupted" | None; poll it between steps
    resume: bool = False  # a checkpoint of an earlier attempt is in ``workdir``
    checkpoint_every: int = 0  # steps between checkpoints, for kinds that keep them
    threads: int | None = None  # torch threads for this job (None: the handler's own choice)
    inputs: dict[str, JobInput] = field(default_factory=dict)  # required key -> its finished job
    # Move a finished temporary file into place. A worker's version refuses (raising
    # labcore.store.Fenced) once this attempt was superseded, so a stalled worker never overwrites the
    # checkpoint or the artifacts of the attempt that resumed the job.
    commit_file: Callable[[Path, Path], None] = os.replace
    checkpoint: str = ""  # the kind's checkpoint file in ``workdir`` (run_attempt fills it in from the kind)

    def write_file(self, name: str, write: Callable[[Path], Any]) -> Path:
        """Write the file ``name`` of the job's folder whole or not at all: ``write(tmp)`` fills a temporary
        file, which is synced and moved into place by ``commit_file`` (see :mod:`labcore.durable`)."""
        return durable.write_file(self.workdir / name, write, self.commit_file)

    def save_checkpoint(self, state: Any) -> Path:
        """Keep ``state`` (JSON-able) as the kind's checkpoint; a kill during the write leaves the last one.

        Yield the ``checkpoint`` event just before: the worker then stores every event up to it first, so a
        resumed attempt's stream never has a gap."""
        return durable.write_json(self.workdir / self._checkpoint_name(), state, self.commit_file)

    def load_checkpoint(self) -> Any:
        """The state the last :meth:`save_checkpoint` kept (what a resumed attempt continues from)."""
        path = self.workdir / self._checkpoint_name()
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LabError(f"{path} is missing, so the job cannot continue from it: resume needs a checkpoint, "
                           f"or rerun the job from the start") from None
        except ValueError as exc:
            raise LabError(f"{path} does not load ({exc}); delete it and rerun the job from the start") from None

    def _checkpoint_name(self) -> str:
        if not self.checkpoint:
            raise LabError("this job kind keeps no checkpoint: register it with checkpoint=\"FILE\" to keep one")
        return self.checkpoint


@dataclass(frozen=True)
class Resources:
    """What one job of a kind asks of the machine that runs it (a cluster executor schedules by it).

    Not part of the job's key: the same spec gives the same result wherever it runs. ``memory_mb`` 0
    asks for no reservation.
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory_mb: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "Resources":
        return cls(**(values or {}))

    def fits(self, node: dict[str, float]) -> bool:
        """Whether a node with these totals (Ray's names: ``CPU``, ``GPU``, ``memory`` in bytes) could run it."""
        return (node.get("CPU", 0.0) >= self.num_cpus and node.get("GPU", 0.0) >= self.num_gpus
                and node.get("memory", 0.0) >= self.memory_mb * 2**20)

    def copies(self, node: dict[str, float]) -> int:
        """How many jobs asking for these resources a node with these totals runs at once (one CPU each
        where they ask for nothing)."""
        asked = [(node.get("CPU", 0.0), self.num_cpus or 1.0), (node.get("GPU", 0.0), self.num_gpus),
                 (node.get("memory", 0.0), self.memory_mb * 2**20)]
        return int(min(have / need for have, need in asked if need > 0))

    def describe(self) -> str:
        parts = [f"{self.num_cpus:g} CPU", f"{self.num_gpus:g} GPU"]
        if self.memory_mb:
            parts.append(f"{self.memory_mb / 1024:.1f} GiB memory")
        return ", ".join(parts)


def describe_node(node: dict[str, float]) -> str:
    """A node's totals in the words :meth:`Resources.describe` uses."""
    return (f"{node.get('CPU', 0.0):g} CPU, {node.get('GPU', 0.0):g} GPU, "
            f"{node.get('memory', 0.0) / 2**30:.1f} GiB memory")


def _default_encode(spec: Any) -> dict[str, Any]:
    return dataclasses.asdict(spec)


def hash_key(kind: str, values: dict[str, Any]) -> str:
    """The key of a kind's resolved spec: its canonical JSON, hashed with the kind's name."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{kind}:{text}".encode()).hexdigest()[:20]


@dataclass(frozen=True)
class JobKind:
    """One registered kind of background work (see :func:`labcore.jobs.job_kind`)."""

    name: str
    spec_type: type
    handler: Callable[[Any, JobContext], Iterator[Event]]
    # The type ``resolve`` returns where it is not ``spec_type`` (a run's ResolvedSpec): a spec resolved before
    # it is submitted (the page shows it first) is found by it and submitted as it is, never resolved again.
    resolved_type: type | None = None
    description: str = ""
    resolve: Callable[[Any], Any] = lambda spec: spec  # fill defaults (torch-free); idempotent
    encode: Callable[[Any], dict[str, Any]] = _default_encode  # spec -> JSON-able dict
    decode: Callable[[dict[str, Any]], Any] | None = None  # dict -> spec (default: spec_type(**values))
    key: Callable[[Any], str] | None = None  # resolved spec -> key (default: hash_key(name, encode(spec)))
    label: Callable[[Any], str] = lambda spec: ""  # short human name for tables
    requires: Callable[[Any], tuple[str, ...]] = lambda spec: ()  # keys whose results it reads
    checkpoint: str = ""  # file in the job's folder a resumed attempt continues from
    stops_itself: bool = False  # the handler polls should_stop and ends with its own result (and checkpoint)
    warm_up: Callable[[], None] | None = None  # what an idle worker imports ahead, so a job starts at once
    resources: Callable[[Any], Resources] = lambda spec: Resources()  # what one job asks of a cluster node

    def from_dict(self, values: dict[str, Any]) -> Any:
        try:
            return self.decode(values) if self.decode else self.spec_type(**values)
        except TypeError as exc:
            raise LabError(f"not a {self.name} spec: {exc}") from None

    def key_of(self, resolved: Any) -> str:
        return self.key(resolved) if self.key else hash_key(self.name, self.encode(resolved))
