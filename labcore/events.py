"""Events of a job's stream, read back: one line of text per event, and curves from training events.

A job's handler yields JSON-able dicts with a ``type``: ``attempt`` (written by the store when a worker
takes it), ``log`` (a message; ``source`` engine | stdout | stderr | error | traceback | store),
``start``, ``step``, ``eval``, ``checkpoint`` (training), ``stage_step`` (a protocol's stage before training:
``stage``, ``step``, ``total_steps``, ``metric``, ``value``), and a last ``result``. Pure functions: the CLI,
the store's log and the pages share them.
"""

from __future__ import annotations

from typing import Any, Iterable


# Events that come many a second and are cheap to delay: a job's event sink writes them in chunks.
FREQUENT = ("step", "stage_step")


def log_line(event: dict[str, Any]) -> str | None:
    """The line an event adds to a job's log (log messages and attempts; None for the rest)."""
    kind = event.get("type")
    if kind == "log":
        source = event.get("source", "engine")
        return ("" if source == "engine" else f"[{source}] ") + str(event.get("message", "")).rstrip("\n")
    if kind == "attempt":
        how = "resumed from checkpoint" if event.get("resume") else "started"
        return f"--- attempt {event['attempt']} {how} by pid {event.get('pid')} ---"
    return None


def describe(event: dict[str, Any]) -> str | None:
    """One line for any event (None for events not worth a line): what ``labcore tail`` prints."""
    kind = event.get("type")
    if kind == "step":
        if "tokens_per_s" in event:  # MLM pretraining: the batch's masked accuracy, and speed in tokens
            return (f"step {event['step']}  loss {event['loss']:.4f}  masked acc {event.get('accuracy', 0):.3f}  "
                    f"lr {event.get('lr', 0):.2e}  {event['tokens_per_s']:,.0f} tokens/s")
        return (f"step {event['step']}  loss {event['loss']:.4f}  lr {event.get('lr', 0):.2e}  "
                f"{event.get('samples_per_s', 0):.1f} samples/s")
    if kind == "eval":
        return f"eval {event['step']}  {event.get('split', '')} {event.get('metric', 'metric')} {event['value']:.4f}"
    if kind == "stage_step":
        return (f"{event.get('stage', 'stage')} {event['step']}/{event.get('total_steps', '?')}  "
                f"{event.get('metric', 'value')} {event['value']:.4f}")
    if kind == "start":
        return (f"start  {event.get('total_steps')} steps, {event.get('params_trainable', 0):,} of "
                f"{event.get('params_total', 0):,} parameters train, {event.get('device')} {event.get('precision')}")
    if kind == "checkpoint":
        return f"checkpoint at step {event['step']}"
    if kind == "result":
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
        if kind == "step":
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
        elif kind == "stage_step":
            add(f"{event.get('stage', 'stage')}_{event.get('metric', 'value')}", int(event["step"]), event.get("value"))
        elif kind == "eval":
            split = event.get("split", "validation")
            add(f"{split}_loss", int(event["step"]), event.get("loss"))
            add(f"{split}_{event.get('metric', 'metric')}", int(event["step"]), event.get("value"))
    return {name: points for name, points in out.items() if points}


def stage_curves(events: Iterable[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """The curves of a protocol's stage before training (ORCA's ``align_otdd``), as :func:`curves_from_events`
    names them; empty for a run whose protocol has no stage."""
    events = list(events)
    names = {f"{e.get('stage', 'stage')}_{e.get('metric', 'value')}" for e in events if e.get("type") == "stage_step"}
    return {name: points for name, points in curves_from_events(events).items() if name in names}
