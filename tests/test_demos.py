"""The demo registry: each demo is a lesson with real specs, and its summary is written from measured numbers."""

from __future__ import annotations

import re

import pytest

from labcore.recipes import demos
from labcore.results.record import RunRecord
from labcore.engine.resolve import resolve_spec


def record(init: str, test: float, *, status: str = "done", val=((20, 0.6), (40, 0.8)), best_step: int = 40,
           steps_to_converge: int | None = 40, majority: float | None = 0.52, metric: str = "accuracy",
           mapping: str = "random") -> RunRecord:
    baseline = {"majority": majority} if majority is not None else {}
    spec = {"init": init, "discipline": "dna-splice", "seed": 0, "mapping": mapping}
    return RunRecord(key=f"{init}-{test}", spec=spec,
                     status=status, metric=metric, test={metric: test}, baseline=baseline, best_step=best_step,
                     steps_done=40, total_steps=120, steps_to_converge=steps_to_converge,
                     val_curve=[list(p) for p in val])


@pytest.mark.parametrize("name", demos.DEMOS.names())
def test_every_demo_is_a_lesson_with_runnable_specs(name):
    demo = demos.DEMOS[name]
    sentences = lambda text: [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.strip()) if s]  # noqa: E731
    assert len(sentences(demo.watch)) == 1 and len(sentences(demo.claim)) == 1
    assert demo.paper in demos.PAPERS and "§" in demo.claim
    specs = demo.specs()
    assert len(specs) == len(demo.roles) >= 2
    keys = [resolve_spec(s).key for s in specs]  # resolving reads the registry only: no torch
    assert len(set(keys)) == len(keys)
    differing = {f for f in specs[0].to_dict() if len({str(getattr(s, f)) for s in specs}) > 1}
    assert differing and differing <= {"init", "mapping", "mapping_k"}
    assert demo.group == f"demo:{name}"
    assert all(s.max_steps or s.epochs for s in specs)


def test_pretrained_runs_come_first_so_they_are_the_reference():
    for name in demos.DEMOS.names():
        assert demos.DEMOS[name].roles[0] == "pretrained"


def test_a_step_cap_shortens_every_run_and_keys_the_demo_apart(monkeypatch):
    demo = demos.DEMOS["dna"]
    full = demo.specs()
    monkeypatch.setenv(demos.MAX_STEPS_ENV, "10")
    capped = demo.specs()
    assert all(s.max_steps == 10 and s.eval_every <= 10 for s in capped)
    assert demo.group == "demo:dna:max10"
    assert resolve_spec(capped[0]).key != resolve_spec(full[0]).key
    monkeypatch.setenv(demos.MAX_STEPS_ENV, "ten")
    with pytest.raises(ValueError, match="whole number"):
        demo.specs()


def test_the_summary_quotes_the_measured_numbers():
    text = demos.summarize_demo([record("pretrained", 0.913, val=((20, 0.7), (120, 0.9))),
                                 record("random", 0.634, val=((20, 0.6), (120, 0.7)), steps_to_converge=120)],
                                ["pretrained", "random"])
    assert text.startswith("Pretrained reached 0.90 validation accuracy at step 120; test accuracy 0.91")
    assert "random reached 0.70 validation accuracy at step 120" in text
    assert "test accuracy 0.91" in text and "test accuracy 0.63" in text
    assert "pretrained leads random by 0.28 accuracy" in text
    assert "Pretrained levelled off from step 40 (within 0.01 of its best); random was still improving at its last " \
           "evaluation (step 120)." in text
    both = demos.summarize_demo([record("pretrained", 0.9, steps_to_converge=40),
                                 record("random", 0.6, steps_to_converge=40)], ["pretrained", "random"])
    assert "Both were still improving at the last evaluation: longer runs may gain more." in both
    assert "most frequent class would score 0.52" in text


def test_other_numbers_give_another_summary():
    a = demos.summarize_demo([record("pretrained", 0.70), record("random", 0.71)], ["pretrained", "random"])
    b = demos.summarize_demo([record("pretrained", 0.95), record("random", 0.50)], ["pretrained", "random"])
    assert a != b
    assert "no measurable difference" in a and "leads" not in a
    assert "random did no better than that" in b


def test_a_run_that_ends_below_its_best_and_an_unfinished_run_are_told_so():
    text = demos.summarize_demo([record("pretrained", 0.8, val=((20, 0.9), (40, 0.8))),
                                 record("random", 0.0, status="cancelled", val=((20, 0.55),))],
                                ["pretrained", "random"])
    assert "reached 0.90 validation accuracy at step 20 and ended at 0.80 (step 40)" in text
    assert "random cancelled at step 40 of 120 after reaching 0.55 validation accuracy at step 20" in text
    assert "leads" not in text  # no comparison with a run that did not finish


def test_bits_summaries_compare_with_chance():
    text = demos.summarize_demo([record("pretrained", 0.61, metric="bit_accuracy", majority=None),
                                 record("random", 0.50, metric="bit_accuracy", majority=None)],
                                ["pretrained", "random"])
    assert "Guessing scores 0.50 bit accuracy; random stayed at chance" in text
    assert "pretrained leads random by 0.11 bit accuracy" in text


def test_roles_default_to_what_differs_and_must_match_the_records():
    text = demos.summarize_demo([record("pretrained", 0.9), record("random", 0.6)])
    assert text.startswith("Pretrained reached")
    with pytest.raises(ValueError, match="one role per record"):
        demos.summarize_demo([record("pretrained", 0.9)], ["a", "b"])
    assert demos.summarize_demo([]) == "No run of this demo has a result yet."
