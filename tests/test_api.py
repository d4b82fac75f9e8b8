"""The Python API (labcore.api) on a store of its own: a tiny real run through the API gives the record the
CLI gives, and the tables, curves and comparisons read what the store holds."""

from __future__ import annotations

import json

import pytest

import labcore
from labcore import api as lab
from labcore.cli.main import main
from labcore.errors import LabError

TINY = dict(model="tiny:bert", discipline="dna-splice", max_steps=4, eval_every=2, train_size="200",
            deterministic=True)
CLI_TINY = ["--model", "tiny:bert", "--discipline", "dna-splice", "--max-steps", "4", "--eval-every", "2",
            "--train-size", "200", "--deterministic", "true"]
# What decides a result; speeds, times and the machine's description differ between any two runs.
SAME = ("key", "spec", "status", "metric", "validation", "test", "baseline", "best_step", "steps_done", "total_steps",
        "train_loss", "val_curve", "train_examples", "params_total", "params_trainable", "test_examples")


@pytest.fixture(scope="module")
def ran(tmp_path_factory, fetched_assets):
    """One tiny run through the API and the same spec through ``python -m labcore run``."""
    import contextlib
    import io

    from labcore.store import Store

    store = Store(tmp_path_factory.mktemp("api") / "store")
    record = lab.run(store=store, **TINY)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", *CLI_TINY, "--json"]) == 0
    yield store, record, json.loads(out.getvalue().strip().splitlines()[-1])
    store.close()


def test_api_run_gives_the_cli_record(ran):
    _, record, cli = ran
    assert record.status == "done"
    assert {name: getattr(record, name) for name in SAME} == {name: cli[name] for name in SAME}


def test_a_finished_spec_comes_from_the_store(ran):
    store, record, _ = ran
    again = lab.run(store=store, **TINY)
    assert again.to_dict() == record.to_dict()  # same wall time: served, not retrained


def test_runs_has_one_row_per_stored_run_with_the_documented_columns(ran):
    store, record, _ = ran
    queued = lab.submit(store=store, start=False, seed=7, **TINY)  # a second run, waiting for a worker
    try:
        table = lab.runs(store=store)
        assert list(table.columns) == list(lab.RUN_COLUMNS)
        assert list(table["key"]) == [record.key, queued.key]
        done = table.iloc[0]
        assert done["status"] == "done" and done["test"] == record.test_value
        assert done["test_low"] <= done["test"] <= done["test_high"]
        assert done["model"] == "tiny:bert" and done["seed"] == 0 and done["tokens_per_s"] > 0
        assert done["device"] == record.device and done["wall_time_s"] == record.wall_time_s
        assert table.iloc[1]["status"] == "queued" and table.iloc[1]["seed"] == 7
        assert list(lab.runs(store=store, status="done")["key"]) == [record.key]
        assert list(lab.runs(store=store, seed=[7, 8])["key"]) == [queued.key]
        with pytest.raises(LabError, match="cannot filter on colour"):
            lab.runs(store=store, colour="red")
    finally:
        store.cancel(queued.key)


def test_curves_are_every_point_of_the_record(ran):
    store, record, _ = ran
    table = lab.curves(record.key[:8], store=store)
    assert len(table) == len(record.train_loss) + len(record.val_curve)
    validation = table[table["curve"] == "validation_accuracy"]
    assert [[s, v] for s, v in zip(validation["step"], validation["value"])] == record.val_curve


def test_compare_is_the_compare_pages_table_and_figures(ran):
    store, record, _ = ran
    shown = lab.compare([record.key], store=store)
    assert shown.table.iloc[0]["n"] == 1 and shown.table.iloc[0]["mean"] == pytest.approx(record.test_value)
    assert shown.bars.data and shown.curves.data
    assert shown.paper.shape == (1, 1) and shown.steps.empty  # one condition, no pretrained-random pair


