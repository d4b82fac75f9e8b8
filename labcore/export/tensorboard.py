"""Runs as TensorBoard event files, written with tensorboardX (the writer Ray Tune uses; no torch needed).

One folder per condition (the spec fields that differ between the exported runs, as the Compare page names
conditions), one run per seed inside it, so ``tensorboard --logdir`` lists and colours runs by condition.
Each run holds its curves as scalars (``train/loss``, ``validation/accuracy`` ... at their steps), its
resolved spec as hyper-parameters in the HParams plugin's format, and its final metrics (``final/...``),
which the HParams dashboard shows beside the hyper-parameters.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from labcore.results.compare import condition_fields, condition_label
from labcore.errors import LabError
from labcore.export.runs import run_curves
from labcore.results.record import RunRecord


def tag(curve: str) -> str:
    """The scalar's tag for a curve name: ``train_loss`` -> ``train/loss``, ``validation_accuracy`` ->
    ``validation/accuracy``, so TensorBoard groups a split's curves in one section."""
    split, _, name = curve.partition("_")
    return f"{split}/{name}" if name else f"train/{split}"


def hyperparameters(spec: dict[str, Any]) -> dict[str, bool | str | float | int]:
    """The resolved spec as the HParams plugin takes it: plain values only (a parameter of the discipline or
    the protocol as ``dparam.<name>`` / ``pparam.<name>``; unset fields left out)."""
    out: dict[str, bool | str | float | int] = {}
    for name, value in spec.items():
        if isinstance(value, dict):
            prefix = {"discipline_params": "dparam", "protocol_params": "pparam"}.get(name, name)
            out.update({f"{prefix}.{k}": v if isinstance(v, (bool, str, float, int)) else str(v)
                        for k, v in value.items()})
        elif isinstance(value, (bool, str, float, int)):
            out[name] = value
        elif value:  # a mapping table: its rows as text
            out[name] = str(value)
    return out


def final_metrics(record: RunRecord) -> dict[str, float]:
    """The numbers a run ended with, tagged ``final/...``: test and validation metrics of the best checkpoint,
    the majority baseline, speed and wall time (none of a run that never validated)."""
    out = {f"final/test_{k}": float(v) for k, v in record.test.items()} if record.test_value is not None else {}
    out.update({f"final/validation_{k}": float(v) for k, v in record.validation.items()}
               if record.test_value is not None else {})
    out.update({f"final/{k}": float(v) for k, v in record.baseline.items()})
    out.update({"final/wall_time_s": record.wall_time_s, "final/tokens_per_s": record.tokens_per_s,
                "final/best_step": float(record.best_step)})
    return out


def _folder_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9=.,+-]+", "_", text).strip("_") or "run"


def write_runs(store: Any, records: Sequence[RunRecord], logdir: str | Path) -> list[Path]:
    """Write ``records`` (runs of ``store``) under ``logdir``; returns each run's folder."""
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    if not records:
        raise LabError("no finished run to export: name runs that have a result (python -m labcore status lists them)")
    fields = condition_fields(list(records), with_discipline=True)
    written = []
    for record in records:
        condition = _folder_name(condition_label(record.spec, fields))
        folder = Path(logdir) / condition / f"seed{record.spec.get('seed', 0)}-{record.key[:8]}"
        metrics = final_metrics(record)
        with SummaryWriter(logdir=str(folder)) as writer:
            for curve, points in run_curves(store, record.key).items():
                for step, value in points:
                    writer.add_scalar(tag(curve), value, step)
            for summary in hparams(hyperparameters(record.spec), metrics):
                writer.file_writer.add_summary(summary)
            for name, value in metrics.items():
                writer.add_scalar(name, value, record.steps_done)
        written.append(folder)
    return written
