"""Shared test set-up: a cache of the tests' own, tier markers, and fetched assets on demand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Before labcore is imported anywhere: the tests build data and runs in their own cache, never the
# user's cache/. Package downloads stay shared (per-user download cache), so nothing is fetched twice.
os.environ.setdefault("TRANSFERLAB_CACHE", str(REPO / ".test-cache"))
# The machine's measured product rates: one file for every cache the tests make (a test's own cache measured
# them again, seconds of every core a time), beside the test cache rather than in the user's.
os.environ.setdefault("TRANSFERLAB_DEVICE_RATES", str(REPO / ".test-cache" / "device-rates.json"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# The test files that take longest, longest first, as measured on a fresh clone (`--durations=0`, summed per
# file: 212 s to 41 s on two cores). `make test` hands whole files to its test processes in collection order
# (`--dist loadfile --no-loadscope-reorder`), so these go out first and the many short files fill in behind
# them; xdist's own order (files with the most tests first) sent these last and the run ended on a tail of one
# long file. A file missing here only runs later; the order changes no result.
LONGEST_FIRST = ("test_e2e_browser.py", "test_ray.py", "test_worker.py", "test_engine.py", "test_pages.py",
                 "test_recipes_fpt_tamkin.py", "test_cli_recipe.py", "test_models.py", "test_resolution.py",
                 "test_pretrain.py", "test_data_music.py", "test_lesson_browser.py", "test_recipes_chiang.py",
                 "test_recipes_drive_all.py", "test_orca.py", "test_pretrain_corpora.py", "test_recipes_orca.py",
                 "test_job_kinds.py", "test_pretrain_page.py")


def _file_rank(item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items):
    for item in items:
        if not any(item.get_closest_marker(m) for m in ("integration", "slow", "browser", "ray")):
            item.add_marker(pytest.mark.unit)
    items.sort(key=_file_rank)  # stable: a file's tests keep their order, as do the files not named


@pytest.fixture(scope="session")
def fetched_assets():
    """Fetch every default asset into the test cache once per session (extraction only, if downloaded)."""
    from labcore import assets

    outcome = assets.fetch_all(progress=lambda _msg: None)
    failed = {name: msg for name, msg in outcome.items() if msg != "ok"}
    if failed:
        pytest.fail("assets could not be fetched: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    return outcome


@pytest.fixture
def one_torch_thread():
    """Run a test on one torch thread and restore the setting afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def store(tmp_path):
    """A store of the test's own; afterwards nothing may be left `running` with no process behind it."""
    from labcore.store import Store

    s = Store(tmp_path / "store")
    yield s
    s.reap()
    assert not [r.key for r in s.jobs(status="running")]
    s.close()
