"""Protocols pin down exactly what trains, what is re-initialised and what is re-ordered.

Expected parameter names are written out per family below, from the models' module paths, independently
of the library's own grouping; every test model is a tiny random one (no asset).
"""

from __future__ import annotations

import copy
import itertools
import json

import pytest
import torch
from torch import nn

from labcore.errors import LabError, UnknownNameError
from labcore.models import LabModel, backbone_info, build_lab_model_from, load_backbone, seeded
from labcore.protocols import (
    PROTOCOLS,
    FrozenParams,
    ProtocolReport,
    apply_protocol,
    parameter_groups,
    parse_protocol_params,
    protocol_names,
)

FAMILIES = ("bert", "roberta", "albert", "gpt2", "llama")


# Tiny models run fastest on one thread, and the machine's cores are shared.
pytestmark = pytest.mark.usefixtures("one_torch_thread")
SWITCHES = ("input", "output", "positions", "layernorm", "feedforward", "attention")


def _pairs(prefix: str, *names: str) -> list[str]:
    return [f"{prefix}{n}.{w}" for n in names for w in ("weight", "bias")]


def expected_groups(family: str, layers: int = 2) -> dict[str, list[str]]:
    """Every parameter of a lab model (vocab adapter) by group, written from the module paths."""
    g = {"input": ["adapter.embedding.weight"], "output": ["head.weight", "head.bias"], "positions": [],
         "layernorm": [], "attention": [], "feedforward": [], "token_types": [], "embedding_projection": []}
    if family in ("bert", "roberta", "albert"):
        g["positions"] = ["backbone.embeddings.position_embeddings.weight"]
        g["token_types"] = ["backbone.embeddings.token_type_embeddings.weight"]
        g["layernorm"] += _pairs("backbone.embeddings.", "LayerNorm")
    if family in ("bert", "roberta"):
        for i in range(layers):
            p = f"backbone.encoder.layer.{i}."
            g["attention"] += _pairs(p + "attention.", "self.query", "self.key", "self.value", "output.dense")
            g["layernorm"] += _pairs(p, "attention.output.LayerNorm", "output.LayerNorm")
            g["feedforward"] += _pairs(p, "intermediate.dense", "output.dense")
    elif family == "albert":
        p = "backbone.encoder.albert_layer_groups.0.albert_layers.0."
        g["embedding_projection"] = _pairs("backbone.encoder.", "embedding_hidden_mapping_in")
        g["attention"] += _pairs(p + "attention.", "query", "key", "value", "dense")
        g["layernorm"] += _pairs(p, "attention.LayerNorm", "full_layer_layer_norm")
        g["feedforward"] += _pairs(p, "ffn", "ffn_output")
    elif family == "gpt2":
        g["positions"] = ["backbone.wpe.weight"]
        for i in range(layers):
            p = f"backbone.h.{i}."
            g["attention"] += _pairs(p, "attn.c_attn", "attn.c_proj")
            g["layernorm"] += _pairs(p, "ln_1", "ln_2")
            g["feedforward"] += _pairs(p, "mlp.c_fc", "mlp.c_proj")
        g["layernorm"] += _pairs("backbone.", "ln_f")
    elif family == "llama":
        for i in range(layers):
            p = f"backbone.layers.{i}."
            g["attention"] += [p + f"self_attn.{x}_proj.weight" for x in "qkvo"]
            g["layernorm"] += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
            g["feedforward"] += [p + f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")]
        g["layernorm"] += ["backbone.norm.weight"]
    return g


def layer_prefix(family: str, i: int) -> str:
    return {"bert": f"backbone.encoder.layer.{i}.", "roberta": f"backbone.encoder.layer.{i}.",
            "gpt2": f"backbone.h.{i}.", "llama": f"backbone.layers.{i}."}[family]


def pretend_pretrained(model: nn.Module) -> None:
    """Move every weight away from its initial value (norms off 1/0), so a re-initialisation shows."""
    with torch.no_grad(), seeded(11, "pretend"):
        for param in model.parameters():
            param.add_(0.1 * torch.randn_like(param))


def lab(family: str, adapter: str = "vocab", seed: int = 0, **kwargs) -> LabModel:
    model, tokenizer, info = load_backbone(f"tiny:{family}")
    pretend_pretrained(model)
    return build_lab_model_from(model, tokenizer, info, adapter=adapter, num_outputs=3, seed=seed, **kwargs)


def deep(family: str, layers: int = 5) -> LabModel:
    """A tiny model with more layers, for blocks and permutations."""
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    with seeded(0, "deep", family):
        if family == "bert":
            model = BertModel(BertConfig(hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                                         intermediate_size=128, vocab_size=50, max_position_embeddings=64))
        else:
            model = GPT2Model(GPT2Config(n_embd=64, n_layer=layers, n_head=4, n_positions=64, vocab_size=50,
                                         bos_token_id=2, eos_token_id=3))
    pretend_pretrained(model)
    model.eval()
    return build_lab_model_from(model, None, backbone_info(f"deep-{family}", model), adapter="vocab",
                                num_outputs=2)


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def changed_keys(before: dict[str, torch.Tensor], model: nn.Module) -> set[str]:
    after = model.state_dict()
    assert set(after) == set(before)
    return {k for k in before if not torch.equal(before[k], after[k])}


def trainable(model: nn.Module) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def batch():
    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0]])
    mask = (ids != 0).long()
    return ids, mask


