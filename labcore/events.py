"""Events of a job's stream: what each one holds, and how they read back.

A job's handler yields JSON-able dicts with a ``type``: ``attempt`` (written by the store when a worker takes
it), ``log`` (a message; ``source`` engine | stdout | stderr | error | traceback | store | ray | tune),
``start``, ``step``, ``eval``, ``checkpoint`` and ``train_end`` (training; the caller keeps the last, it is
never streamed), ``stage_step`` (a protocol's stage before training), ``node`` (where a cluster task runs),
and a last ``result``. A job's event sink stamps each event it writes with the time ``t``.

Each type is a frozen dataclass here, built where the event is emitted. Its ``to_dict()`` is the dict that
goes out (``type``, the fields in their order, optional ones only where set, then ``t``), and
:func:`event_from_dict` reads one back. Streams and their readers keep dicts: the store, the pages and the
CLI read them by key.

The rest are pure functions that read events: one line of text per event, and curves from training events.
The CLI, the store's log and the pages share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Iterable, TypeVar

STEP = "step"
EVAL = "eval"
CHECKPOINT = "checkpoint"
TRAIN_END = "train_end"
START = "start"
STAGE_STEP = "stage_step"
LOG = "log"
ATTEMPT = "attempt"
NODE = "node"
RESULT = "result"

# Events that come many a second and are cheap to delay: a job's event sink writes them in chunks.
FREQUENT = (STEP, STAGE_STEP)

_OMITTED = "omitted when None"
E = TypeVar("E", bound="Event")


def _optional() -> Any:
    """A key the dict has only where the event has a value: the emitters that never set it leave it out."""
    return field(default=None, metadata={_OMITTED: True})


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event shares: its ``type`` (a class constant) and the time a stream stamped on it."""

    TYPE: ClassVar[str]
    t: float | None = _optional()  # seconds since the epoch; the sink adds it last when it writes the event

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict the stream holds: ``type``, the fields in their order, then ``t``."""
        out: dict[str, Any] = {"type": self.TYPE}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "t" and not (value is None and f.metadata.get(_OMITTED)):
                out[f.name] = value
        if self.t is not None:
            out["t"] = self.t
        return out

    @classmethod
    def from_dict(cls: type[E], data: dict[str, Any]) -> E:
        """The event a dict holds; a key the event does not have is an error (``to_dict`` could not
        give the dict back)."""
        if data.get("type") != cls.TYPE:
            raise ValueError(f"not a {cls.TYPE} event: {data.get('type')!r}")
        values = {k: v for k, v in data.items() if k != "type"}
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"a {cls.TYPE} event has no {', '.join(sorted(unknown))}")
        try:
            return cls(**values)
        except TypeError as exc:  # a required key is missing
            raise ValueError(f"a {cls.TYPE} event needs more keys: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class StepEvent(Event):
    """Training steps read to the host: ``step`` is the last of the ``steps`` steps the event stands for,
    ``loss`` their mean. MLM pretraining adds the batch's masked ``accuracy`` and the speed in tokens."""

    TYPE = STEP
    step: int
    steps: int
    epoch: float
    loss: float
    lr: float
    samples_per_s: float
    accuracy: float | None = _optional()
    tokens_per_s: float | None = _optional()


@dataclass(frozen=True, kw_only=True)
class EvalEvent(Event):
    """An evaluation on ``split`` at ``step``: the metric's ``value`` and the loss (None where there is
    none). The loop leaves ``metric`` out; the run (or pretraining) that knows its name adds it."""

    TYPE = EVAL
    step: int
    split: str
    value: float
    loss: float | None
    metric: str | None = _optional()


@dataclass(frozen=True, kw_only=True)
class CheckpointEvent(Event):
    """The resume checkpoint of ``step``, written to ``path`` after this event goes out."""

    TYPE = CHECKPOINT
    step: int
    path: str


