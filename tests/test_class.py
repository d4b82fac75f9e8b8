"""A class on one server, under AppTest: runs belong to whoever asked, a viewer's Cancel withdraws only their
own request after a confirmation, and the teacher's controls appear only with the passcode of
``.streamlit/secrets.toml``. No worker runs here: the store holds its workers, so the runs stay queued."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labcore.execution.executor import LocalExecutor
from labcore.runspec import make_spec
from labcore.store import open_store
from labcore.door.lab import Lab

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SMALL_BITS = {"n_train": 64, "n_validation": 32, "n_test": 32}


@pytest.fixture
def queued(tmp_path, monkeypatch):
    """A store with one run two students asked for (ann, then ben), and workers held so it stays queued."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    store = open_store()
    store.hold_workers("test")
    executor = LocalExecutor(store, autostart=False)
    spec = make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, max_steps=4)
    key = executor.submit(spec, who="ann").key
    executor.submit(spec, who="ben")
    return store, key


def runs_page(key: str, *, who: str, passcode: str | None = None, entered: str | None = None) -> AppTest:
    """The Runs page of ``key`` as session ``who`` sees it, after typing ``entered`` into the sidebar's
    passcode field on Home (AppTest runs a switched-to page on its own, without app.py's sidebar)."""
    at = AppTest.from_file(APP, default_timeout=120)
    if passcode is not None:
        at.secrets["teacher_passcode"] = passcode
    at.session_state["_requester"] = who
    at.query_params["run"] = key
    at.run()
    fields = [t for t in at.text_input if t.label == "Teacher passcode"]
    assert bool(fields) == (passcode is not None)  # the field exists only where a passcode is set
    if entered is not None:
        at = fields[0].input(entered).run()
        if entered != passcode:
            assert "That is not the passcode." in texts(at)
    return at.switch_page("pages/runs.py").run()


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [w.value for w in at.warning] + [s.value for s in at.success]
    parts += [c.value for c in at.caption] + [e.value for e in at.error]
    return "\n".join(str(p) for p in parts)


def button(at: AppTest, label: str):
    found = [b for b in at.button if b.label == label]
    assert found, (label, [b.label for b in at.button])
    return found[0]


def test_a_viewers_cancel_asks_first_then_withdraws_only_their_request(queued):
    store, key = queued
    at = runs_page(key, who="ben")
    assert not at.exception, [e.message for e in at.exception]
    assert "Started by ann · 2 waiting for it (you among them)" in texts(at)
    at = button(at, "Cancel").click().run()
    assert "Withdraw your request? 1 other still wait" in texts(at)
    assert store.get(key).requesters == ["ann", "ben"]  # nothing happens before the yes
    at = button(at, "Yes, cancel").click().run()
    assert "Your request is withdrawn; 1 other still waits for this run" in texts(at)
    record = store.get(key)
    assert (record.status, record.requesters) == ("queued", ["ann"])


def test_the_last_requesters_cancel_stops_the_run(queued):
    store, key = queued
    store.withdraw(key, "ben")
    at = runs_page(key, who="ann")
    at = button(at, "Cancel").click().run()
    assert "Nobody else waits for it" in texts(at)
    at = button(at, "Yes, cancel").click().run()
    assert "Cancelled: nobody else was waiting" in texts(at)
    assert store.get(key).status == "cancelled" and store.get(key).cancelled_by == "ann"


def test_teacher_controls_are_hidden_without_the_passcode(queued):
    store, key = queued
    teacher_only = ("Cancel for everyone", "Clear the queue…", "Start the workers", "Stop the workers…")
    for at in (runs_page(key, who="cat"),  # no passcode set: not even a field
               runs_page(key, who="cat", passcode="owl"),  # set, not entered
               runs_page(key, who="cat", passcode="owl", entered="wrong")):
        assert not at.exception, [e.message for e in at.exception]
        assert not [b for b in at.button if b.label in teacher_only]
        assert "Teacher controls" not in [e.label for e in at.expander]
        assert [b.label for b in at.button].count("Cancel") == 1  # the viewer's own cancel stays


def test_the_teacher_sees_the_controls_and_cancels_for_everyone(queued):
    store, key = queued
    at = runs_page(key, who="tess", passcode="owl", entered="owl")
    assert not at.exception, [e.message for e in at.exception]
    labels = [b.label for b in at.button]
    assert {"Cancel for everyone", "Clear the queue…", "Start the workers", "Stop the workers…"} <= set(labels)
    at = button(at, "Cancel for everyone").click().run()
    assert "Cancel this run for all 2 who asked for it?" in texts(at)
    at = button(at, "Yes, cancel for everyone").click().run()
    record = store.get(key)
    assert (record.status, record.cancelled_by, record.requesters) == ("cancelled", "teacher", [])
    assert "cancelled by the teacher" in texts(at)


