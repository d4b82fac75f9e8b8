"""Generated disciplines: bit XOR, bit memory and ListOps (FPT §2.1)."""

from __future__ import annotations

import numpy as np
import pytest

from labcore import data
from labcore.data import bits, listops
from labcore.errors import DataValidationError, LabError


def quiet(_message: str) -> None:
    pass


def build(name: str, **values):
    """Build without the Arrow cache, so two calls really generate twice."""
    discipline = data.get(name)
    return discipline.build(data.parse_params(discipline, values), quiet)


def split_arrays(dataset, column: str = "vectors") -> dict[str, np.ndarray]:
    return {split: np.asarray(dataset[split][column], dtype=np.float32) for split in dataset}


def row_keys(array: np.ndarray) -> set[bytes]:
    return {row.tobytes() for row in array}


# --------------------------------------------------------------------------------------------------
# bit XOR


def test_xor_info_matches_the_paper_shape():
    _, info = data.load("bits-xor", progress=quiet)
    assert (info.input_kind, info.output_kind, info.metric) == ("vectors", "multilabel", "bit_accuracy")
    assert (info.vector_dim, info.n_bits, info.max_length, info.num_outputs) == (1, 5, 10, 5)
    assert "disjoint" in info.notes and info.citation
    assert info.bit_groups == 2 and info.show_bits("0110110001") == "01101 10001"
    memory = data.get("bits-memory")
    assert memory.info(memory.Params()).show_bits("0110") == "0110"


def test_xor_targets_are_the_elementwise_xor():
    dataset, _ = data.load("bits-xor", progress=quiet)
    for split in dataset:
        x = np.asarray(dataset[split]["vectors"])  # [n, 10, 1]
        assert x.shape[1:] == (10, 1) and set(np.unique(x)) <= {0.0, 1.0}
        a, b = x[:, :5, 0].astype(int), x[:, 5:, 0].astype(int)
        assert np.array_equal(np.asarray(dataset[split]["label"]), a ^ b)


def test_xor_default_splits_are_disjoint_and_use_every_input_once():
    dataset, _ = data.load("bits-xor", progress=quiet)
    keys = {split: row_keys(x) for split, x in split_arrays(dataset).items()}
    assert [len(dataset[s]) for s in ("train", "validation", "test")] == [768, 128, 128]
    assert not keys["train"] & keys["validation"]
    assert not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    assert len(keys["train"] | keys["validation"] | keys["test"]) == 2 ** 10


def test_xor_long_strings_stay_disjoint():
    dataset = build("bits-xor", n_bits=16, n_train=300, n_validation=50, n_test=50)
    keys = [row_keys(x) for x in split_arrays(dataset).values()]
    assert sum(len(k) for k in keys) == len(set().union(*keys)) == 400


def test_xor_overlap_is_declared_when_the_space_is_too_small():
    params = data.parse_params(data.get("bits-xor"), {"n_bits": 2, "n_train": 20, "n_validation": 5,
                                                      "n_test": 5})
    assert not params.disjoint
    assert "overlap" in data.get("bits-xor").info(params).notes
    dataset = build("bits-xor", n_bits=2, n_train=20, n_validation=5, n_test=5)
    assert [len(dataset[s]) for s in ("train", "validation", "test")] == [20, 5, 5]


def test_xor_is_deterministic_per_seed():
    first = split_arrays(build("bits-xor", seed=3))
    again = split_arrays(build("bits-xor", seed=3))
    other = split_arrays(build("bits-xor", seed=4))
    assert all(np.array_equal(first[s], again[s]) for s in first)
    assert not np.array_equal(first["train"], other["train"])


def test_xor_rejects_bad_sizes_with_the_fix():
    with pytest.raises(LabError, match="at least 1"):
        data.parse_params(data.get("bits-xor"), {"n_test": 0})
    with pytest.raises(LabError, match="valid parameters"):
        data.parse_params(data.get("bits-xor"), {"length": 5})


# --------------------------------------------------------------------------------------------------
# bit memory


