"""Lessons: predict, then observe, then explain.

Alone, a user picks a lesson, commits to a prediction, runs it and sees the answer against their guess. In a class
the teacher (signed in with the passcode) opens a sitting and reads out its code; students join with the code
and a nickname and predict; the teacher's screen counts the predictions live; starting the runs locks them;
the reveal shows each student their own guess against the measured answer and the class its histogram with the
answer on it. A what-if vote can follow. Who a student is lives in the address (``?sitting=CODE&seat=TOKEN``), so
a refresh or a server restart finds their seat and prediction again.
"""

from __future__ import annotations

import secrets

import streamlit as st

from labcore.door import lessons
from labcore.door.lessons import LessonError, view, whatif_view
from pages import common, lesson_parts, lesson_teacher, state

common.through_router()


def _lab():
    return state.get_lab()


# ------------------------------------------------------------------------------------------------ the lobby
def _join_form() -> None:
    with st.form("lesson.join"):
        st.markdown("**Join a class**")
        code = st.text_input("Sitting code (on the teacher's screen)", max_chars=lessons.CODE_LENGTH)
        nickname = st.text_input("Your nickname", max_chars=lessons.MAX_NICKNAME)
        if st.form_submit_button("Join", type="primary"):
            try:
                token = lessons.join(_lab(), code, nickname)
            except LessonError as exc:
                st.error(str(exc))
                return
            state.set_qp(sitting=code.strip().upper(), seat=token)
            st.rerun()


def _start_alone(name: str) -> None:
    token = secrets.token_urlsafe(16)
    sitting = lessons.open_sitting(_lab(), lessons.get_lesson(name), solo=True, owner_token=token)
    lessons.join(_lab(), sitting.code, "you", token)
    state.set_qp(sitting=sitting.code, seat=token)


def _open_class(name: str) -> None:
    sitting = lessons.open_sitting(_lab(), lessons.get_lesson(name))
    state.set_qp(sitting=sitting.code, seat=None)


def lobby() -> None:
    st.title(":material/school: Lessons")
    st.markdown("Predict, then observe, then explain: commit to a guess before the result exists, run the few "
                "real runs that answer it, and see the answer against your guess, with an explanation written "
                "from the measured numbers.")
    if not state.is_teacher():
        _join_form()
    names = lessons.lesson_names()
    chosen = st.selectbox("Lesson", names, format_func=lambda n: lessons.get_lesson(n).title, key="lesson.pick")
    lesson = lessons.get_lesson(chosen)
    with st.container(border=True):
        lesson_parts.question_card(lesson)
        st.caption(f":material/description: {lesson.source} · {len(lesson.runs)} runs")
    cols = st.columns(2)
    cols[0].button("Start alone", key="lesson.solo", on_click=_start_alone, args=(chosen,),
                   help="You predict, run and see the answer yourself.")
    if state.is_teacher():
        cols[1].button("Open a class sitting", key="lesson.class", type="primary", on_click=_open_class,
                       args=(chosen,), help="Students join with its code and predict; you start the runs.")
        lesson_teacher.sittings_list()
    elif state.teacher_passcode() is not None:
        cols[1].caption("A class sitting is opened by the teacher (sign in under **Teacher** in the sidebar).")


# ----------------------------------------------------------------------------------------------- a sitting
# A class student's page watches the sitting from one small fragment, always at the same place on the page, so that
# its id is the same in every phase (an id is the function and its place). When the teacher moves the sitting on,
# the fragment sees it and reruns the page. But a busy Streamlit server can drop what a run sent: when a timer's
# request makes it start a new script runner before it has passed on the messages of the run that just ended, it
# discards them (6 to 28 of 100 students missed the reveal so). The server then holds the new page and the browser
# the old one, for good. So the fragment also draws the phase's headline on every tick (the lock, or the measured
# answer with the student's own guess against it): a page that missed a run still shows the phase it is in and the
# answer, on its next tick.
LAST_PHASE = "whatif-revealed"  # nothing follows it: the fragment need not tick


def _watch(code: str, token: str, phase: str, options: tuple[str, ...] = ()) -> None:
    """The fragment above; ``options``: during a vote, the ones shown (a table someone proposes reruns the page)."""
    every = None if phase == LAST_PHASE else common.REFRESH.sitting_s
    st.fragment(_headline, run_every=every)(code, token, phase, options)


def _headline(code: str, token: str, drawn: str, options: tuple[str, ...]) -> None:
    try:
        sitting = lessons.get_sitting(_lab(), code)
        seat = lessons.seat_of(_lab(), code, token)
    except LessonError:
        st.rerun()  # the sitting is gone: the page says so
    now = sitting.phase
    if now == drawn == "vote" and lessons.whatif_options(_lab(), code) != options:
        now = "new options"
    if now != drawn:
        st.rerun()
    if seat is None:
        return
    if sitting.phase == "running":
        _locked(seat)
    elif sitting.phase != "predict":
        lesson = lessons.get_lesson(sitting.lesson)
        lesson_parts.answer_lines(lesson, view(_lab(), lesson), seat.guess)


