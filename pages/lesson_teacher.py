"""The teacher's side of a lesson sitting (and a solo user's, who is their own teacher): the code, the live count
and histogram of predictions, starting the runs (which locks the predictions), the reveal, the what-if vote and
the handout."""

from __future__ import annotations

import streamlit as st

from labcore.door import lessons
from labcore.door.lessons import LessonError, handout_html, handout_pdf, prediction_figure, view, whatif_view
from labcore.errors import LabError
from pages import lesson_parts, state

LIVE_S = 1.0  # the teacher's histogram redraws this often while students predict


def _lab():
    return state.get_lab()


def sittings_list() -> None:
    """The sittings of this lab, to go back to one or delete it (with its predictions)."""
    held = [s for s in lessons.all_sittings(_lab()) if not s.solo]
    if not held:
        return
    st.markdown("**Class sittings in this lab**")
    for sitting in held[::-1][:10]:
        cols = st.columns([3, 1, 1])
        cols[0].caption(f"{sitting.code} · {sitting.lesson} · {sitting.phase} · "
                        f"{len(lessons.seats(_lab(), sitting.code))} students")
        cols[1].button("Open", key=f"lesson.open.{sitting.code}", on_click=state.set_qp,
                       kwargs={"sitting": sitting.code, "seat": None})
        cols[2].button("Delete", key=f"lesson.del.{sitting.code}", on_click=lessons.delete_sitting,
                       args=(_lab(), sitting.code), help="The sitting with every prediction and vote in it.")


def start_button(sitting, lesson, *, solo: bool = False, disabled: bool = False) -> None:
    label = "Run it" if solo else "Start the runs (locks the predictions)"
    if st.button(label, key="lesson.start", type="primary", disabled=disabled):
        lessons.set_phase(_lab(), sitting.code, "running")
        try:
            lessons.advance(state.get_executor(), lesson)
        except LabError as exc:
            st.error(f"Could not start the runs: {exc}")
        st.rerun()


def running(sitting, lesson, *, solo: bool = False) -> None:
    """The runs as they go (later stages submitted as earlier ones end); the reveal once all have ended (a solo
    user sees it at once)."""
    @st.fragment(run_every=2.0)
    def follow() -> None:
        try:
            lessons.advance(state.get_executor(), lesson)
        except LabError as exc:
            st.error(f"Could not submit the next runs: {exc}")
        now = view(_lab(), lesson)
        lesson_parts.progress(now)
        if now.ended:
            if solo:
                lessons.set_phase(_lab(), sitting.code, "revealed")
            st.rerun()
    now = view(_lab(), lesson)
    if now.ended and not solo:
        st.button("Reveal the answer", key="lesson.reveal", type="primary", on_click=lessons.set_phase,
                  args=(_lab(), sitting.code, "revealed"))
        lesson_parts.progress(now)
        return
    follow()


def _live_predictions(sitting, lesson) -> None:
    @st.fragment(run_every=LIVE_S)
    def live() -> None:
        guesses, joined = lessons.tally(_lab(), sitting.code)
        st.metric("Predictions", f"{len(guesses)} of {joined} students")
        st.plotly_chart(prediction_figure(lesson, guesses, title="Predictions so far"), key="lesson.live")
    live()


def teacher(sitting, lesson) -> None:
    st.markdown(f"## Sitting code: `{sitting.code}`")
    st.caption("Students open **Lessons**, type this code and a nickname. Their predictions stay theirs: only this "
               "screen counts them before the reveal, and without names.")
    lesson_parts.question_card(lesson)
    if sitting.phase == "predict":
        start_button(sitting, lesson)
        _live_predictions(sitting, lesson)
    elif sitting.phase == "running":
        guesses = lessons.guesses(_lab(), sitting.code)
        st.caption(f":material/lock: {len(guesses)} predictions locked.")
        running(sitting, lesson)
        st.plotly_chart(prediction_figure(lesson, guesses, title="Predictions (locked)"), key="lesson.locked")
    else:
        lesson_parts.reveal(lesson, view(_lab(), lesson), lessons.guesses(_lab(), sitting.code))
        handout(sitting, lesson)
        whatif(sitting, lesson)
    st.divider()
    cols = st.columns(2)
    cols[0].button("Back to the lessons", key="lesson.back", on_click=state.set_qp, kwargs={"sitting": None})
    cols[1].button("Delete this sitting", key="lesson.delete", on_click=_delete, args=(sitting.code,),
                   help="The sitting with every prediction and vote in it; its runs stay in the store.")


