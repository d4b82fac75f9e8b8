"""ORCA's align-then-refine: the OTDD, the embedder output it compares, and the protocol's alignment stage.

The maths on constructed data (no model); the stage through the real engine on a tiny random BERT, with the
lab's text discipline as the source.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from labcore.protocols import otdd
from labcore.errors import LabError
from labcore.events import curves_from_events, describe, stage_curves
from labcore.protocols import PROTOCOLS, parse_protocol_params
from labcore.results.record import RunRecord
from labcore.engine.run import iter_run, run
from labcore.runspec import make_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY_LISTOPS = {"n_train": 96, "n_validation": 32, "n_test": 32, "max_length": 40}


def blobs(n: int = 90, dim: int = 12, classes: int = 3, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    """Features around one centre per class, labels cycling through the classes."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % classes
    centres = torch.randn(classes, dim, generator=g) * 3
    return centres[labels] + torch.randn(n, dim, generator=g), labels.numpy()


# --------------------------------------------------------------------------------------------- the distance


def test_the_otdd_of_a_sample_with_itself_is_zero():
    x, y = blobs()
    s = otdd.sample(x, y)
    assert abs(float(otdd.otdd(s, s))) < 1e-5


def test_the_otdd_grows_as_one_class_mean_moves_away():
    x, y = blobs()
    a = otdd.sample(x, y)
    reg = otdd.default_reg(a, a)
    values = []
    for shift in (0.0, 0.5, 1.0, 2.0, 4.0):
        moved = x.clone()
        moved[y == 1] += shift
        values.append(float(otdd.otdd(a, otdd.sample(moved, y), reg=reg)))
    assert abs(values[0]) < 1e-5
    assert all(later > earlier for earlier, later in zip(values, values[1:])), values


def test_labels_are_compared_by_their_features_not_their_names():
    # OTDD matches classes by the distributions they label: renamed classes are the same data set (a target's
    # labels never share names with the source's), while labels that no longer follow the features are not.
    x, y = blobs()
    same = otdd.sample(x, y)
    assert abs(float(otdd.otdd(same, otdd.sample(x, (y + 1) % 3)))) < 1e-5
    shuffled = np.random.default_rng(0).permutation(y)
    assert float(otdd.otdd(same, otdd.sample(x, shuffled))) > 1.0


def test_the_gaussian_term_is_pots_bures_wasserstein_distance():
    import ot

    g = torch.Generator().manual_seed(1)
    xa = torch.randn(200, 5, generator=g, dtype=torch.float64)
    xb = torch.randn(150, 5, generator=g, dtype=torch.float64) @ torch.randn(5, 5, generator=g,
                                                                             dtype=torch.float64) + 1.0
    a, b = otdd.sample(xa, np.zeros(200, dtype=int)), otdd.sample(xb, np.zeros(150, dtype=int))
    cov_a, cov_b = a.factors[0].T @ a.factors[0], b.factors[0].T @ b.factors[0]
    assert torch.allclose(cov_a, torch.cov(xa.T, correction=0))
    theirs = ot.gaussian.bures_wasserstein_distance(a.means[0], b.means[0], cov_a, cov_b) ** 2
    assert float(otdd.gaussian_w2(a, b)[0, 0]) == pytest.approx(float(theirs), rel=1e-9)


def test_the_gaussian_term_has_a_finite_gradient_with_fewer_examples_than_dimensions():
    x = torch.randn(9, 40, requires_grad=True)
    reference = otdd.sample(torch.randn(12, 40), np.arange(12) % 2)
    otdd.gaussian_w2(otdd.sample(x, np.arange(9) % 3), reference).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


def test_a_few_alignment_steps_through_an_embedder_reduce_the_otdd():
    torch.manual_seed(0)
    embedder = torch.nn.Linear(6, 32)
    source = otdd.sample(*blobs(n=64, dim=32, classes=2, seed=3))
    inputs, labels = blobs(n=64, dim=6, classes=3, seed=4)
    with torch.no_grad():
        reg = otdd.default_reg(otdd.sample(embedder(inputs), labels), source)
    source_self = otdd.self_cost(source, reg)
    optimiser = torch.optim.Adam(embedder.parameters(), lr=0.05)
    values = []
    for _ in range(15):
        distance = otdd.otdd(otdd.sample(embedder(inputs), labels), source, reg=reg, self_b=source_self)
        optimiser.zero_grad()
        distance.backward()
        assert all(torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0 for p in embedder.parameters())
        optimiser.step()
        values.append(float(distance.detach()))
    assert values[-1] < 0.5 * values[0], values


