"""The transfer atlas: what pretraining buys, model by discipline, from the runs in the store.

A cell of the atlas is one model on one discipline under one protocol and budget. Its *measured gain* is
the mean test metric of the runs at ``init="pretrained"`` minus that of the runs at ``init="random"`` of the
same architecture with every other spec field equal: finished runs are grouped by their spec without the
init and the repeat fields, and the two sides of one group are compared with the lab's one interval rule
(:func:`labcore.recipes.verdict.difference_interval`: paired by seed where both sides have the same seeds,
Welch otherwise). Where a side has fewer than :data:`MIN_SEEDS` seeds there is no interval, and the cell is
greyed: its number is a single draw.

Every cell also carries an *estimated gain*: LogME (You et al., 2021) of the frozen pretrained body minus
LogME of the random body on the same data, a job of seconds (kind ``logme``) against minutes of training.
How far the estimate can be trusted is itself measured: Kendall's tau between estimated and measured gains
over the cells that have both (:func:`agreement`).

Everything here is torch-free and, :func:`finished_runs`, :func:`estimates_from_store` and
:func:`fill_specs` aside, a pure function of run records and LogME results, so the page only draws.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pandas as pd

from labcore.engine import run_results
from labcore.results.compare import condition
from labcore.jobs import key_of
from labcore.jobs.analyses import LogMESpec, ModelRef
from labcore.recipes.verdict import difference_interval
from labcore.results.record import RunRecord
from labcore.runspec import RunSpec, make_spec

if TYPE_CHECKING:
    from labcore.figures import Figure

SIDES = ("pretrained", "random")
# A run's seed and its token mapping's seed together name one repetition: Kao & Lee draw one random
# mapping per seed, so the two vary together and are repeats of one condition, not two conditions.
REPEAT_FIELDS = ("seed", "mapping_seed")
MIN_SEEDS = 2  # seeds a side needs for an interval of the difference
MIN_CELLS = 3  # cells with both gains that Kendall's tau needs to say anything
FILL_SEEDS = (0, 1, 2)  # the repetitions "fill this cell" completes
FILL_BUDGET = "quick"  # the only budget the atlas fills: a few CPU minutes a run
LOGME_EXAMPLES = 500  # training examples LogME sees per cell: seconds of frozen features
LOGME_GROUP = "atlas:logme"

Replicate = tuple[int, int]  # (seed, mapping_seed)
Estimate = tuple[float, float]  # LogME of the (pretrained, random) body


@dataclass(frozen=True)
class Protocol:
    """A protocol with its switches, as runs record them (``frozen`` with ``attention=True`` is another one)."""

    name: str = "full"
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        return self.name + ("(" + ",".join(f"{k}={v}" for k, v in self.params) + ")" if self.params else "")

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> "Protocol":
        params = spec.get("protocol_params") or {}
        items = params.items() if isinstance(params, Mapping) else params
        return cls(str(spec.get("protocol", "full")), tuple(sorted((str(k), v) for k, v in items)))


def replicate(spec: Mapping[str, Any]) -> Replicate:
    return int(spec.get("seed", 0)), int(spec.get("mapping_seed", 0))


def _current(record: RunRecord) -> bool:
    """Whether the record's key is the one its spec has under this engine (older results revisions keep their
    records, under older keys, with the same spec)."""
    try:
        return make_spec(**record.spec).key == record.key
    except Exception:  # a spec this version no longer reads is not current either
        return False


@dataclass(frozen=True)
class Comparison:
    """The finished runs of one condition (spec without init and repeats) at each init, by repetition."""

    spec: Mapping[str, Any] = field(hash=False)  # the first run's spec: what every run of both sides shares
    pretrained: Mapping[Replicate, RunRecord] = field(hash=False)
    random: Mapping[Replicate, RunRecord] = field(hash=False)

    @property
    def model(self) -> str:
        return str(self.spec["model"])

    @property
    def discipline(self) -> str:
        return str(self.spec["discipline"])

    @property
    def protocol(self) -> Protocol:
        return Protocol.of(self.spec)

    @property
    def budget(self) -> str:
        return str(self.spec.get("budget", ""))

    @property
    def runs(self) -> list[RunRecord]:
        return list(self.pretrained.values()) + list(self.random.values())

    @property
    def replicates(self) -> list[Replicate]:
        return sorted(set(self.pretrained) | set(self.random))

    def values(self, side: str) -> dict[int, float]:
        """{repetition index: test metric} of one side; indices shared by both sides pair their runs."""
        index = {rep: i for i, rep in enumerate(self.replicates)}
        return {index[rep]: float(r.test_value) for rep, r in getattr(self, side).items()}


def comparisons(records: Iterable[RunRecord]) -> list[Comparison]:
    """Finished runs at init pretrained or random, grouped by everything else their specs say (repeats
    apart), in order of first appearance. A run on a ``run:`` body has no random twin to speak of and is
    left out; of two records of one repetition (an older results revision) the current one counts."""
    groups: dict[tuple, dict[str, dict[Replicate, RunRecord]]] = {}
    first: dict[tuple, Mapping[str, Any]] = {}
    for record in records:
        init = record.spec.get("init")
        if (record.status != "done" or record.test_value is None or init not in SIDES
                or str(record.spec.get("model", "")).startswith("run:")):
            continue
        key = condition(record, ("init",) + REPEAT_FIELDS)
        sides = groups.setdefault(key, {side: {} for side in SIDES})
        first.setdefault(key, record.spec)
        rep = replicate(record.spec)
        held = sides[init].get(rep)
        if held is None or not _current(held) or _current(record):
            sides[init][rep] = record
    return [Comparison(first[k], sides["pretrained"], sides["random"]) for k, sides in groups.items()]


# ------------------------------------------------------------------------------------------------ the grid
@dataclass(frozen=True)
class Cell:
    model: str
    discipline: str
    protocol: Protocol
    budget: str
    comparison: Comparison | None = None  # the condition with the most seeds on both sides; None: no runs
    others: int = 0  # further conditions of this cell in the store (other sizes, lengths, mappings...)
    logme: Estimate | None = None

    @property
    def n_pretrained(self) -> int:
        return len(self.comparison.pretrained) if self.comparison else 0

    @property
    def n_random(self) -> int:
        return len(self.comparison.random) if self.comparison else 0

    @property
    def greyed(self) -> bool:
        """Either side has fewer than :data:`MIN_SEEDS` seeds: no interval, a number to read with care."""
        return min(self.n_pretrained, self.n_random) < MIN_SEEDS

    @functools.cached_property
    def difference(self) -> tuple[float, float, float, bool]:
        """(mean gain, 95 % low, high, paired); NaN where a side has no run (bounds: fewer than 2 seeds)."""
        if not self.n_pretrained or not self.n_random:
            return math.nan, math.nan, math.nan, False
        return difference_interval(self.comparison.values("pretrained"), self.comparison.values("random"))

    @property
    def gain(self) -> float | None:
        """The measured gain, pretrained minus random (None: a side has no finished run)."""
        value = self.difference[0]
        return None if math.isnan(value) else value

    @property
    def estimate(self) -> float | None:
        """LogME(pretrained) - LogME(random) on this cell's data (None: not estimated yet)."""
        return None if self.logme is None else self.logme[0] - self.logme[1]

    def mean(self, side: str) -> float | None:
        values = list(self.comparison.values(side).values()) if self.comparison else []
        return sum(values) / len(values) if values else None

    @property
    def metric(self) -> str:
        return self.comparison.runs[0].metric if self.comparison else ""

    @property
    def keys(self) -> list[str]:
        """The keys of the cell's runs, pretrained first (what the Compare page opens)."""
        return [r.key for r in self.comparison.runs] if self.comparison else []

    @property
    def logme_spec(self) -> LogMESpec:
        """The LogME job of this cell: both bodies on the data its runs used (the discipline's own where none)."""
        spec = self.comparison.spec if self.comparison else {}
        params = spec.get("discipline_params") or {}
        return LogMESpec(models=(ModelRef(self.model, "pretrained"), ModelRef(self.model, "random")),
                         discipline=self.discipline, examples=LOGME_EXAMPLES,
                         discipline_params=_frozen_params(params), max_length=int(spec.get("max_length") or 0))


