"""Archive and move: finished jobs into one file and into another lab, verified whole before anything is
written. No engine, no torch: runs are finished by hand with real result records and small real files."""

from __future__ import annotations

import contextlib
import dataclasses
import tarfile
from pathlib import Path
from typing import Iterator

import pandas as pd
import pytest

from labcore.archive import ArchiveDamaged, export, import_archive, verify
from labcore.cli.main import main as cli_main
from labcore.results.compare import sweep_table
from labcore.engine import run_results
from labcore.jobs import new_job
from labcore.results.record import RunRecord
from labcore.runspec import make_spec
from labcore.store import NewJob, Store
from labcore.store.selection import Selection

SMALL = {"n_train": 64, "n_validation": 32, "n_test": 32}


def finish(store: Store, job: NewJob, accuracy: float, *, group: str = "pair") -> str:
    key = store.submit(job, group=group).key
    claim = store.claim()
    claim.workdir.mkdir(parents=True, exist_ok=True)
    (claim.workdir / "best.safetensors").write_bytes(b"w" * 5000)
    (claim.workdir / "mapping.json").write_text(f'{{"for": "{key}"}}')
    store.append_events(key, [{"type": "step", "step": 1, "loss": 0.9}], attempt=claim.attempt)
    store.append_events(key, [{"type": "eval", "step": 1, "metric": accuracy}], attempt=claim.attempt)
    result = RunRecord(key=key, spec=claim.spec, status="done", metric="accuracy", test={"accuracy": accuracy},
                       validation={"accuracy": accuracy}, baseline={"majority": 0.5}, best_step=1, steps_done=2,
                       val_curve=[[1, accuracy]], wall_time_s=3.0)
    store.finish(key, claim.attempt, "done", result=result.to_dict())
    return key


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A lab with four finished runs in a group (one on an uploaded data set), and one queued job."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache-a"))
    upload = tmp_path / "cache-a" / "uploads" / "genes"
    upload.mkdir(parents=True)
    (upload / "manifest.json").write_text('{"kind": "tokens"}')
    (upload / "data.csv").write_text("sequence,label\nACGT,0\n")
    store = Store(tmp_path / "a")
    keys = [finish(store, new_job(make_spec(discipline="bits-xor", discipline_params=SMALL, init=init, seed=seed)),
                   0.6 + 0.1 * seed + (0.2 if init == "pretrained" else 0))
            for init in ("pretrained", "random") for seed in (0, 1)]
    plain = new_job(make_spec(discipline="bits-xor", discipline_params=SMALL, seed=7))
    uploaded = dataclasses.replace(plain, key="u" * 20, spec=dict(plain.spec, discipline="upload:genes"))
    keys.append(finish(store, uploaded, 0.7))
    store.submit(new_job(make_spec(discipline="bits-xor", discipline_params=SMALL, seed=9)), group="pair")
    yield store, keys
    store.close()


@contextlib.contextmanager
def other_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "b") -> Iterator[Store]:
    """An empty lab to import into: its own cache (uploads, models) and store."""
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / f"cache-{name}"))
    target = Store(tmp_path / name)
    try:
        yield target
    finally:
        target.close()


def change_byte(archive: Path, inside: bytes, at: int) -> None:
    """Flip one bit of ``archive``, ``at`` bytes into the first place it holds ``inside``."""
    data = bytearray(archive.read_bytes())
    data[data.index(inside) + at] ^= 0x01
    archive.write_bytes(bytes(data))


def table(store: Store, keys) -> pd.DataFrame:
    return sweep_table([run_results.result(store, k) for k in keys])


def test_a_round_trip_into_an_empty_lab_gives_the_same_compare_table(lab, tmp_path, monkeypatch):
    source, keys = lab
    archive = tmp_path / "term.tar.gz"
    done = export(source, archive, Selection(group="pair"))
    assert done.keys == tuple(keys) and done.uploads == ("genes",) and len(done.skipped) == 1
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache-b"))
    target = Store(tmp_path / "b")
    try:
        arrived = import_archive(target, archive)
        assert arrived.keys == tuple(keys) and arrived.uploads == ("genes",)
        pd.testing.assert_frame_equal(table(target, keys), table(source, keys))
        assert target.group("pair")["keys"] == keys
        for key in keys:
            assert target.events(key) == source.events(key) and target.get(key) == source.get(key)
            assert sorted(target.artifacts(key)) == ["mapping.json", "record.json"]  # weights on request only
        assert (tmp_path / "cache-b" / "uploads" / "genes" / "data.csv").read_text() == "sequence,label\nACGT,0\n"
        again = import_archive(target, archive)
        assert again.keys == () and again.existing == tuple(keys) and again.existing_uploads == ("genes",)
    finally:
        target.close()


