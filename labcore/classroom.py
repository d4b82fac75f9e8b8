"""The limits a teacher sets for a class on one server, and the guard on the teacher's passcode.

The teacher writes them in ``.streamlit/secrets.toml`` beside the passcode::

    teacher_passcode = "..."
    [classroom]
    student_budgets = ["quick"]          # the budgets students may run
    student_models = []                  # the lab's models students may use (empty: every built-in one)
    student_local_models = false         # local:FOLDER reads any folder of the server's disk
    student_hub_models = false           # hub:ID downloads whatever a student names
    max_job_minutes = 30                 # a student's job is stopped after this long (0: no limit)
    max_queued_per_student = 5           # jobs one student may have waiting (0: the server's own cap)
    max_disk_mb_per_student = 2000       # what a student's jobs may hold on disk before new ones are refused
    passcode_attempts = 5                # wrong passcodes before the sign-in pauses
    passcode_pause_s = 300

A student is anyone in a class (a passcode is set) who has not entered it. A refusal names the teacher's
setting, so a student knows whom to ask and the teacher knows what to change. The pages apply the limits;
this module knows no screen.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Mapping

from labcore.errors import LabError

SECRETS_TABLE = "classroom"  # [classroom] in .streamlit/secrets.toml
WHERE = f"[{SECRETS_TABLE}] in .streamlit/secrets.toml"
OPEN_PREFIXES = ("run:", "lab:")  # the lab's own results: a finished run's body, a model pretrained here


class StudentLimit(LabError):
    """A student asked for more than the teacher's settings allow; the message names the setting."""