def _locked(seat) -> None:
    mine = f"**{lesson_parts.guess_text(seat.guess)}**" if seat.guess is not None else "none"
    st.info(f":material/lock: Predictions are locked; yours: {mine}. The runs are on; the answer comes at the reveal.")


def _predict(sitting, lesson, token: str, seat):
    """The guess widget and its button; the seat as it stands after this run (with a just-sent guess)."""
    guess = lesson_parts.guess_input(lesson, seat.guess, key=f"lesson.guess.{sitting.code}")
    if st.button("Submit my prediction", key="lesson.submit", type="primary", disabled=guess is None):
        try:
            seat = lessons.predict(_lab(), sitting.code, token, guess)
        except LessonError as exc:
            st.error(str(exc))
            return seat
    if seat.guess is not None:
        st.caption(f":material/lock_open: Your prediction: **{lesson_parts.guess_text(seat.guess)}** (you may change "
                   f"it until the runs start)")
    return seat


def student(sitting, lesson, token: str) -> None:
    seat = lessons.seat_of(_lab(), sitting.code, token)
    if seat is None:
        st.warning("This browser has no seat in this sitting: join with its code.")
        _join_form()
        return
    who = "alone" if sitting.solo else f"as **{seat.nickname}** · sitting {sitting.code}"
    st.caption(f":material/person: {who}")
    lesson_parts.question_card(lesson)
    if not sitting.solo:
        _class_student(sitting, lesson, token, seat)
        return
    if sitting.phase == "predict":
        seat = _predict(sitting, lesson, token, seat)
        lesson_teacher.start_button(sitting, lesson, solo=True, disabled=seat.guess is None)
        return
    if sitting.phase == "running":
        _locked(seat)
        lesson_teacher.running(sitting, lesson, solo=True)
        return
    lesson_parts.reveal(lesson, view(_lab(), lesson), [seat.guess] if seat.guess is not None else [], seat.guess,
                        show_class=False)
    if sitting.phase == "revealed":
        lesson_teacher.handout(sitting, lesson)
    if lesson.whatif is not None:
        lesson_teacher.whatif(sitting, lesson, solo=True)


def _class_student(sitting, lesson, token: str, seat) -> None:
    """A class student's page: the watch (with the phase's headline) first, then what the phase asks or shows."""
    options = lessons.whatif_options(_lab(), sitting.code) if sitting.phase == "vote" else ()
    _watch(sitting.code, token, sitting.phase, options)
    if sitting.phase == "predict":
        _predict(sitting, lesson, token, seat)
        return
    if sitting.phase == "running":
        return
    guesses = [g for g in lessons.guesses(_lab(), sitting.code) if g is not None]
    lesson_parts.figures(lesson, view(_lab(), lesson), guesses)
    if lesson.whatif is None:
        return
    if sitting.phase == "vote":
        _vote(sitting, lesson, token, seat, options)
    elif sitting.phase == "whatif-revealed":
        st.markdown(f"**What if: {sitting.whatif}**")
        lesson_parts.reveal(lesson, whatif_view(_lab(), lesson, sitting.whatif), [], show_class=False)
    elif sitting.phase == "whatif":
        st.info(f"The class chose **{sitting.whatif}**: it runs now; its answer comes at the reveal.")


def _vote(sitting, lesson, token: str, seat, options: tuple[str, ...]) -> None:
    st.markdown(f"**What if?** {lesson.whatif.text}")
    voting, proposing = st.columns([3, 2]) if lessons.takes_tables(lesson) else (st.container(), None)
    if proposing is not None:  # first, so a table proposed in this run is among the options below
        with proposing:
            lesson_parts.propose_table(lesson, lambda text: lessons.propose_table(_lab(), sitting.code, token, text))
        options = lessons.whatif_options(_lab(), sitting.code)
    with voting:
        choice = st.radio("Your vote", options, key="lesson.vote",
                          index=options.index(seat.vote) if seat.vote in options else None)
        if st.button("Vote", key="lesson.vote.btn", disabled=choice is None):
            lessons.vote(_lab(), sitting.code, token, choice)
            st.caption(f"Your vote: **{choice}**")


def sitting_page(code: str) -> None:
    try:
        sitting = lessons.get_sitting(_lab(), code)
        lesson = lessons.get_lesson(sitting.lesson)
    except LessonError as exc:
        st.error(str(exc))
        st.button("Back to the lessons", on_click=state.set_qp, kwargs={"sitting": None, "seat": None})
        return
    token = state.qp("seat") or ""
    owner = sitting.solo and token and lessons.seat_of_token(sitting.code, token) == sitting.owner
    if state.is_teacher() and not sitting.solo:
        lesson_teacher.teacher(sitting, lesson)
    elif sitting.solo and not owner:
        st.error("This lesson was started alone in another browser: only that browser can open it.")
    else:
        student(sitting, lesson, token)


code = state.qp("sitting")
if code:
    sitting_page(code)
else:
    lobby()