def handout(sitting, lesson) -> None:
    """The handout in one click: HTML at once, PDF printed by headless Chromium on request (a few seconds)."""
    measured = view(_lab(), lesson).measured
    if measured is None:
        return
    seats = [s for s in lessons.seats(_lab(), sitting.code) if s.guess is not None
             and s.guessed_at <= (sitting.locked_at or float("inf"))]
    names = [s.nickname for s in seats] if st.checkbox("Students' names in the handout", key="lesson.names") else None
    chosen = sitting.whatif if sitting.phase == "whatif-revealed" else ""
    page = handout_html(lesson, measured, [s.guess for s in seats], names, whatif=chosen,
                        whatif_measured=whatif_view(_lab(), lesson, chosen).measured if chosen else None)
    cols = st.columns(2)
    cols[0].download_button("Handout (HTML)", page, file_name=f"lesson-{lesson.name}.html", mime="text/html",
                            key="lesson.html")
    if cols[1].button("Make the PDF handout", key="lesson.pdf.make"):
        try:
            st.session_state["_lesson_pdf"] = handout_pdf(page)
        except LabError as exc:
            st.error(str(exc))
    if st.session_state.get("_lesson_pdf"):  # made on request: Chromium takes seconds
        cols[1].download_button("Handout (PDF)", st.session_state["_lesson_pdf"], file_name=f"lesson-{lesson.name}.pdf",
                                mime="application/pdf", key="lesson.pdf")


def _delete(code: str) -> None:
    lessons.delete_sitting(_lab(), code)
    state.set_qp(sitting=None, seat=None)


def whatif(sitting, lesson, *, solo: bool = False) -> None:
    """After the reveal: open the vote, run the winner (or the solo user's pick), reveal it beside its base run."""
    spec = lesson.whatif
    if spec is None:
        return
    st.markdown(f"#### What if? {spec.text}")
    if sitting.phase == "revealed":
        if solo:
            _propose(sitting, lesson)
            option = st.radio("Try", lessons.whatif_options(_lab(), sitting.code), key="lesson.whatif.pick")
            st.button("Run it", key="lesson.whatif.solo", on_click=_run_whatif, args=(sitting, lesson, option))
        else:
            st.button("Open the vote", key="lesson.vote.open", on_click=lessons.set_phase,
                      args=(_lab(), sitting.code, "vote"))
    elif sitting.phase == "vote":
        _propose(sitting, lesson)  # before the winner is read, so a table proposed in this run can win

        @st.fragment(run_every=LIVE_S)
        def tally() -> None:
            counts = lessons.votes(_lab(), sitting.code)
            st.bar_chart(counts, horizontal=True)
            st.caption(f"Leading: **{lessons.leader(counts)}** ({sum(counts.values())} votes)")
        tally()
        # The winner is read in the callback, at the press: the page outside the tally is not redrawn as votes
        # come in, so a winner read while drawing it would be the one leading when the vote opened.
        st.button("Queue the winner", key="lesson.vote.close", type="primary", on_click=_queue_winner,
                  args=(sitting, lesson), help="Reads the votes at the press; a tie goes to the first option.")
    elif sitting.phase == "whatif":
        _follow_whatif(sitting, lesson, solo)
    else:
        st.markdown(f"**{sitting.whatif}**")
        lesson_parts.reveal(lesson, whatif_view(_lab(), lesson, sitting.whatif), [], show_class=False)


def _propose(sitting, lesson) -> None:
    """The teacher's own mapping table (a solo user's), for a vote on a token mapping."""
    if lessons.takes_tables(lesson):
        lesson_parts.propose_table(lesson, lambda text: lessons.propose_table_as_teacher(_lab(), sitting.code, text))


def _follow_whatif(sitting, lesson, solo: bool) -> None:
    """The what-if run as it goes; its reveal once it has ended (a solo user's at once). An ended run (one the
    store had) gets its button in the page itself, as the lesson's own reveal does: only a run still going
    needs the ticking fragment, which redraws the page once the run has ended."""
    def reveal_now() -> None:
        lessons.set_phase(_lab(), sitting.code, "whatif-revealed")

    now = whatif_view(_lab(), lesson, sitting.whatif)
    if now.ended:
        lesson_parts.progress(now)
        if solo:
            reveal_now()
            st.rerun()
        st.button("Reveal the what-if", key="lesson.whatif.reveal", type="primary", on_click=reveal_now)
        return

    @st.fragment(run_every=2.0)
    def follow() -> None:
        now = whatif_view(_lab(), lesson, sitting.whatif)
        lesson_parts.progress(now)
        if now.ended:
            st.rerun()
    follow()


def _queue_winner(sitting, lesson) -> None:
    _run_whatif(sitting, lesson, lessons.vote_winner(_lab(), sitting.code))


def _run_whatif(sitting, lesson, option: str) -> None:
    if sitting.phase == "revealed" and not sitting.solo:
        return
    lessons.set_phase(_lab(), sitting.code, "whatif", whatif=option)
    try:
        lessons.submit_whatif(state.get_executor(), lesson, option)
    except (LabError, LessonError) as exc:
        st.session_state["lesson.error"] = str(exc)
