"""TensorBoard export: two tiny real runs (pretrained and random tiny:bert, a few steps, run by an in-process
worker so every step is in their event streams) written as event files and read back with TensorBoard's own
EventAccumulator: every curve point, the HParams plugin's summaries and the final metrics."""

from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from labcore import api as lab
from labcore.cli.main import main
from labcore.export.runs import run_curves
from labcore.export.tensorboard import tag
from labcore.store import Store
from labcore.execution.worker import Worker

TINY = dict(model="tiny:bert", discipline="dna-splice", max_steps=6, eval_every=2, train_size="200", precision="fp32")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, fetched_assets):
    store = Store(tmp_path_factory.mktemp("tb") / "store")
    for init in ("pretrained", "random"):
        lab.submit(store=store, start=False, group="pair", init=init, **TINY)
    Worker(store, exit_when_idle=True).serve()
    yield store
    store.close()


def _read(folder) -> EventAccumulator:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def test_every_curve_point_hyperparameters_and_final_metrics_read_back(finished, tmp_path):
    folders = lab.export_tensorboard(group="pair", logdir=str(tmp_path), store=finished)
    records = lab.records(group="pair", store=finished)
    assert len(folders) == 2 and all(r.status == "done" for r in records)
    # one folder per condition (init differs), one run per seed inside it
    assert sorted(p.split("/")[-2] for p in folders) == ["pretrained", "random"]
    for folder, record in zip(folders, records):
        events = _read(folder)
        curves = run_curves(finished, record.key)
        assert len(curves["train_loss"]) == record.steps_done  # the stream's every step, not the thinned record
        for curve, points in curves.items():
            read = [(e.step, e.value) for e in events.Scalars(tag(curve))]
            assert [s for s, _ in read] == [s for s, _ in points]
            assert [v for _, v in read] == pytest.approx([v for _, v in points], rel=1e-6)
        assert set(events.PluginTagToContent("hparams")) == {"_hparams_/experiment", "_hparams_/session_start_info",
                                                              "_hparams_/session_end_info"}
        assert events.Scalars("final/test_accuracy")[0].value == pytest.approx(record.test_value)
        assert events.Scalars("final/majority")[0].value == pytest.approx(record.baseline["majority"])


def test_hparams_carry_the_resolved_spec(finished, tmp_path):
    from tensorboard.plugins.hparams import plugin_data_pb2

    record = lab.records(group="pair", store=finished)[0]
    folder = lab.export_tensorboard(record.key, str(tmp_path), store=finished)[0]
    content = _read(folder).SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert start.hparams["model"].string_value == "tiny:bert"
    assert start.hparams["lr"].number_value == pytest.approx(record.spec["lr"])
    assert start.hparams["max_steps"].number_value == 6


def test_the_command_writes_the_same(finished, tmp_path, capsys):
    assert main(["export", "tensorboard", "--group", "pair", "--logdir", str(tmp_path), "--store",
                 str(finished.root)]) == 0
    assert "wrote 2 run(s)" in capsys.readouterr().out
    assert len(list(tmp_path.glob("*/*/events.out.tfevents.*"))) == 2
