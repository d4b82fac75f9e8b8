"""A class's sittings and predictions: their own table in the store's folder, locked at the start, each
student's only theirs, kept across a restart, carried by store export and import, deleted with the sitting."""

from __future__ import annotations

import subprocess
import sys

import pytest

from labcore import archive
from labcore.lessons import catalogue, sittings
from labcore.lessons.model import LessonError
from labcore.results.record import RunRecord


def test_a_student_predicts_until_the_lock_and_not_after(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    ada = sittings.join(store.root, sitting.code, "Ada")
    bob = sittings.join(store.root, sitting.code.lower(), "Bob")  # codes are read aloud: any case
    sittings.predict(store.root, sitting.code, ada, 0.8)
    sittings.predict(store.root, sitting.code, ada, 0.85)  # a change of mind before the lock
    sittings.set_phase(store.root, sitting.code, "running")
    with pytest.raises(LessonError, match="predictions are locked"):
        sittings.predict(store.root, sitting.code, bob, 0.6)
    assert sittings.guesses(store.root, sitting.code) == [0.85]
    assert sittings.seat_of(store.root, sitting.code, bob).guess is None


def test_a_prediction_written_after_the_lock_does_not_count(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    ada = sittings.join(store.root, sitting.code, "Ada")
    sittings.predict(store.root, sitting.code, ada, 0.7)
    locked = sittings.set_phase(store.root, sitting.code, "running")
    seat = sittings.seat_of(store.root, sitting.code, ada)
    # a write that raced the teacher's press lands with a later time: it is left out, not counted
    path = store.root / sittings.FOLDER / sitting.code / "seats" / f"{seat.seat}.json"
    path.write_text(path.read_text().replace(str(seat.guessed_at), str(locked.locked_at + 1)))
    assert sittings.guesses(store.root, sitting.code) == []


def test_a_student_cannot_act_for_another_browser(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("bits"))
    ada = sittings.join(store.root, sitting.code, "Ada")
    with pytest.raises(LessonError, match="nickname 'ada' is taken"):
        sittings.join(store.root, sitting.code, "ada")  # another browser cannot take Ada's seat by her name
    assert sittings.join(store.root, sitting.code, "Ada", token=ada) == ada  # Ada's own browser comes back
    with pytest.raises(LessonError, match="no seat"):
        sittings.predict(store.root, sitting.code, "a-guessed-token", "random scores higher")
    eve = sittings.join(store.root, sitting.code, "Eve")
    sittings.predict(store.root, sitting.code, eve, "random scores higher")
    assert sittings.seat_of(store.root, sitting.code, ada).guess is None  # Eve's write went to Eve's seat only
    assert all(ada not in p.read_text() for p in (store.root / sittings.FOLDER).rglob("*.json"))  # no tokens kept


def test_a_guess_must_fit_the_question(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("kao"))
    token = sittings.join(store.root, sitting.code, "Ada")
    with pytest.raises(LessonError, match="put every one of"):
        sittings.predict(store.root, sitting.code, token, ["pretrained", "random"])
    sittings.predict(store.root, sitting.code, token, ["random", "re-emb", "pretrained"])
    with pytest.raises(LessonError, match="not a sitting code"):
        sittings.get(store.root, "../../etc")


def test_predictions_survive_a_restart(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    script = ("import sys; from labcore.lessons import sittings as s; t = s.join(sys.argv[1], sys.argv[2], 'Ada'); "
              "s.predict(sys.argv[1], sys.argv[2], t, 0.75); print(t)")
    token = subprocess.run([sys.executable, "-c", script, str(store.root), sitting.code], check=True,
                           capture_output=True, text=True).stdout.strip()
    assert sittings.seat_of(store.root, sitting.code, token).guess == 0.75  # read by another process
    assert sittings.guesses(store.root, sitting.code) == [0.75]


def test_sittings_travel_with_an_archive_and_go_with_their_deletion(store, tmp_path):
    from labcore.engine import run_results
    from labcore.store import Store

    run_results.put_result(store, RunRecord(key="a" * 20, spec={}, status="done", metric="accuracy",
                                            test={"accuracy": 0.9}))
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    token = sittings.join(store.root, sitting.code, "Ada")
    sittings.predict(store.root, sitting.code, token, 0.9)
    path = archive.export(store, tmp_path / "lab.tar.gz").path
    other = Store(tmp_path / "other")
    try:
        archive.import_archive(other, path)
        assert sittings.get(other.root, sitting.code).lesson == "dna"
        assert sittings.seat_of(other.root, sitting.code, token).guess == 0.9
    finally:
        other.close()
    sittings.delete(store.root, sitting.code)
    with pytest.raises(LessonError, match="no sitting"):
        sittings.get(store.root, sitting.code)
    assert not (store.root / sittings.FOLDER / sitting.code).exists()


def test_the_vote_counts_before_its_lock(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    ada, bob = (sittings.join(store.root, sitting.code, n) for n in ("Ada", "Bob"))
    with pytest.raises(LessonError, match="vote is not open"):
        sittings.vote(store.root, sitting.code, ada, "unused")
    sittings.set_phase(store.root, sitting.code, "vote")
    sittings.vote(store.root, sitting.code, ada, "unused")
    sittings.vote(store.root, sitting.code, bob, "shift")
    sittings.vote(store.root, sitting.code, bob, "unused")
    assert sittings.votes(store.root, sitting.code) == {"unused": 2, "letters": 0, "shift": 0}


TABLE = "table A:1012,C:1013,G:1014,T:1015"


def voting(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    tokens = [sittings.join(store.root, sitting.code, name) for name in ("Ada", "Bob", "Cy")]
    sittings.set_phase(store.root, sitting.code, "vote")
    return sitting, tokens


def test_a_proposed_table_becomes_one_option_of_the_vote(store):
    sitting, (ada, bob, cy) = voting(store)
    assert sittings.propose(store.root, sitting.code, ada, "T:1015, G:1014, C:1013, A:1012") == TABLE
    # the same table in the symbols' order is the same option, and costs Bob nothing: he may propose his own
    assert sittings.propose(store.root, sitting.code, bob, "A:1012,C:1013,G:1014,T:1015") == TABLE
    assert sittings.options(store.root, sitting.code) == ("unused", "letters", "shift", TABLE)
    sittings.propose(store.root, sitting.code, bob, "A:2000,C:2001,G:2002,T:2003")
    sittings.vote(store.root, sitting.code, cy, TABLE)
    sittings.vote(store.root, sitting.code, bob, TABLE)
    sittings.vote(store.root, sitting.code, ada, "unused")
    assert sittings.votes(store.root, sitting.code) == {"unused": 1, "letters": 0, "shift": 0, TABLE: 2,
                                                        "table A:2000,C:2001,G:2002,T:2003": 0}
    assert sittings.winner(store.root, sitting.code) == TABLE
    with pytest.raises(LessonError, match="one table per student"):
        sittings.propose(store.root, sitting.code, ada, "A:3000,C:3001,G:3002,T:3003")
    with pytest.raises(LessonError, match="none of the options"):
        sittings.vote(store.root, sitting.code, cy, "table A:3000,C:3001,G:3002,T:3003")


@pytest.mark.parametrize("text, message", [
    ("A:1012,C:1013,G:1014", "no id for 'T'; give every one of A, C, G, T an id"),
    ("A:1012,C:1013,G:1014,T:1015,U:1016", "names 'U', which dna-splice does not have; its symbols are A, C, G, T"),
    ("A=1012,C:1013,G:1014,T:1015", "'A=1012' is not SYMBOL:ID; write SYMBOL:ID for each symbol"),
    ("A:1012,A:1013,C:1014,G:1015,T:1016", "gives 'A' more than once"),
    ("A:1012,C:1012,G:1014,T:1015", "'A' and 'C' share an id \\(1012\\)"),
    ("", "the table is empty"),
])
def test_a_bad_table_is_refused_naming_the_problem_and_the_fix(store, text, message):
    sitting, (ada, *_) = voting(store)
    with pytest.raises(LessonError, match=message):
        sittings.propose(store.root, sitting.code, ada, text)
    assert sittings.options(store.root, sitting.code) == ("unused", "letters", "shift")
    assert sittings.propose(store.root, sitting.code, ada, TABLE) == TABLE  # a refused table uses up nothing


def test_a_table_is_checked_against_the_models_vocabulary(store, monkeypatch):
    from labcore.lessons import proposals
    from labcore.mapping import Vocab

    small = Vocab(tokens=tuple(f"w{i}" for i in range(1500)), special_ids=frozenset({0, 1}), name="small")
    monkeypatch.setattr(proposals, "_vocab", lambda model: small)
    sitting, (ada, *_) = voting(store)
    with pytest.raises(LessonError, match=r"ids outside \[0, 1500\): 'T' -> 1515; use ids below 1500"):
        sittings.propose(store.root, sitting.code, ada, "A:1012,C:1013,G:1014,T:1515")
    with pytest.raises(LessonError, match="land on special tokens: 'A' -> w1"):
        sittings.propose(store.root, sitting.code, ada, "A:1,C:1013,G:1014,T:1015")
    assert sittings.propose(store.root, sitting.code, ada, "A:1012,C:1013,G:1014,T:1015") == TABLE


def test_proposals_wait_for_the_vote_are_capped_and_the_teacher_may_add_one(store):
    sitting = sittings.open_sitting(store.root, catalogue.get("dna"))
    ada = sittings.join(store.root, sitting.code, "Ada")
    with pytest.raises(LessonError, match="while the vote is open"):
        sittings.propose(store.root, sitting.code, ada, TABLE)
    sittings.set_phase(store.root, sitting.code, "revealed")
    sittings.propose_as_teacher(store.root, sitting.code, "A:999,C:998,G:997,T:996")
    sittings.set_phase(store.root, sitting.code, "vote")
    tokens = [sittings.join(store.root, sitting.code, f"s{n}") for n in range(sittings.MAX_PROPOSALS)]
    for n, token in enumerate(tokens[:-1]):
        sittings.propose(store.root, sitting.code, token, f"A:{2000 + n},C:1013,G:1014,T:1015")
    with pytest.raises(LessonError, match=f"{sittings.MAX_PROPOSALS} proposed tables already"):
        sittings.propose(store.root, sitting.code, tokens[-1], "A:1,C:2,G:3,T:4")
    options = sittings.options(store.root, sitting.code)
    assert options[3] == "table A:999,C:998,G:997,T:996" and len(options) == 3 + sittings.MAX_PROPOSALS
    protocols = sittings.open_sitting(store.root, catalogue.get("orca")).code  # a vote on training protocols
    sittings.set_phase(store.root, protocols, "revealed")
    with pytest.raises(LessonError, match="takes no table"):
        sittings.propose_as_teacher(store.root, protocols, TABLE)


def test_proposals_survive_a_restart_and_travel_with_an_archive(store, tmp_path):
    from labcore.engine import run_results
    from labcore.store import Store

    run_results.put_result(store, RunRecord(key="a" * 20, spec={}, status="done", metric="accuracy",
                                            test={"accuracy": 0.9}))  # an archive holds at least one run

    sitting, (ada, bob, _) = voting(store)
    script = ("import sys; from labcore.lessons import sittings as s; "
              "print(s.propose(sys.argv[1], sys.argv[2], sys.argv[3], 'A:1012,C:1013,G:1014,T:1015'))")
    proposed = subprocess.run([sys.executable, "-c", script, str(store.root), sitting.code, ada], check=True,
                              capture_output=True, text=True).stdout.strip()
    assert proposed == TABLE
    assert sittings.options(store.root, sitting.code)[-1] == TABLE  # read from the seat's file by this process
    sittings.vote(store.root, sitting.code, bob, TABLE)
    path = archive.export(store, tmp_path / "lab.tar.gz").path
    other = Store(tmp_path / "other")
    try:
        archive.import_archive(other, path)
        assert sittings.votes(other.root, sitting.code)[TABLE] == 1
    finally:
        other.close()
