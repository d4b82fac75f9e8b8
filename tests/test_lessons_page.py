"""The Lessons page under AppTest: alone, one user predicts, runs and sees the answer; in a class the teacher
opens a sitting, students join with its code, predict (each only their own), the start locks the predictions,
and the reveal shows each student their guess against the measured answer. The runs' results are put in the
store before the start, as a lesson served from the store: the page must still hide them until the reveal."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labcore.engine import run_results
from labcore.lessons import catalogue, runs, sittings
from labcore.results.record import RunRecord
from labcore.store import open_store

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "lessons.py")
PASSCODE = "owl"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A lab whose store already holds the results of the dna and bits lessons; workers held (nothing trains)."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    store = open_store()
    store.hold_workers("test")
    for name, values in (("dna", (0.913, 0.551)), ("bits", (0.80, 0.50))):
        for key, value in zip(runs.lesson_keys(catalogue.get(name)), values):
            metric = "bit_accuracy" if name == "bits" else "accuracy"
            run_results.put_result(store, RunRecord(key=key, spec={}, status="done", metric=metric,
                                                    test={metric: value}, test_examples=400,
                                                    baseline={"majority": 0.52} if name == "dna" else {},
                                                    val_curve=[[20, value]], best_step=20, steps_done=20))
    return store


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [s.value for s in at.success] + [i.value for i in at.info]
    parts += [c.value for c in at.caption] + [e.value for e in at.error] + [w.value for w in at.warning]
    parts += [str(m.value) for m in at.metric]
    return "\n".join(str(p) for p in parts)


def qp(at: AppTest, name: str) -> str:
    value = at.query_params[name]
    return value if isinstance(value, str) else value[0]


def press(at: AppTest, label: str) -> AppTest:
    found = [b for b in at.button if b.label == label]
    assert found, (label, [b.label for b in at.button])
    return found[0].click().run()


def page(*, teacher: bool = False, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.secrets["teacher_passcode"] = PASSCODE
    if teacher:
        at.session_state["_teacher_code"] = PASSCODE
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def test_alone_one_predicts_runs_and_sees_the_answer_against_the_guess(lab):
    at = page()
    at.selectbox(key="lesson.pick").select("bits").run()
    at = press(at, "Start alone")
    code = qp(at, "sitting")
    assert "Measured answer" not in texts(at)  # the results are in the store already: still hidden
    at.radio[0].set_value("pretrained scores higher").run()
    at = press(at, "Submit my prediction")
    at = press(at, "Run it")
    assert sittings.get(lab.root, code).phase == "revealed"
    assert "Measured answer:** pretrained scores higher" in texts(at)
    assert "pretrained scores higher — right" in texts(at)


def test_a_class_predicts_locks_and_sees_the_reveal(lab):
    teacher = page(teacher=True)
    teacher.selectbox(key="lesson.pick").select("dna").run()
    teacher = press(teacher, "Open a class sitting")
    code = qp(teacher, "sitting")
    assert f"Sitting code: `{code}`" in texts(teacher)
    students = {}
    for name, guess in (("Ada", 0.9), ("Bob", 0.6), ("Cy", None)):
        at = page(params={"sitting": code})  # a link with the code: the join form
        at.text_input[0].input(code)
        at.text_input[1].input(name)
        at = press(at, "Join")
        assert qp(at, "seat")
        if guess is not None:
            at.slider[0].set_value(guess).run()
            at = press(at, "Submit my prediction")
            assert f"Your prediction: **{guess:.2f}**" in texts(at)
            assert "Measured answer" not in texts(at) and "0.91" not in texts(at)
        students[name] = at
    teacher.run()
    assert "2 of 3 students" in texts(teacher)
    teacher = press(teacher, "Start the runs (locks the predictions)")
    assert sittings.get(lab.root, code).phase == "running"
    cy = students["Cy"].run()
    assert "Predictions are locked" in texts(cy) and not cy.slider  # too late to predict
    teacher = press(teacher.run(), "Reveal the answer")
    assert "1 of 2 predictions right (50%)" in texts(teacher)
    ada = students["Ada"].run()
    assert "Your prediction:** 0.90 — right" in texts(ada) and "0.91" in texts(ada)
    # a refresh, or a server restart, is a new session: the address finds Ada's seat and guess again
    again = page(params={"sitting": code, "seat": qp(ada, "seat")})
    assert "Your prediction:** 0.90 — right" in texts(again)


def test_a_wrong_code_says_so(lab):
    at = page(params={"sitting": "ZZZZZ"})
    assert "there is no sitting 'ZZZZZ'" in texts(at)


def test_a_students_compare_and_home_hide_a_lesson_until_its_reveal(lab):
    sitting = sittings.open_sitting(lab.root, catalogue.get("dna"))
    key = runs.lesson_keys(catalogue.get("dna"))[0]
    compare = str(Path(PAGE).parent / "compare.py")

    def student_compare() -> AppTest:
        at = AppTest.from_file(compare, default_timeout=60)
        at.secrets["teacher_passcode"] = PASSCODE
        at.query_params["runs"] = key[:12]
        return at.run()

    def teacher_compare() -> AppTest:
        at = AppTest.from_file(compare, default_timeout=60)
        at.secrets["teacher_passcode"] = PASSCODE
        at.session_state["_teacher_code"] = PASSCODE
        at.query_params["runs"] = key[:12]
        return at.run()

    def shown(at: AppTest) -> str:
        return "\n".join(frame.value.to_csv() for frame in at.dataframe)

    assert "0.913" not in shown(student_compare())  # the dna runs' results exist, but the class has not seen them
    assert "0.913" in shown(teacher_compare())
    sittings.set_phase(lab.root, sitting.code, "running")
    assert "0.913" not in shown(student_compare())
    sittings.set_phase(lab.root, sitting.code, "revealed")
    assert "0.913" in shown(student_compare())


def test_a_students_runs_page_hides_a_lesson_until_its_reveal(lab):
    sitting = sittings.open_sitting(lab.root, catalogue.get("dna"))
    key = runs.lesson_keys(catalogue.get("dna"))[0]

    def shown() -> str:
        at = AppTest.from_file(str(Path(PAGE).parent / "runs.py"), default_timeout=60)
        at.secrets["teacher_passcode"] = PASSCODE
        at.query_params["run"] = key
        at = at.run()
        return "\n".join(frame.value.to_csv() for frame in at.dataframe) + texts(at)

    assert key[:12] not in shown()
    sittings.set_phase(lab.root, sitting.code, "revealed")
    assert key[:12] in shown()


def test_the_class_votes_a_what_if_and_the_teacher_queues_the_winner(lab):
    from labcore.jobs import key_of

    lesson = catalogue.get("dna")
    sitting = sittings.open_sitting(lab.root, lesson)
    sittings.set_phase(lab.root, sitting.code, "running")
    sittings.set_phase(lab.root, sitting.code, "revealed")
    winner = key_of(runs.whatif_spec(lesson, "unused"))
    run_results.put_result(lab, RunRecord(key=winner, spec={}, status="done", metric="accuracy",
                                          test={"accuracy": 0.876}, baseline={"majority": 0.52}, test_examples=400,
                                          val_curve=[[20, 0.876]], best_step=20))
    teacher = press(page(teacher=True, params={"sitting": sitting.code}), "Open the vote")
    voters = []
    for name, option in (("Ada", "unused"), ("Bob", "unused"), ("Cy", "shift")):
        token = sittings.join(lab.root, sitting.code, name)
        at = page(params={"sitting": sitting.code, "seat": token})
        at.radio(key="lesson.vote").set_value(option).run()
        voters.append(press(at, "Vote"))
    assert sittings.votes(lab.root, sitting.code) == {"unused": 2, "letters": 0, "shift": 1}
    assert "Leading: **unused** (3 votes)" in texts(teacher.run())
    teacher = press(teacher, "Queue the winner")
    assert sittings.get(lab.root, sitting.code).phase == "whatif"
    assert "mapping unused 0.88" not in texts(voters[0].run())  # found in the store, but not revealed yet
    teacher = press(teacher.run(), "Reveal the what-if")
    shown = texts(voters[0].run())
    assert "mapping unused 0.88" in shown, shown


def test_a_students_run_pickers_leave_out_a_lesson_until_its_reveal(lab):
    sitting = sittings.open_sitting(lab.root, catalogue.get("dna"))
    key = runs.lesson_keys(catalogue.get("dna"))[0]

    def offered() -> list[str]:
        at = AppTest.from_file(str(Path(PAGE).parent / "attention.py"), default_timeout=60)
        at.secrets["teacher_passcode"] = PASSCODE
        at.query_params["run"] = key
        at = at.run()
        return [option for box in at.selectbox for option in box.options]

    assert not any(key[:8] in option for option in offered())
    sittings.set_phase(lab.root, sitting.code, "revealed")
    assert any(key[:8] in option for option in offered())


def test_a_students_atlas_and_analysis_leave_out_a_lesson_until_its_reveal(tmp_path, monkeypatch):
    """The atlas draws a cell from the lesson's runs and the Analysis page offers them as models: neither may
    show a student the runs before the reveal. The runs carry their real specs here, as the atlas reads them."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    store = open_store()
    store.hold_workers("test")
    lesson = catalogue.get("dna")
    key = runs.lesson_keys(lesson)[0]
    for run, run_key, value in zip(lesson.runs, runs.lesson_keys(lesson), (0.913, 0.551)):
        run_results.put_result(store, RunRecord(key=run_key, spec=run.spec.to_dict(), status="done",
                                                metric="accuracy", test={"accuracy": value}, test_examples=400,
                                                baseline={"majority": 0.52}, val_curve=[[20, value]], best_step=20,
                                                steps_done=20))
    sitting = sittings.open_sitting(store.root, lesson)

    def shown(name: str) -> str:
        at = AppTest.from_file(str(Path(PAGE).parent / f"{name}.py"), default_timeout=60)
        at.secrets["teacher_passcode"] = PASSCODE
        at = at.run()
        assert not at.exception, at.exception
        options = [option for box in list(at.selectbox) + list(at.multiselect) for option in box.options]
        return "\n".join([texts(at), *(frame.value.to_csv() for frame in at.dataframe), *map(str, options)])

    assert "0.913" not in shown("atlas") and f"run {key[:8]}" not in shown("analysis")
    sittings.set_phase(store.root, sitting.code, "revealed")
    assert "0.913" in shown("atlas") and f"run {key[:8]}" in shown("analysis")


