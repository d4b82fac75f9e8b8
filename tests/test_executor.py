"""Choosing the executor: one function reads TRANSFERLAB_EXECUTOR and picks from the registry, for the app
and for every CLI that queues."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from labcore.cli import analyze as cli_analyze
from labcore.cli import worker as cli_worker
from labcore.errors import LabError
from labcore.execution.executor import EXECUTORS, LocalExecutor, executor_for


@pytest.fixture
def recording_backend(monkeypatch):
    """A backend ``recording`` in the registry, chosen by the environment; it records what it was made with."""
    made: list[SimpleNamespace] = []

    def factory(store=None, *, autostart=True):
        def submit(spec, **options):
            executor.submitted.append(spec)
            return SimpleNamespace(key="k", status="queued", outcome="queued", record={})

        executor = SimpleNamespace(store=store, autostart=autostart, submitted=[], submit=submit)
        made.append(executor)
        return executor

    EXECUTORS.register("recording", factory)
    monkeypatch.setenv("TRANSFERLAB_EXECUTOR", "recording")
    yield made
    EXECUTORS.unregister("recording")


def test_local_is_the_default_with_the_workers_the_environment_asks_for(store, monkeypatch):
    monkeypatch.delenv("TRANSFERLAB_EXECUTOR", raising=False)
    monkeypatch.setenv("TRANSFERLAB_WORKERS", "3")
    executor = executor_for(store, autostart=False)
    assert type(executor) is LocalExecutor
    assert (executor.store, executor.workers, executor.autostart) == (store, 3, False)
    monkeypatch.setenv("TRANSFERLAB_EXECUTOR", "")
    assert type(executor_for(store)) is LocalExecutor


def test_an_unknown_executor_is_refused_with_the_valid_names(store, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_EXECUTOR", "slurm")
    with pytest.raises(LabError, match=r"unknown executor 'slurm'.*valid names: local, ray"):
        executor_for(store)


def test_ray_is_chosen_by_name_without_importing_ray(store, monkeypatch):
    pytest.importorskip("ray", reason="Ray is not installed: `pip install -r requirements-ray.txt`")
    from labcore.execution.executor import RayExecutor

    monkeypatch.setenv("TRANSFERLAB_EXECUTOR", "ray")
    executor = executor_for(store, autostart=False)
    assert type(executor) is RayExecutor and executor.store is store and not executor.autostart


def test_both_clis_queue_through_the_executor_the_environment_names(store, recording_backend, capsys):
    executor = cli_worker._executor(argparse.Namespace(store=str(store.root), start=True))
    assert executor is recording_backend[-1] and executor.autostart
    assert executor.store.root == store.root

    parser = argparse.ArgumentParser()
    cli_analyze.add_arguments(parser.add_subparsers())
    args = parser.parse_args(["analyze", "params", "--model", "tiny:bert", "--discipline", "listops", "--queue",
                              "--store", str(store.root)])
    assert cli_analyze.cmd_analyze(args) == 0
    executor = recording_backend[-1]
    assert not executor.autostart and executor.store.root == store.root and len(executor.submitted) == 1
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["status"] == "queued"
