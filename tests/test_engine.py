"""The engine end to end on tiny random backbones: every protocol through the real loop and record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labcore.errors import LabError
from labcore.results.record import RunRecord
from labcore.engine.run import iter_run, resolve_spec, run
from labcore.runspec import make_spec
from test_events import assert_typed

REPO = Path(__file__).resolve().parent.parent
TINY_XOR = {"n_train": 96, "n_validation": 32, "n_test": 32}
TINY_LISTOPS = {"n_train": 96, "n_validation": 32, "n_test": 32, "max_length": 40}


def _spec(**changes):
    values = dict(model="tiny:bert", discipline="listops", discipline_params=TINY_LISTOPS, max_steps=6,
                  eval_every=3, precision="fp32", batch_size=16)
    values.update(changes)
    return make_spec(**values)


@pytest.mark.parametrize("protocol,params", [
    ("full", {}), ("reemb", {}), ("frozen", {}), ("output_only", {}), ("reinit_after", {"k": 1}),
    ("reinit_block", {"start": 0, "size": 1, "mode": "preserve"}), ("reinit_layer", {"layer": 1}),
    ("permute_layers", {"seed": 3}), ("probe", {"layer": 1}),
])
def test_every_protocol_runs_to_a_record(protocol, params, tmp_path):
    record = run(_spec(protocol=protocol, protocol_params=params), workdir=tmp_path)
    assert record.status == "done"
    assert record.metric == "accuracy" and 0.0 <= record.test["accuracy"] <= 1.0
    assert record.params_trainable <= record.params_total
    assert (tmp_path / "best.safetensors").is_file()
    assert RunRecord.from_json(record.to_json()) == record
    if protocol in ("frozen", "output_only", "probe"):
        assert record.params_trainable < record.params_total / 2


def test_events_stream_then_one_result(tmp_path):
    events = list(iter_run(_spec(), workdir=tmp_path))
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "result" and kinds.count("result") == 1
    assert kinds.index("start") < kinds.index("step")
    evals = [e for e in events if e["type"] == "eval"]
    assert [e["step"] for e in evals] == [3, 6] and evals[0]["metric"] == "accuracy"
    json.dumps(events)  # every event is JSON-able
    assert_typed(events)


def test_the_best_checkpoint_is_measured_again_without_dropout():
    # The record's validation figures re-measure the restored best weights: in eval mode they repeat the
    # best evaluation exactly (with dropout left on they would not).
    events = list(iter_run(_spec(max_steps=9, lr=1e-3)))
    record = events[-1]["record"]
    evals = [e for e in events if e["type"] == "eval"]
    best = max(evals, key=lambda e: e["value"])  # the first of equals, as the loop keeps it
    assert record["best_step"] == best["step"]
    assert record["validation"]["accuracy"] == best["value"]
    assert record["validation"]["loss"] == pytest.approx(best["loss"], abs=1e-6)


def test_vectors_multilabel_and_decoder(tmp_path):
    record = run(make_spec(model="tiny:gpt2", discipline="bits-xor", discipline_params=TINY_XOR,
                           protocol="frozen", max_steps=4, precision="fp32"), workdir=tmp_path)
    assert record.status == "done" and record.metric == "bit_accuracy" and record.pooling == "last"


def test_same_spec_same_result():
    a = run(_spec(max_steps=4))
    b = run(_spec(max_steps=4))
    assert a.key == b.key and a.test == b.test and a.train_loss == b.train_loss


def test_cpu_runs_record_their_threads_and_kernels():
    record = run(_spec(max_steps=2), threads=2)
    threads = [n for n in record.notes if n.startswith("trained on ")]
    assert len(threads) == 1 and ("1 CPU thread" in threads[0] or "2 CPU threads" in threads[0])
    from labcore.models.cpu_kernels import dropout_kind

    assert any(n.endswith(f"dropout layers, {dropout_kind()}") for n in record.notes)
    assert any("plain attention function" in n for n in record.notes)


def test_subsample_is_recorded():
    record = run(_spec(train_size="50", max_steps=2))
    assert record.train_examples == 50 and any("50 of 96" in n for n in record.notes)


def test_bad_protocol_parameter_names_the_valid_ones():
    with pytest.raises(LabError, match="valid"):
        run(_spec(protocol="reinit_after", protocol_params={"kk": 1}))


def test_sweep_cli_prints_table_and_reuses_results(tmp_path):
    env = {**__import__("os").environ, "TRANSFERLAB_CACHE": str(tmp_path)}
    cmd = [sys.executable, "-m", "labcore", "sweep", "--model", "tiny:bert", "--discipline", "listops",
           "--dparam", "n_train=96", "--dparam", "n_validation=32", "--dparam", "n_test=32",
           "--dparam", "max_length=40", "--max-steps", "3", "--precision", "fp32",
           "--init", "pretrained,random", "--seeds", "0,1", "--csv"]
    first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.strip().splitlines()
    header = lines[0].split(",")
    assert {"init", "n", "mean", "std", "ci_low", "ci_high"} <= set(header)
    assert len(lines) == 3  # two conditions, each over two seeds
    second = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert second.stderr.count("from the store") == 4
    assert second.stdout == first.stdout


def test_resolve_spec_needs_no_torch():
    code = ("import sys; from labcore.engine.run import resolve_spec; from labcore.runspec import make_spec;"
            "resolve_spec(make_spec(discipline='bits-xor')); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
    assert resolve_spec(make_spec(discipline="bits-xor")).input_adapter == "linear"


DIVERGING = dict(model="tiny:bert", discipline="bits-xor", precision="fp32", lr=1e3,
                 discipline_params={"n_train": 64, "n_validation": 32, "n_test": 32})


def test_a_diverged_run_says_where_and_shows_no_untrained_test_result(tmp_path):
    from labcore.results.compare import sweep_table
    from labcore.recipes.demos import describe_record

    record = run(make_spec(**DIVERGING), workdir=tmp_path)
    assert record.status == "diverged" and record.best_step == 0 and record.val_curve == []
    step = record.steps_done + 1
    assert f"diverged at step {step}: the training loss was nan" in record.error, record.error
    assert "learning rate 1000" in record.error and "try a smaller learning rate (e.g. 100)" in record.error
    assert "untrained" in record.error
    assert record.untrained and record.test_value is None  # the untrained weights' numbers are no result
    assert record.test  # ... though the record keeps them
    row = sweep_table([record]).iloc[0]
    assert row["n"] == 0 and row["not_done"] == 1
    assert "untrained weights" in describe_record(record, "the run")
    assert RunRecord.from_json(record.to_json()) == record


def test_the_command_line_prints_no_test_metric_for_untrained_weights(capsys):
    from labcore.cli import main as cli

    flags = ["--model", "tiny:bert", "--discipline", "bits-xor", "--precision", "fp32", "--lr", "1000",
             "--dparam", "n_train=64", "--dparam", "n_validation=32", "--dparam", "n_test=32"]
    assert cli.main(["run", *flags]) == 0
    out = capsys.readouterr().out
    assert "diverged: no test bit_accuracy" in out and "untrained weights" in out, out
    assert "test bit_accuracy 0." not in out
    assert "diverged at step" in out and "smaller learning rate" in out


def test_a_max_length_beyond_the_model_runs_at_the_model_s_positions_and_says_so():
    record = run(make_spec(**{**DIVERGING, "lr": 1e-3, "max_steps": 2, "max_length": 100000}))
    assert record.status == "done" and record.spec["max_length"] == 64
    assert record.key == resolve_spec(make_spec(**{**DIVERGING, "lr": 1e-3, "max_steps": 2, "max_length": 64})).key
    assert any("the model's limit (64 positions)" in note for note in record.notes), record.notes


def test_two_deterministic_runs_give_identical_weights(tmp_path):
    from safetensors.torch import load_file

    spec = _spec(deterministic=True, lr=1e-3)
    assert resolve_spec(spec).key != resolve_spec(_spec(lr=1e-3)).key  # the key says which
    records = [run(spec, workdir=tmp_path / str(i), threads=2) for i in range(2)]
    weights = [load_file(str(tmp_path / str(i) / "best.safetensors")) for i in range(2)]
    assert weights[0].keys() == weights[1].keys()
    assert all((weights[0][n] == weights[1][n]).all() for n in weights[0])
    assert records[0].threads == [[0, 1]] and records[0].test == records[1].test
    assert any(note.startswith("deterministic: trained on 1 CPU thread") for note in records[0].notes)
    assert records[0].test_examples == 32 and records[0].test_classes >= 1


def test_an_ordinary_run_records_its_threads_and_how_busy_the_machine_was(tmp_path):
    import subprocess
    import sys

    record = run(_spec(), workdir=tmp_path, threads=1)
    assert record.threads == [[0, 1]]
    assert record.busy_cores >= 0.0  # measured, not -1
    # beside a process that keeps a core busy the whole time, the record says so (labcore.engine.speed leaves it out)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = run(_spec(), workdir=tmp_path / "busy", threads=1)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy.busy_cores >= 0.5, busy.busy_cores


def test_a_run_on_windowed_uploads_votes_and_says_so(tmp_path, monkeypatch):
    from labcore.data import upload

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    data = "".join(f">r{i}|{'ab'[i % 2]}\n{('ACGT' if i % 2 else 'TTGA') * 12}\n" for i in range(30)).encode()
    upload.save_upload("long", "l.fasta", data, max_length=20)  # 48 symbols: windows 0, 20, 28
    record = run(_spec(discipline="upload:long", discipline_params={}, max_steps=2, eval_every=1))
    assert record.status == "done" and record.test_examples == 4 and record.test_classes == 2  # 4 records (12 windows) vote
    assert any("cut into windows of 20" in note for note in record.notes)


def test_the_majority_baseline_counts_records_where_windows_vote(tmp_path, monkeypatch):
    # Long records of one class give many windows, short ones of the other one window each: the two
    # majorities differ, and the baseline must be the one of the records the voted accuracy counts.
    from labcore import data as disciplines
    from labcore.data import upload

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    longs = "".join(f">a{i}|long\n{'ACGT' * 12}\n" for i in range(10))  # 48 symbols: 3 windows of 20
    shorts = "".join(f">b{i}|short\n{'TTGA' * 4}\n" for i in range(20))  # 16 symbols: 1 window
    upload.save_upload("mixed", "m.fasta", (longs + shorts).encode(), max_length=20)
    record = run(_spec(discipline="upload:mixed", discipline_params={}, max_steps=2, eval_every=1))
    dataset, _ = disciplines.load("upload:mixed", progress=lambda _m: None)

    def records_of(split):  # one label per record
        return dict(zip(dataset[split]["group"], dataset[split]["label"]))

    train, test = records_of("train"), records_of("test")
    train_windows = list(dataset["train"]["label"])
    commonest_record = max(set(train.values()), key=list(train.values()).count)
    assert commonest_record != max(set(train_windows), key=train_windows.count)  # the case that was wrong
    expected = sum(label == commonest_record for label in test.values()) / len(test)
    assert record.test_examples == len(test)
    assert record.baseline["majority"] == pytest.approx(expected)
