"""A lesson's jobs in the ordinary job store: their keys, submitting them stage by stage, reading their results,
and the "what if" run a class votes for.

A lesson's runs join the store group ``lesson:<name>`` (a Home demo's runs keep their own keys, so what the demo
ran serves the lesson at once); a stage is submitted once the one before it has ended (a fine-tune of a ``lab:``
body waits for its pretraining).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from labcore.engine import run_results
from labcore.jobs import key_of
from labcore.lessons import proposals
from labcore.lessons.model import Lesson, LessonError, LessonRun
from labcore.results.record import RunRecord
from labcore.runspec import make_spec

TERMINAL = ("done", "failed", "diverged", "cancelled", "interrupted", "dead")

_KEYS: dict[str, tuple[str, ...]] = {}


def command(lesson_name: str) -> str:
    """The command line that reruns a lesson (``labcore/lessons/__main__.py``; finished runs are read from the
    store): what a handout prints."""
    return f"python -m labcore.lessons run {lesson_name}"


def lesson_keys(lesson: Lesson) -> tuple[str, ...]:
    """The keys of ``lesson``'s runs, in :attr:`Lesson.runs`' order (resolving reads registries only: no torch)."""
    if lesson.group not in _KEYS:
        _KEYS[lesson.group] = tuple(key_of(run.spec) for run in lesson.runs)
    return _KEYS[lesson.group]


def whatif_spec(lesson: Lesson, option: str) -> Any:
    """The run the class voted for: the what-if role's first run with its mapping or protocol replaced (by a
    proposed table: mapping "table" with its rows, in the discipline's symbol order, so one table is one run)."""
    whatif = lesson.whatif
    if whatif is None:
        raise LessonError(f"lesson {lesson.name!r} has no what-if step")
    spec = lesson.runs_of(whatif.role)[0].spec
    if whatif.kind == "mapping" and proposals.is_table(option):
        rows = proposals.table_rows(lesson, option)
        return make_spec(**{**spec.to_dict(), "mapping": "table", "mapping_table": rows})
    if option not in whatif.options:
        raise LessonError(f"{option!r} is none of the what-if's options ({', '.join(whatif.options)})")
    if whatif.kind == "mapping":
        return make_spec(**{**spec.to_dict(), "mapping": option})
    return make_spec(**{**spec.to_dict(), "protocol": option, "protocol_params": {}})


def whatif_role(lesson: Lesson, option: str) -> str:
    what = "mapping" if lesson.whatif and lesson.whatif.kind == "mapping" else "protocol"
    return f"{lesson.whatif.role}, {what} {option}" if lesson.whatif else option


def records(store: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: store.get(key) for key in keys}


def results(store: Any, keys: tuple[str, ...]) -> dict[str, RunRecord | None]:
    """The finished results of ``keys`` (None where a run has none yet)."""
    out: dict[str, RunRecord | None] = {}
    for key in keys:
        try:
            out[key] = run_results.result(store, key)
        except Exception:  # a half-written or foreign record must not stop a lesson
            out[key] = None
    return out


def ended(store: Any, keys: tuple[str, ...]) -> bool:
    return all((r := store.get(k)) is not None and r.status in TERMINAL for k in keys)


def advance(lesson: Lesson, executor: Any, *, priority: str = "interactive") -> int:
    """Submit the stages whose earlier stages have ended; the number of jobs submitted (finished ones are served
    from the store and not submitted again)."""
    store, submitted = executor.store, 0
    keys = dict(zip(lesson.runs, lesson_keys(lesson)))
    for stage in lesson.stages:
        missing = [run for run in stage if store.get(keys[run]) is None]
        if missing:
            # the executor submits in its requester's name (a page's AskingExecutor: the browser asking)
            executor.submit_group(lesson.group, [run.spec for run in missing], priority=priority)
            submitted += len(missing)
        if not ended(store, tuple(keys[run] for run in stage)):
            break
    return submitted


def submit_whatif(lesson: Lesson, option: str, executor: Any) -> str:
    spec = whatif_spec(lesson, option)
    key = key_of(spec)
    if executor.store.get(key) is None:
        executor.submit_group(f"{lesson.group}:whatif", [spec], priority="interactive")
    return key


def with_role(lesson: Lesson, role: str, spec: Any) -> Lesson:
    """``lesson`` with one more run (the what-if's), for measuring it beside the others."""
    return replace(lesson, runs=lesson.runs + (LessonRun(role, spec),))
