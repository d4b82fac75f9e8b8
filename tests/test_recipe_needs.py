"""A drive checks, before it queues a job, that this machine has what the plan's jobs load: a job that failed
minutes in for a data set never fetched cost its seeds and left its claim untested."""

from __future__ import annotations

import pytest

from labcore.errors import LabError


def test_a_plan_needing_weights_and_data_not_fetched_here_is_refused_naming_each_fix(tmp_path, monkeypatch):
    from labcore.execution.executor import LocalExecutor
    from labcore.recipes import RECIPES
    from labcore.recipes.drive import advance, plan_of
    from labcore.store import Store

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))  # a machine where nothing is fetched
    plan = plan_of(RECIPES["fpt"], "quick", (0,))
    store = Store(tmp_path / "store")
    try:
        with pytest.raises(LabError) as refused:
            advance(plan, LocalExecutor(store, autostart=False))
        assert store.jobs() == []
    finally:
        store.close()
    words = str(refused.value)
    assert "`python -m labcore assets fetch minilm`" in words  # the body every FPT arm starts from
    assert "`python -m labcore assets fetch mnist5k`" in words  # the MNIST arms' data
    assert "finished jobs are kept" in words


def test_what_is_fetched_is_not_named():
    from labcore.recipes.needs import missing
    from labcore.runspec import make_spec

    assert missing([make_spec(model="tiny:bert", discipline="bits-xor")]) == {}
