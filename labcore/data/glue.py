"""GLUE (Wang et al. 2018) as text disciplines ``glue-TASK``, for users who have the hub or a copy.

Columns: ``text`` holds the (first) sentence; sentence-pair tasks add ``text_pair`` with the second.
The pair is kept apart, not joined into one string, so the engine can call the model's own tokenizer
as ``tokenizer(text, text_pair)`` and get that model's separator and segment ids. ``label`` is the
class index, or the similarity score (float) for STS-B.

Splits follow Kao & Lee (appendix A and G.1): GLUE's validation set is the test split, because the
GLUE test labels are hidden; our validation split is carved from GLUE's train split (seeded). MNLI
tests on ``validation_matched`` (``mismatched=True``: ``validation_mismatched``). Metrics as in
Kao & Lee's Table 3: MCC for CoLA, Spearman for STS-B, F1 for MRPC and QQP, accuracy for the rest.

Sources, one per call:

* no ``data_dir``: ``datasets.load_dataset("nyu-mll/glue", task)``, which needs the hub, or a copy an
  earlier download left in the Hugging Face cache (``HF_DATASETS_CACHE``);
* ``data_dir=FOLDER``: parquet files in the hub repository's layout, ``FOLDER/TASK/train-*.parquet``
  and ``FOLDER/TASK/validation-*.parquet`` (MNLI: ``validation_matched-*`` /
  ``validation_mismatched-*``), as a clone of ``nyu-mll/glue`` has them. ``FOLDER`` may also be the
  task folder itself, and ``SPLIT/*.parquet`` (the hub's parquet export) is accepted too. The files
  are read with the packaged ``parquet`` builder of ``datasets`` and explicit ``data_files`` per
  split: letting ``datasets`` infer splits from file names would merge MNLI's two validation sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from labcore import paths
from labcore.data.base import Discipline, DisciplineInfo, seeded_split
from labcore.errors import DataValidationError, LabError, UnknownNameError

HUB_ID = "nyu-mll/glue"


@dataclass(frozen=True)
class GlueTask:
    name: str
    title: str
    text: str  # column of the first sentence in GLUE's files
    text_pair: str  # column of the second sentence; "" for single-sentence tasks
    output_kind: str  # "class" or "regression"
    metric: str
    class_names: tuple[str, ...] = ()  # in GLUE's label order


TASKS: dict[str, GlueTask] = {t.name: t for t in (
    GlueTask("cola", "CoLA: grammatical acceptability", "sentence", "", "class", "mcc",
             ("unacceptable", "acceptable")),
    GlueTask("sst2", "SST-2: sentence sentiment", "sentence", "", "class", "accuracy", ("negative", "positive")),
    GlueTask("mrpc", "MRPC: paraphrase", "sentence1", "sentence2", "class", "f1",
             ("not_equivalent", "equivalent")),
    GlueTask("qqp", "QQP: duplicate questions", "question1", "question2", "class", "f1",
             ("not_duplicate", "duplicate")),
    GlueTask("stsb", "STS-B: sentence similarity (0-5)", "sentence1", "sentence2", "regression", "spearman"),
    GlueTask("mnli", "MNLI: entailment (3 classes)", "premise", "hypothesis", "class", "accuracy",
             ("entailment", "neutral", "contradiction")),
    GlueTask("qnli", "QNLI: question answered by sentence", "question", "sentence", "class", "accuracy",
             ("entailment", "not_entailment")),
    GlueTask("rte", "RTE: entailment (2 classes)", "sentence1", "sentence2", "class", "accuracy",
             ("entailment", "not_entailment")),
)}


@dataclass(frozen=True)
class GlueParams:
    seed: int = 0  # seed of the validation carve-out
    validation_fraction: float = 0.1  # of GLUE's train split, held out as our validation split
    data_dir: str = ""  # local copy in the hub layout; "" loads nyu-mll/glue from the hub or its cache


@dataclass(frozen=True)
class MnliParams(GlueParams):
    mismatched: bool = False  # test on validation_mismatched instead of validation_matched


def names() -> list[str]:
    return [f"glue-{task}" for task in TASKS]


class GlueDiscipline(Discipline):
    """One GLUE task as a text discipline."""

    def __init__(self, task: GlueTask) -> None:
        self.task = task
        self.name = f"glue-{task.name}"
        self.title = f"GLUE {task.title}"
        self.Params = MnliParams if task.name == "mnli" else GlueParams

    def _test_split(self, params: GlueParams) -> str:
        if self.task.name == "mnli":
            return "validation_mismatched" if params.mismatched else "validation_matched"
        return "validation"

    def info(self, params: GlueParams) -> DisciplineInfo:
        source = (f"local copy in {params.data_dir}" if params.data_dir
                  else f"hub data set {HUB_ID}, config {self.task.name}")
        pair = ("; sentence pairs as text + text_pair" if self.task.text_pair else "")
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="text", output_kind=self.task.output_kind,
            metric=self.task.metric, class_names=self.task.class_names,
            citation="Wang et al. 2018 (GLUE); Kao & Lee 2021, appendix A and G.1 (validation sets as test sets)",
            source=source,
            licence=f"set by each task's authors (see the {HUB_ID} data set card); some are for research use only",
            notes=f"Test split = GLUE {self._test_split(params)}; validation = {params.validation_fraction:.0%} of "
                  f"GLUE train (seeded){pair}.",
        )

    def build(self, params: GlueParams, progress):
        if not 0 < params.validation_fraction < 1:
            raise LabError(f"{self.name}: validation_fraction must lie between 0 and 1, not "
                           f"{params.validation_fraction}")
        test_split = self._test_split(params)
        if params.data_dir:
            progress(f"reading {self.name} from {params.data_dir}")
            raw, where = self._load_local(Path(params.data_dir).expanduser(), test_split)
        else:
            progress(f"loading {HUB_ID} {self.task.name} (hub or its cache)")
            raw = self._load_hub(test_split)
            where = {split: f"{HUB_ID} {self.task.name} {split}" for split in raw}
        return self._to_splits(raw, where, test_split, params)

    def _offline_error(self, cause: BaseException, test_split: str) -> LabError:
        return LabError(
            f"{self.name} needs the hub or a local copy: set HF_DATASETS_OFFLINE=0 (and HF_HUB_OFFLINE=0) "
            f"with network, or pass a local folder via the parameter data_dir=... holding "
            f"{self.task.name}/train-*.parquet and {self.task.name}/{test_split}-*.parquet (the layout of "
            f"the {HUB_ID} repository) [{type(cause).__name__}: {cause}]")

    def _load_hub(self, test_split: str):
        import datasets

        unreachable: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)
        try:  # the hub client's own "not cached and offline" error is not a ConnectionError
            from huggingface_hub.errors import LocalEntryNotFoundError

            unreachable += (LocalEntryNotFoundError,)
        except ImportError:
            pass
        try:
            import httpx

            unreachable += (httpx.TransportError,)
        except ImportError:
            pass
        try:
            return datasets.load_dataset(HUB_ID, self.task.name)
        except unreachable as error:
            raise self._offline_error(error, test_split) from None

    def _load_local(self, root: Path, test_split: str):
        import datasets

        if not root.is_dir():
            raise LabError(f"{self.name}: data_dir {str(root)!r} is not a folder; point it at a copy of "
                           f"{HUB_ID} holding {self.task.name}/train-*.parquet")
        folder = root / self.task.name if (root / self.task.name).is_dir() else root
        files: dict[str, list[str]] = {}
        for split in ("train", test_split):
            found = sorted({*folder.glob(f"{split}-*.parquet"), *folder.glob(f"{split}/*.parquet")})
            if not found:
                raise LabError(f"{self.name}: no {split} files in {folder}: expected {split}-*.parquet (or "
                               f"{split}/*.parquet) in data_dir/{self.task.name} or in data_dir itself, as in "
                               f"the {HUB_ID} repository ({self.task.name}/{split}-00000-of-00001.parquet)")
            files[split] = [str(f) for f in found]
        where = {split: ", ".join(str(Path(f).relative_to(root)) for f in found) for split, found in files.items()}
        loaded = {}
        for split, found in files.items():
            # One split per call: the builder casts every split to the first file's schema, so a
            # faulty file would otherwise be reported as a cast error in some other split.
            try:
                loaded[split] = datasets.load_dataset(
                    "parquet", data_files={split: found}, split=split,
                    cache_dir=str(paths.cache_dir() / "hf-datasets"))  # the lab's cache, not the user's home
            except (datasets.exceptions.DatasetGenerationError, OSError, ValueError) as error:
                cause = f"{error}: {error.__cause__}" if error.__cause__ else str(error)
                raise DataValidationError(f"{self.name}: {where[split]} cannot be read ({cause}); copy the "
                                          f"files again from {HUB_ID}") from None
        return loaded, where

    def _to_splits(self, raw, where: dict[str, str], test_split: str, params: GlueParams):
        import datasets
        import numpy as np

        train = self._standardise(raw["train"], where["train"])
        test = self._standardise(raw[test_split], where[test_split])
        for split, part in (("train", train), (test_split, test)):
            labels = np.asarray(part["label"])
            if self.task.output_kind == "class":
                bad = np.flatnonzero((labels < 0) | (labels >= len(self.task.class_names)))
            else:  # STS-B, the one regression task: similarity scores lie in 0..5 (NaN fails too)
                bad = np.flatnonzero(~((labels >= 0) & (labels <= 5)))
            if bad.size:
                raise DataValidationError(
                    f"{self.name}: row {int(bad[0])} of {where[split]} has label {labels[bad[0]]}, not a valid "
                    f"{self.task.name} label; GLUE's test files carry -1 (hidden labels): use the train and "
                    f"validation files")
        fractions = (1 - params.validation_fraction, params.validation_fraction, 0.0)
        keep, held, _ = seeded_split(len(train), fractions, params.seed)
        return datasets.DatasetDict(train=train.select(keep), validation=train.select(held), test=test)

    def _standardise(self, part, where: str):
        """Keep the task's sentence columns and label, renamed to text / text_pair / label."""
        import datasets

        wanted = [self.task.text] + ([self.task.text_pair] if self.task.text_pair else []) + ["label"]
        missing = [c for c in wanted if c not in part.column_names]
        if missing:
            raise DataValidationError(f"{self.name}: {where} has no column(s) "
                                      f"{', '.join(missing)} (found {', '.join(part.column_names)}); "
                                      f"{self.task.name} needs {', '.join(wanted)}: use the {HUB_ID} files")
        part = part.select_columns(wanted)
        renames = {self.task.text: "text", **({self.task.text_pair: "text_pair"} if self.task.text_pair else {})}
        part = part.rename_columns(renames)
        # Plain ints (not ClassLabel) / floats, like every other discipline's label column.
        dtype = "int64" if self.task.output_kind == "class" else "float32"
        return part.cast_column("label", datasets.Value(dtype))


_DISCIPLINES: dict[str, GlueDiscipline] = {}


def glue_discipline(name: str) -> GlueDiscipline:
    """The discipline ``glue-TASK`` (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte)."""
    task = name.removeprefix("glue-")
    if task not in TASKS:
        raise UnknownNameError(f"unknown GLUE discipline {name!r}; valid names: {', '.join(names())}")
    if task not in _DISCIPLINES:
        _DISCIPLINES[task] = GlueDiscipline(TASKS[task])
    return _DISCIPLINES[task]