@dataclass(frozen=True, kw_only=True)
class TrainEndEvent(Event):
    """The training loop's last event, for its caller (who builds the record from it): how it ended, the
    best validation, every step's loss and the validation curve as ``[(step, value), ...]``."""

    TYPE = TRAIN_END
    status: str
    best_step: int
    best_value: float | None  # None: no evaluation ran
    steps_done: int
    total_steps: int
    losses: list[tuple[int, float]]
    val_curve: list[tuple[int, float]]
    samples_per_s: float
    host_reads: int
    error: str | None = _optional()  # a diverged run's explanation
    step_note: str | None = _optional()  # how the steps ran, where not eagerly (labcore.engine.step)


@dataclass(frozen=True, kw_only=True)
class StartEvent(Event):
    """Training is about to start: its size, its parameters, and where and in what precision it runs."""

    TYPE = START
    key: str
    total_steps: int
    params_total: int
    params_trainable: int
    device: str
    device_name: str | None = _optional()
    precision: str
    train_examples: int | None = _optional()


@dataclass(frozen=True, kw_only=True)
class StageStepEvent(Event):
    """A step of a protocol's stage before training (ORCA's embedder alignment): its ``metric``'s value."""

    TYPE = STAGE_STEP
    stage: str
    step: int
    total_steps: int
    metric: str
    value: float


@dataclass(frozen=True, kw_only=True)
class LogEvent(Event):
    """A line of the job's log. No ``source``: the engine's own; ``phase`` ``prepare``: a message a run
    printed as it prepared; ``stopped_at``: the step at which a tuner stopped the run."""

    TYPE = LOG
    source: str | None = _optional()
    message: str
    phase: str | None = _optional()
    stopped_at: int | None = _optional()


@dataclass(frozen=True, kw_only=True)
class AttemptEvent(Event):
    """A worker took the job: its ``attempt`` number, and whether it resumes from a checkpoint."""

    TYPE = ATTEMPT
    attempt: int
    resume: bool
    pid: int | None
    host: str


@dataclass(frozen=True, kw_only=True)
class NodeEvent(Event):
    """Where a cluster task runs: the node, its host and address, and the task's process."""

    TYPE = NODE
    node_id: str
    host: str
    ip: str
    pid: int


@dataclass(frozen=True, kw_only=True)
class ResultEvent(Event):
    """A handler's last event: its ``record`` and, for job kinds, the ``status`` it ended with (a run's
    record carries its own)."""

    TYPE = RESULT
    status: str | None = _optional()
    record: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class OutcomeEvent(Event):
    """The stream's last event, written by the worker: how the attempt ended (a page shows it)."""

    TYPE = RESULT
    status: str
    metrics: dict[str, Any] | None
    error: str


EVENTS: tuple[type[Event], ...] = (StepEvent, EvalEvent, CheckpointEvent, TrainEndEvent, StartEvent,
                                   StageStepEvent, LogEvent, AttemptEvent, NodeEvent, ResultEvent, OutcomeEvent)
_BY_TYPE = {cls.TYPE: cls for cls in EVENTS if cls is not OutcomeEvent}


def event_from_dict(data: dict[str, Any]) -> Event:
    """The event a stream's dict holds (a ``result`` without a ``record`` is a worker's outcome)."""
    kind = data.get("type")
    if kind == RESULT and "record" not in data:
        return OutcomeEvent.from_dict(data)
    if kind not in _BY_TYPE:
        raise ValueError(f"unknown event type {kind!r}")
    return _BY_TYPE[kind].from_dict(data)


def log_line(event: dict[str, Any]) -> str | None:
    """The line an event adds to a job's log (log messages and attempts; None for the rest)."""
    kind = event.get("type")
    if kind == LOG:
        source = event.get("source", "engine")
        return ("" if source == "engine" else f"[{source}] ") + str(event.get("message", "")).rstrip("\n")
    if kind == ATTEMPT:
        how = "resumed from checkpoint" if event.get("resume") else "started"
        return f"--- attempt {event['attempt']} {how} by pid {event.get('pid')} ---"
    return None