def test_weights_travel_on_request_and_the_cli_says_what_it_skipped(lab, tmp_path, monkeypatch, capsys):
    source, keys = lab
    archive = tmp_path / "one.tar"
    assert cli_main(["store", "export", str(archive), "--keys", keys[0][:10], "--weights",
                     "--store", str(source.root)]) == 0
    assert "1 finished job(s)" in capsys.readouterr().out
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache-b"))
    assert cli_main(["store", "import", str(archive), "--store", str(tmp_path / "b")]) == 0
    assert cli_main(["store", "import", str(archive), "--store", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "imported 1 job(s)" in out and f"skipped 1 job(s) this lab already holds (same key, same result): " \
                                          f"{keys[0][:12]}" in out
    target = Store(tmp_path / "b")
    try:
        assert (target.workdir(keys[0]) / "best.safetensors").read_bytes() == b"w" * 5000
    finally:
        target.close()


@pytest.mark.parametrize("damage", ["a changed byte", "cut short"])
def test_a_damaged_archive_is_refused_whole(lab, tmp_path, monkeypatch, damage):
    source, keys = lab
    archive = tmp_path / "term.tar"
    export(source, archive)
    if damage == "a changed byte":
        change_byte(archive, f'{{"for": "{keys[-1]}"}}'.encode(), 3)  # inside the last run's mapping.json
    else:
        archive.write_bytes(archive.read_bytes()[:archive.stat().st_size * 2 // 3])
    with other_lab(tmp_path, monkeypatch) as target:
        with pytest.raises(ArchiveDamaged, match="damaged .*nothing of it was imported"):
            import_archive(target, archive)
        assert target.table.keys() == [] and target.groups() == []
        assert not (tmp_path / "cache-b" / "uploads").exists()
        assert not [p for p in (tmp_path / "b").iterdir() if p.name.startswith(".import-")]
        assert not (tmp_path / "b" / "runs").exists() or not any((tmp_path / "b" / "runs").iterdir())


def test_an_archive_lists_every_member_with_its_sha256(lab, tmp_path):
    source, keys = lab
    archive = tmp_path / "term.tar"
    export(source, archive)
    manifest = verify(archive)
    with tarfile.open(archive) as tar:
        names = [m.name for m in tar][1:]
    assert sorted(names) == sorted(manifest["members"])
    assert all(len(m["sha256"]) == 64 for m in manifest["members"].values())
    assert f"jobs/{keys[0]}/files/best.safetensors" not in names


def test_the_atlas_reads_the_same_after_a_round_trip(tmp_path, monkeypatch):
    """A finished atlas cell (two seeds a side) with its LogME estimate gives the same atlas table in an
    empty lab after export and import."""
    from labcore.recipes import atlas

    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache-a"))
    source = Store(tmp_path / "a")
    try:
        for init in atlas.SIDES:
            for seed in (0, 1):
                spec = make_spec(discipline="bits-xor", discipline_params=SMALL, init=init, seed=seed)
                finish(source, new_job(spec), 0.6 + 0.05 * seed + (0.2 if init == "pretrained" else 0))
        grid = dict(models=["minilm"], disciplines=["bits-xor", "listops"])
        cell = atlas.build_atlas(atlas.finished_runs(source), **grid).cell("minilm", "bits-xor")
        logme = source.submit(new_job(cell.logme_spec), group=atlas.LOGME_GROUP).key
        claim = source.claim()
        scores = {"minilm/pretrained": -0.4, "minilm/random seed 0": -0.9}
        source.finish(logme, claim.attempt, "done", result={"logme": scores})

        def atlas_of(store: Store) -> pd.DataFrame:
            built = atlas.build_atlas(atlas.finished_runs(store), **grid)
            return atlas.atlas_table(built.with_estimates(atlas.estimates_from_store(store, built.logme_specs())))

        before = atlas_of(source)
        assert not before.loc[0, "greyed"] and before.loc[0, "estimated_gain"] == pytest.approx(0.5)
        archive = tmp_path / "atlas.tar.gz"
        export(source, archive)
        with other_lab(tmp_path, monkeypatch) as target:
            import_archive(target, archive)
            pd.testing.assert_frame_equal(atlas_of(target), before)
    finally:
        source.close()


@pytest.mark.slow
def test_a_finished_recipe_reads_the_same_after_a_round_trip(tmp_path_factory, tmp_path, monkeypatch, fetched_assets):
    """A real tiny recipe (minutes on two cores): its report and its runs' Compare table survive export and
    import into an empty lab."""
    from recipe_store import finished_recipe

    from labcore.recipes import RECIPES
    from labcore.recipes.drive import results_of
    from labcore.recipes.export import to_text

    finished = finished_recipe("kao", tmp_path_factory)
    recipe, plan = RECIPES["kao"], finished.plan
    archive = tmp_path / "kao.tar.gz"
    done = export(finished.store, archive, Selection(recipe="kao"))
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "empty-cache"))
    target = Store(tmp_path / "empty-cache" / "store")
    try:
        assert import_archive(target, archive).keys == done.keys
        runs = [k for k in done.keys if finished.store.get(k).kind == "run"]
        pd.testing.assert_frame_equal(table(target, runs), table(finished.store, runs))
        before = to_text(recipe.report(plan, results_of(plan, finished.store)))
        assert to_text(recipe.report(plan, results_of(plan, target))) == before
    finally:
        target.close()