def test_a_student_proposes_a_table_the_class_votes_for_it_and_the_teacher_queues_it(lab):
    from labcore.jobs import key_of

    lesson, table = catalogue.get("dna"), "table A:1012,C:1013,G:1014,T:1015"
    sitting = sittings.open_sitting(lab.root, lesson)
    sittings.set_phase(lab.root, sitting.code, "running")
    sittings.set_phase(lab.root, sitting.code, "revealed")
    teacher = press(page(teacher=True, params={"sitting": sitting.code}), "Open the vote")
    ada = page(params={"sitting": sitting.code, "seat": sittings.join(lab.root, sitting.code, "Ada")})
    ada.text_input(key="lesson.table").input("A:1012,C:1013,G:1014,X:1015").run()
    ada = press(ada, "Propose")
    assert "'X', which dna-splice does not have" in texts(ada)  # refused, saying why and what to write
    assert table not in ada.radio(key="lesson.vote").options
    ada.text_input(key="lesson.table").input("T:1015,G:1014,C:1013,A:1012").run()
    ada = press(ada, "Propose")
    assert f"{table}** is one of the options" in texts(ada)
    assert table in ada.radio(key="lesson.vote").options  # in the same run as the proposal
    for name in ("Bob", "Cy"):
        at = page(params={"sitting": sitting.code, "seat": sittings.join(lab.root, sitting.code, name)})
        assert list(at.radio(key="lesson.vote").options) == ["unused", "letters", "shift", table]
        at.radio(key="lesson.vote").set_value(table).run()
        press(at, "Vote")
    assert sittings.votes(lab.root, sitting.code)[table] == 2
    # The teacher's page as drawn when the vote opened, before any table or vote: the press reads the votes.
    teacher = press(teacher, "Queue the winner")
    assert sittings.get(lab.root, sitting.code).whatif == table
    queued = lab.get(key_of(runs.whatif_spec(lesson, table)))
    assert queued is not None and queued.spec["mapping_table"] == [["A", 1012], ["C", 1013], ["G", 1014], ["T", 1015]]


