"""Scores of one run and aggregates over runs: pure numpy/scipy functions, no torch.

Per-run metrics (the names disciplines use in ``DisciplineInfo.metric``, see :data:`METRICS`):
accuracy, macro F1, Matthews correlation (multi-class: Gorodkin's R_K, the GLUE/CoLA measure), Spearman
correlation (GLUE's STS-B) and bit accuracy (Lu et al.'s bit memory / bit XOR). :func:`compute`
takes either predictions or the model's raw scores, so the engine needs no per-metric code.

Over runs (seeds, mappings, subsamples), :func:`aggregate` gives mean, sample standard deviation and a
95 % Student-t interval, as Tamkin et al. draw their error bars (appendix C / §3: "95% confidence
intervals calculated with a t-distribution").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from labcore.errors import LabError
from labcore.registry import Registry

# --------------------------------------------------------------------------------------------------
# input checks


def _pair(y_true: Any, y_pred: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    true, pred = np.asarray(y_true), np.asarray(y_pred)
    if true.shape[:1] != pred.shape[:1] or true.ndim == 0:
        raise LabError(f"{what}: {true.shape} true values against {pred.shape} predictions; pass one "
                       f"prediction per example")
    if true.shape[0] == 0:
        raise LabError(f"{what}: no examples to score; evaluate on a non-empty split")
    return true, pred


def _labels(values: np.ndarray, what: str) -> np.ndarray:
    """Class indices from labels, or from scores ``[n, classes]`` by argmax."""
    if values.ndim == 2:
        return values.argmax(axis=1)
    if values.ndim != 1:
        raise LabError(f"{what}: expected class indices [n] or scores [n, classes], got shape {values.shape}")
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
            raise LabError(f"{what}: 1-D float values that are not whole numbers look like scores of one "
                           f"output; pass class indices, or scores of shape [n, classes]")
        return values.astype(np.int64)
    if values.dtype.kind not in "iub":
        raise LabError(f"{what}: labels must be integer class indices, got dtype {values.dtype}")
    return values.astype(np.int64)


def _classes(y_true: Any, y_pred: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    true, pred = _pair(y_true, y_pred, what)
    return _labels(true, what), _labels(pred, what)


def _confusion(true: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Confusion counts over the classes that occur in either array (rows: true, columns: predicted)."""
    classes, inverse = np.unique(np.concatenate([true, pred]), return_inverse=True)
    k = classes.size
    t, p = inverse[: true.size], inverse[true.size:]
    return np.bincount(t * k + p, minlength=k * k).reshape(k, k).astype(np.float64)


# --------------------------------------------------------------------------------------------------
# per-run metrics


def accuracy(y_true: Any, y_pred: Any) -> float:
    """Fraction of examples whose predicted class equals the true class."""
    true, pred = _classes(y_true, y_pred, "accuracy")
    return float(np.mean(true == pred))


def _f1_per_class(confusion: np.ndarray) -> np.ndarray:
    tp = np.diag(confusion)
    predicted, actual = confusion.sum(axis=0), confusion.sum(axis=1)
    denominator = predicted + actual
    # 2TP / (2TP + FP + FN); a class never predicted and never true cannot occur here (classes come from
    # the data), and a class with TP = 0 scores 0, as in sklearn's zero_division=0.
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)


def macro_f1(y_true: Any, y_pred: Any) -> float:
    """Unweighted mean of per-class F1 over the classes present in ``y_true`` or ``y_pred`` (sklearn's
    ``f1_score(average="macro")``)."""
    true, pred = _classes(y_true, y_pred, "f1")
    return float(np.mean(_f1_per_class(_confusion(true, pred))))


def binary_f1(y_true: Any, y_pred: Any, positive: int = 1) -> float:
    """F1 of the positive class alone: GLUE's F1 for MRPC and QQP (Kao & Lee table 3)."""
    true, pred = _classes(y_true, y_pred, "f1_binary")
    tp = float(np.sum((true == positive) & (pred == positive)))
    denominator = float(np.sum(true == positive) + np.sum(pred == positive))
    return 2 * tp / denominator if denominator else 0.0


def mcc(y_true: Any, y_pred: Any) -> float:
    """Matthews correlation; for more than two classes Gorodkin's R_K (as sklearn's matthews_corrcoef).

    With confusion matrix C, s = n examples, c = correct, t_k = true counts, p_k = predicted counts:
    (c*s - sum p_k t_k) / sqrt((s^2 - sum p_k^2) (s^2 - sum t_k^2)). It is 0.0 when either factor is 0
    (all true labels, or all predictions, one class): no correlation can be measured, and CoLA
    reports that case as 0.
    """
    true, pred = _classes(y_true, y_pred, "mcc")
    confusion = _confusion(true, pred)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    s, c = confusion.sum(), np.trace(confusion)
    covariance = c * s - float(p @ t)
    denominator = (s * s - float(p @ p)) * (s * s - float(t @ t))
    return float(covariance / math.sqrt(denominator)) if denominator > 0 else 0.0


