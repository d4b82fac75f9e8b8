"""The registry of disciplines: every kind of data the lab can train on.

``load(name)`` returns ``(DatasetDict, DisciplineInfo)``; the first call builds and caches the Arrow
files under ``cache/datasets/``. Two families have open-ended names: ``upload:NAME`` (a user's own
data, see :mod:`labcore.data.upload`) and ``glue-TASK`` (GLUE from the hub or a local copy, see
:mod:`labcore.data.glue`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from labcore.data.base import (  # noqa: F401  (re-exported for callers)
    Discipline, DisciplineInfo, NoParams, ProgressFn, Summary, example_lengths, is_built, label_counts,
    load_cached, parse_params,
)
from labcore.registry import Registry

DISCIPLINES: Registry[Discipline] = Registry("discipline")


def register(discipline_cls: type[Discipline]) -> type[Discipline]:
    """Class decorator: register one instance of a Discipline subclass under its ``name``."""
    DISCIPLINES.register(discipline_cls.name, discipline_cls())
    return discipline_cls


def get(name: str) -> Discipline:
    if name.startswith("upload:"):
        from labcore.data.upload import uploaded_discipline

        return uploaded_discipline(name)
    if name.startswith("glue-"):
        from labcore.data.glue import glue_discipline

        return glue_discipline(name)
    return DISCIPLINES[name]


def names() -> list[str]:
    """Every fixed discipline name, then the user's uploads."""
    from labcore.data.upload import list_uploads

    return DISCIPLINES.names() + [f"upload:{u}" for u in list_uploads()]


def load(name: str, params: dict[str, Any] | None = None, preset: str = "", progress: ProgressFn = print):
    discipline = get(name)
    parsed = parse_params(discipline, params, preset)
    return load_cached(discipline, parsed, progress), discipline.info(parsed)


def render(info: DisciplineInfo, row: dict[str, Any], limit: int = 80) -> str:
    """A readable form of one example: its own symbols for tokens, the text, or the vector shape."""
    if info.input_kind == "tokens":
        symbols = [info.alphabet[i] for i in row["tokens"][:limit]]
        sep = "" if all(len(s) == 1 for s in info.alphabet) else " "
        more = " ..." if len(row["tokens"]) > limit else ""
        return sep.join(symbols) + more
    if info.input_kind == "text":
        text = row["text"]
        return text if len(text) <= limit * 2 else text[: limit * 2] + " ..."
    vectors = row["vectors"]
    return f"{len(vectors)} vectors of dimension {len(vectors[0]) if vectors else 0}"


def label_name(info: DisciplineInfo, label: Any) -> str:
    if info.output_kind == "class":
        return info.class_names[label]
    if info.output_kind == "multilabel":
        return "".join(str(int(b)) for b in label)
    return f"{label:.3f}"


def summarize(name: str, params: dict[str, Any] | None = None, preset: str = "",
              progress: ProgressFn = print, n_examples: int = 3) -> Summary:
    dataset, info = load(name, params, preset, progress)
    sizes = {split: len(dataset[split]) for split in dataset}
    counts: Counter[str] = Counter()
    if info.output_kind == "class":
        for split in dataset:
            per_class = label_counts(dataset[split], len(info.class_names))
            counts.update({c: n for c, n in zip(info.class_names, per_class) if n})
    lengths = [n for split in dataset for n in example_lengths(dataset[split], info.input_kind)]
    train = dataset["train"]
    examples = tuple(f"[{label_name(info, train[i]['label'])}] {render(info, train[i])}"
                     for i in range(min(n_examples, len(train))))
    return Summary(
        name=name, split_sizes=sizes, class_counts=dict(counts),
        length_min=min(lengths) if lengths else 0,
        length_mean=sum(lengths) / len(lengths) if lengths else 0.0,
        length_max=max(lengths) if lengths else 0,
        examples=examples,
    )


def _register_builtin() -> None:
    # Importing a module registers its disciplines. Order is the order `data list` prints.
    from labcore.data import bits, dna, images, listops, music, protein, text  # noqa: F401


_register_builtin()
