"""Backbones and their structure (the lab models built on them: test_lab_models.py).

Unit tests use the tiny random backbones (``tiny:<family>``: 2 layers x 64, 4 heads, 50 tokens; ALBERT
with 3 layers sharing one block) and need no asset. Integration tests load the three packaged models.
"""

from __future__ import annotations

import copy
import json
import time

import pytest
import torch
from torch import nn

from labcore.errors import LabError, UnknownNameError
from labcore.models import (
    BackboneInfo,
    LabModel,
    backbone_names,
    build_lab_model_from,
    count_parameters,
    init_from_statistics,
    load_backbone,
    models_dir,
    seeded,
    structure,
)

FAMILIES = ("bert", "roberta", "albert", "gpt2", "llama")


# Tiny models run fastest on one thread, and the machine's cores are shared.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(family: str, init: str = "pretrained", seed: int = 0, attn: str = "sdpa"):
    return load_backbone(f"tiny:{family}", init, seed=seed, attn_implementation=attn)


def lab(family: str, adapter: str = "vocab", *, num_outputs: int = 3, attn: str = "sdpa", **kwargs) -> LabModel:
    model, tokenizer, info = tiny(family, attn=attn)
    return build_lab_model_from(model, tokenizer, info, adapter=adapter, num_outputs=num_outputs, **kwargs)


def state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


# --------------------------------------------------------------------------------------------------
# names and loading


def test_packaged_backbone_names():
    assert backbone_names() == ["minilm", "antiberty", "smollm2"]


def test_unknown_backbone_and_init_list_the_valid_choices():
    with pytest.raises(UnknownNameError) as error:
        load_backbone("bert-large")
    message = str(error.value)
    assert "minilm" in message and "hub:" in message and "local:" in message
    with pytest.raises(UnknownNameError, match="pretrained, random, stats"):
        load_backbone("tiny:bert", "xavier")
    with pytest.raises(LabError, match="tiny:bert"):
        load_backbone("tiny:t5")


def test_hub_offline_says_it_needs_the_hub_and_suggests_local():
    # conftest sets HF_HUB_OFFLINE=1: nothing is fetched, the error must explain the way out.
    with pytest.raises(LabError) as error:
        load_backbone("hub:lab-test/no-such-model")
    assert "hub" in str(error.value) and "local:" in str(error.value)


def test_local_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(LabError, match="no config.json"):
        load_backbone(f"local:{tmp_path}")


@pytest.mark.parametrize("family", FAMILIES)
def test_info_describes_the_model(family):
    model, tokenizer, info = tiny(family)
    assert isinstance(info, BackboneInfo)
    assert info.family == family and info.init == "pretrained"
    assert info.kind == ("decoder" if family in ("gpt2", "llama") else "encoder")
    assert (info.hidden_size, info.num_heads, info.vocab_size) == (64, 4, 50)
    assert info.num_layers == (3 if family == "albert" else 2)
    assert info.shared_layers == (family == "albert")
    assert info.embedding_size == (32 if family == "albert" else 64)
    assert info.max_positions == {"bert": 64, "roberta": 65, "albert": 64, "gpt2": 64, "llama": None}[family]
    assert (info.cls_id, info.sep_id, info.pad_id) == (2, 3, 0)
    assert json.dumps(info.to_dict())  # plain data, storable in a run record
    assert not model.training and all(p.dtype == torch.float32 for p in model.parameters())


def test_local_folder_round_trip(tmp_path):
    model, tokenizer, _ = tiny("bert")
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    loaded, tok2, info = load_backbone(f"local:{tmp_path / 'm'}")
    assert info.name == f"local:{tmp_path / 'm'}" and info.family == "bert"
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
    assert tok2("A C D")["input_ids"] == tokenizer("A C D")["input_ids"]


def test_local_folder_with_only_vocab_txt_gets_a_cased_wordpiece_tokenizer(tmp_path):
    # AntiBERTy's layout: config + weights + a bare vocab.txt; lower-casing would make residues [UNK].
    from labcore.models.backbones import TINY_VOCAB

    model, _, _ = tiny("bert")
    model.save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    _, tok, _ = load_backbone(f"local:{tmp_path}")
    ids = tok("A C D E")["input_ids"]
    assert tok.unk_token_id not in ids and ids == [2, 10, 11, 12, 13, 3]


