"""Layer curves: what each layer contributes, as groups of ordinary training runs and one table each.

* ``probe``: a linear probe on every layer's hidden state (Tamkin et al. §3; the ``probe`` protocol);
* ``reinit_after``: layers k and after re-initialised, k = 0 .. L (Tamkin fig. 2, incremental reinit);
* ``reinit_block`` / ``preserve_block``: a block of layers re-initialised, or all but it (fig. 3);
* ``permute``: the layers in shuffled orders (fig. 4), beside the original model and a random init.

:func:`curve_specs` builds the runs (a sweep of one protocol parameter, times seeds, plus the reference
runs); :func:`curve_table` reads their finished records. Torch-free and pure, data only: whoever shows a curve
draws its table with :func:`labcore.figures.analysis.layer_curve_figure` (the door composes the two), and the
pages and the CLI queue the specs through the executor like any sweep. FPT's depth ablation (§3.10)
needs backbones cut to fewer layers, which no protocol does yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from labcore.errors import LabError
from labcore.results.metrics import aggregate
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec


@dataclass(frozen=True)
class Curve:
    name: str
    title: str
    x_label: str
    points: Callable[[int], list[dict[str, Any]]]  # layers -> the protocol and its params at each x
    x_of: Callable[[dict[str, Any]], float]  # a record's protocol params -> its x


def _probe(layers: int) -> list[dict[str, Any]]:
    return [{"protocol": "probe", "protocol_params": {"layer": k}} for k in range(layers + 1)]


def _reinit_after(layers: int) -> list[dict[str, Any]]:
    return [{"protocol": "reinit_after", "protocol_params": {"k": k}} for k in range(layers + 1)]


def _blocks(mode: str, size: int = 3) -> Callable[[int], list[dict[str, Any]]]:
    def points(layers: int) -> list[dict[str, Any]]:
        size_ = min(size, layers)
        return [{"protocol": "reinit_block", "protocol_params": {"start": s, "size": size_, "mode": mode}}
                for s in range(layers - size_ + 1)]
    return points


def _permute(layers: int, orders: int = 5) -> list[dict[str, Any]]:
    return [{"protocol": "permute_layers", "protocol_params": {"seed": s}} for s in range(orders)]


CURVES = {c.name: c for c in (
    Curve("probe", "Probing accuracy per layer (Tamkin et al. §3)", "layer probed (0 = embeddings)", _probe,
          lambda p: p.get("layer", -1)),
    Curve("reinit_after", "Layers k and after re-initialised (Tamkin et al. fig. 2)", "k (pretrained layers kept)",
          _reinit_after, lambda p: p.get("k", 0)),
    Curve("reinit_block", "A block of layers re-initialised (Tamkin et al. fig. 3)", "first layer of the block",
          _blocks("reinit"), lambda p: p.get("start", 0)),
    Curve("preserve_block", "Only a block of layers kept pretrained (Tamkin et al. fig. 3)",
          "first layer of the block", _blocks("preserve"), lambda p: p.get("start", 0)),
    Curve("permute", "Layers in shuffled orders (Tamkin et al. fig. 4)", "permutation", _permute,
          lambda p: p.get("seed", 0)),
)}


def curve_specs(name: str, base: RunSpec, layers: int, seeds: Sequence[int] = (0, 1, 2)) -> list[RunSpec]:
    """The runs of curve ``name`` on ``base`` (its model, discipline, budget): every point times every seed,
    then the reference lines, the full fine-tune of the pretrained model and of a random init."""
    if name not in CURVES:
        raise LabError(f"unknown layer curve {name!r}; valid curves: {', '.join(CURVES)}")
    if layers < 1:
        raise LabError(f"a layer curve needs the model's number of layers (at least 1), got {layers}")
    specs = [base.replace(protocol=p["protocol"], protocol_params=p["protocol_params"], seed=s)
             for p in CURVES[name].points(layers) for s in seeds]
    specs += [base.replace(protocol="full", protocol_params={}, init=init, seed=s)
              for init in ("pretrained", "random") for s in seeds]
    return specs


def _reference(record: RunRecord) -> str | None:
    spec = record.spec
    if spec.get("protocol") == "full":
        return f"full fine-tune, {spec.get('init')}"
    return None


def curve_table(name: str, records: Iterable[RunRecord]) -> pd.DataFrame:
    """x, mean, std, 95 % interval and n of the test metric at every point of the curve; reference rows
    (the full fine-tunes) have x = NaN and a ``reference`` name."""
    curve = CURVES[name]
    groups: dict[tuple[str, float | None], list[float]] = {}
    metric = ""
    for record in records:
        if record.test_value is None:
            continue  # untrained weights: no result to plot
        metric = record.metric
        reference = _reference(record)
        # References have no x (None, not NaN: NaN keys never meet in a dict).
        x = None if reference else float(curve.x_of(dict(record.spec.get("protocol_params") or {})))
        groups.setdefault((reference or "", x), []).append(record.test_value)
    rows = []
    for (reference, x), values in groups.items():
        stats = aggregate(values)
        rows.append({"reference": reference, "x": float("nan") if x is None else x, "metric": metric, "n": len(values), "mean": stats.mean,
                     "std": stats.std, "ci_low": stats.ci_low, "ci_high": stats.ci_high})
    table = pd.DataFrame(rows, columns=["reference", "x", "metric", "n", "mean", "std", "ci_low", "ci_high"])
    return table.sort_values(["reference", "x"]).reset_index(drop=True)


__all__ = ["CURVES", "Curve", "curve_specs", "curve_table"]
