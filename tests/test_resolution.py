"""A spec is resolved once, at submission, and its key is the one it always had.

The keys below were computed before the resolution was made one function; a change that moves any of them
would make every finished run with that spec run again (and its record unreachable under its old key).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from labcore import jobs
from labcore.engine import run_results
from labcore.machine import device as devices
from labcore.runspec import make_spec

REPO = Path(__file__).resolve().parent.parent

PINNED = [  # (device the budget is resolved for, the spec's fields, its key)
    ("cpu", {}, "d1afca60d5aca6694d37"),
    ("cpu", {"discipline": "dna-splice", "seed": 3}, "4c47ba65310b82c53601"),
    ("cpu", {"discipline": "text-sentiment"}, "86b6e3ecf594014f612b"),
    ("cpu", {"discipline": "text-sentiment", "budget": "standard"}, "7eb03805200b0f9ab658"),
    # On CUDA a spec that leaves the step to the lab replays CUDA graphs on bucket-padded batches (other results, so
    # another key); the same spec with the eager step keeps the key it had before steps could differ.
    ("cuda", {"discipline": "text-sentiment", "budget": "standard", "step": "eager"}, "e6db8cf0b2d9a29a299f"),
    ("cuda", {"discipline": "text-sentiment", "budget": "standard"}, "a7c410e9e493825c6ce6"),
    ("cpu", {"discipline": "bits-xor", "mapping_seed": 4}, "7ad779e1267a5a86640d"),
    ("cpu", {"model": "tiny:bert", "discipline": "listops", "lr": 1e-3, "max_steps": 20, "max_length": 64},
     "fcc8965474fb03ea3c67"),
    ("cpu", {"discipline": "dna-splice", "protocol": "frozen", "budget": "paper"}, "7253ca53ea212e178029"),
    ("cpu", {"discipline": "protein-amp", "protocol": "reinit_after", "protocol_params": {"k": 2}, "budget": "paper"},
     "4b2223661688878d3035"),
    ("cpu", {"discipline": "dna-splice", "budget": "standard", "mapping": "shift", "mapping_k": 7, "epochs": 3},
     "2f0e08caf42a42a3d714"),
    ("cuda", {"discipline": "dna-splice", "budget": "standard", "mapping": "shift", "mapping_k": 7, "epochs": 3,
              "step": "eager"}, "3576094cb0ca9244f362"),
    ("cuda", {"discipline": "dna-splice", "budget": "standard", "mapping": "shift", "mapping_k": 7, "epochs": 3},
     "94362da070a106ef98fe"),
    ("cpu", {"discipline": "dna-splice", "mapping": "table",
             "mapping_table": [["A", 1012], ["C", 1013], ["G", 1014], ["T", 1015]]}, "aec4df3604a2f27fb60f"),
    ("cuda", {"discipline": "image-digits", "protocol": "output_only", "deterministic": True, "train_size": "1%",
              "step": "eager"}, "83a6cb8e1dcccd8c98b2"),
    ("cuda", {"discipline": "image-digits", "protocol": "output_only", "deterministic": True, "train_size": "1%"},
     "0f5892ab2299cbbb386e"),
]


@pytest.mark.parametrize("device,fields,key", PINNED)
def test_keys_stay_what_they_were(monkeypatch, device, fields, key):
    monkeypatch.setattr(devices, "budget_device", lambda: device)
    assert jobs.new_job(make_spec(**fields)).key == key


# ------------------------------------------------------------------------------- resolved once, read after
TINY = {"model": "tiny:bert", "discipline": "bits-xor", "discipline_params": {"n_train": 64}, "max_steps": 2}
TINY_FLAGS = ["--model", "tiny:bert", "--discipline", "bits-xor", "--dparam", "n_train=64", "--max-steps", "2"]


def _replace_everywhere(monkeypatch, original, replacement) -> None:
    """Put ``replacement`` wherever a loaded module holds ``original`` (imported by name or not)."""
    for module in list(sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                monkeypatch.setattr(module, name, replacement)


@pytest.fixture
def resolutions(monkeypatch, tmp_path):
    """The seed of every spec the one resolution resolves (labcore.engine.resolve.resolve), in a cache of the
    test's own."""
    import labcore.api  # noqa: F401  (every caller loaded, so every name the function has is counted)
    import labcore.cli.main  # noqa: F401
    import labcore.door.runs  # noqa: F401
    import labcore.engine.run  # noqa: F401
    from labcore.engine import resolve as resolution

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    original = resolution.resolve
    seeds: list[int] = []

    def counted(spec, where):
        seeds.append(spec.seed)
        return original(spec, where)

    _replace_everywhere(monkeypatch, original, counted)
    return seeds