def test_local_folder_without_tokenizer_loads_for_vector_inputs(tmp_path):
    model, _, _ = tiny("gpt2")
    model.save_pretrained(tmp_path)
    loaded, tokenizer, info = load_backbone(f"local:{tmp_path}")
    assert tokenizer is None and info.cls_id is None and info.pad_id is None
    lab_model = build_lab_model_from(loaded, tokenizer, info, adapter="linear", vector_dim=2, num_outputs=1)
    assert lab_model(torch.randn(1, 3, 2)).shape == (1, 1)


def test_missing_weights_are_an_error_not_silent_random_layers(tmp_path):
    from safetensors.torch import load_file, save_file

    model, tokenizer, _ = tiny("bert")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    del tensors["encoder.layer.1.output.dense.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(LabError, match="encoder.layer.1.output.dense.weight"):
        load_backbone(f"local:{tmp_path}")


@pytest.mark.parametrize("damage,needle", [
    ("config", "its config.json does not describe the model its weights hold"),
    ("truncated", "a weight file is truncated or damaged"),
])
def test_a_local_folder_whose_weights_do_not_load_is_a_clear_error(tmp_path, damage, needle):
    model, tokenizer, _ = tiny("bert")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    if damage == "config":
        config = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": 96}))
    else:
        weights = tmp_path / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
    with pytest.raises(LabError) as raised:
        load_backbone(f"local:{tmp_path}")
    message = str(raised.value)
    assert needle in message and str(tmp_path) in message and "save_pretrained" in message, message


def test_converted_folders_are_built_once_and_rebuilt_when_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path))
    first, _, _ = load_backbone("tiny:gpt2")
    folder = models_dir() / "tiny-gpt2"
    assert folder.parent == tmp_path / "models"
    stamp = json.loads((folder / "lab-conversion.json").read_text())
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    load_backbone("tiny:gpt2")
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime  # not rebuilt
    (folder / "lab-conversion.json").write_text(json.dumps({**stamp, "format": -1}))
    (folder / "model.safetensors").unlink()
    again, _, _ = load_backbone("tiny:gpt2")
    assert json.loads((folder / "lab-conversion.json").read_text()) == stamp
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), again.parameters()))
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny-gpt2"]  # no temporary leftovers


# --------------------------------------------------------------------------------------------------
# inits


@pytest.mark.parametrize("family", FAMILIES)
def test_random_init_is_seeded_and_differs_from_pretrained(family):
    pretrained, _, _ = tiny(family)
    a, _, info = tiny(family, "random", seed=1)
    b, _, _ = tiny(family, "random", seed=1)
    c, _, _ = tiny(family, "random", seed=2)
    assert info.init == "random"
    sa, sb, sc, sp = state(a), state(b), state(c), state(pretrained)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    weight = next(k for k in sa if k.endswith("weight") and sa[k].dim() == 2)
    assert not torch.equal(sa[weight], sc[weight]) and not torch.equal(sa[weight], sp[weight])


def test_random_bert_uses_the_truncated_normal_of_tamkin_appendix_b():
    model, _, _ = tiny("bert", "random", seed=0)
    for module in model.modules():
        if isinstance(module, nn.Linear):
            assert module.weight.abs().max() <= 0.04 + 1e-7
            assert torch.all(module.bias == 0)
        if isinstance(module, nn.LayerNorm):
            assert torch.all(module.weight == 1) and torch.all(module.bias == 0)