# --------------------------------------------------------------------------------------------------
# registry and parameters


def test_registry_lists_every_protocol_with_a_paper_section():
    assert protocol_names() == ["full", "reemb", "frozen", "output_only", "reinit_after", "reinit_block",
                                "reinit_layer", "permute_layers", "probe", "align_refine"]
    for name, protocol in PROTOCOLS.items():
        assert protocol.name == name
        assert "§" in protocol.description or "appendix" in protocol.description
        protocol.Params()  # every parameter has a default
        with pytest.raises(Exception):
            protocol.Params().__setattr__("x", 1)  # frozen


def test_parse_protocol_params_defaults_and_overrides():
    assert parse_protocol_params("frozen") == FrozenParams()
    assert FrozenParams() == FrozenParams(input=True, output=True, positions=True, layernorm=True,
                                          feedforward=False, attention=False)
    assert parse_protocol_params("frozen", {"attention": True}).attention is True
    assert parse_protocol_params("reinit_block", {"start": 2, "mode": "preserve"}).mode == "preserve"


def test_parse_protocol_params_rejects_unknown_keys_and_wrong_types():
    with pytest.raises(LabError, match="valid parameters: input, output, positions, layernorm, feedforward, "
                                       "attention"):
        parse_protocol_params("frozen", {"ln": True})
    with pytest.raises(LabError, match="must be int"):
        parse_protocol_params("reinit_after", {"k": True})
    with pytest.raises(LabError, match="must be int"):
        parse_protocol_params("reinit_after", {"k": "3"})
    with pytest.raises(LabError, match="must be bool"):
        parse_protocol_params("frozen", {"attention": 1})
    with pytest.raises(LabError, match="reinit, preserve"):
        parse_protocol_params("reinit_block", {"mode": "keep"})
    with pytest.raises(UnknownNameError, match="valid names: full, reemb"):
        parse_protocol_params("freeze")


def test_registries_load_without_torch():
    # The app builds its model and protocol forms from these; it never imports torch.
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, labcore.protocols as p; from labcore.models import BACKBONES, backbone_names, INITS; "
            "p.parse_protocol_params('frozen', {'attention': True}); backbone_names(); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


def test_apply_checks_the_params_type():
    with pytest.raises(LabError, match="FrozenParams"):
        PROTOCOLS["frozen"].apply(lab("bert"), parse_protocol_params("full"), 0)


# --------------------------------------------------------------------------------------------------
# what trains


@pytest.mark.parametrize("family", FAMILIES)
def test_parameter_groups_cover_every_parameter_exactly_once(family):
    model = lab(family)
    expected = expected_groups(family)
    groups = parameter_groups(model)
    assert {k: sorted(v) for k, v in groups.items() if k != "other"} == {k: sorted(v) for k, v in expected.items()}
    assert groups["other"] == []
    names = [n for n, _ in model.named_parameters()]
    assert sorted(itertools.chain.from_iterable(expected.values())) == sorted(names)


SWITCH_SETS = [(), ("input",), ("output",), ("positions",), ("layernorm",), ("feedforward",), ("attention",),
               ("input", "output", "positions", "layernorm"), SWITCHES]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("on", SWITCH_SETS, ids=lambda s: "+".join(s) or "none")
