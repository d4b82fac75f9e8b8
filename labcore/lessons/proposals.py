"""A class's own token mapping for a what-if vote: a table of the discipline's symbols, each given a vocabulary
id, written as the command line writes it (``A:1012,C:1013,G:1014,T:1015``).

A proposal is checked when it is made, against the what-if run's discipline (every symbol once, no other) and,
where the model's vocabulary is on this machine (read from its files, without torch), against that vocabulary
with the check every run's mapping goes through (inside it, off special tokens, one-to-one). A valid table
becomes the vote option ``table A:1012,C:1013,G:1014,T:1015``, its rows in the discipline's symbol order: the
same table written in another order is the same option, and the same run.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from labcore import data as disciplines
from labcore.errors import LabError
from labcore.lessons.model import Lesson, LessonError
from labcore.mapping import RUN_SPECIAL_FIX, MappingSpec, Vocab, build_mapping, model_vocab
from labcore.runspec import COUNT_LIMIT

PREFIX = "table "  # a table option's name starts so; the fixed options are mapping kinds, none of which does
MAX_TEXT = 1200  # characters: room for a protein's 25 symbols, not for an essay in the vote
Rows = tuple[tuple[str, int], ...]


def is_table(option: str) -> bool:
    return str(option).startswith(PREFIX)


def takes_tables(lesson: Lesson) -> bool:
    """Whether the lesson's what-if votes on a token mapping, so a class may propose a table."""
    return lesson.whatif is not None and lesson.whatif.kind == "mapping"


def table_option(lesson: Lesson, text: str) -> str:
    """The vote option a proposed table is (``table A:1012,...``), or a LessonError naming the problem and
    the fix."""
    return PREFIX + ",".join(f"{symbol}:{ident}" for symbol, ident in table_rows(lesson, text))


def table_rows(lesson: Lesson, text: str) -> Rows:
    """The (symbol, id) rows of a table (its option's name, or the table as a student typed it), checked, in
    the discipline's symbol order."""
    spec = _target(lesson)
    alphabet = _alphabet(spec)
    rows = _parse(text, alphabet)
    if alphabet is not None:
        _check_symbols(rows, alphabet, spec.discipline)
        rows = tuple(sorted(rows, key=lambda row: alphabet.index(row[0])))
    else:
        rows = tuple(sorted(rows))
    vocab = _vocab(spec.model)
    if vocab is not None:
        try:
            build_mapping(MappingSpec("table", table=rows), alphabet, vocab, special_fix=RUN_SPECIAL_FIX)
        except LabError as exc:
            raise LessonError(str(exc)) from None
    return rows


def example(lesson: Lesson) -> str:
    """A table in the form a proposal takes, for the discipline the what-if runs on (ids only illustrate)."""
    try:
        return _example(_alphabet(_target(lesson)))
    except LabError:
        return _example(None)


# ------------------------------------------------------------------------------------------------ the checks
def _target(lesson: Lesson) -> Any:
    if not takes_tables(lesson):
        raise LessonError(f"lesson {lesson.name!r} votes on no token mapping, so it takes no table: choose one "
                          f"of its options")
    return lesson.runs_of(lesson.whatif.role)[0].spec


def _alphabet(spec: Any) -> tuple[str, ...] | None:
    """The discipline's symbols (None for text: its tokens are the vocabulary's)."""
    discipline = disciplines.get(spec.discipline)
    info = discipline.info(disciplines.parse_params(discipline, dict(spec.discipline_params)))
    if info.input_kind == "text":
        return None
    if not info.alphabet:
        raise LessonError(f"{spec.discipline} feeds no symbols to the model, so no table can map them")
    return tuple(info.alphabet)


def _example(alphabet: tuple[str, ...] | None) -> str:
    shown = alphabet or ("the", "of")
    return ",".join(f"{symbol}:{1012 + n}" for n, symbol in enumerate(shown[:4])) + (",..." if len(shown) > 4
                                                                                      else "")


def _form(alphabet: tuple[str, ...] | None) -> str:
    return f"SYMBOL:ID for each symbol, separated by commas, e.g. {_example(alphabet)}"


def _parse(text: str, alphabet: tuple[str, ...] | None) -> Rows:
    body = str(text).strip()
    if body.lower().startswith(PREFIX.strip()):
        body = body[len(PREFIX.strip()):]
    if len(body) > MAX_TEXT:
        raise LessonError(f"the table is over {MAX_TEXT} characters; write {_form(alphabet)}")
    parts = [part.strip() for part in re.split(r"[,;\n]", body) if part.strip()]
    if not parts:
        raise LessonError(f"the table is empty; write {_form(alphabet)}")
    rows = []
    for part in parts:
        # the id after the last colon: a symbol may itself hold one
        symbol, colon, ident = (piece.strip() for piece in part.rpartition(":"))
        if not colon or not symbol or not ident.isascii() or not ident.isdigit():
            raise LessonError(f"{part!r} is not SYMBOL:ID; write {_form(alphabet)}")
        if int(ident) >= COUNT_LIMIT:
            raise LessonError(f"{part!r}: the id {ident} is beyond any vocabulary; use an id of the model's "
                              f"vocabulary (a count from 0)")
        rows.append((symbol, int(ident)))
    return tuple(rows)


def _check_symbols(rows: Rows, alphabet: tuple[str, ...], discipline: str) -> None:
    """Every symbol once, and no other; and no id twice (a model could not tell those symbols apart)."""
    symbols = [symbol for symbol, _ in rows]
    every = ", ".join(alphabet)
    twice = sorted({s for s in symbols if symbols.count(s) > 1})
    if twice:
        raise LessonError(f"the table gives {', '.join(map(repr, twice))} more than once; give each of {every} "
                          f"one id")
    unknown = [s for s in symbols if s not in alphabet]
    if unknown:
        raise LessonError(f"the table names {', '.join(map(repr, unknown))}, which {discipline} does not have; "
                          f"its symbols are {every}: give each one id")
    missing = [s for s in alphabet if s not in symbols]
    if missing:
        raise LessonError(f"the table has no id for {', '.join(map(repr, missing))}; give every one of {every} "
                          f"an id")
    ids = [ident for _, ident in rows]
    shared = sorted({i for i in ids if ids.count(i) > 1})
    if shared:
        owners = [" and ".join(repr(s) for s, i in rows if i == ident) for ident in shared]
        raise LessonError(f"{'; '.join(owners)} share an id ({', '.join(map(str, shared))}), so the model could "
                          f"not tell them apart; give each symbol its own id")


@functools.lru_cache(maxsize=8)
def _model_vocab(model: str) -> Vocab:
    return model_vocab(model)  # a failure is not cached: a vocabulary fetched later is read then


def _vocab(model: str) -> Vocab | None:
    """The model's vocabulary where its files are on this machine; None where not (the run checks it then)."""
    try:
        return _model_vocab(model)
    except LabError:
        return None
