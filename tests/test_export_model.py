"""A fine-tuned run leaves the lab: a tiny real splice run (tiny:bert, 150 steps, fp32) written as a folder that
``transformers`` loads, whose pipeline on raw DNA strings predicts what the lab predicts on the whole test
split; runs whose protocol has no transformers form are refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from labcore import api as lab
from labcore.cli.main import main
from labcore.errors import LabError
from labcore.export.model import lab_logits, raw_examples, refusal
from labcore.engine.run import load_trained
from labcore.runspec import make_spec
from labcore.store import Store

SPLICE = dict(model="tiny:bert", discipline="dna-splice", max_steps=150, eval_every=30, lr=1e-3, precision="fp32")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, fetched_assets):
    root = tmp_path_factory.mktemp("model")
    store = Store(root / "store")
    record = lab.run(store=store, **SPLICE)
    folder = lab.export_model(record.key[:10], str(root / "splice-model"), store=store)
    yield store, record, folder
    store.close()


def pipeline_and_lab(store, record, folder) -> tuple[list[str], list[str], list[str]]:
    """The pipeline's labels on the raw test strings, the lab's labels of the same examples, the true labels."""
    from transformers import pipeline

    prepared = load_trained(make_spec(**record.spec), store.workdir(record.key))
    texts = raw_examples(prepared)
    assert set("".join(texts)) <= set("ACGT") and len(texts) == record.test_examples
    labels = [p["label"] for p in pipeline("text-classification", model=folder)(texts, batch_size=64)]
    names = list(prepared.info.class_names)
    return labels, [names[i] for i in lab_logits(prepared).argmax(1)], [names[i] for i in prepared.dataset["test"]["label"]]


def test_the_pipeline_on_raw_dna_predicts_what_the_lab_does_on_the_whole_test_split(exported):
    labels, lab_says, truth = pipeline_and_lab(*exported)
    assert labels == lab_says
    assert len(set(labels)) > 1  # a model that left the majority class: agreement is not trivial
    assert np.mean([a == b for a, b in zip(labels, truth)]) == pytest.approx(exported[1].test["accuracy"])


@pytest.mark.slow
def test_a_short_minilm_splice_run_round_trips_on_the_whole_test_split(tmp_path, fetched_assets):
    # MiniLM, 120 steps at 1e-4 in the machine's precision: about 5 minutes on 2 busy cores
    store = Store(tmp_path / "store")
    record = lab.run(store=store, model="minilm", discipline="dna-splice", max_steps=120, lr=1e-4)
    labels, lab_says, truth = pipeline_and_lab(store, record, lab.export_model(record.key, str(tmp_path / "m"),
                                                                               store=store))
    assert labels == lab_says and len(set(labels)) > 1
    assert np.mean([a == b for a, b in zip(labels, truth)]) == pytest.approx(record.test["accuracy"], abs=0.02)
    store.close()


def test_auto_classes_load_the_folder_with_label_names_and_the_runs_token_ids(exported):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    store, record, folder = exported
    mapping = json.loads((store.workdir(record.key) / "mapping.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    assert model.config.id2label == {0: "EI", 1: "IE", 2: "N"}
    ids = tokenizer("GATC")["input_ids"]
    symbol_id = dict(zip(mapping["alphabet"], mapping["ids"]))
    assert ids == [tokenizer.cls_token_id, *(symbol_id[s] for s in "GATC"), tokenizer.sep_token_id]
    assert tokenizer("G A T C")["input_ids"] == ids  # spaces between symbols are ignored
    prepared = load_trained(make_spec(**record.spec), store.workdir(record.key))
    with torch.inference_mode():
        logits = model(**tokenizer(raw_examples(prepared)[:8], padding=True, return_tensors="pt")).logits
    assert logits.numpy() == pytest.approx(lab_logits(prepared, limit=8), rel=1e-4, abs=1e-5)
    card = (Path(folder) / "README.md").read_text()
    for fact in (record.key, "GPL-2", "Max length: 62 tokens", "no windows", f"{record.test['accuracy']:.4f}"):
        assert fact in card


def test_the_command_writes_a_folder(exported, tmp_path, capsys):
    store, record, _ = exported
    assert main(["export", "model", record.key[:12], str(tmp_path / "m"), "--store", str(store.root)]) == 0
    assert "pipeline('text-classification'" in capsys.readouterr().out
    assert {p.name for p in (tmp_path / "m").iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json",
                                                            "README.md"}


def test_protocols_without_a_transformers_form_are_refused_with_the_reason(exported, capsys):
    store, record, _ = exported
    assert "real-valued vectors" in refusal({"input_adapter": "linear"})
    assert "own" in refusal({"input_adapter": "embedding", "protocol": "full"})
    assert "middle layer" in refusal({"input_adapter": "vocab", "protocol": "probe"})
    assert "pools with 'mean'" in refusal({"input_adapter": "vocab", "protocol": "full", "pooling": "mean"})
    assert refusal(record.spec) == ""
    bits = lab.run(store=store, model="tiny:bert", discipline="bits-xor", max_steps=2, eval_every=1, precision="fp32")
    with pytest.raises(LabError, match="real-valued vectors fed through a new linear input layer"):
        lab.export_model(bits.key, "unused", store=store)
    assert main(["export", "model", bits.key, "unused", "--store", str(store.root)]) == 2
    assert "cannot be written as a transformers model" in capsys.readouterr().err


def test_a_text_run_with_shifted_tokens_leaves_with_the_bodys_tokenizer_and_a_permuted_table(tmp_path, fetched_assets):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from labcore.export.model import exported_logits

    store = Store(tmp_path / "store")
    record = lab.run(store=store, model="tiny:bert", discipline="text-sentiment", mapping="shift", max_steps=10,
                     eval_every=5, train_size="200", precision="fp32")
    folder = lab.export_model(record.key, str(tmp_path / "sentiment"), store=store)
    prepared = load_trained(make_spec(**record.spec), store.workdir(record.key))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.model_max_length == prepared.max_length == 64  # cut where the run cut
    texts = raw_examples(prepared)[:64]
    ours = lab_logits(prepared, limit=64)
    theirs = exported_logits(AutoModelForSequenceClassification.from_pretrained(folder), tokenizer, texts)
    assert theirs == pytest.approx(ours, rel=1e-4, abs=1e-5)
    assert np.ptp(ours[:, 0]) > 0  # the examples' logits differ: the comparison is not of one constant
    store.close()


@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_roberta_and_albert_bodies_leave_with_the_lab_s_logits(tmp_path, family, fetched_assets):
    store = Store(tmp_path / "store")
    record = lab.run(store=store, model=f"tiny:{family}", discipline="dna-splice", max_steps=20, eval_every=10,
                     lr=1e-3, train_size="200", precision="fp32")
    folder = lab.export_model(record.key, str(tmp_path / family), store=store)
    prepared = load_trained(make_spec(**record.spec), store.workdir(record.key))
    from transformers import pipeline

    classify = pipeline("text-classification", model=folder, top_k=None)
    scores = classify(raw_examples(prepared)[:32])
    names = list(prepared.info.class_names)
    ours = lab_logits(prepared, limit=32)
    probabilities = np.exp(ours - ours.max(1, keepdims=True))
    probabilities /= probabilities.sum(1, keepdims=True)
    theirs = np.array([[{s["label"]: s["score"] for s in row}[name] for name in names] for row in scores])
    assert theirs == pytest.approx(probabilities, abs=1e-5)
    store.close()


def test_a_decoder_body_is_refused_with_the_reason(tmp_path, fetched_assets):
    store = Store(tmp_path / "store")
    record = lab.run(store=store, model="tiny:gpt2", discipline="dna-splice", max_steps=2, eval_every=1,
                     train_size="200", precision="fp32")
    with pytest.raises(LabError, match="gpt2 body; export writes the families bert, roberta, albert"):
        lab.export_model(record.key, str(tmp_path / "gpt2"), store=store)
    assert not (tmp_path / "gpt2").exists()
    store.close()