@dataclass(frozen=True)
class ClassroomLimits:
    student_budgets: tuple[str, ...] = ("quick",)
    student_models: tuple[str, ...] = ()
    student_local_models: bool = False
    student_hub_models: bool = False
    max_job_minutes: float = 30.0
    max_queued_per_student: int = 5
    max_disk_mb_per_student: float = 2000.0
    passcode_attempts: int = 5
    passcode_pause_s: float = 300.0

    @classmethod
    def from_settings(cls, values: Mapping[str, Any] | None) -> "ClassroomLimits":
        """The limits from the ``[classroom]`` table (absent: the defaults); an unknown name or a value of the
        wrong type is refused, naming it and the valid names."""
        values = dict(values or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise LabError(f"{WHERE} has no setting {unknown[0]!r}; its settings are: {', '.join(known)}")
        out: dict[str, Any] = {}
        for name, value in values.items():
            default = getattr(cls(), name)
            try:
                if isinstance(default, tuple):
                    if isinstance(value, str) or not isinstance(value, Iterable):
                        raise TypeError
                    out[name] = tuple(str(v) for v in value)
                elif isinstance(default, bool):
                    if not isinstance(value, bool):
                        raise TypeError
                    out[name] = value
                else:
                    out[name] = type(default)(value)
                    if out[name] < 0:
                        raise ValueError
            except (TypeError, ValueError):
                raise LabError(f"{WHERE}: {name} = {value!r} is not {_kind(default)}; for example "
                               f"{name} = {_toml(default)}") from None
        return cls(**out)

    # ------------------------------------------------------------------------------------------ specs
    def check(self, spec: Any) -> None:
        """Refuse a spec a student may not run (a run's budget and model, an analysis's models)."""
        budget = getattr(spec, "budget", None)
        if budget and budget not in self.student_budgets:
            raise StudentLimit(f"students may run the budget(s) {', '.join(self.student_budgets)}, not {budget!r} "
                               f"(the teacher's setting student_budgets, {WHERE}); choose "
                               f"{self.student_budgets[0]!r} or ask the teacher")
        for model in _models_of(spec):
            self._check_model(model)

    def _check_model(self, model: str) -> None:
        if model.startswith(OPEN_PREFIXES):
            return
        for prefix, allowed, setting in (("local:", self.student_local_models, "student_local_models"),
                                         ("hub:", self.student_hub_models, "student_hub_models")):
            if model.startswith(prefix) and not allowed:
                raise StudentLimit(f"students may not use {prefix} models ({model!r}): the teacher's setting "
                                   f"{setting} is off ({WHERE}); pick one of the lab's models or ask the teacher")
        if self.student_models and model not in self.student_models:
            raise StudentLimit(f"students may use the model(s) {', '.join(self.student_models)}, not {model!r} "
                               f"(the teacher's setting student_models, {WHERE})")

    def check_queue(self, waiting: int, adding: int) -> None:
        """Refuse ``adding`` more queued jobs to a student who has ``waiting`` already."""
        cap = self.max_queued_per_student
        if cap and waiting + adding > cap:
            raise StudentLimit(f"a student may have {cap} job(s) waiting at a time and you have {waiting}; this "
                               f"asks for {adding} more (the teacher's setting max_queued_per_student, {WHERE}); "
                               f"wait until some start, or cancel one on the Runs page")

    def check_disk(self, held_bytes: int) -> None:
        """Refuse new jobs to a student whose jobs already hold the disk quota."""
        quota = self.max_disk_mb_per_student
        if quota and held_bytes >= quota * 2**20:
            raise StudentLimit(f"your jobs hold {held_bytes / 2**20:,.0f} MB on the server, the most a student may "
                               f"(the teacher's setting max_disk_mb_per_student = {quota:g}, {WHERE}); ask the "
                               f"teacher to archive and clear some of your runs")

    @property
    def max_job_s(self) -> float:
        return self.max_job_minutes * 60.0

    def time_limit_note(self) -> str:
        """Who stopped a job that ran out of time, as its record says (``cancelled_by``)."""
        return f"the teacher's max_job_minutes ({self.max_job_minutes:g} min)"


def _kind(default: Any) -> str:
    if isinstance(default, tuple):
        return "a list of names"
    if isinstance(default, bool):
        return "true or false"
    return "a number of 0 or more"


def _toml(default: Any) -> str:
    if isinstance(default, tuple):
        return "[" + ", ".join(f'"{v}"' for v in default) + "]"
    if isinstance(default, bool):
        return str(default).lower()
    return f"{default:g}" if isinstance(default, float) else str(default)


def _models_of(spec: Any) -> list[str]:
    """The model names a spec loads: a run's ``model``, an analysis's ``models``, a pretraining's start."""
    names = [getattr(spec, "model", None), getattr(spec, "start", None)]
    names += [getattr(m, "model", None) for m in getattr(spec, "models", None) or ()
              if not getattr(m, "run", "")]
    return [n for n in names if isinstance(n, str) and n]


# --------------------------------------------------------------------------------------------- passcode
class PasscodeGuard:
    """Counts wrong passcodes per session and per address; after ``attempts`` of them in a row the sign-in
    pauses for ``pause_s`` (a right passcode during a pause is refused too, so guessing gains nothing).
    One guard serves a whole server (thread-safe): a new browser session does not reset an address."""

    def __init__(self, attempts: int = 5, pause_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.attempts, self.pause_s, self.clock = attempts, pause_s, clock
        self._failures: dict[str, int] = {}
        self._paused_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait_s(self, *who: str) -> float:
        """Seconds until any of ``who`` (a session, an address) may try again; 0 when it may now."""
        now = self.clock()
        with self._lock:
            return max([self._paused_until.get(w, 0.0) - now for w in who if w] + [0.0])

    def failed(self, *who: str) -> float:
        """Count a wrong passcode; the pause it starts (0 while attempts remain)."""
        with self._lock:
            for w in filter(None, who):
                self._failures[w] = self._failures.get(w, 0) + 1
                if self._failures[w] >= self.attempts:
                    self._paused_until[w] = self.clock() + self.pause_s
                    self._failures[w] = 0
        return self.wait_s(*who)

    def succeeded(self, *who: str) -> None:
        with self._lock:
            for w in who:
                self._failures.pop(w, None)
