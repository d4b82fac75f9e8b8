"""Metrics against hand-computed values and against sklearn / scipy."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import f1_score, matthews_corrcoef

from labcore.data.base import METRICS as DISCIPLINE_METRICS
from labcore.errors import LabError, UnknownNameError
from labcore.results.metrics import (
    METRICS, Aggregate, accuracy, aggregate, binary_f1, bit_accuracy, compute, macro_f1, majority_baseline,
    mcc, spearman, vote,
)


def random_labels(seed: int, n: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true = rng.integers(0, classes, n)
    # Predictions agree with the truth about half the time, so the scores are neither 0 nor 1.
    pred = np.where(rng.random(n) < 0.5, true, rng.integers(0, classes, n))
    return true, pred


# --------------------------------------------------------------------------------------------------
# per-run metrics by hand


def test_accuracy_by_hand():
    assert accuracy([0, 1, 2, 2], [0, 2, 2, 2]) == 0.75
    assert accuracy(np.array([1.0, 0.0]), np.array([1.0, 1.0])) == 0.5  # whole-number floats are labels


def test_accuracy_from_scores_takes_argmax():
    scores = np.array([[2.0, 1.0], [0.1, 0.3], [5.0, -1.0]])
    assert accuracy([0, 1, 1], scores) == pytest.approx(2 / 3)


def test_macro_f1_by_hand():
    # class 0: tp 1, fp 0, fn 1 -> 2/3; class 1: tp 1, fp 1, fn 0 -> 2/3; class 2: tp 1 -> 1.
    assert macro_f1([0, 0, 1, 2], [0, 1, 1, 2]) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    # a class only ever predicted counts with F1 0, as in sklearn
    assert macro_f1([0, 0], [0, 1]) == pytest.approx((2 / 3 + 0) / 2)


def test_binary_f1_by_hand():
    # positive class: tp 1, fp 1, fn 1 -> 0.5
    assert binary_f1([1, 1, 0, 0], [1, 0, 1, 0]) == 0.5
    assert binary_f1([0, 0], [0, 0]) == 0.0  # no positives anywhere: nothing to score


def test_mcc_binary_by_hand():
    # tp 2, tn 1, fp 1, fn 0: (2*1 - 1*0) / sqrt(3 * 2 * 1 * 2)
    assert mcc([1, 1, 0, 0], [1, 1, 1, 0]) == pytest.approx(2 / math.sqrt(12))
    assert mcc([0, 1, 0, 1], [0, 1, 0, 1]) == 1.0
    assert mcc([0, 1, 0, 1], [1, 0, 1, 0]) == -1.0


def test_mcc_multiclass_by_hand():
    # Gorodkin: s = 6, c = 5, t = (2, 2, 2), p = (3, 1, 2) -> (30 - 12) / sqrt((36 - 14)(36 - 12)).
    true = [0, 0, 1, 1, 2, 2]
    pred = [0, 0, 0, 1, 2, 2]
    assert mcc(true, pred) == pytest.approx(18 / math.sqrt(22 * 24))


def test_mcc_constant_is_zero():
    assert mcc([0, 1, 1], [1, 1, 1]) == 0.0
    assert mcc([1, 1, 1], [1, 0, 1]) == 0.0


def test_spearman_by_hand():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2, 3) vs (1, 3, 2): 1 - 6 * 2 / (3 * 8) = 0.5
    assert spearman([1, 2, 3], np.array([[0.1], [0.9], [0.5]])) == pytest.approx(0.5)


def test_spearman_constant_predictions_score_zero():
    assert spearman([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]) == 0.0
    assert spearman([2.0, 2.0, 2.0], [0.1, 0.5, 0.3]) == 0.0
    assert spearman([1.0], [1.0]) == 0.0


def test_spearman_rejects_nan():
    with pytest.raises(LabError, match="nan or inf.*loss curve"):
        spearman([1.0, 2.0], [np.nan, 1.0])


def test_bit_accuracy_by_hand():
    true = [[1, 0, 1], [0, 0, 0]]
    assert bit_accuracy(true, [[1, 1, 1], [0, 0, 1]]) == pytest.approx(4 / 6)
    # float predictions are logits: positive means 1
    assert bit_accuracy(true, np.array([[3.0, -2.0, 0.5], [-1.0, -0.1, 0.0]])) == 1.0


def test_bit_accuracy_errors():
    with pytest.raises(LabError, match="must be 0 or 1"):
        bit_accuracy([[1, 2]], [[1, 0]])
    with pytest.raises(LabError, match="same number of bits"):
        bit_accuracy([[1, 0]], [[1, 0, 1]])
    with pytest.raises(LabError, match="expected \\[n, bits\\]"):
        bit_accuracy([1, 0], [1, 0])


def test_input_errors():
    with pytest.raises(LabError, match="one prediction per example"):
        accuracy([0, 1], [0])
    with pytest.raises(LabError, match="no examples"):
        accuracy([], [])
    with pytest.raises(LabError, match="look like scores"):
        accuracy([0, 1], [0.2, 0.7])
    with pytest.raises(LabError, match="integer class indices"):
        accuracy(["a", "b"], ["a", "b"])
    with pytest.raises(LabError, match="scores \\[n, classes\\]"):
        accuracy([0], np.zeros((1, 2, 2)))


# --------------------------------------------------------------------------------------------------
# cross-checks


@pytest.mark.parametrize("seed, classes", [(0, 2), (1, 3), (2, 5), (3, 10)])
def test_against_sklearn(seed, classes):
    true, pred = random_labels(seed, 300, classes)
    assert mcc(true, pred) == pytest.approx(matthews_corrcoef(true, pred), abs=1e-12)
    assert macro_f1(true, pred) == pytest.approx(f1_score(true, pred, average="macro", zero_division=0))
    if classes == 2:
        assert binary_f1(true, pred) == pytest.approx(f1_score(true, pred))


def test_mcc_against_sklearn_with_a_missing_class():
    true = np.array([0, 0, 1, 1, 3, 3, 3])
    pred = np.array([0, 1, 1, 1, 3, 0, 2])
    assert mcc(true, pred) == pytest.approx(matthews_corrcoef(true, pred))
    assert macro_f1(true, pred) == pytest.approx(f1_score(true, pred, average="macro", zero_division=0))


def test_spearman_against_scipy_with_ties():
    rng = np.random.default_rng(4)
    true = rng.integers(0, 5, 200).astype(float)
    pred = true + rng.normal(0, 2, 200)
    assert spearman(true, pred) == pytest.approx(stats.spearmanr(true, pred).statistic)


# --------------------------------------------------------------------------------------------------
# registry and dispatch


def test_registry_covers_every_discipline_metric():
    assert set(DISCIPLINE_METRICS) <= set(METRICS.names())
    with pytest.raises(UnknownNameError, match="valid names: accuracy, f1"):
        compute("bleu", [0], [0])


def test_compute_dispatches():
    true, pred = random_labels(5, 50, 3)
    assert compute("accuracy", true, pred) == accuracy(true, pred)
    assert compute("f1", true, pred) == macro_f1(true, pred)
    assert compute("mcc", true, pred) == mcc(true, pred)
    assert compute("spearman", [1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert compute("bit_accuracy", [[1, 0]], [[0.7, -0.2]]) == 1.0
    logits = np.eye(3)[pred] * 2.0 - 1.0  # one-hot scores whose argmax is pred
    assert compute("accuracy", true, logits) == accuracy(true, pred)


# --------------------------------------------------------------------------------------------------
# baselines and voting


def test_majority_baseline():
    assert majority_baseline([0, 1, 1, 2], [1, 1, 0, 2, 2]) == pytest.approx(2 / 5)
    # tie between 0 and 2 in training: the smallest index wins
    assert majority_baseline([2, 0, 2, 0], [0, 0, 2]) == pytest.approx(2 / 3)
    # bits: training majorities are (1, 0)
    assert majority_baseline([[1, 0], [1, 1], [0, 0]], [[1, 0], [0, 0]]) == pytest.approx(3 / 4)
    with pytest.raises(LabError, match="a split is empty"):
        majority_baseline([], [0])


def test_vote_per_group():
    groups = ["bach-1", "bach-1", "bach-1", "mozart-2", "mozart-2", "x"]
    preds = [0, 2, 2, 1, 0, 3]
    names, voted = vote(groups, preds)
    assert names == ("bach-1", "mozart-2", "x")  # first appearance
    assert voted.tolist() == [2, 0, 3]  # mozart-2 ties 1/0 -> the smaller index, 0
    scores = np.eye(4)[preds]
    assert vote(groups, scores)[1].tolist() == voted.tolist()
    labels = [2, 2, 2, 1, 1, 3]
    truth_names, truth = vote(groups, labels)
    assert truth_names == names
    assert accuracy(truth, voted) == pytest.approx(2 / 3)


def test_vote_errors():
    with pytest.raises(LabError, match="one group per example"):
        vote(["a"], [0, 1])


# --------------------------------------------------------------------------------------------------
# aggregation


def test_aggregate_t_interval_by_hand():
    # mean 0.8, sample std 0.1, t_{0.975, 2} = 4.302652729911275
    result = aggregate([0.7, 0.8, 0.9])
    half = 4.302652729911275 * 0.1 / math.sqrt(3)
    assert result.mean == pytest.approx(0.8) and result.std == pytest.approx(0.1) and result.n == 3
    assert result.ci_low == pytest.approx(0.8 - half) and result.ci_high == pytest.approx(0.8 + half)


def test_aggregate_against_scipy_interval():
    values = np.random.default_rng(6).normal(0.7, 0.05, 8)
    result = aggregate(values, confidence=0.9)
    low, high = stats.t.interval(0.9, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    assert (result.ci_low, result.ci_high) == pytest.approx((low, high))
    assert result.std == pytest.approx(np.std(values, ddof=1)) and result.confidence == 0.9


def test_aggregate_single_value_is_a_point():
    result = aggregate([0.42])
    assert (result.mean, result.std, result.n, result.ci_low, result.ci_high) == (0.42, 0.0, 1, 0.42, 0.42)


def test_aggregate_identical_values_have_zero_width():
    result = aggregate([0.5, 0.5, 0.5])
    assert result.std == 0.0 and result.ci_low == result.ci_high == 0.5


def test_aggregate_is_json_serialisable():
    result = aggregate([0.1, 0.2])
    again = Aggregate.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert set(result.to_dict()) == {"mean", "std", "n", "ci_low", "ci_high", "confidence"}


def test_aggregate_errors():
    with pytest.raises(LabError, match="no values"):
        aggregate([])
    with pytest.raises(LabError, match="leave out diverged runs"):
        aggregate([0.5, float("nan")])
    with pytest.raises(LabError, match="confidence must lie in"):
        aggregate([0.5, 0.6], confidence=95)


def test_wilson_interval_and_the_small_test_rule():
    from labcore.results.metrics import small_test_warning, wilson_interval

    low, high = wilson_interval(10, 10)
    assert (round(low, 4), high) == (0.7225, 1.0)  # 10 of 10 is not certainty
    low, high = wilson_interval(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    low, high = wilson_interval(0, 1)
    assert low == 0.0 and round(high, 4) == 0.7935
    assert "fewer than 30" in small_test_warning(10, 2) and "steps of 0.10" in small_test_warning(10, 2)
    assert "one class only" in small_test_warning(40, 1)
    assert small_test_warning(30, 2) == "" and small_test_warning(0, 0) == ""
    with pytest.raises(LabError):
        wilson_interval(1, 0)
