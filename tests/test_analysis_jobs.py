"""The analysis job kinds on the lab's tiny random BERT: each handler's numbers where the answer is known
(a model against itself), the shapes of the rest, a fine-tuned run as an input, and one analysis through
a real worker process."""

from __future__ import annotations

import numpy as np
import pytest

from labcore import jobs
from labcore.errors import LabError
from labcore.jobs import JobContext, JobInput
from labcore.jobs.analyses import (GradientsSpec, HeadsSpec, JacobianSpec, LogMESpec, ModelRef, NoiseSpec,
                                   ParamsSpec, SimilaritySpec)
from labcore.store import JobRecord

LISTOPS = {"n_train": 48, "n_validation": 16, "n_test": 16, "max_length": 24}
TINY, TINY_RANDOM = ModelRef(model="tiny:bert"), ModelRef(model="tiny:bert", init="random", seed=1)


def run_kind(spec, tmp_path, inputs=None):
    """Resolve the spec as the executor does and run its handler in this process; its result record."""
    kind = jobs.kind_of(spec)
    resolved = kind.resolve(spec)
    assert kind.from_dict(kind.encode(resolved)) == resolved  # the stored JSON gives the same spec back
    result = None
    for event in kind.handler(resolved, JobContext(workdir=tmp_path, inputs=inputs or {})):
        if event["type"] == "result":
            result = event["record"]
    assert result is not None
    return result


def common(**changes):
    return dict(discipline="listops", discipline_params=LISTOPS, **changes)


def test_a_model_is_fully_similar_to_itself_and_less_to_a_random_one(tmp_path, one_torch_thread):
    same = run_kind(SimilaritySpec(models=(TINY, TINY), examples=16, **common()), tmp_path)
    matrix = np.asarray(same["matrix"])
    assert matrix.shape == (3, 3)  # embedding output and 2 layers each
    assert np.allclose(np.diag(matrix), 1.0, atol=1e-6)
    other = run_kind(SimilaritySpec(models=(TINY, TINY_RANDOM), examples=16, measure="cka", **common()), tmp_path)
    assert other["last"] < 0.999 and -1e-9 <= other["last"] <= 1 + 1e-9


def test_heads_of_a_model_match_themselves_at_distance_zero(tmp_path, one_torch_thread):
    result = run_kind(HeadsSpec(models=(TINY, TINY), examples=3, **common()), tmp_path)
    assert len(result["mean"]) == 2 and np.allclose(result["mean"], 0.0, atol=1e-6)
    random = run_kind(HeadsSpec(models=(TINY, TINY_RANDOM), examples=3, **common()), tmp_path)
    assert min(random["mean"]) > 0


def test_jacobian_gradients_noise_params_and_logme_give_their_numbers(tmp_path, one_torch_thread):
    models = (TINY, TINY_RANDOM)
    jac = run_kind(JacobianSpec(models=models, examples=2, max_length=16, **common()), tmp_path)
    assert set(jac["singular_values"]) == {m.label() for m in models}
    assert all(d["min"] >= 0 and d["max"] > 0 for d in jac["singular_values"].values())
    grads = run_kind(GradientsSpec(models=models, examples=4, **common()), tmp_path)
    for dist in grads["cosines"].values():
        assert len(dist["values"]) == 6 and -1 - 1e-9 <= dist["min"] <= dist["max"] <= 1 + 1e-9  # 4 choose 2
    noise = run_kind(NoiseSpec(models=models, examples=4, **common()), tmp_path)
    for per_sigma in noise["variation"].values():
        means = [per_sigma[str(s)]["mean"] for s in (1e-2, 1e-4, 1e-6, 1e-8)]
        assert means == sorted(means, reverse=True) and means[0] > 0
    params = run_kind(ParamsSpec(models=models, **common()), tmp_path)
    assert all(len(v) == 2 for stds in params["stds"].values() for v in stds.values())
    score = run_kind(LogMESpec(models=models, examples=32, **common()), tmp_path)
    assert all(np.isfinite(v) for v in score["logme"].values())


def test_params_loads_the_weights_alone_and_gives_the_prepared_models_numbers(tmp_path, one_torch_thread,
                                                                              monkeypatch):
    import dataclasses

    from labcore.engine import run as run_module
    from labcore.analysis.inputs import prepare
    from labcore.analysis.params import layer_stds

    models = (TINY, TINY_RANDOM, ModelRef(model="tiny:gpt2", init="stats", seed=2))
    expected = {m.label(): layer_stds({n: p.detach() for n, p in prepare(dataclasses.asdict(m), "listops", LISTOPS)
                                       .model.backbone.named_parameters()}) for m in models}

    def no_data(*args, **kwargs):
        raise AssertionError("the params analysis prepared the discipline's data")

    monkeypatch.setattr(run_module, "Prepared", no_data)
    result = run_kind(ParamsSpec(models=models, **common()), tmp_path)
    assert result["models"] == list(expected)
    for label, stds in expected.items():
        assert list(result["stds"][label]) == list(stds)
        for kind, values in stds.items():
            assert result["stds"][label][kind] == [None if v != v else float(v) for v in values]


def test_a_fine_tuned_run_is_an_input_of_its_own_discipline(tmp_path, one_torch_thread):
    from labcore.engine.run import run
    from labcore.runspec import make_spec

    spec = make_spec(model="tiny:bert", discipline="listops", discipline_params=LISTOPS, max_steps=3,
                     precision="fp32")
    workdir = tmp_path / "run"
    record = run(spec, workdir=workdir)
    source = JobInput(record=JobRecord(key=record.key, spec=record.spec, status="done"), workdir=workdir)
    job = jobs.new_job(SimilaritySpec(models=(ModelRef(run=record.key), TINY), examples=8, **common()))
    assert job.requires == (record.key,)
    result = run_kind(SimilaritySpec(models=(ModelRef(run=record.key), TINY), examples=8, **common()), tmp_path,
                      inputs={record.key: source})
    assert result["models"][0].startswith(f"run {record.key[:8]}")
    params = run_kind(ParamsSpec(models=(ModelRef(run=record.key),), **common()), tmp_path,
                      inputs={record.key: source})
    assert all(len(v) == 2 for v in params["stds"][params["models"][0]].values())
    with pytest.raises(LabError, match="was trained on listops"):
        run_kind(SimilaritySpec(models=(ModelRef(run=record.key), TINY), examples=8, discipline="bits-xor"),
                 tmp_path, inputs={record.key: source})


def test_bad_analysis_specs_are_refused_before_anything_loads():
    with pytest.raises(LabError, match="exactly 2 models"):
        jobs.new_job(SimilaritySpec(models=(TINY,), **common()))
    with pytest.raises(LabError, match="valid measures"):
        jobs.new_job(SimilaritySpec(measure="svcca", **common()))
    with pytest.raises(LabError, match="examples must be"):
        jobs.new_job(NoiseSpec(examples=1, **common()))
    with pytest.raises(LabError, match="valid inits"):
        jobs.new_job(NoiseSpec(models=(ModelRef(init="nope"),), **common()))