@pytest.fixture
def no_resolution(monkeypatch):
    """From here on, resolving fails the test (what a worker must never do)."""
    from labcore.engine import resolve as resolution

    def refused(spec, where):
        raise AssertionError(f"resolved again: {spec.label()}")

    def forbid() -> None:
        _replace_everywhere(monkeypatch, resolution.resolve, refused)

    return forbid


def test_the_command_line_resolves_a_run_once(resolutions):
    from labcore.cli.main import main

    assert main(["run", *TINY_FLAGS, "--seed", "21"]) == 0
    assert resolutions == [21]


def test_a_sweep_resolves_each_spec_once(resolutions):
    from labcore.cli.main import main

    assert main(["sweep", *TINY_FLAGS, "--seeds", "22,23"]) == 0
    assert sorted(resolutions) == [22, 23]


def test_the_python_api_resolves_once_in_this_process_and_when_it_queues(resolutions, tmp_path):
    import labcore.api as lab
    from labcore.store import open_store

    store = open_store(str(tmp_path / "store"))
    record = lab.run(**TINY, seed=24, store=store)
    assert resolutions == [24] and record.status == "done"
    lab.sweep(**TINY, seed=[25, 26], store=store)
    assert resolutions == [24, 25, 26]
    queued = lab.submit(**TINY, seed=27, store=store, start=False)
    assert resolutions == [24, 25, 26, 27] and store.get(queued.key).spec["seed"] == 27


def test_a_run_from_the_page_is_resolved_once_and_the_worker_reads_the_stored_resolution(
        resolutions, no_resolution, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from labcore.execution.executor import LocalExecutor
    from labcore.execution.worker import Worker
    from labcore.store import open_store

    from labcore.execution.pool import stop_workers

    # The worker runs below, in this process: neither a submission nor a page (which starts one when jobs wait and
    # none is alive) may start another, which would outlive the test.
    monkeypatch.setattr(LocalExecutor, "_wake_workers", lambda self: None)
    monkeypatch.setattr(LocalExecutor, "ensure_workers", lambda self: [])
    try:
        _page_run_resolved_once(AppTest, Worker, open_store, resolutions, no_resolution)
    finally:
        stop_workers(open_store(), timeout_s=10)


def _page_run_resolved_once(AppTest, Worker, open_store, resolutions, no_resolution) -> None:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    at = at.switch_page("pages/new_experiment.py").run()
    at.selectbox(key="w:exp.discipline").select("bits-xor").run()
    at.text_input(key="exp.adv.model").input("tiny:bert").run()
    at.number_input(key="exp.adv.quick.finetune.max_steps").set_value(2).run()
    assert not at.exception, [e.message for e in at.exception]
    resolutions.clear()
    at.button(key="btn.exp.run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert resolutions == [0]  # shown and submitted: one resolution
    store = open_store()
    [queued] = run_results.runs(store)
    no_resolution()
    Worker(store, exit_when_idle=True).serve()
    record = store.get(queued.key)
    assert record.status == "done", record.error
    assert record.result["key"] == queued.key and record.result["spec"] == queued.spec
