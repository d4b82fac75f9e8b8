"""The pure maths of labcore.analysis: representation similarity, Jacobian spectra, gradient cosines,
output variation under parameter noise, parameter statistics and LogME, on tiny random data."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from labcore.analysis.gradients import cosine_matrix, flatten_grads, gradient_cosines, per_example_grads
from labcore.analysis.jacobian import jacobian_singular_values
from labcore.analysis.logme import logme
from labcore.analysis.noise import output_variation, summarise
from labcore.analysis.params import layer_stds, parse_name
from labcore.analysis.similarity import cca, layer_similarity, linear_cka, pwcca


def _orthogonal(rng, d):
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return q


# -------------------------------------------------------------------------------------------------
# similarity


def test_a_representation_is_identical_to_itself():
    x = np.random.default_rng(0).normal(size=(300, 8))
    assert pwcca(x, x) == pytest.approx(1.0, abs=1e-10)
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(cca(x, x), 1.0, atol=1e-10)


def test_cca_and_pwcca_see_through_any_invertible_linear_map():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 8))
    # A generic invertible map can squeeze some direction under 1 % of the variance; keep=1.0 keeps all.
    y = x @ rng.normal(size=(8, 8))
    np.testing.assert_allclose(cca(x, y, keep=1.0), 1.0, atol=1e-8)
    assert pwcca(x, y, keep=1.0) == pytest.approx(1.0, abs=1e-8)
    # A moderately conditioned map passes the default 99 % truncation intact; a wider y [n, 12] of rank 8
    # is rank-deficient too.
    mild = _orthogonal(rng, 8) @ np.diag(rng.uniform(0.8, 1.25, 8)) @ _orthogonal(rng, 8)
    wide = x @ mild @ rng.normal(size=(8, 12))
    assert pwcca(x, x @ mild) == pytest.approx(1.0, abs=1e-8)
    assert pwcca(x, wide, keep=1.0) == pytest.approx(1.0, abs=1e-8)
    assert pwcca(wide, x, keep=1.0) == pytest.approx(1.0, abs=1e-8)


def test_linear_cka_is_invariant_to_rotation_and_isotropic_scaling_only():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 6)) * np.array([3.0, 2.0, 1.5, 1.0, 0.5, 0.2])
    assert linear_cka(x, 3.7 * x @ _orthogonal(rng, 6)) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(x, x @ np.diag([0.1, 1, 1, 1, 1, 10.0])) < 0.9  # anisotropic scaling changes it


def test_independent_representations_score_near_zero_as_n_grows():
    rng = np.random.default_rng(3)
    d = 10

    def scores(n):
        x, y = rng.normal(size=(n, d)), rng.normal(size=(n, d))
        return pwcca(x, y), linear_cka(x, y)

    small, large = scores(200), scores(2000)
    # Chance level shrinks like sqrt(d / n) for CCA and d / n for CKA; at n=2000, d=10 it is ~0.05 and
    # ~0.005, so the bounds leave about 2x room.
    assert large[0] < small[0] and large[1] < small[1]
    assert large[0] < 0.1
    assert large[1] < 0.01


def test_rank_deficient_representations_give_finite_scores():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(200, 6))
    dup = np.hstack([z, z[:, :3], np.zeros((200, 2))])  # duplicated and dead units: rank 6 of 11
    other = rng.normal(size=(200, 5))
    for value in (pwcca(dup, other), linear_cka(dup, other), *cca(dup, other), pwcca(dup, dup)):
        assert np.isfinite(value)
    assert pwcca(dup, z) == pytest.approx(1.0, abs=1e-8)
    assert pwcca(dup, dup) == pytest.approx(1.0, abs=1e-8)


def test_layer_similarity_is_the_matrix_of_pairs():
    rng = np.random.default_rng(5)
    reps_a = [rng.normal(size=(100, 4)) for _ in range(3)]
    reps_b = [reps_a[0] @ _orthogonal(rng, 4), rng.normal(size=(100, 7))]
    matrix = layer_similarity(reps_a, reps_b, linear_cka)
    assert matrix.shape == (3, 2)
    assert matrix[0, 0] == pytest.approx(1.0)
    assert matrix[2, 1] == linear_cka(reps_a[2], reps_b[1])


@pytest.mark.parametrize("rows", [30, 100])  # fewer rows than 4 x width: SVD; more: the Gram matrix's eigh
def test_layer_similarity_computes_each_layers_basis_once_and_gives_the_per_pair_numbers(rows, monkeypatch):
    from labcore.analysis import similarity

    rng = np.random.default_rng(6)
    reps_a = [rng.normal(size=(rows, 8)).astype(np.float32) for _ in range(3)]
    reps_b = [reps_a[1] @ rng.normal(size=(8, 8)), rng.normal(size=(rows, 6)), rng.normal(size=(rows, 10))]
    reps_b[2][:, 5:] = reps_b[2][:, :5]  # rank-deficient: duplicated units
    for fn in (pwcca, linear_cka):
        per_pair = np.array([[fn(a, b) for b in reps_b] for a in reps_a])
        assert np.array_equal(layer_similarity(reps_a, reps_b, fn), per_pair)
    calls = []
    counted = similarity.svd_basis
    monkeypatch.setattr(similarity, "svd_basis", lambda x, keep=similarity.KEEP: calls.append(1) or counted(x, keep))
    layer_similarity(reps_a, reps_b, pwcca)
    assert len(calls) == len(reps_a) + len(reps_b)


# -------------------------------------------------------------------------------------------------
# Jacobian


def test_jacobian_of_a_linear_map_has_its_singular_values():
    gen = torch.Generator().manual_seed(0)
    length, d_in, d_out = 3, 4, 5
    w = torch.randn(d_out, length * d_in, generator=gen, dtype=torch.float64)  # acts on the flattened [L, d_in]
    embeddings = torch.randn(6, length, d_in, generator=gen, dtype=torch.float64)  # [B, L, d_in]
    values = jacobian_singular_values(lambda e: w @ e.reshape(-1), embeddings)
    assert values.shape == (6, d_out)
    np.testing.assert_allclose(values, np.tile(torch.linalg.svdvals(w).numpy(), (6, 1)), rtol=1e-12)


def test_batched_jacobians_equal_one_example_at_a_time():
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    embeddings = torch.randn(5, 6, 3, generator=gen, dtype=torch.float64)  # [B, L, d_in]
    mask = (torch.rand(5, 6, generator=gen) > 0.3).double()  # [B, L], passed through undifferentiated

    def pooled(e, m):  # [L, d_in], [L] -> [d_out]: masked mean of a nonlinear layer
        return (torch.tanh(e @ w.T) * m[:, None]).sum(0) / m.sum().clamp(min=1)

    batched = jacobian_singular_values(pooled, embeddings, mask)
    looped = jacobian_singular_values(pooled, embeddings, mask, batched=False)
    assert batched.shape == (5, 4)
    np.testing.assert_allclose(batched, looped, rtol=1e-12, atol=1e-14)


# -------------------------------------------------------------------------------------------------
# gradients


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).double().eval()


def test_per_example_grads_equal_a_loop_of_backward_passes():
    model = _mlp()
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(7, 4, generator=gen, dtype=torch.float64), torch.randint(0, 3, (7,), generator=gen)
    loss_fn = nn.functional.cross_entropy
    grads = per_example_grads(model, dict(model.named_parameters()), loss_fn, x, y)
    for i in range(7):
        model.zero_grad()
        loss_fn(model(x[i:i + 1]), y[i:i + 1]).backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(grads[name][i], p.grad, rtol=1e-12, atol=1e-14)


def test_gradient_cosines_are_cosines():
    model = _mlp(1)
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(6, 4, generator=gen, dtype=torch.float64), torch.randint(0, 3, (6,), generator=gen)
    x[5], y[5] = x[0], y[0]  # example 5 repeats example 0
    flat = flatten_grads(per_example_grads(model, dict(model.named_parameters()),
                                           nn.functional.cross_entropy, x, y))  # [6, P]
    assert flat.shape == (6, sum(p.numel() for p in model.parameters()))
    cos = cosine_matrix(flat)
    np.testing.assert_allclose(np.diag(cos), 1.0, atol=1e-12)
    assert cos[0, 5] == pytest.approx(1.0, abs=1e-12)
    pairs = gradient_cosines(flat)
    assert pairs.shape == (15,)
    assert np.all((pairs >= -1.0) & (pairs <= 1.0))
    assert pairs[4] == cos[0, 5]  # upper triangle, row by row: (0,1) (0,2) (0,3) (0,4) (0,5) ...


def test_a_zero_gradient_has_no_cosine():
    cos = cosine_matrix(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    assert np.isnan(cos[1]).all() and np.isnan(cos[:, 1]).all()
    assert cos[0, 2] == pytest.approx(2 ** -0.5)


# -------------------------------------------------------------------------------------------------
# noise


def test_output_variation_grows_with_sigma_and_restores_the_parameters():
    model = _mlp(2)
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    sigmas = (0.0, 1e-8, 1e-6, 1e-4, 1e-2)
    variation = output_variation(model, lambda: model(x), sigmas, seed=7, draws=3)
    assert set(variation) == set(sigmas) and variation[1e-4].shape == (3, 8)
    assert np.all(variation[0.0] == 0.0)
    means = [mean for mean, _ in summarise(variation).values()]
    assert all(a < b for a, b in zip(means, means[1:]))
    # The same noise directions at every sigma, and small perturbations act linearly: 100x the noise
    # moves the outputs 100x (float64 model; 1e-3 leaves room for the curvature at sigma=1e-4).
    assert means[3] / means[2] == pytest.approx(100, rel=1e-3)
    assert means[2] / means[1] == pytest.approx(100, rel=1e-3)
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name])
    again = output_variation(model, lambda: model(x), sigmas, seed=7, draws=3)
    assert all(np.array_equal(variation[s], again[s]) for s in sigmas)  # seeded


def test_parameters_are_restored_when_the_forward_pass_fails():
    model = _mlp(3)
    before = [p.detach().clone() for p in model.parameters()]
    calls = []

    def forward():
        calls.append(1)
        if len(calls) > 1:  # the clean pass succeeds, the first noisy one fails
            raise RuntimeError("boom")
        return model(torch.ones(2, 4, dtype=torch.float64))

    with pytest.raises(RuntimeError):
        output_variation(model, forward, (1e-2,))
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


# -------------------------------------------------------------------------------------------------
# params


def test_layer_stds_pool_each_layers_matrices():
    ones = np.array([[1.0, -1.0], [1.0, -1.0]])  # std 1
    threes = np.array([[3.0, -3.0], [-3.0, 3.0]])  # std 3
    stds = layer_stds([(0, "attention", ones), (0, "attention", torch.tensor(threes)),
                       (1, "feedforward", 2 * ones), (1, "attention", threes),
                       (1, "attention", np.array([5.0, -5.0]))])  # a 1-D bias is not a matrix: ignored
    # Layer 0's attention pools ±1 and ±3 (mean 0): variance (4 * 1 + 4 * 9) / 8 = 5.
    np.testing.assert_allclose(stds["attention"], [5 ** 0.5, 3.0])
    assert np.isnan(stds["feedforward"][0]) and stds["feedforward"][1] == pytest.approx(2.0)
    assert list(stds) == ["attention", "feedforward"]


@pytest.mark.parametrize("name, expected", [
    ("backbone.encoder.layer.3.attention.self.query.weight", (3, "attention")),
    ("encoder.layer.0.attention.output.dense.weight", (0, "attention")),
    ("encoder.layer.0.intermediate.dense.weight", (0, "feedforward")),
    ("encoder.layer.11.output.dense.weight", (11, "feedforward")),
    ("encoder.layer.0.output.LayerNorm.weight", None),
    ("encoder.layer.0.attention.self.query.bias", None),
    ("encoder.albert_layer_groups.0.albert_layers.0.attention.dense.weight", (0, "attention")),
    ("encoder.albert_layer_groups.0.albert_layers.0.ffn_output.weight", (0, "feedforward")),
    ("h.2.attn.c_attn.weight", (2, "attention")),
    ("h.2.mlp.c_proj.weight", (2, "feedforward")),
    ("h.2.ln_1.weight", None),
    ("layers.1.self_attn.o_proj.weight", (1, "attention")),
    ("layers.1.mlp.gate_proj.weight", (1, "feedforward")),
    ("layers.1.post_attention_layernorm.weight", None),
    ("embeddings.word_embeddings.weight", None),
])
def test_parse_name_knows_the_families(name, expected):
    assert parse_name(name) == expected


def test_layer_stds_from_a_state_dict():
    gen = torch.Generator().manual_seed(5)
    state = {"h.0.attn.c_attn.weight": 0.02 * torch.randn(64, 192, generator=gen),
             "h.0.attn.c_attn.bias": torch.randn(192, generator=gen),
             "h.0.ln_1.weight": torch.ones(64),
             "h.1.mlp.c_fc.weight": torch.full((4, 4), 7.0)}
    stds = layer_stds(state)
    assert stds["attention"][0] == pytest.approx(state["h.0.attn.c_attn.weight"].double().std(correction=0).item())
    assert np.isnan(stds["attention"][1]) and stds["feedforward"][1] == 0.0


# -------------------------------------------------------------------------------------------------
# LogME


def _brute_force_evidence(f, y):
    """max over a log-grid of (alpha, beta) of the dense log evidence / n: a coarse grid over 1e-4..1e4,
    then a grid 1000x finer (steps of 1e-3 decades) around the coarse maximum."""
    n, d = f.shape
    gram, fy = f.T @ f, f.T @ y

    def evidence(alpha, beta):  # [G] each -> [G]
        a = alpha[:, None, None] * np.eye(d) + beta[:, None, None] * gram  # [G, d, d]
        m = beta[:, None] * np.linalg.solve(a, np.broadcast_to(fy, (len(alpha), d))[..., None])[..., 0]
        residual = ((m @ f.T - y) ** 2).sum(axis=1)
        return (n / 2 * np.log(beta) + d / 2 * np.log(alpha) - n / 2 * np.log(2 * np.pi) - beta / 2 * residual
                - alpha / 2 * (m ** 2).sum(axis=1) - 0.5 * np.linalg.slogdet(a)[1]) / n

    def best(log_a, log_b):
        grid_a, grid_b = (g.ravel() for g in np.meshgrid(log_a, log_b, indexing="ij"))
        values = evidence(10 ** grid_a, 10 ** grid_b)
        i = int(values.argmax())
        return values[i], grid_a[i], grid_b[i]

    _, a0, b0 = best(np.linspace(-4, 4, 81), np.linspace(-4, 4, 81))
    value, a1, b1 = best(np.linspace(a0 - 0.1, a0 + 0.1, 201), np.linspace(b0 - 0.1, b0 + 0.1, 201))
    assert -4 < a1 < 4 and -4 < b1 < 4  # an interior maximum, or the grid proves nothing
    return value


def test_logme_is_the_maximum_evidence_of_the_brute_force_grid():
    rng = np.random.default_rng(6)
    f = rng.normal(size=(60, 5))
    target = f @ rng.normal(size=5) + 0.5 * rng.normal(size=60)  # one regression target [n]
    labels = (f @ rng.normal(size=(5, 3)) + rng.normal(size=(60, 3))).argmax(axis=1)  # 3 classes
    one_hot = np.eye(3)[labels]
    brute_regression = _brute_force_evidence(f, target)
    brute_classes = np.mean([_brute_force_evidence(f, one_hot[:, c]) for c in range(3)])
    # The grid can only fall short of the true maximum (by ~1e-6 per example at its step); the fixed point
    # stops within a relative 1e-6 of it.
    for score, brute in ((logme(f, target), brute_regression), (logme(f, labels), brute_classes),
                         (logme(torch.tensor(f), one_hot), brute_classes)):
        assert brute - 1e-9 <= score <= brute + 1e-5


def test_logme_prefers_features_that_determine_the_labels():
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 4, size=300)
    informative = np.hstack([np.eye(4)[labels] + 0.1 * rng.normal(size=(300, 4)), rng.normal(size=(300, 4))])
    noise = rng.normal(size=(300, 8))
    assert logme(informative, labels) > logme(noise, labels) + 0.5
    # More dimensions than examples, and duplicated columns: still a finite score.
    wide = rng.normal(size=(10, 30))
    assert np.isfinite(logme(np.hstack([wide, wide]), labels[:10]))


# ------------------------------------------------------------------------------------------- layer curves
def test_layer_curves_are_sweeps_of_protocols_with_their_reference_runs():
    from labcore.analysis.curves import CURVES, curve_specs, curve_table
    from labcore.errors import LabError
    from labcore.figures.analysis import layer_curve_figure
    from labcore.results.record import RunRecord
    from labcore.runspec import make_spec

    base = make_spec(model="tiny:bert", discipline="bits-xor")
    specs = curve_specs("reinit_after", base, layers=2, seeds=(0, 1))
    assert [dict(s.protocol_params).get("k") for s in specs[:6]] == [0, 0, 1, 1, 2, 2]
    assert [(s.protocol, s.init) for s in specs[6:]] == [("full", "pretrained")] * 2 + [("full", "random")] * 2
    records = [RunRecord(key=str(i), spec=s.to_dict(), status="done", metric="accuracy", best_step=5,
                         test={"accuracy": 0.5 + 0.1 * dict(s.protocol_params).get("k", 0) + 0.01 * s.seed})
               for i, s in enumerate(specs)]
    table = curve_table("reinit_after", records)
    points = table[table["reference"] == ""]
    assert list(points["x"]) == [0.0, 1.0, 2.0] and list(points["n"]) == [2, 2, 2]
    assert np.allclose(points["mean"], [0.505, 0.605, 0.705])
    assert set(table["reference"]) == {"", "full fine-tune, pretrained", "full fine-tune, random"}
    curve = CURVES["reinit_after"]
    fig = layer_curve_figure(table, name=curve.name, title=curve.title, x_label=curve.x_label)
    assert len(fig.data) == 1 and len(fig.layout.shapes) == 2  # the curve and two reference lines
    with pytest.raises(LabError, match="valid curves"):
        curve_specs("nope", base, layers=2)
