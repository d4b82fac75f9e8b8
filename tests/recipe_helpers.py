"""Run a recipe's whole plan, shrunk to tiny jobs, through a real store and an in-process worker."""

from __future__ import annotations

import dataclasses
from typing import Any

from labcore.execution.executor import LocalExecutor
from labcore.jobs.analyses import AnalysisSpec, ModelRef
from labcore.pretrain.spec import PretrainSpec
from labcore.recipes.drive import advance, progress, results_of
from labcore.runspec import RunSpec
from labcore.execution.worker import Worker

TINY_MODEL = "tiny:bert"
# The tiny vocabulary (45 ids) cannot give music's 128 symbols ids of their own: music runs on MiniLM, kept
# small by its length and steps.
NEEDS_VOCABULARY = ("music-composer",)
# Data sets kept small too: the music corpus at its "quick" preset (10 pieces a composer) parses in a
# fraction of the default build's time, most of which goes to Beethoven's long quartet scores.
TINY_DISCIPLINE_PARAMS = {"music-composer": {"cap_per_composer": 10}}
# Protocols that name layers name MiniLM's six; the tiny model has two, so their layer numbers are scaled
# onto it (k=3 of 6 becomes k=1 of 2), keeping distinct choices distinct where two layers allow.
MINILM_LAYERS, TINY_LAYERS = 6, 2


def _scaled(layer: int) -> int:
    return round(layer * TINY_LAYERS / MINILM_LAYERS)


def _tiny_layers(protocol: str, params: dict[str, Any]) -> dict[str, Any]:
    params = dict(params)
    if protocol == "reinit_after":
        params["k"] = _scaled(params.get("k", 0))
    elif protocol == "probe" and params.get("layer", -1) >= 0:
        params["layer"] = _scaled(params["layer"])
    elif protocol == "reinit_layer":
        params["layer"] = min(_scaled(params.get("layer", 0)), TINY_LAYERS - 1)
    elif protocol == "reinit_block":
        size = max(1, _scaled(params.get("size", 3)))
        params.update(size=size, start=min(_scaled(params.get("start", 0)), TINY_LAYERS - size))
    return params


def _tiny_ref(ref: ModelRef) -> ModelRef:
    return ref if ref.run else dataclasses.replace(ref, model=TINY_MODEL, mapping="auto")


def tiny(spec: Any) -> Any:
    """The ``adjust`` that shrinks any recipe spec: a 2-layer random BERT, a few steps, few examples."""
    if isinstance(spec, RunSpec):
        model = spec.model if spec.model.startswith(("lab:", "run:")) else TINY_MODEL
        extra = {}
        if spec.discipline in NEEDS_VOCABULARY and model == TINY_MODEL:
            model, extra = "minilm", dict(max_length=32)
        if model == TINY_MODEL and spec.protocol_params:
            extra["protocol_params"] = _tiny_layers(spec.protocol, dict(spec.protocol_params))
        if spec.discipline in TINY_DISCIPLINE_PARAMS:
            extra["discipline_params"] = {**dict(spec.discipline_params), **TINY_DISCIPLINE_PARAMS[spec.discipline]}
        # one validation, at the last step: each one predicts the whole validation split, the most of a tiny run's time
        return spec.replace(model=model, max_steps=4, eval_every=4, train_size="48", precision="fp32", **extra)
    if isinstance(spec, AnalysisSpec):
        examples = min(spec.examples, 8) if spec.examples else 0
        return dataclasses.replace(spec, models=tuple(_tiny_ref(m) for m in spec.models), examples=examples)
    if isinstance(spec, PretrainSpec):
        return dataclasses.replace(spec, size="tiny" if not spec.start else spec.size, steps=3, tokens=0,
                                   sequences=64, batch_size=8)
    return spec


def run_tiny(recipe, store, seeds=(0, 1), budget: str = "quick"):
    """(plan, results) after every stage of the tiny plan ran (stages in order, as the driver submits them)."""
    plan = recipe.plan(budget, seeds, adjust=tiny)
    executor = LocalExecutor(store, autostart=False)
    for _ in range(len(plan.stages) + 1):
        advance(plan, executor)
        Worker(store, exit_when_idle=True).serve()
        if progress(plan, store).ended:
            break
    return plan, results_of(plan, store)


def tiny_report(recipe, finished):
    """(plan, results, report) of the whole tiny plan run to the end in ``finished`` (a
    ``recipe_store.finished_recipe``), checked complete: every step finished, every claim measured, and the
    report's HTML page and CSV export whole."""
    from labcore.recipes.export import to_csv, to_html, verdict_table
    from labcore.recipes.verdict import NOT_MEASURED

    plan, results = finished.plan, finished.results
    assert progress(plan, finished.store).ended
    report = recipe.report(plan, results)
    assert report.done == report.total == len(plan.steps)
    assert not [v.claim for _, v in report.claims if v.word == NOT_MEASURED]
    assert to_html(report).count("class=\"plotly-graph-div\"") == len(report.figures)
    assert "# verdicts" in to_csv(report, plan, results) and len(verdict_table(report)) == len(report.claims)
    return plan, results, report
