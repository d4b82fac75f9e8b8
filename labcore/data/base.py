"""What a discipline is, and how its data set is built once and cached as Arrow.

A discipline turns one source (a fetched file, a generator, an upload) into a ``datasets.DatasetDict``
with ``train``, ``validation`` and ``test`` splits and a :class:`DisciplineInfo` that says how to read it.

Column conventions, shared by every discipline so the engine needs no per-discipline code:

* ``tokens``  (list of int): for ``input_kind == "tokens"``; each value indexes ``info.alphabet``.
* ``vectors`` (list of list of float, ``[length, vector_dim]``): for ``input_kind == "vectors"``.
* ``text``    (str): for ``input_kind == "text"``; tokenised later by the chosen model's own tokenizer.
* ``label``: int class index (``output_kind == "class"``), list of 0/1 ints of length ``n_bits``
  (``"multilabel"``) or float (``"regression"``).
* ``group`` (str, optional): examples that share a group are windows of one item (a music piece);
  splits never cut a group, and evaluation votes over a group's windows (``info.vote_by_group``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from labcore import paths
from labcore.errors import LabError

ProgressFn = Callable[[str], None]

INPUT_KINDS = ("tokens", "vectors", "text")
OUTPUT_KINDS = ("class", "multilabel", "regression")
METRICS = ("accuracy", "f1", "f1_binary", "mcc", "spearman", "bit_accuracy")
SPLITS = ("train", "validation", "test")

# Bump when a builder's output changes for the same parameters, so stale Arrow caches are rebuilt.
BUILD_VERSION = 1


@dataclass(frozen=True)
class NoParams:
    """Parameters of a discipline that has none."""


@dataclass(frozen=True)
class DisciplineInfo:
    name: str
    title: str
    input_kind: str
    output_kind: str
    metric: str
    citation: str  # one line: the paper (and section) the discipline comes from
    source: str  # where the data comes from, in words
    licence: str
    alphabet: tuple[str, ...] = ()  # tokens: symbol of each token index
    vector_dim: int = 0  # vectors: dimension of each input vector
    class_names: tuple[str, ...] = ()  # class: name of each label index
    n_bits: int = 0  # multilabel: number of output bits
    max_length: int = 0  # longest sequence the builder emits (tokens/vectors), 0 for text
    vote_by_group: bool = False  # evaluation votes over the windows of a group
    # vectors: each vector is a square image patch, patches in row-major order (see data.images): shown
    # as the image, positions named "patch i"
    vectors_are_patches: bool = False
    # vectors of one bit: the input joins this many bit strings of equal length (bits-xor: 2), shown apart
    bit_groups: int = 1
    assets: tuple[str, ...] = ()  # names in labcore.assets.ASSETS this discipline needs
    notes: str = ""  # split rule, caps, anything a user should know
    # what every run on this data must say in its notes (sequences cut or windowed at upload, files left out)
    run_notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.input_kind not in INPUT_KINDS:
            raise ValueError(f"{self.name}: input_kind {self.input_kind!r} not in {INPUT_KINDS}")
        if self.output_kind not in OUTPUT_KINDS:
            raise ValueError(f"{self.name}: output_kind {self.output_kind!r} not in {OUTPUT_KINDS}")
        if self.metric not in METRICS:
            raise ValueError(f"{self.name}: metric {self.metric!r} not in {METRICS}")

    @property
    def num_outputs(self) -> int:
        """Width of the prediction head."""
        if self.output_kind == "class":
            return len(self.class_names)
        if self.output_kind == "multilabel":
            return self.n_bits
        return 1

    def show_bits(self, bits: str) -> str:
        """A string of the input's bits (one-bit vectors), its :attr:`bit_groups` strings set apart."""
        size = len(bits) // self.bit_groups
        if self.bit_groups < 2 or not size:
            return bits
        cuts = [bits[i * size:(i + 1) * size] for i in range(self.bit_groups - 1)]
        return " ".join(cuts + [bits[(self.bit_groups - 1) * size:]])

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Discipline:
    """Base class: subclasses set ``name``/``title``/``Params`` and implement ``info`` and ``build``."""

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type] = NoParams
    presets: ClassVar[dict[str, dict[str, Any]]] = {}  # e.g. {"paper": {...}} over Params' defaults

    def info(self, params: Any) -> DisciplineInfo:
        raise NotImplementedError

    def build(self, params: Any, progress: ProgressFn) -> "datasets.DatasetDict":  # noqa: F821
        raise NotImplementedError

    def floor(self, params: Any) -> tuple[float, str] | None:
        """(score, how) of a trivial solution that beats the majority class, where the task has one: the
        floor a trained model must clear before its score says it learnt anything. None: the majority class
        (which each run records) is the floor."""
        return None

    def available(self) -> tuple[bool, str]:
        """Whether the discipline can be built here, and if not, why (names the fix)."""
        from labcore import assets

        for name in self.info(self.Params()).assets:
            if not assets.is_available(name):
                return False, f"asset {name!r} missing: run `python -m labcore assets fetch {name}`"
        return True, ""