def test_deleting_a_run_is_the_teachers_in_a_class_and_asks_first(queued):
    store, key = queued
    student = runs_page(key, who="cat", passcode="owl")
    assert button(student, "Delete…").disabled
    at = runs_page(key, who="tess", passcode="owl", entered="owl")
    at = button(at, "Delete…").click().run()
    assert "Delete for good? delete 1 job(s)" in texts(at) and store.get(key) is not None
    at = button(at, "Yes, delete").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert store.get(key) is None and key not in store.keys()
    assert "Deleted 1 job(s)" in texts(at) or "No runs yet" in "\n".join(i.value for i in at.info)


def test_the_teacher_measures_what_the_lab_holds_on_the_runs_page(queued):
    store, key = queued
    def disk_panel(at: AppTest) -> bool:
        return any("Disk: what the lab holds" in e.label for e in at.expander)

    assert not disk_panel(runs_page(key, who="cat", passcode="owl"))  # a student does not see it
    at = runs_page(key, who="tess", passcode="owl", entered="owl")
    assert disk_panel(at)
    at = button(at, "Measure").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "in 1 job folder(s); database" in texts(at)


def test_workers_the_teacher_stopped_stay_stopped_until_started(tmp_path):
    from labcore.store import Store

    store = Store(tmp_path / "store")
    try:
        store.hold_workers("teacher")
        assert LocalExecutor(store).ensure_workers() == []  # a submission or a page starts none
        assert store.workers_held()["who"] == "teacher"
        store.release_workers()
        assert store.workers_held() is None
    finally:
        store.close()


def test_live_curves_and_figures_are_built_once_per_cursor_for_every_session(tmp_path, monkeypatch):
    from pages import common, state

    store = open_store(tmp_path / "store")  # the one the lab below reads
    lab = Lab(store.root)
    try:
        key = "k1"
        store.append_events(key, [{"type": "step", "step": s, "loss": 1.0 / s, "t": s} for s in range(1, 6)])
        reads = []
        real = store.read_events
        monkeypatch.setattr(store, "read_events", lambda k, c=0: reads.append(c) or real(k, c))
        cache = state.StreamCache()
        first = cache.curves(lab, key)
        assert cache.curves(lab, key) is first  # a second viewer at the same cursor: the same lists
        assert reads == [0] and len(first[0]) == 5
        store.append_events(key, [{"type": "step", "step": 6, "loss": 0.1, "t": 6}])
        moved = cache.curves(lab, key)
        assert moved is not first and len(moved[0]) == 6 and reads == [0, 1]  # only the new chunk is read

        builds = []
        figures = common.FigureCache()
        for _ in range(3):  # three sessions asking for the same figure
            figures.get(("sig", 1), lambda: builds.append(1) or (common.views.loss_curves([]), []))
        assert builds == [1]
    finally:
        store.close()


def test_two_sessions_pressing_the_same_demo_share_its_runs_and_both_are_recorded(tmp_path, monkeypatch):
    from labcore.recipes import demos

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    store = open_store()
    store.hold_workers("test")  # no worker process: the runs stay queued
    index = demos.DEMOS.names().index("bits")
    for who in ("ann", "ben"):
        at = AppTest.from_file(APP, default_timeout=120)
        at.session_state["_requester"] = who
        at.run()
        at = [b for b in at.button if b.label == "▶ Run this demo"][index].click().run()
        assert not at.exception, [e.message for e in at.exception]
    records = store.jobs(group=demos.DEMOS["bits"].group)
    assert len(records) == 2 and {r.status for r in records} == {"queued"}
    assert all((r.started_by, r.requesters) == ("ann", ["ann", "ben"]) for r in records)


def test_the_eta_reads_only_the_current_attempts_first_and_last_step(tmp_path):
    from pages import state

    store = open_store(tmp_path / "store")  # the one the lab below reads
    lab = Lab(store.root)
    try:
        steps = [{"type": "step", "step": s, "t": 100.0 + s} for s in range(1, 50)]
        store.append_events("k", [{"type": "attempt", "attempt": 1}] + steps[:10] + [{"type": "attempt", "attempt": 2}])
        store.append_events("k", steps[20:40])
        cache = state.StreamCache()
        assert cache.pace(lab, "k", read=False) == []  # nothing read yet, and nothing read for it
        pace = cache.pace(lab, "k")
        assert pace == [steps[20], steps[39]]
        events = cache.read(lab, "k")
        full = state.progress("running", 40, 100, events, now=200.0)
        assert state.progress("running", 40, 100, pace, now=200.0) == full and full.eta_s == 60.0
    finally:
        store.close()