def test_pot_is_handed_torch_only_so_no_other_array_library_takes_the_gpu():
    # JAX, loaded as a POT backend where a GPU is, takes 75 % of its memory: ten ORCA workers on one H100
    # ran out of memory that way. A user's own setting of the switches stands.
    import subprocess
    import sys

    probe = ("import os, torch; from labcore.protocols import otdd; otdd.entropic_ot(torch.rand(4, 5), 0.1); "
             "print([os.environ.get(k) for k in ('POT_BACKEND_DISABLE_JAX', 'POT_BACKEND_DISABLE_CUPY', "
             "'POT_BACKEND_DISABLE_TENSORFLOW', 'POT_BACKEND_DISABLE_PYTORCH')])")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("POT_BACKEND_")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "['1', '1', '1', None]"
    env["POT_BACKEND_DISABLE_CUPY"] = ""  # empty: POT loads CuPy where it is installed
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "['1', '', '1', None]"


def test_class_ids_for_bit_vectors_and_regression_targets():
    bits = np.array([[0, 1], [1, 1], [0, 1], [0, 0]], dtype=np.float32)
    ids = otdd.class_ids(bits)
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 3
    assert otdd.class_ids(np.array([2, 0, 1])).tolist() == [2, 0, 1]
    targets = np.linspace(0.0, 1.0, 100, dtype=np.float32)
    assert np.bincount(otdd.class_ids(targets)).tolist() == [25, 25, 25, 25]


# ------------------------------------------------------------------------------------------- the embedder


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "gpt2", "llama"])
def test_the_first_block_input_is_hidden_state_zero(family):
    from labcore.models import build_lab_model

    model = build_lab_model(f"tiny:{family}", adapter="vocab", num_outputs=2).eval()
    ids = torch.randint(5, 40, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[0, 5:] = 0
    with torch.no_grad():
        assert torch.equal(model.first_block_input(model.adapter(ids), mask), model.hidden_states(ids, mask)[0])


# ------------------------------------------------------------------------------------------- the protocol


def test_align_refine_parameters_are_checked_when_parsed():
    assert parse_protocol_params("align_refine").align_steps > 0
    for values, message in (({"align_steps": -1}, "align_steps must be 0"), ({"align_lr": 0.0}, "align_lr"),
                            ({"examples": 2}, "examples must be at least"),
                            ({"distance": "mmd"}, "valid distances: otdd")):
        with pytest.raises(LabError, match=message):
            parse_protocol_params("align_refine", values)
    assert PROTOCOLS["align_refine"].stage is not None and PROTOCOLS["full"].stage is None


def _spec(**changes):
    values = dict(model="tiny:bert", discipline="listops", discipline_params=TINY_LISTOPS, max_steps=6,
                  eval_every=3, precision="fp32", batch_size=16)
    values.update(changes)
    return make_spec(**values)


def _aligned(steps: int, **changes):
    return _spec(protocol="align_refine", protocol_params={"align_steps": steps, "examples": 32}, **changes)


@pytest.mark.integration  # the source is the lab's text discipline, a fetched asset
def test_no_alignment_trains_the_same_weights_as_full(tmp_path, fetched_assets):
    from safetensors.torch import load_file

    records, weights = [], []
    for name, spec in (("full", _spec(deterministic=True)), ("aligned", _aligned(0, deterministic=True))):
        records.append(run(spec, workdir=tmp_path / name, threads=1))
        weights.append(load_file(str(tmp_path / name / "best.safetensors")))
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][n], weights[1][n]) for n in weights[0])
    full, aligned = records
    assert full.test == aligned.test and full.train_loss == aligned.train_loss
    assert not full.stage
    assert aligned.stage["steps_done"] == 0 and aligned.stage["before"] == aligned.stage["after"] > 0
    assert any("trains exactly as full" in note for note in aligned.notes)


@pytest.mark.integration
def test_the_alignment_streams_its_curve_and_the_record_keeps_the_distance_before_and_after(tmp_path,
                                                                                            fetched_assets):
    events = list(iter_run(_aligned(6), workdir=tmp_path))
    kinds = [e["type"] for e in events]
    stage = [e for e in events if e["type"] == "stage_step"]
    assert [e["step"] for e in stage] == [1, 2, 3, 4, 5, 6]
    assert kinds.index("start") > kinds.index("stage_step")  # the alignment curve comes before training's
    assert describe(stage[0]).startswith("align 1/6  otdd ")
    assert [p[0] for p in curves_from_events(events)["align_otdd"]] == [1, 2, 3, 4, 5, 6]
    assert list(stage_curves(events)) == ["align_otdd"] and stage_curves(events[kinds.index("start"):]) == {}
    record = RunRecord.from_dict(events[-1]["record"])
    assert record.stage["name"] == "align" and record.stage["source"] == "text-sentiment"
    assert record.stage["after"] < record.stage["before"]  # six steps already bring the data closer to text
    assert [p[1] for p in record.stage["curve"]] == [e["value"] for e in stage]
    assert any(note.startswith("align: OTDD approximated: mean of the embedder outputs") for note in record.notes)
    assert json.loads((tmp_path / "stage.json").read_text())["after"] == record.stage["after"]
    assert RunRecord.from_json(record.to_json()) == record