def test_memory_layout_and_target_is_the_unmasked_query():
    dataset, info = data.load("bits-memory", progress=quiet)
    assert (info.vector_dim, info.n_bits, info.max_length) == (10, 100, 60)
    masked_total = bits_total = 0
    for split in dataset:
        x = np.asarray(dataset[split]["vectors"])  # [n, 60, 10]
        y = np.asarray(dataset[split]["label"])  # [n, 100]
        assert x.shape[1:] == (60, 10) and y.shape[1:] == (100,)
        strings = x.reshape(len(x), 6, 100)  # 5 patterns, then the masked query
        patterns, query = strings[:, :5], strings[:, 5]
        assert set(np.unique(patterns)) == {-1.0, 1.0} and set(np.unique(query)) == {-1.0, 0.0, 1.0}
        target = 2.0 * y - 1.0
        # The target is one of the five patterns, and the query agrees with it wherever unmasked.
        assert (patterns == target[:, None, :]).all(axis=2).any(axis=1).all()
        assert ((query == 0) | (query == target)).all()
        masked_total += int((query == 0).sum())
        bits_total += query.size
    assert 0.49 < masked_total / bits_total < 0.51  # 500,000 bits masked with probability 0.5


def test_memory_splits_are_disjoint():
    dataset, _ = data.load("bits-memory", progress=quiet)
    keys = [row_keys(x) for x in split_arrays(dataset).values()]
    assert sum(len(k) for k in keys) == len(set().union(*keys)) == 5000


def test_memory_is_deterministic_per_seed():
    small = {"n_bits": 20, "token_dim": 5, "n_train": 50, "n_validation": 10, "n_test": 10}
    first = split_arrays(build("bits-memory", seed=1, **small))
    again = split_arrays(build("bits-memory", seed=1, **small))
    other = split_arrays(build("bits-memory", seed=2, **small))
    assert all(np.array_equal(first[s], again[s]) for s in first)
    assert not np.array_equal(first["train"], other["train"])
    assert first["train"].shape == (50, 24, 5)  # (5 + 1) strings x 20 bits / 5 bits per token


def test_memory_mask_prob_is_honoured():
    inputs, _, _ = bits.memory_examples(bits.MemoryParams(n_bits=50, token_dim=10, mask_prob=0.2,
                                                          n_train=1000, n_validation=10, n_test=10))
    assert 0.18 < float((inputs[:, -1] == 0).mean()) < 0.22


def test_memory_paper_preset_is_120_tokens_of_dimension_50():
    discipline = data.get("bits-memory")
    info = discipline.info(data.parse_params(discipline, preset="paper"))
    assert (info.max_length, info.vector_dim, info.n_bits) == (120, 50, 1000)


def test_memory_token_dim_must_divide_the_string():
    with pytest.raises(LabError, match="must divide"):
        data.parse_params(data.get("bits-memory"), {"n_bits": 100, "token_dim": 7})


# --------------------------------------------------------------------------------------------------
# ListOps


@pytest.mark.parametrize("expression, value", [
    ("[MAX 4 3 [MIN 2 3 ] 1 0 ]", 4),  # the paper's example
    ("[MIN 7 2 9 ]", 2),
    ("[MAX 0 0 ]", 0),
    ("[MED 1 5 3 ]", 3),
    ("[MED 1 2 ]", 1),  # even count: mean 1.5 rounded down, as LRA's int(np.median)
    ("[MED 1 4 ]", 2),  # 2.5 -> 2
    ("[MED 3 9 4 6 ]", 5),  # middle two 4, 6 -> 5
    ("[SM 7 8 9 ]", 4),  # 24 mod 10
    ("[SM 5 5 ]", 0),
    ("[SM [MAX 1 9 ] [MIN 3 4 ] [MED 2 8 5 ] ]", 7),  # 9 + 3 + 5 = 17
    ("[MIN [MAX [SM 9 9 ] 3 ] 6 ]", 6),  # SM -> 8, MAX -> 8, MIN(8, 6) -> 6
    ("[MED [MIN 9 8 ] [MAX 0 1 ] [SM 6 6 ] [MED 7 7 7 ] ]", 4),  # 8 1 2 7 sorted 1 2 7 8: (2 + 7) // 2
    ("7", 7),
])
def test_listops_evaluator_on_hand_computed_expressions(expression, value):
    assert listops.evaluate(expression) == value
    assert listops.evaluate(expression.split()) == value