# ------------------------------------------------------------------------------------ the teacher's limits
@pytest.fixture
def held(tmp_path):
    """A store whose workers are held: what anyone queues stays queued."""
    from labcore.store import Store

    store = Store(tmp_path / "store")
    store.hold_workers("test")
    yield store
    store.close()


def asking(store, who: str, **limits):
    """``who``'s executor as the pages give it: a student's under the teacher's settings ``limits``, or with
    none, the teacher's own session (not limited)."""
    from labcore.classroom import ClassroomLimits
    from labcore.door.desk import Desk

    return Desk(LocalExecutor(store, autostart=False), who,
                ClassroomLimits.from_settings(limits) if limits else None)


def test_a_students_paper_budget_and_local_model_are_refused_naming_the_teachers_setting(held):
    from labcore.classroom import StudentLimit

    store = held
    student = asking(store, "ann", max_queued_per_student=2, max_job_minutes=1)
    with pytest.raises(StudentLimit, match="budget.*quick, not 'paper'.*student_budgets, \\[classroom\\] in "
                                           "\\.streamlit/secrets\\.toml"):
        student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, budget="paper"))
    with pytest.raises(StudentLimit, match="local: models \\('local:/srv/weights'\\).*student_local_models is off"):
        student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, model="local:/srv/weights"))
    with pytest.raises(StudentLimit, match="hub: models.*student_hub_models"):
        student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, model="hub:bert-base-uncased"))
    assert store.keys() == []  # nothing refused was queued
    specs = [make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, seed=i) for i in range(3)]
    with pytest.raises(StudentLimit, match="2 job\\(s\\) waiting.*this asks for 3.*max_queued_per_student"):
        student.submit_group("mine", specs)
    student.submit_group("mine", specs[:2])
    claim = store.claim()  # a student's job carries the teacher's time limit to whoever runs it
    assert 59 < claim.deadline - time.time() <= 60 and "max_job_minutes (1 min)" in claim.deadline_note
    teacher = asking(store, "tess")  # no limits: the teacher's session
    assert teacher.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, budget="paper")).outcome \
        == "queued"
    store.finish(claim.key, claim.attempt, "cancelled")


def test_a_students_resume_meets_the_same_limits_as_a_submission(held):
    from labcore.classroom import StudentLimit

    store = held
    student = asking(store, "ann", max_queued_per_student=1, max_job_minutes=1)
    teacher = asking(store, "tess")
    paper = teacher.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, budget="paper")).key
    teacher.cancel(paper)
    with pytest.raises(StudentLimit, match="budget.*quick, not 'paper'.*student_budgets"):
        student.resume(paper)  # the teacher's paper run stays the teacher's to resume
    assert store.get(paper).status == "cancelled"

    stopped = student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS)).key
    student.withdraw(stopped)
    waiting = student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, seed=1)).key
    with pytest.raises(StudentLimit, match="1 job\\(s\\) waiting.*you have 1; this asks for 1 more.*"
                                           "max_queued_per_student"):
        student.resume(stopped)
    assert store.get(stopped).status == "cancelled" and store.waiting_for("ann") == [waiting]
    student.withdraw(waiting)
    assert student.resume(stopped).outcome == "resumed"
    claim = store.claim()  # the resumed job carries the teacher's time limit too
    assert claim.key == stopped and "max_job_minutes (1 min)" in claim.deadline_note
    store.finish(claim.key, claim.attempt, "cancelled")


def test_a_job_past_its_requesters_time_limit_is_stopped_saying_who_stopped_it(tmp_path):
    from labcore.store import Store
    from labcore.execution.worker import Worker

    store = Store(tmp_path / "store")
    try:
        store.limit_requester("ann", max_job_s=0.01, note="the teacher's max_job_minutes (0.0002 min)")
        key = LocalExecutor(store, autostart=False).submit(
            make_spec(discipline="bits-xor", discipline_params=SMALL_BITS), who="ann").key
        claim = store.claim()
        time.sleep(0.05)
        assert Worker(store)._should_stop(claim) == "cancelled"
        assert store.get(key).cancelled_by == "the teacher's max_job_minutes (0.0002 min)"
        store.finish(key, claim.attempt, "cancelled")
    finally:
        store.close()