def test_frozen_trains_exactly_the_switched_on_groups(family, on):
    model = lab(family)
    params = parse_protocol_params("frozen", {s: s in on for s in SWITCHES})
    expected = expected_groups(family)
    wanted = set(itertools.chain.from_iterable(expected[s] for s in on))
    if not wanted:  # nothing to train (no switch, or positions on a rotary model)
        with pytest.raises(LabError, match="no parameter to train"):
            PROTOCOLS["frozen"].apply(model, params, 0)
        return
    report = PROTOCOLS["frozen"].apply(model, params, 0)
    assert trainable(model) == wanted
    assert set(report.trainable_names) == wanted
    assert report.trainable_parameters == sum(p.numel() for n, p in model.named_parameters() if n in wanted)
    backbone_on = any(n.startswith("backbone.") for n in wanted)
    assert report.body_eval == (not backbone_on) == model.body_eval
    assert not report.features_only
    # token-type tables and ALBERT's projection never train, and the report says so
    assert not wanted & set(expected["token_types"] + expected["embedding_projection"])
    if expected["token_types"]:
        assert any("token-type" in note for note in report.notes)


def test_frozen_fpt_defaults_on_gpt2():
    model = lab("gpt2")
    report = apply_protocol(model, "frozen")
    e = expected_groups("gpt2")
    assert trainable(model) == set(e["input"] + e["output"] + e["positions"] + e["layernorm"])
    assert not report.body_eval and model.backbone.training is model.training


def test_frozen_positions_on_a_rotary_model_is_reported():
    report = apply_protocol(lab("llama"), "frozen")
    assert any("rotary" in note and "no position table" in note for note in report.notes)
    assert any("RMSNorm" in note for note in report.notes)


def test_frozen_albert_reports_shared_block_and_frozen_projection():
    report = apply_protocol(lab("albert"), "frozen", {"attention": True})
    notes = " ".join(report.notes)
    assert "embedding_hidden_mapping_in" in notes and "shared block" in notes and "token-type" in notes


@pytest.mark.parametrize("family", FAMILIES)
def test_full_trains_everything(family):
    model = lab(family)
    model.head.weight.requires_grad_(False)  # protocols start from a clean slate
    report = apply_protocol(model, "full")
    assert trainable(model) == {n for n, _ in model.named_parameters()}
    assert not report.body_eval and not report.features_only and report.notes == ()
    assert report.trainable_parameters == report.total_parameters
    assert json.loads(json.dumps(report.to_dict()))["protocol"] == "full"


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_output_only_equals_frozen_with_only_the_head(family):
    a, b = lab(family, seed=2), lab(family, seed=2)
    report_a = apply_protocol(a, "output_only")
    report_b = apply_protocol(b, "frozen", {s: s == "output" for s in SWITCHES})
    assert trainable(a) == trainable(b) == {"head.weight", "head.bias"}
    assert report_a.features_only and not report_b.features_only
    assert report_a.body_eval and report_b.body_eval
    a.train()
    b.train()
    assert not a.backbone.training and not b.backbone.training
    ids, mask = batch()
    features_a, features_b = a.features(ids, mask), b.features(ids, mask)
    torch.testing.assert_close(features_a, features_b, rtol=0, atol=0)
    torch.testing.assert_close(features_a, a.features(ids, mask), rtol=0, atol=0)  # no dropout: cacheable
    for model in (a, b):
        nn.functional.cross_entropy(model(ids, mask), torch.tensor([0, 2])).backward()
    torch.testing.assert_close(a.head.weight.grad, b.head.weight.grad, rtol=0, atol=0)
    torch.testing.assert_close(a.head.bias.grad, b.head.bias.grad, rtol=0, atol=0)


