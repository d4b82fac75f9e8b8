"""The lab's lessons: every TOML file of ``labcore/lessons/library/``, checked once when first asked for.

A file's name orders the menu (``1-dna.toml`` first); its ``name`` field is what links and sittings use.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from labcore.lessons.load import load_file
from labcore.lessons.model import Lesson, LessonError

LIBRARY = Path(__file__).resolve().parent / "library"


@lru_cache(maxsize=1)
def _all() -> dict[str, Lesson]:
    out: dict[str, Lesson] = {}
    for path in sorted(LIBRARY.glob("*.toml")):
        lesson = load_file(path)
        if lesson.name in out:
            raise LessonError(f"{path.name}: the name {lesson.name!r} is taken by another lesson file")
        out[lesson.name] = lesson
    return out


def names() -> list[str]:
    return list(_all())


def get(name: str) -> Lesson:
    lessons = _all()
    if name not in lessons:
        raise LessonError(f"there is no lesson {name!r}; the lessons are {', '.join(lessons)}")
    return lessons[name]
