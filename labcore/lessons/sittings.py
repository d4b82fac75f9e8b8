"""Sittings of a lesson and the class's predictions: a table of their own in the store's folder, not jobs.

``<store>/lessons/<CODE>/sitting.json`` holds a sitting (its lesson, its phase, when it locked and revealed);
``<store>/lessons/<CODE>/seats/<seat>.json`` one student's nickname, prediction and vote. Each file is written
whole or not at all (:mod:`labcore.durable`), and each has one writer: the sitting's file the teacher's actions,
a seat's file that student's own browser. So a server restart finds every prediction, and two students never
write the same file.

A student is a secret token their browser keeps (in the address); the seat is a hash of it, so the store holds
nothing that would let anyone act for a student, and every action on a seat needs the token. Nobody can write a
prediction for someone else's browser, and before the reveal only the teacher's view reads the class's guesses
(:func:`guesses`, without names).

Phases: ``predict`` (students guess) -> ``running`` (guesses locked, runs submitted) -> ``revealed``; then,
for a lesson with a what-if step, ``vote`` -> ``whatif`` (the winner runs) -> ``whatif-revealed``. A prediction
counts only if it was written before the lock (a write racing the teacher's press is left out, not counted).

In a vote on a token mapping, students may propose their own mapping table (:mod:`labcore.lessons.proposals`):
one each, ``<store>/lessons/<CODE>/proposals/<seat>.json`` (written by that student's browser), and the
teacher's in the sitting's file; so proposals keep the one-writer rule, survive a restart and go with the
sitting, and a voter's page finds new ones by reading a handful of small files, not every seat. A valid table
becomes one more option of the vote, once however many propose it; :data:`MAX_PROPOSALS` keeps a class from
flooding the vote.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from labcore import durable
from labcore.lessons import catalogue, proposals
from labcore.lessons.model import Lesson, LessonError

FOLDER = "lessons"  # in the store's root: travels with `store export` (labcore.archive's SIDE_FOLDERS)
PHASES = ("predict", "running", "revealed", "vote", "whatif", "whatif-revealed")
CODE_LETTERS = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud and typed on phones
CODE_LENGTH = 5
MAX_NICKNAME = 24
MAX_PROPOSALS = 8  # tables proposed in one sitting: the vote stays readable on a phone


@dataclass(frozen=True)
class Sitting:
    code: str
    lesson: str
    phase: str = "predict"
    created_at: float = 0.0
    locked_at: float = 0.0  # 0: not locked yet
    revealed_at: float = 0.0
    solo: bool = False  # one person alone: they guess, run and reveal themselves
    owner: str = ""  # a solo sitting's seat: the one browser that may act on it
    whatif: str = ""  # the option the class chose
    vote_locked_at: float = 0.0
    proposals: tuple[str, ...] = ()  # the tables the teacher (or a solo owner) proposed, as vote options


@dataclass(frozen=True)
class Seat:
    seat: str
    nickname: str
    joined_at: float
    guess: Any = None  # a number, a choice, or a list of conditions in order; None: no guess yet
    guessed_at: float = 0.0
    vote: str = ""
    voted_at: float = 0.0


def _folder(root: Path | str, code: str) -> Path:
    code = str(code).strip().upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_LETTERS for c in code):
        raise LessonError(f"{code!r} is not a sitting code: codes are {CODE_LENGTH} letters and digits, such as "
                          f"the one on the teacher's screen")
    return Path(root) / FOLDER / code


def seat_of_token(code: str, token: str) -> str:
    return hashlib.sha256(f"{code.upper()}:{token}".encode()).hexdigest()[:24]


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    durable.write_json(path, value)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, or a foreign file: as if absent


# ------------------------------------------------------------------------------------------------- sittings
def open_sitting(root: Path | str, lesson: Lesson, *, solo: bool = False, owner_token: str = "") -> Sitting:
    """A new sitting of ``lesson`` with a fresh code (``solo``: for the one browser holding ``owner_token``)."""
    for _ in range(100):
        code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
        folder = _folder(root, code)
        if not folder.exists():
            break
    else:
        raise LessonError("no free sitting code after 100 tries: delete old sittings")
    sitting = Sitting(code, lesson.name, created_at=time.time(), solo=solo,
                      owner=seat_of_token(code, owner_token) if solo else "")
    _write(folder / "sitting.json", asdict(sitting))
    return sitting


def get(root: Path | str, code: str) -> Sitting:
    value = _read(_folder(root, code) / "sitting.json")
    if value is None:
        raise LessonError(f"there is no sitting {code.upper()!r} in this lab: check the code on the teacher's "
                          f"screen")
    sitting = Sitting(**{k: v for k, v in value.items() if k in Sitting.__dataclass_fields__})
    return replace(sitting, proposals=tuple(str(p) for p in sitting.proposals or ()))  # JSON hands a list


def all_sittings(root: Path | str) -> list[Sitting]:
    folder = Path(root) / FOLDER
    out = []
    for path in sorted(folder.glob("*/sitting.json")) if folder.is_dir() else ():
        try:
            out.append(get(root, path.parent.name))
        except LessonError:
            continue
    return sorted(out, key=lambda s: s.created_at)


def set_phase(root: Path | str, code: str, phase: str, *, whatif: str = "") -> Sitting:
    """Move a sitting on (the teacher's action, or a solo owner's); the lock and reveal times are kept."""
    if phase not in PHASES:
        raise LessonError(f"unknown phase {phase!r}; the phases are {', '.join(PHASES)}")
    sitting = get(root, code)
    now = time.time()
    changes: dict[str, Any] = {"phase": phase}
    if phase == "running" and not sitting.locked_at:
        changes["locked_at"] = now
    if phase == "revealed" and not sitting.revealed_at:
        changes["revealed_at"] = now
    if phase == "whatif":
        changes.update(whatif=whatif, vote_locked_at=now)
    sitting = replace(sitting, **changes)
    _write(_folder(root, code) / "sitting.json", asdict(sitting))
    return sitting


def delete(root: Path | str, code: str) -> None:
    """The sitting and every prediction and vote in it."""
    shutil.rmtree(_folder(root, code), ignore_errors=True)


# ---------------------------------------------------------------------------------------------------- seats
def _seat_path(root: Path | str, code: str, seat: str) -> Path:
    return _folder(root, code) / "seats" / f"{seat}.json"


def seats(root: Path | str, code: str) -> list[Seat]:
    """Every seat of a sitting (names included: for the teacher's list and a handout that asks for names)."""
    folder = _folder(root, code) / "seats"
    out = []
    for path in folder.glob("*.json") if folder.is_dir() else ():
        value = _read(path)
        if value is not None:
            out.append(Seat(**{k: v for k, v in value.items() if k in Seat.__dataclass_fields__}))
    return sorted(out, key=lambda s: s.joined_at)


def join(root: Path | str, code: str, nickname: str, token: str = "") -> str:
    """Seat ``nickname`` in the sitting; the token the browser keeps (``token``: the one it has, to come back).
    A nickname another browser holds is refused."""
    sitting = get(root, code)
    nickname = " ".join(str(nickname).split())
    if not nickname or len(nickname) > MAX_NICKNAME:
        raise LessonError(f"a nickname is 1 to {MAX_NICKNAME} characters")
    token = token or secrets.token_urlsafe(16)
    seat = seat_of_token(sitting.code, token)
    mine = seat_of(root, sitting.code, token)
    if mine is not None:
        return token
    if any(s.nickname.lower() == nickname.lower() for s in seats(root, sitting.code)):
        raise LessonError(f"the nickname {nickname!r} is taken in this sitting: choose another")
    _write(_seat_path(root, sitting.code, seat), asdict(Seat(seat, nickname, time.time())))
    return token


def seat_of(root: Path | str, code: str, token: str) -> Seat | None:
    if not token:
        return None
    value = _read(_seat_path(root, code, seat_of_token(code, token)))
    return None if value is None else Seat(**{k: v for k, v in value.items() if k in Seat.__dataclass_fields__})


def _own_seat(root: Path | str, code: str, token: str) -> Seat:
    seat = seat_of(root, code, token)
    if seat is None:
        raise LessonError("this browser has no seat in the sitting: join with the code and a nickname first")
    return seat


def predict(root: Path | str, code: str, token: str, guess: Any) -> Seat:
    """Write this browser's prediction (only its own: the seat comes from its token); refused once locked."""
    sitting = get(root, code)
    seat = _own_seat(root, sitting.code, token)
    if sitting.phase != "predict":
        raise LessonError("predictions are locked: the runs have started")
    guess = check_guess(catalogue.get(sitting.lesson), guess)
    seat = replace(seat, guess=guess, guessed_at=time.time())
    _write(_seat_path(root, sitting.code, seat.seat), asdict(seat))
    return seat


def vote(root: Path | str, code: str, token: str, option: str) -> Seat:
    sitting = get(root, code)
    seat = _own_seat(root, sitting.code, token)
    lesson = catalogue.get(sitting.lesson)
    if sitting.phase != "vote":
        raise LessonError("the vote is not open")
    if lesson.whatif is None or option not in options(root, sitting.code):
        raise LessonError(f"{option!r} is none of the options of this vote")
    seat = replace(seat, vote=option, voted_at=time.time())
    _write(_seat_path(root, sitting.code, seat.seat), asdict(seat))
    return seat


def check_guess(lesson: Lesson, guess: Any) -> Any:
    """``guess`` as the lesson's question takes it, or :class:`LessonError` saying what it takes."""
    question = lesson.question
    if question.kind == "number":
        try:
            value = float(guess)
        except (TypeError, ValueError):
            raise LessonError(f"the answer is a number from {question.low:g} to {question.high:g}") from None
        if not question.low <= value <= question.high:
            raise LessonError(f"the answer is a number from {question.low:g} to {question.high:g}, not {value:g}")
        return value
    if question.kind == "choice":
        if guess not in question.choices:
            raise LessonError(f"choose one of: {'; '.join(question.choices)}")
        return guess
    order = [str(g) for g in guess or ()]
    if sorted(order) != sorted(question.choices):
        raise LessonError(f"put every one of {', '.join(question.choices)} in order, each once")
    return order


# ------------------------------------------------------------------------------------------ the class's view
def guesses(root: Path | str, code: str) -> list[Any]:
    """The predictions that count (written before the lock), without names: the histogram's data."""
    return tally(root, code)[0]


def tally(root: Path | str, code: str) -> tuple[list[Any], int]:
    """(the predictions that count, the students seated), from one reading of the seats: what the teacher's
    live view redraws every second."""
    sitting = get(root, code)
    cut = sitting.locked_at or float("inf")
    every = seats(root, code)
    return [s.guess for s in every if s.guess is not None and s.guessed_at <= cut], len(every)


def votes(root: Path | str, code: str) -> dict[str, int]:
    """Option -> the votes cast for it before the vote closed, in the options' order."""
    sitting = get(root, code)
    counts = {o: 0 for o in options(root, code)}
    cut = sitting.vote_locked_at or float("inf")
    for seat in seats(root, code):
        if seat.vote in counts and seat.voted_at <= cut:
            counts[seat.vote] += 1
    return counts


def winner(root: Path | str, code: str) -> str:
    """The option with the most votes; a tie goes to the option listed first (the lesson's own before any
    proposed table)."""
    return leader(votes(root, code))


def leader(counts: dict[str, int]) -> str:
    """The option leading ``counts`` (:func:`votes`' reading, in the options' order); a tie goes to the first."""
    order = list(counts)
    return max(order, key=lambda o: (counts[o], -order.index(o)))


# --------------------------------------------------------------------------------------- proposed tables
def options(root: Path | str, code: str) -> tuple[str, ...]:
    """The vote's options: the lesson's own, then the teacher's tables, then the students' in the order they
    were proposed (one option per table, however many proposed it; none proposed after the vote closed)."""
    sitting = get(root, code)
    lesson = catalogue.get(sitting.lesson)
    if lesson.whatif is None:
        return ()
    cut = sitting.vote_locked_at or float("inf")
    folder = _folder(root, code) / "proposals"
    theirs = [(float(value.get("at") or 0.0), str(value.get("option") or ""))
              for path in (folder.glob("*.json") if folder.is_dir() else ()) if isinstance(value := _read(path), dict)]
    every = lesson.whatif.options + sitting.proposals + tuple(o for at, o in sorted(theirs) if at <= cut)
    return tuple(o for o in dict.fromkeys(every) if o)


def _proposed(root: Path | str, sitting: Sitting, text: str) -> tuple[str, bool]:
    """(the option ``text`` is, whether it is one already); a LessonError where the table is not valid or the
    sitting has all the tables it takes."""
    lesson = catalogue.get(sitting.lesson)
    option = proposals.table_option(lesson, text)
    now = options(root, sitting.code)
    if option in now:
        return option, True
    if len(now) - len(lesson.whatif.options) >= MAX_PROPOSALS:
        raise LessonError(f"this vote has {MAX_PROPOSALS} proposed tables already, as many as it takes: vote for "
                          f"one of them")
    return option, False


def propose(root: Path | str, code: str, token: str, text: str) -> str:
    """A student's own mapping table, proposed while the vote is open: its vote option. One table per student;
    a table someone proposed already is that option, and costs nothing."""
    sitting = get(root, code)
    seat = _own_seat(root, sitting.code, token)
    if sitting.phase != "vote":
        raise LessonError("tables are proposed while the vote is open")
    option, known = _proposed(root, sitting, text)
    if known:
        return option
    path = _folder(root, sitting.code) / "proposals" / f"{seat.seat}.json"
    mine = _read(path)
    if mine is not None:
        raise LessonError(f"you have proposed a table already ({mine.get('option')}): one table per student; "
                          f"vote for it, or for another option")
    _write(path, {"seat": seat.seat, "option": option, "at": time.time()})
    return option


def propose_as_teacher(root: Path | str, code: str, text: str) -> str:
    """The teacher's own table (a solo owner's, who is their own teacher), after the reveal or during the
    vote: its vote option."""
    sitting = get(root, code)
    if sitting.phase not in ("revealed", "vote"):
        raise LessonError("tables are proposed after the reveal, until the vote closes")
    option, known = _proposed(root, sitting, text)
    if not known:
        sitting = replace(sitting, proposals=sitting.proposals + (option,))
        _write(_folder(root, code) / "sitting.json", asdict(sitting))
    return option