def _scores(values: np.ndarray, what: str) -> np.ndarray:
    """Regression outputs: shape [n] or [n, 1]."""
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise LabError(f"{what}: expected one score per example ([n] or [n, 1]), got shape {values.shape}")
    return values.astype(np.float64)


def spearman(y_true: Any, y_score: Any) -> float:
    """Spearman rank correlation (scipy.stats.spearmanr).

    Constant predictions (or constant targets) have no ranks to correlate; scipy returns nan. That is
    reported as 0.0 — "no rank correlation" — so a collapsed model scores 0 instead of poisoning the
    mean over seeds with nan.
    """
    from scipy import stats

    true, pred = _pair(y_true, y_score, "spearman")
    true, pred = _scores(true, "spearman"), _scores(pred, "spearman")
    if not (np.all(np.isfinite(true)) and np.all(np.isfinite(pred))):
        raise LabError("spearman: values contain nan or inf; the model diverged or the labels are broken — "
                       "check the run's loss curve")
    if true.size < 2 or np.ptp(true) == 0 or np.ptp(pred) == 0:
        return 0.0
    rho = stats.spearmanr(true, pred).statistic
    return 0.0 if math.isnan(rho) else float(rho)


def _bits(values: np.ndarray, what: str) -> np.ndarray:
    """0/1 bits from labels, or from float logits by sign (logit > 0, i.e. sigmoid > 0.5, is 1)."""
    if values.ndim != 2:
        raise LabError(f"{what}: expected [n, bits], got shape {values.shape}")
    if values.dtype.kind == "f":
        return (values > 0).astype(np.int64)
    if values.dtype.kind not in "iub" or not np.all((values == 0) | (values == 1)):
        raise LabError(f"{what}: integer bit values must be 0 or 1; pass bits, or float logits")
    return values.astype(np.int64)


def bit_accuracy(y_true: Any, y_pred: Any) -> float:
    """Mean over all examples and all bits of (predicted bit == true bit).

    Integer predictions are bits; float predictions are read as logits (positive -> 1), which is
    what a multilabel head emits. Pass probabilities as ``probs > 0.5`` instead.
    """
    true, pred = _pair(y_true, y_pred, "bit_accuracy")
    true = _bits(true, "bit_accuracy (true)")
    pred = _bits(pred, "bit_accuracy (predicted)")
    if true.shape != pred.shape:
        raise LabError(f"bit_accuracy: true bits {true.shape} against predictions {pred.shape}; give every "
                       f"example the same number of bits")
    return float(np.mean(true == pred))


# --------------------------------------------------------------------------------------------------
# baselines and voting


def _majority(values: np.ndarray) -> int:
    """Most frequent class; a tie goes to the smallest class index (deterministic, documented)."""
    classes, counts = np.unique(values, return_counts=True)
    return int(classes[np.argmax(counts)])  # unique sorts ascending and argmax takes the first maximum


def majority_baseline(train_labels: Any, test_labels: Any) -> float:
    """Test accuracy of always predicting the training set's most frequent class (ties: smallest index).

    For multilabel bits (``[n, bits]``) each bit predicts its own training majority; the score is the
    bit accuracy. This is the floor a model must beat before anything is said about transfer.
    """
    train, test = np.asarray(train_labels), np.asarray(test_labels)
    if train.shape[:1] == (0,) or test.shape[:1] == (0,):
        raise LabError("majority_baseline: a split is empty; pass non-empty train and test labels")
    if train.ndim == 2 and test.ndim == 2:
        if train.shape[1] != test.shape[1]:
            raise LabError(f"majority_baseline: {train.shape[1]} training bits against {test.shape[1]} test bits")
        guess = np.array([_majority(column) for column in _bits(train, "majority_baseline").T])
        return float(np.mean(_bits(test, "majority_baseline") == guess[None, :]))
    train, test = _labels(train, "majority_baseline"), _labels(test, "majority_baseline")
    return float(np.mean(test == _majority(train)))


def vote(groups: Sequence[Hashable], predictions: Any) -> tuple[tuple[Hashable, ...], np.ndarray]:
    """Majority class per group (e.g. the windows of one music piece).

    Returns the groups in order of first appearance and, aligned with them, each group's voted class.
    ``predictions`` are class indices or scores ``[n, classes]`` (argmax first: each window casts one
    vote). A tie goes to the smallest class index, so the result never depends on window order. Vote
    the labels the same way to get the groups' true classes in the same order.
    """
    group_list = list(groups)
    labels = _labels(np.asarray(predictions), "vote")
    if len(group_list) != labels.shape[0]:
        raise LabError(f"vote: {len(group_list)} group names against {labels.shape[0]} predictions; pass one "
                       f"group per example")
    members: dict[Hashable, list[int]] = {}
    for group, label in zip(group_list, labels.tolist()):
        members.setdefault(group, []).append(label)
    voted = np.array([_majority(np.asarray(votes)) for votes in members.values()], dtype=np.int64)
    return tuple(members), voted