def _frozen_params(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A run's recorded discipline parameters as a spec's sorted pairs; JSON lists back to tuples, so the
    LogME spec hashes (music's composers are a list in the record)."""
    def freeze(value: Any) -> Any:
        return tuple(freeze(v) for v in value) if isinstance(value, list) else value

    return tuple(sorted((str(k), freeze(v)) for k, v in params.items()))


@dataclass(frozen=True)
class Agreement:
    """Kendall's tau between estimated and measured gains over ``n`` cells (NaN: too few, or no ranking)."""

    n: int
    tau: float = math.nan
    p: float = math.nan

    def sentence(self) -> str:
        if self.n < MIN_CELLS:
            return (f"too few cells to say how far the estimate can be trusted: {self.n} with both a measured gain "
                    f"({MIN_SEEDS}+ seeds a side) and a LogME estimate, {MIN_CELLS} needed")
        if math.isnan(self.tau):
            return f"no ranking to compare over the {self.n} cells with both gains: one side's values are all tied"
        return (f"Kendall's τ = {self.tau:+.2f} between estimated and measured gains over n = {self.n} cells "
                f"(p = {self.p:.3g})")


def agreement(estimated: Sequence[float], measured: Sequence[float]) -> Agreement:
    """How well the estimated gains rank the cells as the measured ones do (scipy's Kendall tau-b)."""
    from scipy.stats import kendalltau

    if len(estimated) != len(measured):
        raise ValueError(f"{len(estimated)} estimates for {len(measured)} measured gains")
    n = len(estimated)
    if n < MIN_CELLS:
        return Agreement(n)
    with warnings.catch_warnings():  # constant input: scipy warns and returns NaN, which the sentence says
        warnings.simplefilter("ignore")
        result = kendalltau(list(estimated), list(measured))
    return Agreement(n, float(result.statistic), float(result.pvalue))


@dataclass(frozen=True)
class Atlas:
    models: tuple[str, ...]
    disciplines: tuple[str, ...]
    protocol: Protocol
    budget: str
    cells: Mapping[tuple[str, str], Cell] = field(hash=False)

    def cell(self, model: str, discipline: str) -> Cell:
        return self.cells[(model, discipline)]

    def logme_specs(self) -> list[LogMESpec]:
        return [c.logme_spec for c in self.cells.values()]

    def with_estimates(self, estimates: Mapping[LogMESpec, Estimate]) -> "Atlas":
        cells = {k: dataclasses.replace(c, logme=estimates.get(c.logme_spec)) for k, c in self.cells.items()}
        return dataclasses.replace(self, cells=cells)

    @property
    def agreement(self) -> Agreement:
        both = [c for c in self.cells.values() if not c.greyed and c.estimate is not None]
        return agreement([c.estimate for c in both], [c.gain for c in both])


def build_atlas(records: Iterable[RunRecord], *, models: Sequence[str], disciplines: Sequence[str],
                protocol: Protocol = Protocol(), budget: str = FILL_BUDGET,
                estimates: Mapping[LogMESpec, Estimate] | None = None) -> Atlas:
    """The grid of ``models`` x ``disciplines`` under one protocol and budget. Where a cell holds several
    conditions (other training sizes, lengths, mappings...), it shows the one with the most seeds on both
    sides and counts the rest in :attr:`Cell.others`."""
    found: dict[tuple[str, str], list[Comparison]] = {}
    for comparison in comparisons(records):
        if comparison.protocol == protocol and comparison.budget == budget:
            found.setdefault((comparison.model, comparison.discipline), []).append(comparison)
    cells = {}
    for model in models:
        for discipline in disciplines:
            candidates = found.get((model, discipline), [])
            best = max(candidates, key=lambda c: (min(len(c.pretrained), len(c.random)),
                                                  len(c.pretrained) + len(c.random)), default=None)
            cells[(model, discipline)] = Cell(model, discipline, protocol, budget, best, max(0, len(candidates) - 1))
    atlas = Atlas(tuple(models), tuple(disciplines), protocol, budget, cells)
    return atlas.with_estimates(estimates) if estimates else atlas


def present(records: Iterable[RunRecord]) -> tuple[list[str], list[Protocol]]:
    """The models and protocols of the store's comparable runs, in order of first appearance."""
    models: dict[str, None] = {}
    protocols: dict[Protocol, None] = {}
    for comparison in comparisons(records):
        models.setdefault(comparison.model)
        protocols.setdefault(comparison.protocol)
    return list(models), list(protocols)


# ------------------------------------------------------------------------------------- the store and jobs
def finished_runs(store: Any) -> list[RunRecord]:
    """The result records of the store's finished runs, in submission order."""
    return [RunRecord.from_dict(r.result) for r in run_results.runs(store, status="done") if r.result]


def logme_key(spec: LogMESpec) -> str:
    """The job key of a cell's LogME. Not memoised: resolving reads the discipline registry only (a
    millisecond), and an uploaded discipline's key changes with its file."""
    return key_of(spec)


def estimate_of(result: Mapping[str, Any] | None, model: str) -> Estimate | None:
    """(pretrained, random) LogME of ``model`` from a finished logme job's result."""
    scores = (result or {}).get("logme") or {}
    pretrained = scores.get(ModelRef(model, "pretrained").label())
    random = scores.get(ModelRef(model, "random").label())
    if pretrained is None or random is None:
        return None
    return float(pretrained), float(random)


def estimates_from_store(store: Any, specs: Iterable[LogMESpec]) -> dict[LogMESpec, Estimate]:
    out = {}
    for spec in specs:
        record = store.get(logme_key(spec))
        if record is not None and record.status == "done":
            value = estimate_of(record.result, spec.models[0].model)
            if value is not None:
                out[spec] = value
    return out


def fill_specs(cell: Cell, seeds: Sequence[int] = FILL_SEEDS) -> list[RunSpec]:
    """The runs that would give ``cell`` both sides at ``len(seeds)`` repetitions: the missing ones of the
    condition it shows (same settings, more seeds), or of the budget's plain spec where it has no runs.

    New repetitions take seeds from ``seeds`` not used yet; their mapping seed follows the seed where the
    condition's repetitions tie the two (Kao's one random mapping per seed), else stays the condition's own.
    """
    if cell.comparison is None:
        template = make_spec(model=cell.model, discipline=cell.discipline, protocol=cell.protocol.name,
                             protocol_params=cell.protocol.params, budget=cell.budget)
        existing: list[Replicate] = []
        tied = False
    else:
        template = make_spec(**cell.comparison.spec)
        existing = cell.comparison.replicates
        tied = template.mapping == "random" and len(existing) > 1 and all(s == m for s, m in existing)
    wanted = existing[:len(seeds)]
    used = {seed for seed, _ in existing}
    for seed in seeds:
        if len(wanted) >= len(seeds):
            break
        if seed not in used:
            wanted.append((seed, seed if tied else template.mapping_seed))
    have = {side: set(getattr(cell.comparison, side)) if cell.comparison else set() for side in SIDES}
    return [template.replace(init=side, seed=seed, mapping_seed=mapping_seed)
            for side in SIDES for seed, mapping_seed in wanted if (seed, mapping_seed) not in have[side]]


# ------------------------------------------------------------------------------------- table and figure
def atlas_table(atlas: Atlas) -> pd.DataFrame:
    """One row per cell: the measured gain with its interval and seeds, the LogME estimate beside it."""
    rows = []
    for (model, discipline), c in atlas.cells.items():
        _, low, high, paired = c.difference
        rows.append(dict(model=model, discipline=discipline, protocol=atlas.protocol.label, budget=atlas.budget,
                         metric=c.metric, n_pretrained=c.n_pretrained, n_random=c.n_random,
                         pretrained=c.mean("pretrained"), random=c.mean("random"), gain=c.gain,
                         ci_low=None if math.isnan(low) else low, ci_high=None if math.isnan(high) else high,
                         paired=paired if c.gain is not None else None, greyed=c.greyed,
                         logme_pretrained=c.logme[0] if c.logme else None,
                         logme_random=c.logme[1] if c.logme else None, estimated_gain=c.estimate,
                         other_settings=c.others))
    return pd.DataFrame(rows)


def _signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"


def cell_lines(cell: Cell) -> list[str]:
    """What a cell says in words: its runs, the measured gain with its interval, the LogME estimate."""
    lines = [f"{cell.protocol.label}, {cell.budget} budget"]
    if cell.comparison is None:
        lines.append("measured gain: no finished runs yet")
    else:
        gain, low, high, paired = cell.difference
        means = {side: ("–" if cell.mean(side) is None else f"{cell.mean(side):.3f}") for side in SIDES}
        lines.append(f"pretrained {means['pretrained']} (n = {cell.n_pretrained}) · random {means['random']} "
                     f"(n = {cell.n_random}) · {cell.metric.replace('_', ' ')}")
        if cell.gain is None:
            lines.append("measured gain: needs a finished run on each side")
        elif math.isnan(low):
            lines.append(f"measured gain {gain:+.3f}: no interval from fewer than {MIN_SEEDS} seeds a side")
        else:
            how = "paired by seed" if paired else "Welch"
            lines.append(f"measured gain {gain:+.3f}, 95 % interval [{low:+.3f}, {high:+.3f}] ({how})")
        if cell.others:
            lines.append(f"{cell.others} other setting(s) of this cell in the store: the one with most seeds shown")
    if cell.logme is None:
        lines.append("LogME: not estimated yet")
    else:
        lines.append(f"LogME pretrained {cell.logme[0]:.3f}, random {cell.logme[1]:.3f}: estimated gain "
                     f"{cell.estimate:+.3f}")
    return lines


def hover_text(cell: Cell) -> str:
    click = "click: compare these runs" if cell.comparison else "click: pick this cell to fill it"
    return "<br>".join([f"<b>{cell.model} · {cell.discipline}</b>"] + cell_lines(cell) + [click])


def cell_text(cell: Cell) -> str:
    return f"{_signed(cell.gain)}<br>n {cell.n_pretrained}/{cell.n_random}<br>est {_signed(cell.estimate)}"


def atlas_figure(atlas: Atlas, *, highlight: tuple[str, str] | None = None, title: str = "") -> Figure:
    """The grid as a heat map (:func:`labcore.figures.atlas.gain_grid`): measured gain on a diverging scale
    centred at 0 (greyed cells grey), each cell's gain, seeds (pretrained/random) and LogME estimate written
    in it, the rest on hover; a click reports the cell's ``[model, discipline]``."""
    from labcore.figures.atlas import GridCell, gain_grid

    models, disciplines = list(atlas.models), list(atlas.disciplines)
    cells = [[atlas.cell(m, d) for d in disciplines] for m in models]
    grid = [[GridCell(c.model, c.discipline, c.gain, c.comparison is not None, c.greyed, cell_text(c), hover_text(c))
             for c in row] for row in cells]
    return gain_grid(models, disciplines, grid, highlight=highlight if highlight in atlas.cells else None,
                     title=title)


__all__ = ["Agreement", "Atlas", "Cell", "Comparison", "Estimate", "FILL_BUDGET", "FILL_SEEDS", "LOGME_EXAMPLES",
           "LOGME_GROUP", "MIN_CELLS", "MIN_SEEDS", "Protocol", "REPEAT_FIELDS", "SIDES", "agreement",
           "atlas_figure", "atlas_table", "build_atlas", "cell_lines", "cell_text", "comparisons", "estimate_of",
           "estimates_from_store", "fill_specs", "finished_runs", "hover_text", "logme_key", "present", "replicate"]