@pytest.mark.parametrize("expression, problem", [
    ("[MAX 1 2", "never closed"),
    ("[MAX 1 2 ] ]", "follows a complete"),
    ("1 2", "follows a complete"),
    ("]", "closes nothing"),
    ("[FOO 1 2 ]", "unknown symbol"),
    ("[MAX ]", "no arguments"),
    ("", "empty"),
])
def test_listops_evaluator_rejects_malformed_expressions(expression, problem):
    with pytest.raises(DataValidationError, match=problem):
        listops.evaluate(expression)


def test_listops_median_matches_lra_rule():
    rng = np.random.default_rng(0)
    for _ in range(500):
        values = rng.integers(0, 10, size=int(rng.integers(1, 11))).tolist()
        assert listops.apply_operator("[MED", values) == int(np.median(values))


def test_listops_labels_lengths_and_splits():
    dataset, info = data.load("listops", progress=quiet)
    params = data.parse_params(data.get("listops"))
    assert (info.input_kind, info.output_kind, len(info.alphabet), len(info.class_names)) == ("tokens", "class", 15, 10)
    seen: dict[str, set[tuple[int, ...]]] = {}
    for split in dataset:
        rows, labels = dataset[split]["tokens"], dataset[split]["label"]
        for tokens, label in zip(rows, labels):
            assert params.min_length <= len(tokens) <= params.max_length == info.max_length
            assert listops.evaluate(listops.to_symbols(tokens)) == label
        seen[split] = {tuple(t) for t in rows}
        assert len(seen[split]) == len(rows)  # distinct within a split too
    assert not seen["train"] & seen["validation"]
    assert not seen["train"] & seen["test"]
    assert not seen["validation"] & seen["test"]


def test_listops_summary_shows_the_skewed_classes():
    summary = data.summarize("listops", progress=quiet)
    assert summary.split_sizes == {"train": 10_000, "validation": 1_000, "test": 1_000}
    assert set(summary.class_counts) == set(listops.CLASSES)
    assert sum(summary.class_counts.values()) == 12_000
    assert max(summary.class_counts.values()) > 1.3 * 1_200  # well above a uniform 10 %
    assert summary.examples[0].startswith("[") and "]" in summary.examples[0]
    assert "skewed" in data.get("listops").info(data.parse_params(data.get("listops"))).notes


def test_listops_is_deterministic_per_seed():
    small = {"n_train": 200, "n_validation": 20, "n_test": 20}
    first = build("listops", seed=5, **small)
    again = build("listops", seed=5, **small)
    other = build("listops", seed=6, **small)
    assert first["train"]["tokens"] == again["train"]["tokens"]
    assert first["test"]["label"] == again["test"]["label"]
    assert first["train"]["tokens"] != other["train"]["tokens"]


def test_listops_truncation_keeps_the_first_tokens():
    values = {"min_length": 40, "max_length": 120, "truncate_to": 32, "n_train": 100,
              "n_validation": 10, "n_test": 10}
    dataset = build("listops", **values)
    assert all(len(t) == 32 for t in dataset["train"]["tokens"])
    discipline = data.get("listops")
    info = discipline.info(data.parse_params(discipline, values))
    assert info.max_length == 32 and "first 32 tokens" in info.notes


def test_listops_paper_preset_follows_lra_and_fpt():
    discipline = data.get("listops")
    params = data.parse_params(discipline, preset="paper")
    assert (params.max_depth, params.max_args, params.min_length, params.max_length) == (10, 10, 501, 1999)
    assert (params.n_train, params.n_validation, params.n_test) == (96_000, 2_000, 2_000)
    assert discipline.info(params).max_length == 512


@pytest.mark.parametrize("values, problem", [
    ({"min_length": 200, "max_length": 100}, "exceeds max_length"),
    ({"max_depth": 2, "max_args": 3, "min_length": 10}, "longest possible"),
    ({"max_args": 1}, "2 or more"),
    ({"max_length": 3}, "shortest expression"),
])
def test_listops_rejects_impossible_windows(values, problem):
    with pytest.raises(LabError, match=problem):
        data.parse_params(data.get("listops"), values)


def test_listops_too_few_distinct_expressions_is_an_error():
    # Length exactly 4 allows only 4 operators x 100 digit pairs = 400 distinct expressions.
    params = listops.ListOpsParams(min_length=4, max_length=4, n_train=500, n_validation=1, n_test=1)
    with pytest.raises(LabError, match="widen the window"):
        listops.generate(params, 502, seed=0)