# --------------------------------------------------------------------------------------------------
# registry


@dataclass(frozen=True)
class Metric:
    name: str
    title: str  # what a table header shows
    fn: Callable[[Any, Any], float]
    output_kind: str  # which DisciplineInfo.output_kind it scores: class, multilabel or regression


METRICS: Registry[Metric] = Registry("metric")
for _metric in (
    Metric("accuracy", "accuracy", accuracy, "class"),
    Metric("f1", "macro F1", macro_f1, "class"),
    Metric("f1_binary", "F1 (positive class)", binary_f1, "class"),
    Metric("mcc", "MCC", mcc, "class"),
    Metric("spearman", "Spearman ρ", spearman, "regression"),
    Metric("bit_accuracy", "bit accuracy", bit_accuracy, "multilabel"),
):
    METRICS.register(_metric.name, _metric)


def compute(metric_name: str, y_true: Any, y_pred_or_scores: Any) -> float:
    """Score predictions (class indices, bits) or raw model scores (logits) with a named metric."""
    return METRICS[metric_name].fn(y_true, y_pred_or_scores)


# --------------------------------------------------------------------------------------------------
# aggregation over runs


@dataclass(frozen=True)
class Aggregate:
    mean: float
    std: float  # sample standard deviation (ddof = 1)
    n: int
    ci_low: float
    ci_high: float
    confidence: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Aggregate":
        return cls(**{k: data[k] for k in ("mean", "std", "n", "ci_low", "ci_high", "confidence") if k in data})


def aggregate(values: Sequence[float], confidence: float = 0.95) -> Aggregate:
    """Mean, sample std and a Student-t interval: mean ± t_{(1+c)/2, n-1} · std / sqrt(n).

    With one value there is no spread to estimate: std is 0 and the interval is the value itself
    (a point, not a claim of certainty; the table shows n so a reader can tell).
    """
    from scipy import stats

    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0:
        raise LabError("aggregate: no values; finish at least one run before aggregating")
    if not np.all(np.isfinite(data)):
        raise LabError(f"aggregate: values contain nan or inf ({data.tolist()}); leave out diverged runs or "
                       f"report them separately")
    if not 0 < confidence < 1:
        raise LabError(f"aggregate: confidence must lie in (0, 1), got {confidence}")
    mean = float(np.mean(data))
    if data.size == 1:
        return Aggregate(mean, 0.0, 1, mean, mean, confidence)
    std = float(np.std(data, ddof=1))
    half = float(stats.t.ppf((1 + confidence) / 2, df=data.size - 1)) * std / math.sqrt(data.size)
    return Aggregate(mean, std, int(data.size), mean - half, mean + half, confidence)


# --------------------------------------------------------------------------------------------------
# one run's test set: how far its accuracy can be trusted

# A test set smaller than this moves an accuracy in steps of more than 1/30 (3.3 points), and its 95 %
# interval spans tens of points: the pages warn beside such a figure.
SMALL_TEST = 30


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (an accuracy over ``n`` independent examples).

    Unlike the normal approximation it stays inside [0, 1] and is not a point at 0 or n successes:
    with 10 of 10 correct the 95 % interval is 0.72..1.00. ``successes`` may be a rounded float (an
    accuracy times n).
    """
    if n <= 0:
        raise LabError(f"wilson_interval: n must be positive, got {n}")
    if not 0 < confidence < 1:
        raise LabError(f"wilson_interval: confidence must lie in (0, 1), got {confidence}")
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = min(max(successes / n, 0.0), 1.0)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def small_test_warning(n: int, n_classes: int) -> str:
    """Why a test set of ``n`` examples (units that vote, where they do) of ``n_classes`` classes cannot
    carry a comparison; "" where it can (or where the sizes are not known: 0)."""
    if n <= 0:
        return ""
    if n_classes == 1:
        return (f"the test set holds one class only ({n} example{'s' if n != 1 else ''}): its accuracy says "
                f"whether the model predicts that class, not whether it tells classes apart")
    if n < SMALL_TEST:
        return (f"the test set has {n} example{'s' if n != 1 else ''}, fewer than {SMALL_TEST}: the accuracy "
                f"moves in steps of {1 / n:.2f}, so differences below the interval's width mean nothing")
    return ""