def parse_params(discipline: Discipline, values: dict[str, Any] | None = None, preset: str = "") -> Any:
    """Build the discipline's frozen Params from a preset and overrides; unknown keys are an error."""
    merged: dict[str, Any] = {}
    if preset:
        if preset not in discipline.presets:
            valid = ", ".join(discipline.presets) or "(none)"
            raise LabError(f"discipline {discipline.name!r} has no preset {preset!r}; valid presets: {valid}")
        merged.update(discipline.presets[preset])
    merged.update(values or {})
    fields = {f.name: f for f in dataclasses.fields(discipline.Params)}
    unknown = sorted(set(merged) - set(fields))
    if unknown:
        valid = ", ".join(fields) or "(none)"
        raise LabError(f"discipline {discipline.name!r} has no parameter(s) {', '.join(unknown)}; "
                       f"valid parameters: {valid}")
    return discipline.Params(**merged)


def params_key(name: str, params: Any) -> str:
    payload = json.dumps({"name": name, "params": dataclasses.asdict(params), "v": BUILD_VERSION},
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def cache_path(name: str, params: Any) -> Path:
    safe = name.replace(":", "_").replace("/", "_")
    return paths.datasets_dir() / safe / params_key(name, params)


def seeded_split(n: int, fractions: tuple[float, float, float], seed: int) -> tuple[list[int], list[int], list[int]]:
    """Deterministic index split into train/validation/test with the given fractions (sum 1)."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(n)
    n_val = int(round(n * fractions[1]))
    n_test = int(round(n * fractions[2]))
    n_train = n - n_val - n_test
    return (sorted(order[:n_train].tolist()), sorted(order[n_train:n_train + n_val].tolist()),
            sorted(order[n_train + n_val:].tolist()))


def group_split(groups: list[str], fractions: tuple[float, float, float],
                seed: int) -> tuple[list[int], list[int], list[int]]:
    """Like :func:`seeded_split` but over groups: all rows of a group land in the same split."""
    unique = sorted(set(groups))
    train_g, val_g, test_g = seeded_split(len(unique), fractions, seed)
    where = {}
    for split, chosen in enumerate((train_g, val_g, test_g)):
        for i in chosen:
            where[unique[i]] = split
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    for row, group in enumerate(groups):
        out[where[group]].append(row)
    return out


def _units_by_label(labels: Sequence[Any], keys: list[Any]) -> dict[Any, list[Any]]:
    """Each label's units (rows, or groups: a group's rows share one label, one file or class folder),
    sorted, labels in sorted order."""
    by_label: dict[Any, list[Any]] = {}
    seen: set[Any] = set()
    for key, label in zip(keys, labels):
        if key not in seen:
            seen.add(key)
            by_label.setdefault(label, []).append(key)
    return {label: sorted(by_label[label]) for label in sorted(by_label)}


def stratified_split(labels: Sequence[Any], fractions: tuple[float, float, float], seed: int, *,
                     groups: Sequence[str] | None = None,
                     min_per_split: int = 0) -> tuple[list[int], list[int], list[int]]:
    """Seeded train/validation/test split of row indices that keeps each class's share in every split.

    The units (rows, or with ``groups`` whole groups, whose rows share one label) of each class are
    shuffled, classes in sorted order, and each class is cut by its own rounded ``fractions``: its
    first units to train, the next to validation, the rest to test. Validation and test get at least
    ``min_per_split`` units of every class, train keeps the rest; a class with fewer than
    ``3 * min_per_split`` units is a ValueError (uploads refuse such classes before they get here).
    Each split lists its rows in order.
    """
    import numpy as np

    keys = list(groups) if groups is not None else list(range(len(labels)))
    rng = np.random.default_rng(seed)
    where: dict[Any, int] = {}
    for label, units in _units_by_label(labels, keys).items():
        order = [units[i] for i in rng.permutation(len(units))]
        n_val = max(min_per_split, int(round(len(order) * fractions[1])))
        n_test = max(min_per_split, int(round(len(order) * fractions[2])))
        n_train = len(order) - n_val - n_test
        if n_train < min_per_split:
            raise ValueError(f"class {label!r} has {len(order)} units; {3 * min_per_split} are needed for "
                             f"{min_per_split} in each split")
        for i, unit in enumerate(order):
            where[unit] = 0 if i < n_train else 1 if i < n_train + n_val else 2
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    for row, key in enumerate(keys):
        out[where[key]].append(row)
    return out


def stratified_folds(labels: Sequence[Any], k: int, seed: int, *,
                     groups: Sequence[str] | None = None) -> list[int]:
    """The fold (0 .. k-1) of every row: a seeded, stratified partition for k-fold cross-validation.

    Each class's units (rows, or whole groups) are shuffled and dealt to the folds in turn, the deal
    going on where the previous class stopped: every fold holds each class within one unit of its
    share (a class with fewer than ``k`` units is missing from some folds, as it must be), and the
    folds' sizes differ by at most one unit. The folds are disjoint and cover every row.
    """
    import numpy as np

    if k < 2:
        raise ValueError(f"k-fold cross-validation needs at least 2 folds, not {k}")
    keys = list(groups) if groups is not None else list(range(len(labels)))
    units = _units_by_label(labels, keys)
    if k > sum(len(u) for u in units.values()):
        raise ValueError(f"{k} folds of {sum(len(u) for u in units.values())} units would leave a fold empty")
    rng = np.random.default_rng(seed)
    fold_of: dict[Any, int] = {}
    dealt = 0
    for members in units.values():
        for i in rng.permutation(len(members)):
            fold_of[members[i]] = dealt % k
            dealt += 1
    return [fold_of[key] for key in keys]


def fold_split(labels: Sequence[Any], k: int, fold: int, seed: int, *, groups: Sequence[str] | None = None,
               min_per_split: int = 0) -> tuple[list[int], list[int], list[int]]:
    """Rows of train, validation and test for fold ``fold`` of a k-fold cross-validation.

    Test is the fold itself (:func:`stratified_folds`, so the k test sets are disjoint and together
    cover the data); validation, for choosing the checkpoint, is carved from the other folds as a
    fixed split carves a split the data lack: of each class, a seeded ninth of its units there (at
    least ``min_per_split``, always leaving one to train on); train keeps the rest.
    """
    import numpy as np

    if not 0 <= fold < k:
        raise ValueError(f"fold {fold} is not one of the {k} folds 0 .. {k - 1}")
    keys = list(groups) if groups is not None else list(range(len(labels)))
    folds = stratified_folds(labels, k, seed, groups=groups)
    where = {key: 2 for key, f in zip(keys, folds) if f == fold}
    rest = [(key, label) for key, label, f in zip(keys, labels, folds) if f != fold]
    rng = np.random.default_rng([seed, fold])
    for members in _units_by_label([label for _, label in rest], [key for key, _ in rest]).values():
        take = min(len(members) - 1, max(min_per_split, int(round(len(members) / 9))))
        chosen = {members[i] for i in rng.permutation(len(members))[:take]}
        where.update({key: 1 if key in chosen else 0 for key in members})
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    for row, key in enumerate(keys):
        out[where[key]].append(row)
    return out


def is_built(discipline: Discipline, params: Any) -> bool:
    """Whether the data set of these params is in the Arrow cache (loading it then builds nothing)."""
    return (cache_path(discipline.name, params) / "dataset_dict.json").is_file()


def load_cached(discipline: Discipline, params: Any, progress: ProgressFn = print):
    """Load the built DatasetDict from the Arrow cache, building it first if needed.

    The build writes into a temporary folder and is renamed into place only when complete, so an
    interrupted or failed build never replaces (or half-writes) a good cached copy.
    """
    import datasets

    datasets.disable_progress_bars()  # the lab reports progress itself; tqdm bars flood logs and pages
    target = cache_path(discipline.name, params)
    if is_built(discipline, params):
        return datasets.load_from_disk(str(target))
    dataset = discipline.build(params, progress)
    missing = [s for s in SPLITS if s not in dataset]
    if missing:
        raise LabError(f"discipline {discipline.name!r} built no {', '.join(missing)} split")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".building-"))
    try:
        dataset.save_to_disk(str(tmp))
        (tmp / "info.json").write_text(json.dumps(discipline.info(params).to_dict(), indent=1))
        if not target.exists():  # else another process finished first; keep its copy
            try:
                os.replace(tmp, target)
            except OSError:  # it finished between the check and the rename
                if not target.exists():
                    raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return datasets.load_from_disk(str(target))


def example_lengths(split: "datasets.Dataset", input_kind: str) -> list[int]:  # noqa: F821
    """The length of every example of a split: symbols or vectors, read in Arrow; words, for text.

    Sequences are measured without turning them into Python lists, so an upload of millions of
    symbols is summarised in a blink.
    """
    import pyarrow.compute as pc

    if input_kind == "text":
        return [len(x.split()) for x in split["text"]]
    column = split.select_columns([input_kind]).with_format("arrow")[:].column(input_kind)
    return pc.list_value_length(column).to_numpy(zero_copy_only=False).tolist()


def label_counts(split: "datasets.Dataset", n_classes: int) -> list[int]:  # noqa: F821
    """Examples of each class index in a split (class output), counted in Arrow."""
    import numpy as np

    labels = split.select_columns(["label"]).with_format("arrow")[:].column("label").to_numpy()
    return np.bincount(labels, minlength=n_classes).tolist()


@dataclass(frozen=True)
class Summary:
    """What `data show` prints and the Data page shows: sizes, balance, lengths, examples."""

    name: str
    split_sizes: dict[str, int]
    class_counts: dict[str, int] = field(default_factory=dict)  # over all splits
    length_min: int = 0
    length_mean: float = 0.0
    length_max: int = 0
    examples: tuple[str, ...] = ()