def test_the_teachers_settings_are_checked_by_name():
    from labcore.classroom import ClassroomLimits
    from labcore.errors import LabError

    with pytest.raises(LabError, match="no setting 'max_jobs'; its settings are: student_budgets"):
        ClassroomLimits.from_settings({"max_jobs": 3})
    with pytest.raises(LabError, match="student_budgets = 'paper' is not a list of names; for example "
                                       "student_budgets = \\[\"quick\"\\]"):
        ClassroomLimits.from_settings({"student_budgets": "paper"})
    limits = ClassroomLimits.from_settings({"student_budgets": ["quick", "standard"], "student_hub_models": True})
    assert limits.student_budgets == ("quick", "standard") and limits.student_hub_models


def test_five_wrong_passcodes_pause_the_sign_in_even_for_the_right_one(monkeypatch):
    from labcore.classroom import PasscodeGuard

    now = [0.0]
    guard = PasscodeGuard(attempts=5, pause_s=300, clock=lambda: now[0])
    assert [guard.failed("session:a", "address:1") for _ in range(4)] == [0.0] * 4
    assert guard.failed("session:a", "address:1") == 300
    assert guard.wait_s("session:b", "address:1") == 300  # a new session from the same address waits too
    now[0] = 301
    assert guard.wait_s("session:a", "address:1") == 0

    # on the page: five wrong tries, then the right passcode is refused while the pause lasts
    from pages.state import identity

    monkeypatch.setattr(identity, "_GUARDS", {})
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["teacher_passcode"] = "owl"
    at.session_state["_requester"] = "mallory"
    at.run()
    for attempt in range(5):
        field = [t for t in at.text_input if t.label == "Teacher passcode"][0]
        at = field.input(f"guess-{attempt}").run()
    assert "sign-in is paused for 300 s" in texts(at)
    at = [t for t in at.text_input if t.label == "Teacher passcode"][0].input("owl").run()
    assert "sign-in is paused" in texts(at) and "Sign out" not in [b.label for b in at.button]


def test_a_large_group_is_shown_a_page_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    store = open_store()
    store.hold_workers("test")
    specs = [make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, seed=i) for i in range(60)]
    keys = [s.key for s in LocalExecutor(store, autostart=False).submit_group("sweep-60", specs)]
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["group"] = "sweep-60"
    at.run()
    at = at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "Runs 1-25 of 60" in texts(at)
    assert [b.label for b in at.button].count("Cancel") == 25  # one per run of the page
    at = at.number_input[0].set_value(3).run()
    assert "Runs 51-60 of 60" in texts(at) and [b.label for b in at.button].count("Cancel") == 10
    shown = "\n".join(str(e.label) for e in at.expander)
    assert store.get(keys[59]).label in shown and store.get(keys[0]).label not in shown


def test_a_student_over_the_disk_quota_is_refused_new_jobs(held):
    from labcore.classroom import StudentLimit

    store = held
    student = asking(store, "ann", max_disk_mb_per_student=1)
    key = student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS)).key
    claim = store.claim()
    claim.workdir.mkdir(parents=True)
    (claim.workdir / "best.safetensors").write_bytes(b"w" * 2**20)
    store.finish(key, claim.attempt, "done", result={"key": key, "status": "done", "spec": claim.spec})
    with pytest.raises(StudentLimit, match="your jobs hold 1 MB.*max_disk_mb_per_student = 1"):
        student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS, seed=1))
    assert student.submit(make_spec(discipline="bits-xor", discipline_params=SMALL_BITS)).outcome == "cached"


def test_the_status_line_is_read_less_often_where_reading_the_store_costs_more(tmp_path, monkeypatch):
    from pages.state import summary

    store = open_store(tmp_path / "store")  # the one the lab below reads
    lab = Lab(store.root)
    clock, reads = [100.0], []
    real_counts = store.status_counts

    def slow_counts(*args, **options):  # a large store: every reading of all statuses takes half a second
        reads.append(clock[0])
        clock[0] += 0.5
        return real_counts(*args, **options)

    monkeypatch.setattr(summary.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(store, "status_counts", slow_counts)
    monkeypatch.setattr(summary, "_SUMMARIES", {})
    try:
        summary.worker_summary(lab)
        clock[0] = 104.0  # within ten times the reading's cost: served as read
        summary.worker_summary(lab)
        clock[0] = 106.0
        summary.worker_summary(lab)
        assert reads == [100.0, 106.0]
    finally:
        store.close()