def test_bad_fields_get_the_clis_errors(capsys):
    with pytest.raises(LabError) as api_error:
        lab.spec(model="tiny:bert", max_length=3)
    assert main(["run", "--model", "tiny:bert", "--max-length", "3"]) == 2
    assert str(api_error.value).startswith("max_length must be")
    assert capsys.readouterr().err.strip() == f"error: --{str(api_error.value).replace('max_length', 'max-length', 1)}"
    with pytest.raises(LabError, match="valid choices: pretrained, random, stats"):
        lab.specs(init=["pretrained", "warm"])


def test_the_functions_show_the_spec_fields_and_run_refuses_a_sweep():
    import dataclasses
    import inspect

    from labcore.runspec import RunSpec

    shown = inspect.signature(lab.run).parameters
    assert [f.name for f in dataclasses.fields(RunSpec)] == list(shown)[3:]
    assert shown["lr"].default is None and shown["model"].default == "minilm"
    assert inspect.signature(lab.sweep).parameters["seed"].annotation == "int | list"
    with pytest.raises(LabError, match="seed got a list; sweep"):
        lab.run(seed=[0, 1])


def test_sweep_specs_are_the_product_of_the_lists():
    chosen = lab.specs(model="tiny:bert", init=["pretrained", "random"], seed=[0, 1, 2], discipline_params={})
    assert [(s.init, s.seed) for s in chosen] == [(i, s) for i in ("pretrained", "random") for s in (0, 1, 2)]


def test_import_labcore_stays_light():
    import importlib
    import subprocess
    import sys

    code = ("import sys, labcore; assert callable(labcore.runs); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    assert labcore.api is lab
    importlib.import_module("labcore.cli.main")  # most of the package's modules: none may hide an API name

    assert all(getattr(labcore, name) is getattr(lab, name) for name in labcore._API)
    assert set(labcore._API) <= set(lab.__all__)


def test_analyze_atlas_and_recipe_read_as_the_pages_do(ran):
    store, record, _ = ran
    result = lab.analyze("params", models=["tiny:bert", "tiny:bert@random@1"], store=store)
    assert result["models"] == ["tiny:bert/pretrained", "tiny:bert/random seed 1"]
    assert lab.analyze("params", models=["tiny:bert", "tiny:bert@random@1"], store=store) == result  # seeded
    with pytest.raises(LabError, match="valid analyses"):
        lab.analyze("palmistry")
    from labcore.execution.executor import executor_for
    from labcore.jobs.analyses import ModelRef, SPEC_TYPES

    queued = executor_for(store, autostart=False).submit(SPEC_TYPES["params"](models=(ModelRef(model="tiny:bert"),)))
    with pytest.raises(LabError, match="params job, not a training run"):
        lab.curves(queued.key, store=store)
    store.cancel(queued.key)
    grid = lab.atlas(store=store)
    assert list(grid.table[["model", "discipline"]].iloc[0]) == ["tiny:bert", "dna-splice"] and grid.figure.data
    kao = lab.recipe("kao", seeds=[0], store=store)
    report = kao.report()  # nothing of it has run: a report of what is missing
    assert report.done == 0 and report.total > 0
    progress = kao.run(wait=False, start=False)  # its first stage queued for workers; none started here
    assert progress.queued > 0 and progress.done == 0
    assert store.clear_queue()
    with pytest.raises(LabError, match="valid names: kao"):
        lab.recipe("nope")


def test_background_runs_go_through_a_worker_with_live_event_streams(tmp_path, fetched_assets):
    from labcore.execution.executor import LocalExecutor
    from labcore.store import Store

    store = Store(tmp_path / "store")
    try:
        records = lab.sweep(background=True, group="bg", store=store, seed=[3, 4], **TINY)
        assert [r.spec["seed"] for r in records] == [3, 4] and all(r.status == "done" for r in records)
        assert all(store.events(r.key) for r in records)  # streamed as the Runs page reads them
        assert lab.wait(records[0].key[:8], store=store) == records[0]
        steps = lab.curves(group="bg", store=store)
        assert set(steps[steps["curve"] == "train_loss"]["step"]) == set(range(1, TINY["max_steps"] + 1))
    finally:
        LocalExecutor(store).stop_workers()
        store.close()