def test_stats_init_matches_each_tensors_mean_and_std():
    pretrained, _, _ = tiny("bert")
    # Give every tensor its own distinct statistics, so a swapped or global draw would show.
    with torch.no_grad(), seeded(5, "test"):
        for i, param in enumerate(pretrained.parameters()):
            param.normal_(mean=0.01 * i, std=0.01 + 0.002 * i)
    model = copy.deepcopy(pretrained)
    init_from_statistics(model, seed=3)
    checked = 0
    for (name, before), after in zip(pretrained.named_parameters(), model.parameters()):
        assert not torch.equal(before, after), name
        if before.numel() >= 1000:
            assert after.mean().item() == pytest.approx(before.mean().item(), abs=0.1 * before.std().item())
            assert after.std().item() == pytest.approx(before.std().item(), rel=0.1)
            checked += 1
    assert checked >= 8
    again = copy.deepcopy(pretrained)
    init_from_statistics(again, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


def test_stats_init_through_load_backbone():
    pretrained, _, _ = tiny("gpt2")
    model, _, info = tiny("gpt2", "stats", seed=0)
    assert info.init == "stats"
    for (name, a), b in zip(pretrained.named_parameters(), model.parameters()):
        if a.numel() >= 1000:
            assert not torch.equal(a, b)
            assert b.std().item() == pytest.approx(a.std().item(), rel=0.1), name


def test_loading_and_building_leave_the_global_random_state_alone():
    before = torch.get_rng_state()
    model, tokenizer, info = tiny("bert", "random", seed=4)
    build_lab_model_from(model, tokenizer, info, adapter="embedding", n_symbols=7, num_outputs=2, seed=4)
    load_backbone("tiny:llama", "stats", seed=1)
    assert torch.equal(before, torch.get_rng_state())


# --------------------------------------------------------------------------------------------------
# structure


@pytest.mark.parametrize("family", FAMILIES)
def test_structure_reaches_the_parts_through_the_module_tree(family):
    model, _, _ = tiny(family)
    s = structure(model)
    assert isinstance(s.word_embeddings, nn.Embedding) and s.word_embeddings.num_embeddings == 50
    assert (s.position_embeddings is None) == (family == "llama")
    assert (s.token_type_embeddings is not None) == (family in ("bert", "roberta", "albert"))
    assert (s.embedding_norm is not None) == (family in ("bert", "roberta", "albert"))
    assert (s.final_norm is not None) == (family in ("gpt2", "llama"))
    assert (s.embedding_projection is not None) == (family == "albert")
    assert isinstance(s.layers, nn.ModuleList)
    assert len(s.layers) == (1 if family == "albert" else 2)
    assert s.num_layers == (3 if family == "albert" else 2)
    assert s.shared_layers == (family == "albert")
    norm_type = "LlamaRMSNorm" if family == "llama" else "LayerNorm"
    for i in range(len(s.layers)):
        block_params = {id(p) for p in s.layers[i].parameters()}
        parts = s.attention(i) + s.feedforward(i) + s.layer_norms(i)
        assert all(id(p) in block_params for m in parts for p in m.parameters())
        assert all(type(n).__name__ == norm_type for n in s.layer_norms(i))
        # attention, feed-forward and norms together cover the whole block
        covered = {id(p) for m in parts for p in m.parameters()}
        assert covered == block_params
    assert [s.block_of_layer(i) for i in range(s.num_layers)] == ([0, 0, 0] if family == "albert" else [0, 1])


def test_structure_refuses_an_unknown_family():
    from transformers import DistilBertConfig, DistilBertModel

    model = DistilBertModel(DistilBertConfig(dim=64, n_layers=1, n_heads=4, hidden_dim=128, vocab_size=50))
    with pytest.raises(LabError, match="layer structure of model type 'distilbert'"):
        structure(model)


def test_init_module_really_reinitialises_loaded_weights():
    # transformers marks loaded tensors as initialised and its init functions then skip them.
    model, _, _ = tiny("bert")
    s = structure(model)
    dense = s.feedforward(1)[0].dense
    before = dense.weight.detach().clone()
    with seeded(0, "t"):
        s.init_module(s.layers[1])
    assert not torch.equal(before, dense.weight)
    assert dense.weight.abs().max() <= 0.04 + 1e-7 and torch.all(dense.bias == 0)
    # truncated normal within ±2σ has std 0.88σ
    assert dense.weight.std().item() == pytest.approx(0.02 * 0.8796, rel=0.08)
    for norm in s.layer_norms(1):
        assert torch.all(norm.weight == 1) and torch.all(norm.bias == 0)


def test_gpt2_init_scales_the_residual_projections():
    model, _, _ = tiny("gpt2")
    s = structure(model)
    with seeded(0, "t"):
        s.init_module(s.layers[0])
    # σ/√(2·layers) = 0.02/2 for the residual projections, σ for the others
    assert s.layers[0].attn.c_proj.weight.std().item() == pytest.approx(0.01, rel=0.1)
    assert s.layers[0].mlp.c_fc.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_set_layer_order_moves_the_blocks():
    model, _, _ = tiny("llama")
    s = structure(model)
    blocks = list(s.layers)
    s.set_layer_order([1, 0])
    assert list(structure(model).layers) == [blocks[1], blocks[0]]
    with pytest.raises(LabError, match="not a permutation"):
        s.set_layer_order([0, 0])


# --------------------------------------------------------------------------------------------------
# packaged models (real weights)


@pytest.mark.integration
def test_minilm_loads_offline(fetched_assets):
    start = time.perf_counter()
    model, tokenizer, info = load_backbone("minilm")
    seconds = time.perf_counter() - start
    assert type(model).__name__ == "BertModel"
    assert len(tokenizer) == 30522 and info.vocab_size == 30522
    assert tokenizer.convert_tokens_to_ids("[unused0]") == 1
    assert (info.cls_id, info.sep_id, info.pad_id, info.num_layers, info.hidden_size) == (101, 102, 0, 6, 384)
    assert count_parameters(model)[0] == 22_713_216
    assert structure(model).word_embeddings.weight.numel() == 11_720_448
    print(f"minilm: {seconds:.1f} s, {count_parameters(model)[0]:,} parameters")
    lab_model = build_lab_model_from(model, tokenizer, info, adapter="vocab", num_outputs=2,
                                     vocab_rows=tuple(range(100)) + (101, 102))
    total, _ = count_parameters(lab_model)
    assert total < 11_000_000  # the table and the pooler are gone
    ids = lab_model.adapter.compact(torch.tensor([[101, 1, 2, 102]]))
    assert lab_model(ids).shape == (1, 2)


@pytest.mark.integration
def test_antiberty_loads_with_a_cased_wordpiece_tokenizer(fetched_assets):
    model, tokenizer, info = load_backbone("antiberty")
    ids = tokenizer("A C D E")["input_ids"]
    assert tokenizer.unk_token_id not in ids and ids == [2, 5, 6, 7, 8, 3]
    assert type(model).__name__ == "BertModel" and info.num_layers == 8 and info.hidden_size == 512
    assert count_parameters(model)[0] == 25_758_720
    folder = models_dir() / "antiberty"
    assert (folder / "model.safetensors").is_file() and (folder / "lab-conversion.json").is_file()
    again, _, _ = load_backbone("antiberty")
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


@pytest.mark.integration
def test_smollm2_converts_once_and_reloads_from_the_cache(fetched_assets):
    folder = models_dir() / "smollm2"
    start = time.perf_counter()
    model, tokenizer, info = load_backbone("smollm2")
    first = time.perf_counter() - start
    assert (folder / "model.safetensors").is_file() and (folder / "lab-conversion.json").is_file()
    stamp = (folder / "lab-conversion.json").stat().st_mtime
    start = time.perf_counter()
    again, tokenizer2, _ = load_backbone("smollm2")
    second = time.perf_counter() - start
    assert (folder / "lab-conversion.json").stat().st_mtime == stamp  # not converted twice
    print(f"smollm2: first load {first:.1f} s (conversion if not cached), reload {second:.1f} s")
    assert type(model).__name__ == "LlamaModel" and info.family == "llama" and info.kind == "decoder"
    assert info.max_positions is None and info.num_layers == 30 and info.hidden_size == 576
    assert "4-bit" in info.description and "lossy" in info.description
    assert count_parameters(model)[0] == 134_515_008
    assert all(p.dtype == torch.float32 for p in model.parameters())
    text = "The capital of France is"
    assert tokenizer2(text)["input_ids"] == tokenizer(text)["input_ids"]
    # The de-quantised model still knows things: the tied LM head predicts " Paris".
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    with torch.no_grad():
        hidden = again(input_ids=ids).last_hidden_state[0, -1]
    best = int((hidden @ again.embed_tokens.weight.T).argmax())
    assert tokenizer.decode([best]).strip() == "Paris"
