"""A lesson file (TOML) checked and turned into a :class:`~labcore.lessons.model.Lesson`.

Every refusal names the file and the field and says what would be valid, so a teacher writing a lesson learns
what to change without reading this code. The checks that matter most: each run's discipline exists, and the
figure that answers the question is one the runs produce (its conditions are the lesson's runs, as many as
the figure needs).

A file looks like this (``labcore/lessons/library/*.toml`` are the lab's own)::

    name = "dna"
    title = "Does a text model help on DNA?"
    paper = "kao"                       # a key of labcore.recipes.demos.PAPERS
    source = "§3.2, table 6 and fig. 2"
    [question]
    kind = "number"                     # choice | number | order
    text = "What test accuracy will the text-pretrained model reach on splice junctions?"
    low = 0.0
    high = 1.0
    [figure]
    kind = "value"                      # value | gap | best | order
    roles = ["pretrained"]
    [base]                              # spec values every run shares
    model = "minilm"
    [[runs]]
    role = "pretrained"
    spec = { init = "pretrained" }      # or demo = "dna" (the Home demo's run of that role)
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Mapping

from labcore import data as disciplines
from labcore.errors import LabError
from labcore.lessons.model import (FIGURES, MEASURES, PREDICTIONS, WHATIF_KINDS, Figure, Lesson, LessonError,
                                   LessonRun, Question, WhatIf, gap_choices)
from labcore.mapping.spec import KINDS as MAPPING_KINDS
from labcore.protocols import PROTOCOLS
from labcore.recipes.demos import DEMOS, PAPERS
from labcore.runspec import make_spec

TOP = ("name", "title", "paper", "source", "background", "minutes", "question", "figure", "base", "runs", "whatif")
RUN_FIELDS = ("role", "spec", "demo", "seeds", "stage", "kind", "body")


def load_file(path: Path | str) -> Lesson:
    path = Path(path)
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LessonError(f"lesson file {path.name}: not valid TOML ({exc})") from None
    return load(values, where=path.name)


def load(values: Mapping[str, Any], where: str = "lesson") -> Lesson:
    """The lesson ``values`` describe (a TOML file's table), or :class:`LessonError` naming what is wrong."""
    _known(values, TOP, where)
    for name in ("name", "title", "paper", "source", "question", "figure", "runs"):
        if name not in values:
            raise LessonError(f"{where}: `{name}` is missing; a lesson needs {', '.join(TOP[:4])}, [question], "
                              f"[figure] and at least one [[runs]]")
    if values["paper"] not in PAPERS:
        raise LessonError(f"{where}: paper {values['paper']!r} is none of the lab's papers ({', '.join(PAPERS)})")
    runs = _runs(values.get("runs") or [], dict(values.get("base") or {}), where)
    roles = tuple(dict.fromkeys(r.role for r in runs if r.kind == "run"))
    figure = _figure(dict(values["figure"]), roles, where)
    question = _question(dict(values["question"]), figure, where)
    whatif = _whatif(dict(values["whatif"]), roles, where) if values.get("whatif") else None
    return Lesson(name=str(values["name"]), title=str(values["title"]), question=question, runs=runs,
                  figure=figure, paper=str(values["paper"]), source=str(values["source"]),
                  background=str(values.get("background", "")), whatif=whatif,
                  minutes=float(values.get("minutes", 0.0)))


def _known(values: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise LessonError(f"{where}: unknown field {unknown[0]!r}; the fields are {', '.join(known)}")


# ------------------------------------------------------------------------------------------------- runs
def _runs(items: list[dict[str, Any]], base: dict[str, Any], where: str) -> tuple[LessonRun, ...]:
    if not items:
        raise LessonError(f"{where}: no [[runs]]; a lesson needs the runs that answer its question")
    bodies: dict[str, str] = {}  # a pretraining's role -> the lab: model its fine-tunes load
    out: list[LessonRun] = []
    for number, item in enumerate(items, 1):
        at = f"{where}, run {number} ({item.get('role', '?')})"
        _known(item, RUN_FIELDS, at)
        if not item.get("role"):
            raise LessonError(f"{at}: `role` is missing: name the condition it stands for")
        kind, stage = str(item.get("kind", "run")), int(item.get("stage", 0))
        seeds = tuple(int(s) for s in item.get("seeds", [0]))
        if kind == "pretrain":
            spec = _pretrain(dict(item.get("spec") or {}), at)
            bodies[item["role"]] = f"lab:{spec.name}"
            out.append(LessonRun(item["role"], spec, spec.seed, stage, "pretrain"))
            continue
        if kind != "run":
            raise LessonError(f"{at}: kind {kind!r} is neither `run` nor `pretrain`")
        for seed in seeds:
            spec = _run_spec(item, base, bodies, seed, at)
            out.append(LessonRun(item["role"], spec, seed, stage))
    return tuple(out)


def _run_spec(item: dict[str, Any], base: dict[str, Any], bodies: dict[str, str], seed: int, at: str):
    if item.get("demo"):
        demo = item["demo"]
        if demo not in DEMOS:
            raise LessonError(f"{at}: there is no Home demo {demo!r}; the demos are {', '.join(DEMOS.names())}")
        roles = DEMOS[demo].roles
        if item["role"] not in roles:
            raise LessonError(f"{at}: demo {demo!r} has no run {item['role']!r}; its runs are {', '.join(roles)}")
        return DEMOS[demo].specs()[roles.index(item["role"])]  # the demo's own run: Home's results serve it
    values = {**base, **dict(item.get("spec") or {}), "seed": seed}
    if item.get("body"):
        if item["body"] not in bodies:
            raise LessonError(f"{at}: body {item['body']!r} is no pretraining listed before it "
                              f"({', '.join(bodies) or 'none is'})")
        values["model"] = bodies[item["body"]]
    discipline = values.get("discipline")
    if discipline not in disciplines.names():
        raise LessonError(f"{at}: unknown discipline {discipline!r}; the disciplines are "
                          f"{', '.join(disciplines.names())}")
    protocol = values.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS.names():
        raise LessonError(f"{at}: unknown protocol {protocol!r}; the protocols are {', '.join(PROTOCOLS.names())}")
    mapping = values.get("mapping")
    if mapping is not None and mapping not in MAPPING_KINDS:
        raise LessonError(f"{at}: unknown token mapping {mapping!r}; the mappings are {', '.join(MAPPING_KINDS)}")
    try:
        return make_spec(**values)
    except LabError as exc:
        raise LessonError(f"{at}: {exc}") from None


def _pretrain(values: dict[str, Any], at: str):
    from labcore.pretrain.spec import PretrainSpec, resolve_pretrain

    try:
        return resolve_pretrain(PretrainSpec(**values))
    except TypeError as exc:
        raise LessonError(f"{at}: {exc}") from None
    except LabError as exc:
        raise LessonError(f"{at}: {exc}") from None


# ------------------------------------------------------------------------------------- figure, question
def _figure(values: dict[str, Any], roles: tuple[str, ...], where: str) -> Figure:
    at = f"{where}, [figure]"
    _known(values, ("kind", "roles", "measure"), at)
    kind, measure = str(values.get("kind", "")), str(values.get("measure", "test"))
    wanted = tuple(str(r) for r in values.get("roles", ()))
    if kind not in FIGURES:
        raise LessonError(f"{at}: kind {kind!r} is none of {', '.join(FIGURES)}")
    if measure not in MEASURES:
        raise LessonError(f"{at}: the runs do not produce a figure {measure!r}; they measure "
                          f"{', '.join(MEASURES)}")
    missing = [r for r in wanted if r not in roles]
    if missing:
        raise LessonError(f"{at}: the runs do not produce {missing[0]!r}: no run has that role; the runs' roles "
                          f"are {', '.join(roles)}")
    need = {"value": (1, 1), "gap": (2, 2), "best": (2, 9), "order": (2, 9)}[kind]
    if not need[0] <= len(wanted) <= need[1]:
        count = str(need[0]) if need[0] == need[1] else f"{need[0]} or more"
        raise LessonError(f"{at}: a {kind} figure reads {count} condition(s), not {len(wanted)}")
    return Figure(kind, wanted, measure)


def _question(values: dict[str, Any], figure: Figure, where: str) -> Question:
    at = f"{where}, [question]"
    _known(values, ("kind", "text", "low", "high", "unit", "tolerance"), at)
    kind = str(values.get("kind", ""))
    if kind not in PREDICTIONS:
        raise LessonError(f"{at}: kind {kind!r} is none of {', '.join(PREDICTIONS)}")
    if not values.get("text"):
        raise LessonError(f"{at}: `text` is missing: the question as the class reads it")
    fits = {"number": ("value", "gap"), "choice": ("gap", "best"), "order": ("order",)}[kind]
    if figure.kind not in fits:
        raise LessonError(f"{at}: {_a(kind)} question is answered by {' or '.join(_a(f) for f in fits)} figure, "
                          f"not {_a(figure.kind)} one")
    low, high = float(values.get("low", 0.0)), float(values.get("high", 1.0))
    if kind == "number" and not low < high:
        raise LessonError(f"{at}: low ({low:g}) must be below high ({high:g})")
    choices = figure.roles if kind in ("order",) or figure.kind == "best" else ()
    if kind == "choice" and figure.kind == "gap":
        choices = gap_choices(*figure.roles)
    return Question(kind, str(values["text"]), tuple(choices), low, high, str(values.get("unit", "")),
                    float(values.get("tolerance", 0.05)))


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _whatif(values: dict[str, Any], roles: tuple[str, ...], where: str) -> WhatIf:
    at = f"{where}, [whatif]"
    _known(values, ("kind", "role", "options", "text"), at)
    kind, role = str(values.get("kind", "")), str(values.get("role", ""))
    options = tuple(str(o) for o in values.get("options", ()))
    if kind not in WHATIF_KINDS:
        raise LessonError(f"{at}: kind {kind!r} is none of {', '.join(WHATIF_KINDS)}")
    if role not in roles:
        raise LessonError(f"{at}: role {role!r} is none of the runs' roles ({', '.join(roles)})")
    valid = MAPPING_KINDS if kind == "mapping" else PROTOCOLS.names()
    bad = [o for o in options if o not in valid]
    if bad or len(options) < 2:
        raise LessonError(f"{at}: options must be two or more of {', '.join(valid)}"
                          + (f"; {bad[0]!r} is not" if bad else ""))
    return WhatIf(kind, role, options, str(values.get("text", "")))