def describe(event: dict[str, Any]) -> str | None:
    """One line for any event (None for events not worth a line): what ``labcore tail`` prints."""
    kind = event.get("type")
    if kind == STEP:
        if "tokens_per_s" in event:  # MLM pretraining: the batch's masked accuracy, and speed in tokens
            return (f"step {event['step']}  loss {event['loss']:.4f}  masked acc {event.get('accuracy', 0):.3f}  "
                    f"lr {event.get('lr', 0):.2e}  {event['tokens_per_s']:,.0f} tokens/s")
        return (f"step {event['step']}  loss {event['loss']:.4f}  lr {event.get('lr', 0):.2e}  "
                f"{event.get('samples_per_s', 0):.1f} samples/s")
    if kind == EVAL:
        return f"eval {event['step']}  {event.get('split', '')} {event.get('metric', 'metric')} {event['value']:.4f}"
    if kind == STAGE_STEP:
        return (f"{event.get('stage', 'stage')} {event['step']}/{event.get('total_steps', '?')}  "
                f"{event.get('metric', 'value')} {event['value']:.4f}")
    if kind == START:
        return (f"start  {event.get('total_steps')} steps, {event.get('params_trainable', 0):,} of "
                f"{event.get('params_total', 0):,} parameters train, {event.get('device')} {event.get('precision')}")
    if kind == CHECKPOINT:
        return f"checkpoint at step {event['step']}"
    if kind == RESULT:
        # A worker's result event says its status; a handler's own (in-process runs) carries its record.
        record = event.get("record") or {}
        status = event.get("status") or record.get("status", "done")
        error = event.get("error") or record.get("error")
        return f"result  {status}" + (f": {error}" if error else "")
    return log_line(event)


def curves_from_events(events: Iterable[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Loss and evaluation curves from a metric stream, as ``{name: [(step, value), ...]}``.

    A resumed (or restarted) attempt starts again at its checkpoint step: points an earlier attempt
    logged at or after that step are dropped, so the curve continues from the checkpoint instead of
    doubling back. Names: ``train_loss``, ``lr``, ``train_accuracy`` (where steps carry one), ``<split>_loss``,
    ``<split>_<metric>``, and ``<stage>_<metric>`` for a protocol's stage before training (``align_otdd``).
    """
    out: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, step: int, value: Any) -> None:
        if value is None:
            return
        points = out.setdefault(name, [])
        while points and points[-1][0] >= step:
            points.pop()
        points.append((step, float(value)))

    last_step = -1
    for event in events:
        kind = event.get("type")
        if kind == STEP:
            step = int(event["step"])
            if step <= last_step:
                # A step that is not past the last one: a new attempt starts here. Cut every curve.
                for points in out.values():
                    while points and points[-1][0] >= step:
                        points.pop()
            last_step = step
            add("train_loss", step, event.get("loss"))
            add("lr", step, event.get("lr"))
            add("train_accuracy", step, event.get("accuracy"))  # MLM pretraining: masked accuracy of the batch
        elif kind == STAGE_STEP:
            add(f"{event.get('stage', 'stage')}_{event.get('metric', 'value')}", int(event["step"]), event.get("value"))
        elif kind == EVAL:
            split = event.get("split", "validation")
            add(f"{split}_loss", int(event["step"]), event.get("loss"))
            add(f"{split}_{event.get('metric', 'metric')}", int(event["step"]), event.get("value"))
    return {name: points for name, points in out.items() if points}


def stage_curves(events: Iterable[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """The curves of a protocol's stage before training (ORCA's ``align_otdd``), as :func:`curves_from_events`
    names them; empty for a run whose protocol has no stage."""
    events = list(events)
    names = {f"{e.get('stage', 'stage')}_{e.get('metric', 'value')}" for e in events if e.get("type") == STAGE_STEP}
    return {name: points for name, points in curves_from_events(events).items() if name in names}
