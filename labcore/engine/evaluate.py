"""Predictions of a trained model and the metrics a record keeps of them: logits in order, the units a metric
counts (records whose windows vote count once), the metric and loss, and which test examples came out right."""

from __future__ import annotations

from typing import Any

import numpy as np

from labcore.machine import device as devices


def predict(model, data, batch_size: int, device: str, precision: str, *, features: bool = False):
    """Logits (or pooled features) for every example of `data`, in its original order."""
    import torch

    from labcore.data.encode import iterate

    outputs: list[Any] = [None] * len(data)
    # Predictions never see dropout, whatever mode the caller left the model in (after training it is
    # still in train mode); the mode is given back afterwards.
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), devices.autocast(precision, device):
            for batch in iterate(data, batch_size, shuffle=False, device=device):
                out = model.features(batch.inputs, batch.mask) if features else model(batch.inputs, batch.mask)
                out = out.float().cpu()  # one copy a batch (on a GPU, one row at a time was a sync a row)
                for row, i in enumerate(batch.index):
                    outputs[i] = out[row]
    finally:
        model.train(was_training)
    return torch.stack(outputs) if outputs else torch.empty(0)


def counted_labels(data, info) -> np.ndarray:
    """The labels a class metric counts: one per group (its first window's, in order of first appearance,
    as :func:`labcore.results.metrics.vote` orders its groups) where a record's windows vote, else one per example."""
    if not (info.vote_by_group and data.groups is not None):
        return np.asarray(data.labels)
    first: dict[Any, Any] = {}
    for group, label in zip(data.groups, data.labels):
        first.setdefault(group, label)
    return np.asarray(list(first.values()))


def class_predictions(logits, data, info) -> np.ndarray:
    """The predicted class of each unit the metric counts: an example, or a record whose windows vote."""
    from labcore.results import metrics

    predictions = logits.argmax(-1).numpy()
    if info.vote_by_group and data.groups is not None:
        _groups, predictions = metrics.vote(data.groups, predictions)
    return predictions


def correct_examples(logits, data, info):
    """Which examples (windows' votes counted once) the logits classify right; None for other outputs."""
    if info.output_kind != "class":
        return None
    return class_predictions(logits, data, info) == counted_labels(data, info)


def evaluate_logits(logits, data, info) -> dict[str, float]:
    """Metric and loss of `logits` against `data`'s labels, voting over groups where the discipline says so."""
    import torch

    from labcore.results import metrics
    from labcore.engine.train import loss_fn

    labels = torch.from_numpy(data.labels)
    kind = {"class": "ce", "multilabel": "bce", "regression": "mse"}[info.output_kind]
    loss = float(loss_fn(kind)(logits, labels).item()) if len(data) else float("nan")
    if info.output_kind == "class":
        predictions = class_predictions(logits, data, info)
        truth = counted_labels(data, info)
    elif info.output_kind == "multilabel":
        predictions = (logits > 0).long().numpy()
        truth = data.labels
    else:
        predictions = logits.squeeze(-1).numpy()
        truth = data.labels
    value = metrics.compute(info.metric, truth, predictions)
    out = {info.metric: float(value), "loss": loss}
    if info.output_kind == "class" and info.metric != "accuracy":
        out["accuracy"] = float(metrics.compute("accuracy", truth, predictions))
    return out


def test_size(data, info) -> dict[str, int]:
    """How many examples the test metric counts (groups, where their windows vote) and of how many classes."""
    units = len(counted_labels(data, info))
    classes = len({int(y) for y in np.asarray(data.labels).ravel()}) if info.output_kind == "class" else 0
    return {"test_examples": units, "test_classes": classes}


def predict_head(head, data, batch_size: int, device: str):
    """Logits of a head over cached feature rows (the features-only protocols), in order."""
    import torch

    with torch.inference_mode():
        x = torch.from_numpy(np.stack([f[0] for f in data.inputs])).to(device)
        return torch.cat([head(x[i:i + batch_size]).float().cpu() for i in range(0, len(x), batch_size)])


__all__ = ["class_predictions", "correct_examples", "counted_labels", "evaluate_logits", "predict", "predict_head",
           "test_size"]
