"""The event dataclasses: each reads back from its dict, writes the keys in the order streams hold them,
and the training loop's events are exactly what they produce."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labcore.data.encode import Encoded
from labcore.events import (EVENTS, AttemptEvent, CheckpointEvent, EvalEvent, LogEvent, NodeEvent, OutcomeEvent,
                            ResultEvent, StageStepEvent, StartEvent, StepEvent, TrainEndEvent, event_from_dict)
from test_train_loop import Tiny, _cfg, _data, _run

# Each event type, bare (optional keys left out) and full (every key set, stamped with a time).
SAMPLES = [
    StepEvent(step=8, steps=4, epoch=1.0, loss=0.5, lr=1e-3, samples_per_s=120.0),
    StepEvent(step=8, steps=4, epoch=1.0, loss=0.5, lr=1e-3, samples_per_s=120.0, accuracy=0.25,
              tokens_per_s=9000.0, t=1.5),
    EvalEvent(step=8, split="validation", value=0.75, loss=None),
    EvalEvent(step=8, split="validation", value=0.75, loss=0.4, metric="accuracy", t=1.5),
    CheckpointEvent(step=8, path="/runs/k/resume.pt"),
    TrainEndEvent(status="done", best_step=8, best_value=None, steps_done=8, total_steps=8,
                  losses=[(1, 0.9), (2, 0.8)], val_curve=[(8, 0.75)], samples_per_s=120.0, host_reads=8),
    TrainEndEvent(status="diverged", best_step=0, best_value=0.5, steps_done=0, total_steps=8, losses=[],
                  val_curve=[], samples_per_s=0.0, host_reads=1, error="diverged at step 1"),
    StartEvent(key="k", total_steps=8, params_total=100, params_trainable=10, device="cpu", precision="fp32"),
    StartEvent(key="k", total_steps=8, params_total=100, params_trainable=10, device="cuda",
               device_name="NVIDIA H100", precision="bf16", train_examples=64, t=1.5),
    StageStepEvent(stage="align", step=3, total_steps=10, metric="otdd", value=1.25),
    LogEvent(message="resumed from step 4"),
    LogEvent(source="tune", message="stopped early", phase="prepare", stopped_at=4, t=1.5),
    AttemptEvent(attempt=2, resume=True, pid=123, host="box", t=1.5),
    NodeEvent(node_id="n1", host="box", ip="10.0.0.1", pid=123, t=1.5),
    ResultEvent(record={"key": "k", "status": "done"}),
    ResultEvent(status="failed", record={"error": "boom"}, t=1.5),
    OutcomeEvent(status="done", metrics=None, error=""),
    OutcomeEvent(status="failed", metrics={"accuracy": 0.5}, error="boom", t=1.5),
]


def test_every_event_type_has_samples():
    assert {type(e) for e in SAMPLES} == set(EVENTS)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_each_event_round_trips(event):
    data = event.to_dict()
    assert data["type"] == event.TYPE and list(data)[0] == "type"
    assert event_from_dict(data) == event
    assert event_from_dict(json.loads(json.dumps(data))).to_dict() == json.loads(json.dumps(data))


def test_keys_come_in_the_order_streams_hold_them():
    # Optional keys are left out where unset, and the stream's time stamp comes last.
    assert list(LogEvent(message="m").to_dict()) == ["type", "message"]
    assert list(LogEvent(source="store", message="m", t=1.0).to_dict()) == ["type", "source", "message", "t"]
    assert list(EvalEvent(step=1, split="validation", value=0.5, loss=None, metric="f1").to_dict()) == [
        "type", "step", "split", "value", "loss", "metric"]
    assert list(ResultEvent(record={}).to_dict()) == ["type", "record"]
    assert list(ResultEvent(status="done", record={}).to_dict()) == ["type", "status", "record"]
    assert list(AttemptEvent(attempt=1, resume=False, pid=1, host="h", t=2.0).to_dict()) == [
        "type", "attempt", "resume", "pid", "host", "t"]
    assert OutcomeEvent(status="done", metrics=None, error="").to_dict() == {
        "type": "result", "status": "done", "metrics": None, "error": ""}  # None kept: the key is always there


def test_a_result_without_a_record_is_the_workers_outcome():
    assert isinstance(event_from_dict({"type": "result", "status": "done", "metrics": None, "error": ""}),
                      OutcomeEvent)
    assert isinstance(event_from_dict({"type": "result", "record": {}}), ResultEvent)


def test_reading_refuses_what_no_event_holds():
    with pytest.raises(ValueError, match="unknown event type"):
        event_from_dict({"type": "nope"})
    with pytest.raises(ValueError, match="has no extra"):
        event_from_dict({"type": "log", "message": "m", "extra": 1})
    with pytest.raises(ValueError, match="needs more keys"):
        event_from_dict({"type": "checkpoint", "step": 1})
    with pytest.raises(ValueError, match="not a step event"):
        StepEvent.from_dict({"type": "eval"})


def assert_typed(events):
    """Each event is its dataclass's dict, key for key and in order (other tests check their streams too)."""
    for event in events:
        assert list(event_from_dict(event).to_dict().items()) == list(event.items())


def test_the_training_loops_events_are_the_dataclasses_dicts(tmp_path):
    calls = []
    stopped = _run(Tiny(), _data(), _cfg(checkpoint_every=2), workdir=tmp_path,
                   should_stop=lambda: "interrupted" if calls.append(1) or len(calls) >= 5 else None)
    resumed = _run(Tiny(), _data(), _cfg(patience=1, eval_every=2), workdir=tmp_path, resume=True)
    nan = Encoded([np.full((2, 2), np.nan, dtype=np.float32)] * 8, np.zeros(8, dtype=np.int64))
    diverged = _run(Tiny(), nan, _cfg())
    events = stopped + resumed + diverged
    assert {e["type"] for e in events} == {"step", "eval", "checkpoint", "log", "train_end"}
    assert resumed[0]["message"] == "resumed from step 5" and "early stop" in resumed[-2]["message"]
    assert diverged[-1]["status"] == "diverged" and "error" in diverged[-1]
    assert_typed(events)
