"""Archives carry the models the lab made: a ``lab:`` pretraining and a ``run:`` body that archived runs name
travel with them (with the pretraining's own record), come back with the same files, and never overwrite a
different folder of the same name. No engine, no torch: jobs are finished by hand and the model folders are
written the way the lab installs them (:func:`labcore.models.install_folder`), with small real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labcore.archive import ArchiveDamaged, export, import_archive, verify
from labcore.archive.models import ModelFolderConflict
from labcore.cli.main import main as cli_main
from labcore.jobs import new_job
from labcore.models import install_folder, models_dir
from labcore.pretrain.spec import PretrainSpec
from labcore.runspec import make_spec
from labcore.store import Store
from labcore.store.selection import Selection

from test_archive import SMALL, change_byte, finish, other_lab


def made_model(folder: str, card: dict, weights: bytes = b"m" * 3000) -> Path:
    """A model folder as the lab installs one: built aside, stamped, renamed into place."""

    def build(target: Path) -> None:
        (target / "config.json").write_text('{"model_type": "roberta", "hidden_size": 64}')
        (target / "model.safetensors").write_bytes(weights)
        (target / "card.json").write_text(json.dumps(card))

    return Path(install_folder(folder, {"key": card.get("key")}, build))


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def made_here(tmp_path, monkeypatch):
    """A lab with a finished tiny pretraining (``lab:mini``), a run on it, a run and a run on that run's body
    (``run:KEY``), the last two in the group ``made-here``."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache-a"))
    store = Store(tmp_path / "a")
    pretraining = store.submit(new_job(PretrainSpec(corpus="flat", size="tiny", steps=2, name="mini"))).key
    claim = store.claim()
    store.finish(pretraining, claim.attempt, "done", result={"name": "lab:mini", "steps": 2, "key": pretraining})
    made_model("lab-mini", {"key": pretraining, "description": "pretrained in the lab"})
    on_mini = finish(store, new_job(make_spec(discipline="bits-xor", discipline_params=SMALL, model="lab:mini")),
                     0.8, group="made-here")
    source = finish(store, new_job(make_spec(discipline="bits-xor", discipline_params=SMALL, seed=3)), 0.7,
                    group="bodies")
    made_model(f"run-{source}", {"key": source, "source": "run"})
    on_body = finish(store, new_job(make_spec(discipline="bits-xor", discipline_params=SMALL,
                                              model=f"run:{source}", protocol="frozen")), 0.75, group="made-here")
    yield store, {"pretraining": pretraining, "on_mini": on_mini, "source": source, "on_body": on_body}
    store.close()


def test_the_models_jobs_name_and_the_pretraining_that_made_one_travel_and_come_back(made_here, tmp_path,
                                                                                      monkeypatch):
    source, keys = made_here
    sent = {name: files_of(models_dir() / name) for name in ("lab-mini", f"run-{keys['source']}")}
    archive = tmp_path / "made.tar.gz"
    done = export(source, archive, Selection(group="made-here"))
    assert done.models == ("lab:mini", f"run:{keys['source']}") and done.absent_models == ()
    assert set(done.keys) == set(keys.values())  # the pretraining and the body's run came along
    members = verify(archive)["members"]
    assert all(len(members[f"models/{name}/{file}"]["sha256"]) == 64 for name in sent for file in sent[name])

    with other_lab(tmp_path, monkeypatch) as target:
        arrived = import_archive(target, archive)
        assert arrived.models == done.models and arrived.existing_models == ()
        assert {name: files_of(models_dir() / name) for name in sent} == sent
        assert target.get(keys["pretraining"]) == source.get(keys["pretraining"])
        again = import_archive(target, archive)  # the same folders here: kept, nothing else changes
        assert again.models == () and again.existing_models == done.models


def test_a_different_model_of_the_same_name_is_never_overwritten(made_here, tmp_path, monkeypatch):
    source, keys = made_here
    archive = tmp_path / "made.tar"
    export(source, archive, Selection(keys=(keys["on_mini"],)))
    with other_lab(tmp_path, monkeypatch, "c") as target:
        theirs = made_model("lab-mini", {"key": "0" * 20, "description": "another lab's mini"}, weights=b"t" * 3000)
        before = files_of(theirs)
        with pytest.raises(ModelFolderConflict, match="different lab:mini in .*lab-mini; nothing of the archive "
                                                      "was imported.*move or rename it"):
            import_archive(target, archive)
        assert files_of(theirs) == before and target.table.keys() == []
        assert not [p for p in (tmp_path / "c").iterdir() if p.name.startswith(".import-")]


def test_a_changed_byte_in_a_carried_model_refuses_the_archive_whole(made_here, tmp_path, monkeypatch):
    source, keys = made_here
    archive = tmp_path / "made.tar"
    export(source, archive, Selection(keys=(keys["on_mini"],)))
    change_byte(archive, b"m" * 3000, 1500)  # inside lab:mini's weights
    with other_lab(tmp_path, monkeypatch) as target:
        with pytest.raises(ArchiveDamaged, match="models/lab-mini/model.safetensors does not match its sha256"):
            import_archive(target, archive)
        assert not (models_dir() / "lab-mini").exists() and target.table.keys() == []


def test_the_cli_names_the_models_it_carries_and_those_absent(made_here, tmp_path, capsys):
    source, keys = made_here
    (models_dir() / "lab-mini" / "config.json").unlink()  # no longer a whole model here
    assert cli_main(["store", "export", str(tmp_path / "one.tar"), "--keys", keys["on_mini"][:10],
                     "--store", str(source.root)]) == 0
    assert "not on this machine, so not in the archive: lab:mini" in capsys.readouterr().out
    assert verify(tmp_path / "one.tar")["models"] == []