def test_a_students_recipes_page_leaves_out_a_lessons_runs_until_its_reveal(lab):
    # The tamkin lesson's two runs are two of the tamkin recipe's quick runs: its report would give the answer away.
    lesson = catalogue.get("tamkin")
    for key, value in zip(runs.lesson_keys(lesson), (0.8731, 0.6642)):
        run_results.put_result(lab, RunRecord(key=key, spec={}, status="done", metric="accuracy",
                                              test={"accuracy": value}, test_examples=400, val_curve=[[20, value]],
                                              best_step=20, steps_done=20))
    sitting = sittings.open_sitting(lab.root, lesson)

    def recipes_page(teacher: bool = False) -> str:
        at = AppTest.from_file(str(Path(PAGE).parent / "recipes.py"), default_timeout=60)
        at.secrets["teacher_passcode"] = PASSCODE
        if teacher:
            at.session_state["_teacher_code"] = PASSCODE
        at.query_params["recipe"] = "tamkin"
        at.query_params["budget"] = "quick"
        at = at.run()
        assert not at.exception, at.exception
        return texts(at) + "\n".join(frame.value.to_csv() for frame in at.dataframe)

    shown = recipes_page()
    assert "0.873" not in shown and "belong to a class lesson" in shown
    assert "0.873" in recipes_page(teacher=True)
    sittings.set_phase(lab.root, sitting.code, "revealed")
    assert "0.873" in recipes_page()
