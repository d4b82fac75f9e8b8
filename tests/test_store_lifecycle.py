"""A lab that lives all term: deleting jobs with their dependents named first. No engine, no torch: jobs are
claimed and finished by hand with small results, and their folders hold small real files."""

from __future__ import annotations

import threading

import pytest

from labcore.cli.main import main as cli_main
from labcore.errors import LabError
from labcore.jobs import new_job
from labcore.jobs.analyses import ModelRef, SimilaritySpec
from labcore.runspec import make_spec
from labcore.store.delete import delete, delete_selected, plan_delete
from labcore.store.selection import Selection

RECIPE_GROUP = "recipe:kao:quick:seeds=0"


def run_spec(seed: int = 0, **changes):
    return make_spec(discipline="bits-xor", discipline_params={"n_train": 64, "n_validation": 32, "n_test": 32},
                     seed=seed, **changes)


def finished(store, spec, *, group: str | None = None, files: dict[str, bytes] | None = None) -> str:
    """Submit, claim and finish a job, with a step event and the files it 'wrote'."""
    key = store.submit(new_job(spec), group=group).key
    claim = store.claim()
    assert claim is not None and claim.key == key
    for name, data in (files or {"best.safetensors": b"w" * 4096}).items():
        (claim.workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (claim.workdir / name).write_bytes(data)
    store.append_events(key, [{"type": "step", "step": 1, "loss": 0.5}], attempt=claim.attempt)
    store.finish(key, claim.attempt, "done", result={"key": key, "status": "done", "spec": claim.spec,
                                                     "metric": "accuracy", "test": {"accuracy": 0.75}})
    return key


def snapshot(store, key: str) -> tuple:
    """Everything of a job a deletion must not touch: record, events, files and their bytes."""
    return (store.get(key), store.events(key),
            {name: path.read_bytes() for name, path in store.artifacts(key).items()})


@pytest.fixture
def lab(store):
    """A run with a run built on its body, an analysis of it and a recipe group listing it, beside others."""
    source = finished(store, run_spec(0), group=RECIPE_GROUP)
    other = finished(store, run_spec(1), group=RECIPE_GROUP)
    on_body = finished(store, run_spec(2, model=f"run:{source}"))
    analysis = finished(store, SimilaritySpec(models=(ModelRef(run=source), ModelRef()), discipline="bits-xor",
                                              examples=16), files={"result.json": b"{}"})
    return store, {"source": source, "other": other, "on_body": on_body, "analysis": analysis}


def test_delete_names_dependents_first_and_touches_nothing_else(lab):
    store, k = lab
    plan = plan_delete(store, Selection(keys=(k["source"][:10],)))
    assert plan.keys == (k["source"],) and plan.bytes >= 4096 and not plan.running
    named = {d.key or d.label for d in plan.dependents}
    assert named == {k["on_body"], k["analysis"], RECIPE_GROUP}
    text = "\n".join(plan.lines())
    assert k["on_body"][:12] in text and k["analysis"][:12] in text and RECIPE_GROUP in text
    assert store.get(k["source"]) is not None  # a plan deletes nothing

    before = {name: snapshot(store, key) for name, key in k.items() if name != "source"}
    folder = store.workdir(k["source"])
    delete(store, plan)
    assert store.get(k["source"]) is None and store.events(k["source"]) == [] and not folder.exists()
    assert k["source"] not in store.keys()
    assert store.group(RECIPE_GROUP)["keys"] == [k["other"]]
    assert {name: snapshot(store, key) for name, key in k.items() if name != "source"} == before
    assert store.submit(new_job(run_spec(0))).outcome == "queued"  # its key can run again


def test_deleting_a_group_keeps_jobs_another_group_lists_and_the_recipe_goes_whole(lab):
    store, k = lab
    store.submit_group("mine", [new_job(run_spec(1))])  # the recipe's other run is also in "mine"
    plan = plan_delete(store, Selection(recipe="kao"))
    assert plan.groups == (RECIPE_GROUP,) and plan.keys == (k["source"],)
    assert plan.kept == ((k["other"], "mine"),)
    delete(store, plan)
    assert RECIPE_GROUP not in store.groups() and store.get(k["other"]).status == "done"
    with pytest.raises(LabError, match="recipes with jobs here: \\(none\\)"):
        plan_delete(store, Selection(recipe="kao"))


def test_a_job_still_waiting_for_the_deleted_one_blocks_the_deletion(store):
    source = finished(store, run_spec(0))
    waiting = store.submit(new_job(run_spec(3, model=f"run:{source}"))).key
    with pytest.raises(LabError, match=f"{waiting[:12]} \\(queued\\).*cancel or delete those first"):
        delete_selected(store, [source])
    assert store.get(source).status == "done"
    delete_selected(store, [source, waiting])  # both together are fine
    assert store.keys() == []


def test_a_changed_store_refuses_the_confirmed_plan(store):
    source = finished(store, run_spec(0))
    plan = plan_delete(store, Selection(keys=(source,)))
    finished(store, run_spec(4, model=f"run:{source}"))  # a dependent appears after the plan was shown
    with pytest.raises(LabError, match="changed since this deletion was shown"):
        delete(store, plan)
    assert store.get(source) is not None


def test_a_running_job_is_cancelled_and_waited_for_before_it_goes(store):
    key = store.submit(new_job(run_spec(0))).key
    claim = store.claim()

    def worker():  # stops at its next "step" once the cancel flag is up, as the training loop does
        while not store.cancel_requested(key, claim.attempt):
            threading.Event().wait(0.02)
        store.finish(key, claim.attempt, "cancelled")

    thread = threading.Thread(target=worker)
    thread.start()
    plan = delete_selected(store, [key])
    thread.join(5)
    assert plan.running == (key,) and store.get(key) is None


def test_the_cli_shows_the_plan_and_deletes_only_with_yes(lab, capsys):
    store, k = lab
    root = str(store.root)
    assert cli_main(["delete", k["source"][:8], "--store", root]) == 1
    shown = capsys.readouterr().out
    assert "nothing was deleted: add --yes" in shown and k["on_body"][:12] in shown
    assert store.get(k["source"]) is not None
    assert cli_main(["delete", k["source"][:8], "--store", root, "--yes"]) == 0
    assert store.get(k["source"]) is None
    assert cli_main(["delete", "--group", "nope", "--store", root]) == 2
    assert "no sweep named 'nope'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------- disk
def test_a_finished_job_drops_its_resume_checkpoint_and_a_stopped_one_keeps_it(store):
    key = store.submit(new_job(run_spec(0))).key
    claim = store.claim()
    claim.workdir.mkdir(parents=True)
    (claim.workdir / "resume.pt").write_bytes(b"c" * 1000)
    store.finish(key, claim.attempt, "interrupted")
    assert (store.workdir(key) / "resume.pt").is_file()  # it can still be resumed from there
    store.resume(key)
    claim = store.claim()
    assert claim.resume
    (claim.workdir / "best.safetensors").write_bytes(b"w" * 100)
    store.finish(key, claim.attempt, "done", result={"key": key, "status": "done", "spec": claim.spec})
    assert sorted(store.artifacts(key)) == ["best.safetensors", "record.json"]


def test_du_shows_what_the_lab_holds_by_kind_group_and_requester(store, capsys):
    from labcore.store.usage import disk_usage

    ann = store.submit(new_job(run_spec(0)), group="sweep", who="ann").key
    claim = store.claim()
    claim.workdir.mkdir(parents=True)
    (claim.workdir / "best.safetensors").write_bytes(b"w" * 3 * 2**20)
    store.finish(ann, claim.attempt, "done", result={"key": ann, "status": "done", "spec": claim.spec})
    finished(store, SimilaritySpec(models=(ModelRef(run=ann), ModelRef()), discipline="bits-xor", examples=16),
             files={"result.json": b"x" * 2**20})
    (store.workdir(ann) / "resume.pt").write_bytes(b"c" * 2**20)  # left by an older version of the lab
    usage = disk_usage(store)
    record_bytes = sum((store.workdir(k) / "record.json").stat().st_size for k in store.keys())
    assert usage.jobs == 2 and usage.total == 5 * 2**20 + record_bytes and usage.stale == 2**20
    assert [(r.name, r.jobs) for r in usage.by_kind] == [("run", 1), ("similarity", 1)]
    assert [(r.name, r.jobs) for r in usage.by_group] == [("sweep", 1)]
    assert [(r.name, r.jobs) for r in usage.by_requester] == [("ann", 1), ("(command line)", 1)]
    assert cli_main(["store", "du", "--drop-stale", "--store", str(store.root)]) == 0
    shown = capsys.readouterr().out
    assert "freed 1.0 MiB" in shown and "by requester:" in shown and "ann" in shown
    assert not (store.workdir(ann) / "resume.pt").exists() and disk_usage(store).stale == 0


def test_resetting_a_class_clears_every_job_and_group(lab, capsys):
    store, k = lab
    assert cli_main(["delete", "--all", "--store", str(store.root)]) == 1  # shown, not done
    assert "delete 4 job(s)" in capsys.readouterr().out and len(store.keys()) == 4
    assert cli_main(["delete", "--all", "--yes", "--store", str(store.root)]) == 0
    assert store.keys() == [] and store.groups() == [] and not any(store.runs_dir.iterdir())
