"""The pieces of the Lessons page that teacher, student and solo views share: the question and its guess
widget, the runs' progress, and the reveal (a student's own guess against the measured answer, the class's
predictions with the answer drawn on them, the explanation)."""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from labcore.door.lessons import (Lesson, LessonError, LessonView, is_right, prediction_figure, result_figure,
                                  share_right, table_example)
from pages import common


def question_card(lesson: Lesson) -> None:
    st.markdown(f"### {lesson.title}")
    if lesson.background:
        st.markdown(lesson.background)
    st.markdown(f"**The question:** {lesson.question.text}")


def guess_input(lesson: Lesson, current: Any, key: str) -> Any:
    """The widget for the lesson's kind of guess, starting at ``current`` (the browser's last prediction)."""
    question = lesson.question
    if question.kind == "number":
        start = float(current) if current is not None else round((question.low + question.high) / 2, 2)
        return st.slider(question.unit or "Your prediction", min_value=float(question.low),
                         max_value=float(question.high), value=start, step=0.01, key=key)
    if question.kind == "choice":
        index = question.choices.index(current) if current in question.choices else None
        return st.radio("Your prediction", question.choices, index=index, key=key)
    # an order: pick the conditions one after another, highest first
    picked = st.multiselect("Your order, highest first (pick them one after another)", question.choices,
                            default=list(current) if current else [], key=key)
    return picked if len(picked) == len(question.choices) else None


def propose_table(lesson: Lesson, propose: Callable[[str], str]) -> None:
    """The "Propose a table" input of a mapping vote: ``propose`` checks the table and adds it to the options
    (its option), or says what is wrong with it."""
    example = table_example(lesson)
    text = st.text_input("Propose a table", key="lesson.table", placeholder=example,
                         help=f"Your own mapping: each symbol and the vocabulary id it is fed as, e.g. {example}. "
                              f"A valid table becomes an option of the vote for everyone.")
    if st.button("Propose", key="lesson.table.btn", disabled=not text.strip()):
        try:
            option = propose(text)
        except LessonError as exc:
            st.error(str(exc))
            return
        st.caption(f"**{option}** is one of the options.")


def guess_text(guess: Any) -> str:
    if isinstance(guess, (list, tuple)):
        return " > ".join(guess)
    return f"{guess:.2f}" if isinstance(guess, float) else str(guess)


def progress(lesson_view: LessonView) -> None:
    """One line per run: its condition and status."""
    total = len(lesson_view.statuses)
    st.progress(lesson_view.done / max(1, total), text=f"{lesson_view.done} of {total} runs finished")
    for role, status in lesson_view.statuses:
        icon = common.STATUS_ICONS.get(status, ":material/hourglass_empty:")
        st.caption(f"{icon} {role}: {status or 'waiting for an earlier run'}")


def reveal(lesson: Lesson, lesson_view: LessonView, guesses: list[Any], mine: Any = None,
           show_class: bool = True) -> None:
    """The answer: the student's own guess against it, the class's predictions with it drawn on, the runs'
    values with their intervals, and the explanation written from them."""
    if answer_lines(lesson, lesson_view, mine):
        figures(lesson, lesson_view, guesses, show_class)


def answer_lines(lesson: Lesson, lesson_view: LessonView, mine: Any = None) -> bool:
    """The measured answer with its interval, and the student's own guess against it (False: no answer)."""
    measured = lesson_view.measured
    if measured is None:
        st.warning("Some runs ended without a result, so there is no answer to reveal: retry them on **Runs**.")
        return False
    answer = measured.answer
    if measured.value is not None:  # a value or a gap: the number with its interval
        number = f"{measured.value:.2f} (95 % interval {measured.low:.2f} to {measured.high:.2f})"
        answer = number if lesson.question.kind == "number" else f"{answer}: {number}"
    st.success(f"**Measured answer:** {answer}")
    if mine is not None:
        verdict = "right" if is_right(lesson, measured, mine) else "not right"
        st.info(f"**Your prediction:** {guess_text(mine)} — {verdict}.")
    return True


def figures(lesson: Lesson, lesson_view: LessonView, guesses: list[Any], show_class: bool = True) -> None:
    """The reveal under its answer lines: the class's share right and predictions, the runs' values, the why."""
    measured = lesson_view.measured
    if measured is None:
        return
    if show_class and guesses:
        right, answered = share_right(lesson, measured, guesses)
        st.markdown(f"**The class:** {right} of {answered} predictions right ({right / answered:.0%}).")
        st.plotly_chart(_class_figure(repr((lesson.name, guesses, measured)), lesson, guesses, measured),
                        key=f"reveal-hist-{lesson_view.lesson.name}")
    st.plotly_chart(_result_figure(repr(measured), measured), key=f"reveal-bars-{lesson_view.lesson.name}")
    st.markdown(f"**Why:** {lesson_view.explanation}")


# A class's reveal draws the same two figures for every student (their own guess is in the line above them, not on
# the histogram), and building a plotly figure costs a tenth of a second or more on two cores: at the reveal a
# class of 100 would hold the server for many seconds. They are built once per distinct answer and class (the
# leading-underscore arguments are not hashed: the key is the text of what they draw).
@st.cache_resource(max_entries=64, show_spinner=False)
def _class_figure(key: str, _lesson: Lesson, _guesses: list[Any], _measured):
    return prediction_figure(_lesson, _guesses, _measured, title="The class's predictions")


@st.cache_resource(max_entries=64, show_spinner=False)
def _result_figure(key: str, _measured):
    return result_figure(_measured, title="What the runs measured (95 % intervals)")