@pytest.mark.integration
def test_a_resumed_run_keeps_its_alignment_instead_of_aligning_again(tmp_path, fetched_assets):
    calls = []

    def stop_after_two_training_steps():  # the stage asks once per alignment step, the loop once per step
        calls.append(1)
        return "cancelled" if len(calls) == 3 + 2 else None

    first = list(iter_run(_aligned(3), workdir=tmp_path, should_stop=stop_after_two_training_steps))
    assert first[-1]["record"]["status"] == "cancelled"
    second = list(iter_run(_aligned(3), workdir=tmp_path, resume=True))
    assert not [e for e in second if e["type"] == "stage_step"]
    assert second[-1]["record"]["status"] == "done"
    assert second[-1]["record"]["stage"] == first[-1]["record"]["stage"]


def test_compare_lists_the_alignment_distance_beside_the_test_metric():
    from labcore.results.compare import alignment_table

    aligned = RunRecord(key="a" * 20, spec={"seed": 1}, status="done", metric="accuracy", test={"accuracy": 0.9},
                        val_curve=[[1, 0.9]], best_step=1,
                        stage={"name": "align", "distance": "otdd", "source": "text-sentiment", "before": 7.0,
                               "after": 2.5, "steps_done": 4, "seconds": 1.5})
    plain = RunRecord(key="b" * 20, spec={"seed": 1}, status="done", metric="accuracy", test={"accuracy": 0.8})
    table = alignment_table([aligned, plain])
    assert table.to_dict("records") == [{"run": "a" * 12, "seed": 1, "metric": "accuracy", "test": 0.9,
                                          "distance": "otdd to text-sentiment", "before": 7.0, "after": 2.5,
                                          "steps": 4, "seconds": 1.5}]
    assert alignment_table([plain]).empty


@pytest.mark.integration
def test_runs_draws_the_alignment_curve_and_compare_its_distance_beside_the_test_metric(tmp_path, monkeypatch,
                                                                                         fetched_assets):
    from streamlit.testing.v1 import AppTest

    from labcore import paths
    from labcore.execution.executor import LocalExecutor
    from labcore.store import open_store
    from labcore.execution.worker import Worker

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "assets").symlink_to(paths.assets_dir())  # the fetched text source, under a store of the test's own
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(cache))
    store = open_store()
    key = LocalExecutor(store, autostart=False).submit(_aligned(3)).key
    Worker(store, exit_when_idle=True).serve()
    assert store.get(key).status == "done", store.log(key)
    at = AppTest.from_file(str(paths.REPO_ROOT / "app.py"), default_timeout=120)
    at.query_params["runs"] = key[:12]
    at = at.run().switch_page("pages/compare.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "Alignment distance beside the test metric (ORCA)" in [s.value for s in at.subheader]
    table = next(f.value for f in at.dataframe if "after" in f.value.columns)
    stage = store.get(key).result["stage"]
    assert table["before"].tolist() == [stage["before"]] and table["after"].tolist() == [stage["after"]]
    runs = AppTest.from_file(str(paths.REPO_ROOT / "app.py"), default_timeout=120)
    runs.query_params["run"] = key
    runs = runs.run().switch_page("pages/runs.py").run()
    assert not runs.exception, [e.message for e in runs.exception]
    charts = [json.loads(c.proto.spec) for c in runs.get("plotly_chart")]
    assert len(charts) == 2  # the alignment, then training
    assert charts[0]["data"][0]["y"] == [p[1] for p in stage["curve"]]
    assert charts[0]["layout"]["xaxis"]["title"]["text"] == "alignment step"


def test_the_experiment_form_offers_the_alignment_budget(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from labcore import paths

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    at = AppTest.from_file(str(paths.REPO_ROOT / "app.py"), default_timeout=120).run()
    at = at.switch_page("pages/new_experiment.py").run()
    at.selectbox(key="w:exp.protocol").select("align_refine").run()
    at.number_input(key="exp.p.align_refine.align_steps").set_value(5).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    code = "\n".join(c.value for c in at.code)
    assert "--protocol align_refine" in code and "--pparam align_steps=5" in code
    assert "align_lr" not in code  # the learning rate shown is the default, so the spec leaves it out
