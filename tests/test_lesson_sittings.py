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