@pytest.mark.parametrize("family", ["bert", "albert", "llama"])
def test_probe_trains_a_head_on_one_mean_pooled_layer(family):
    model = lab(family)
    n = model.info.num_layers
    report = apply_protocol(model, "probe", {"layer": 1})
    assert trainable(model) == {"head.weight", "head.bias"}
    assert (model.pool_layer, model.pooling) == (1, "mean")
    assert report.features_only and report.body_eval
    model.train()
    ids, mask = batch()
    out = model.backbone(inputs_embeds=model.adapter(ids), attention_mask=mask, output_hidden_states=True)
    expected = (out.hidden_states[1] * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    torch.testing.assert_close(model.features(ids, mask), expected)
    apply_protocol(model, "probe")  # default: the last hidden state
    assert model.pool_layer == n
    apply_protocol(model, "probe", {"layer": 0})  # the embedding output
    assert model.pool_layer == 0
    with pytest.raises(LabError, match=f"0..{n}"):
        apply_protocol(model, "probe", {"layer": n + 1})


# --------------------------------------------------------------------------------------------------
# re-initialisation


def check_reinitialised(model: LabModel, before: dict, family: str, layers: set[int], total: int) -> None:
    """Exactly the given layers changed, every tensor in them, norms back to γ=1 β=0."""
    prefixes = [layer_prefix(family, i) for i in layers]
    expected = {k for k in before if any(k.startswith(p) for p in prefixes)}
    assert changed_keys(before, model) == expected
    norms = {id(p) for n in model.structure.all_layer_norms() for p in n.parameters()}
    for name, param in model.named_parameters():
        if name in expected and id(param) in norms:
            assert torch.all(param == (1 if name.endswith("weight") else 0)), name
    assert trainable(model) == {n for n, _ in model.named_parameters()}  # then everything fine-tunes


@pytest.mark.parametrize("family", ["bert", "roberta", "gpt2", "llama"])
@pytest.mark.parametrize("k", [0, 1, 2])
def test_reinit_after_k_changes_exactly_the_layers_from_k(family, k):
    model = lab(family)
    before = snapshot(model)
    report = apply_protocol(model, "reinit_after", {"k": k}, seed=5)
    check_reinitialised(model, before, family, set(range(k, 2)), 2)
    assert report.reinitialised == tuple(f"layer {i}" for i in range(k, 2))
    if k == 2:
        assert any("equals full" in note for note in report.notes)
    else:
        assert any("embeddings kept" in note for note in report.notes)


def test_reinit_of_a_layer_does_not_depend_on_the_other_layers():
    a, b = lab("bert"), lab("bert")
    apply_protocol(a, "reinit_after", {"k": 0}, seed=3)
    apply_protocol(b, "reinit_layer", {"layer": 1}, seed=3)
    sa, sb = a.state_dict(), b.state_dict()
    for key in sa:
        if key.startswith("backbone.encoder.layer.1."):
            assert torch.equal(sa[key], sb[key]), key


def test_reinit_bert_draws_the_truncated_normal_of_tamkin_appendix_b():
    model = lab("bert")
    apply_protocol(model, "reinit_layer", {"layer": 0}, seed=1)
    layer = model.structure.layers[0]
    for module in layer.modules():
        if isinstance(module, nn.Linear):
            assert module.weight.abs().max() <= 0.04 + 1e-7 and torch.all(module.bias == 0)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
@pytest.mark.parametrize("mode", ["reinit", "preserve"])
def test_reinit_block_reinitialises_the_block_or_everything_else(family, mode):
    model = deep(family, 5)
    before = snapshot(model)
    report = apply_protocol(model, "reinit_block", {"start": 1, "size": 3, "mode": mode}, seed=2)
    layers = {1, 2, 3} if mode == "reinit" else {0, 4}
    check_reinitialised(model, before, family, layers, 5)
    assert report.reinitialised == tuple(f"layer {i}" for i in sorted(layers))


def test_reinit_block_must_fit():
    with pytest.raises(LabError, match="do not fit"):
        apply_protocol(deep("bert", 5), "reinit_block", {"start": 3, "size": 3})


@pytest.mark.parametrize("family", ["bert", "roberta", "gpt2", "llama"])
@pytest.mark.parametrize("layer", [0, 1])
def test_reinit_layer_changes_only_that_layer(family, layer):
    model = lab(family)
    before = snapshot(model)
    apply_protocol(model, "reinit_layer", {"layer": layer}, seed=0)
    check_reinitialised(model, before, family, {layer}, 2)


def test_reinit_layer_out_of_range():
    with pytest.raises(LabError, match="layers 0..1"):
        apply_protocol(lab("gpt2"), "reinit_layer", {"layer": 2})
    with pytest.raises(LabError, match="k is 0..2"):
        apply_protocol(lab("gpt2"), "reinit_after", {"k": 3})


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_reemb_redraws_the_input_rows_and_nothing_else(family):
    model = lab(family, vocab_rows=(0, 4, 9, 17, 30))
    before = snapshot(model)
    report = apply_protocol(model, "reemb", seed=1)
    assert changed_keys(before, model) == {"adapter.embedding.weight"}
    assert trainable(model) == {n for n, _ in model.named_parameters()}
    assert report.reinitialised == ("input embeddings",)
    table = model.adapter.embedding.weight
    assert torch.all(table[0] == 0)  # the padding row, as the family's initialiser leaves it
    if family == "bert":
        assert table.abs().max() <= 0.04 + 1e-7


def test_reemb_with_a_new_input_layer_is_full_and_says_so():
    model = lab("gpt2", "embedding", n_symbols=6)
    before = snapshot(model)
    report = apply_protocol(model, "reemb")
    assert changed_keys(before, model) == set()
    assert any("exactly like full" in note for note in report.notes)


# --------------------------------------------------------------------------------------------------
# permutation


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_permute_layers_moves_block_order_i_to_position_i(family):
    model = deep(family, 5)
    before = snapshot(model)
    report = apply_protocol(model, "permute_layers", {"seed": 1}, seed=9)
    order = report.layer_order
    assert sorted(order) == list(range(5)) and order != tuple(range(5))
    after = model.state_dict()
    for i, j in enumerate(order):
        new, old = layer_prefix(family, i), layer_prefix(family, j)
        keys = [k for k in before if k.startswith(old)]
        assert keys
        for key in keys:
            assert torch.equal(after[new + key[len(old):]], before[key]), (i, j, key)
    untouched = [k for k in before if not any(k.startswith(layer_prefix(family, i)) for i in range(5))]
    assert all(torch.equal(after[k], before[k]) for k in untouched)
    assert trainable(model) == {n for n, _ in model.named_parameters()}
    assert str(list(order)) in " ".join(report.notes)
    ids, mask = batch()
    assert model(ids, mask).shape == (2, 2)


def test_permutation_depends_on_its_own_seed_only():
    orders = {apply_protocol(deep("bert", 5), "permute_layers", {"seed": 1}, seed=s).layer_order for s in (0, 7)}
    assert len(orders) == 1
    other = apply_protocol(deep("bert", 5), "permute_layers", {"seed": 2}).layer_order
    assert other != orders.pop()


def test_permuted_model_computes_with_the_blocks_in_the_new_order():
    original = deep("gpt2", 3)
    model = copy.deepcopy(original)
    blocks = list(model.structure.layers)
    report = apply_protocol(model, "permute_layers", {"seed": 1})
    assert report.layer_order != (0, 1, 2)
    assert list(model.structure.layers) == [blocks[j] for j in report.layer_order]
    original.eval()
    model.eval()
    ids, mask = batch()
    # the embedding output is the same, the first layer's output is not: another block runs first
    a = original.backbone(inputs_embeds=original.adapter(ids), attention_mask=mask, output_hidden_states=True)
    b = model.backbone(inputs_embeds=model.adapter(ids), attention_mask=mask, output_hidden_states=True)
    torch.testing.assert_close(a.hidden_states[0], b.hidden_states[0])
    assert not torch.allclose(a.hidden_states[1], b.hidden_states[1])


# --------------------------------------------------------------------------------------------------
# shared layers (ALBERT)


@pytest.mark.parametrize("name, values", [("reinit_layer", {"layer": 1}), ("reinit_after", {"k": 1}),
                                          ("reinit_block", {"start": 0, "size": 2}),
                                          ("permute_layers", {})])
def test_layer_protocols_refuse_shared_layers_clearly(name, values):
    model = lab("albert")
    before = snapshot(model)
    with pytest.raises(LabError, match="share") as error:
        apply_protocol(model, name, values)
    assert "albert" in str(error.value)
    assert changed_keys(before, model) == set()


def test_whole_shared_block_reinit_is_allowed():
    model = lab("albert")
    before = snapshot(model)
    report = apply_protocol(model, "reinit_after", {"k": 0})
    prefix = "backbone.encoder.albert_layer_groups.0."
    assert changed_keys(before, model) == {k for k in before if k.startswith(prefix)}
    assert report.reinitialised == ("shared block 0 (layers 0-2)",)
    assert apply_protocol(lab("albert"), "reinit_after", {"k": 3}).reinitialised == ()


# --------------------------------------------------------------------------------------------------
# reports and randomness


def test_reports_are_plain_data():
    report = apply_protocol(lab("bert"), "probe", {"layer": 1})
    assert isinstance(report, ProtocolReport)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["features_only"] is True and data["trainable_names"] == ["head.weight", "head.bias"]


def test_protocols_leave_the_global_random_state_alone():
    models = [lab("bert") for _ in range(4)]
    before = torch.get_rng_state()
    apply_protocol(models[0], "reinit_after", {"k": 0}, seed=3)
    apply_protocol(models[1], "reemb", seed=3)
    apply_protocol(models[2], "permute_layers", {"seed": 3})
    apply_protocol(models[3], "frozen")
    assert torch.equal(before, torch.get_rng_state())


def test_reinit_is_seeded():
    a, b, c = lab("llama"), lab("llama"), lab("llama")
    for model, seed in ((a, 1), (b, 1), (c, 2)):
        apply_protocol(model, "reinit_layer", {"layer": 0}, seed=seed)
    key = "backbone.layers.0.mlp.up_proj.weight"
    assert torch.equal(a.state_dict()[key], b.state_dict()[key])
    assert not torch.equal(a.state_dict()[key], c.state_dict()[key])
    assert copy.deepcopy(a)  # still an ordinary module
