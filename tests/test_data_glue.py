"""GLUE disciplines: a small local parquet copy in the hub's layout, and the offline error."""

from __future__ import annotations

import pytest

from labcore import data as disciplines
from labcore.data import glue
from labcore.errors import DataValidationError, LabError, UnknownNameError


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))


def write_parquet(path, columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), str(path))


def glue_copy(root, task, splits, n=20, **overrides):
    """A few rows per split, with the hub's column names and file names."""
    spec = glue.TASKS[task]
    for split in splits:
        columns = {spec.text: [f"{split} first {i}" for i in range(n)]}
        if spec.text_pair:
            columns[spec.text_pair] = [f"{split} second {i}" for i in range(n)]
        if spec.output_kind == "class":
            columns["label"] = [i % len(spec.class_names) for i in range(n)]
        else:
            columns["label"] = [float(i % 6) for i in range(n)]
        columns["idx"] = list(range(n))
        columns.update(overrides)
        write_parquet(root / task / f"{split}-00000-of-00001.parquet", columns)
    return root


def build(name, **params):
    discipline = disciplines.get(name)
    return discipline.build(disciplines.parse_params(discipline, params), lambda _m: None), discipline


def test_single_sentence_task_from_local_copy(tmp_path):
    root = glue_copy(tmp_path / "glue", "sst2", ("train", "validation", "test"), n=40)
    dataset, discipline = build("glue-sst2", data_dir=str(root))
    assert {s: len(dataset[s]) for s in dataset} == {"train": 36, "validation": 4, "test": 40}
    assert dataset["train"].column_names == ["text", "label"]
    assert dataset["test"]["text"][0] == "validation first 0"  # GLUE's validation set is the test split
    assert set(dataset["validation"]["text"]) <= {f"train first {i}" for i in range(40)}
    assert not set(dataset["validation"]["text"]) & set(dataset["train"]["text"])
    info = discipline.info(discipline.Params(data_dir=str(root)))
    assert info.input_kind == "text" and info.metric == "accuracy"
    assert info.class_names == ("negative", "positive") and "appendix A" in info.citation


def test_pair_task_keeps_text_and_text_pair(tmp_path):
    root = glue_copy(tmp_path / "glue", "mrpc", ("train", "validation"))
    dataset, discipline = build("glue-mrpc", data_dir=str(root / "mrpc"))  # the task folder works too
    assert dataset["test"].column_names == ["text", "text_pair", "label"]
    row = dataset["test"][3]
    assert (row["text"], row["text_pair"]) == ("validation first 3", "validation second 3")
    assert discipline.info(discipline.Params()).metric == "f1"


def test_regression_and_metrics_per_task(tmp_path):
    root = glue_copy(tmp_path / "glue", "stsb", ("train", "validation"))
    dataset, discipline = build("glue-stsb", data_dir=str(root))
    info = discipline.info(discipline.Params())
    assert info.output_kind == "regression" and info.metric == "spearman" and info.num_outputs == 1
    assert dataset["test"].features["label"].dtype == "float32"
    metrics = {name: disciplines.get(name).info(disciplines.get(name).Params()).metric for name in glue.names()}
    assert metrics == {"glue-cola": "mcc", "glue-sst2": "accuracy", "glue-mrpc": "f1", "glue-qqp": "f1",
                       "glue-stsb": "spearman", "glue-mnli": "accuracy", "glue-qnli": "accuracy",
                       "glue-rte": "accuracy"}


def test_mnli_tests_on_matched_or_mismatched(tmp_path):
    root = glue_copy(tmp_path / "glue", "mnli", ("train", "validation_matched", "validation_mismatched"))
    dataset, _ = build("glue-mnli", data_dir=str(root))
    assert dataset["test"]["text"][0] == "validation_matched first 0"
    dataset, _ = build("glue-mnli", data_dir=str(root), mismatched=True)
    assert dataset["test"]["text"][0] == "validation_mismatched first 0"
    with pytest.raises(LabError, match="no parameter"):
        build("glue-sst2", mismatched=True)


def test_seeded_validation_carve_out(tmp_path):
    root = glue_copy(tmp_path / "glue", "cola", ("train", "validation"), n=50)
    a, _ = build("glue-cola", data_dir=str(root))
    b, _ = build("glue-cola", data_dir=str(root))
    c, _ = build("glue-cola", data_dir=str(root), seed=1)
    assert a["validation"]["text"] == b["validation"]["text"] != c["validation"]["text"]


def test_local_copy_problems_are_named(tmp_path):
    with pytest.raises(LabError, match="is not a folder"):
        build("glue-rte", data_dir=str(tmp_path / "nowhere"))
    root = glue_copy(tmp_path / "glue", "rte", ("train",))
    with pytest.raises(LabError, match=r"no validation files in .*validation-\*\.parquet"):
        build("glue-rte", data_dir=str(root))
    root = glue_copy(tmp_path / "other", "qnli", ("train", "validation"))
    (root / "qnli" / "train-00000-of-00001.parquet").unlink()
    write_parquet(root / "qnli" / "train-00000-of-00001.parquet", {"text": ["x"] * 20, "label": [0] * 20})
    with pytest.raises(DataValidationError, match=r"qnli/train-00000-of-00001.parquet has no column\(s\) "
                                                   r"question, sentence"):
        build("glue-qnli", data_dir=str(root))
    root = glue_copy(tmp_path / "hidden", "sst2", ("train", "validation"), label=[-1] * 20)
    with pytest.raises(DataValidationError, match="row 0 of sst2/train-00000-of-00001.parquet has label -1"):
        build("glue-sst2", data_dir=str(root))
    (root / "sst2" / "validation-00000-of-00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataValidationError, match="sst2/validation-00000-of-00001.parquet cannot be read"):
        build("glue-sst2", data_dir=str(root))


def test_unknown_task_lists_valid_names():
    with pytest.raises(UnknownNameError, match="glue-cola, glue-sst2.*glue-rte"):
        disciplines.get("glue-wnli")


def test_offline_without_data_dir_fails_fast_with_the_fix(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub

    # The libraries read these variables once, at import, so the settings they took are set too.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    # An empty Hugging Face cache, so a copy a user downloaded earlier cannot make the load succeed.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf")
    with pytest.raises(LabError) as info:
        build("glue-sst2")
    message = str(info.value)
    assert message.startswith("glue-sst2 needs the hub or a local copy: set HF_DATASETS_OFFLINE=0")
    assert "data_dir=" in message and "sst2/train-*.parquet" in message
