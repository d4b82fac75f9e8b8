"""MLM pretraining (tiny sizes, CPU, seconds): the loss falls, the result is a ``lab:`` backbone that loads
like any other and round-trips bit for bit, 50-substitute copies exactly the rows it should, a finished
run's body loads as ``run:<key>``, and the ``pretrain`` kind goes through a real worker and the cache."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from labcore import jobs
from labcore.errors import LabError
from labcore.models import INITS, load_backbone, made_here_names, model_folder
from labcore.pretrain import corpora
from labcore.pretrain.engine import iter_pretrain
from labcore.pretrain.mlm import CLS_ID, MASK_ID, SEP_ID, mask_tokens, substitute_rows
from labcore.pretrain.spec import PretrainSpec, resolve_pretrain
from test_events import assert_typed

REPO = Path(__file__).resolve().parent.parent
TINY = dict(size="tiny", batch_size=8, sequences=128, lr=3e-3, precision="fp32")


def _fresh(name: str) -> str:
    """``name``, its lab model folder removed: one left by an earlier session of the tests may hold another key."""
    from labcore.pretrain.export import lab_folder

    shutil.rmtree(lab_folder(name), ignore_errors=True)
    return name


def _pretrain(tmp_path: Path, **changes):
    spec = PretrainSpec(**{**TINY, **changes, "name": _fresh(changes["name"])})
    events = list(iter_pretrain(spec, key=jobs.key_of(spec), workdir=tmp_path / "job", threads=1))
    assert events[-1]["type"] == "result", events[-1]
    return events, events[-1]["record"]


def _same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert torch.equal(a[name], b[name]), name


# ---------------------------------------------------------------------------------- no asset needed


def test_masking_chooses_fifteen_percent_of_ordinary_positions_eighty_ten_ten():
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (64, 120))
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    mask = torch.ones_like(ids)
    mask[:8, 100:] = 0  # padding is never chosen
    replacements = torch.arange(5000, 6000)
    inputs, positions, targets = mask_tokens(ids, mask, replacements)
    chosen = torch.zeros(ids.numel(), dtype=torch.bool)
    chosen[positions] = True
    chosen = chosen.view_as(ids)
    assert not chosen[:, 0].any() and not chosen[:, -1].any() and not chosen[:8, 100:].any()
    assert abs(chosen.float().sum() / (mask.sum() - 2 * 64) - 0.15) < 0.01
    assert torch.equal(targets, ids.view(-1)[positions])
    new = inputs.view(-1)[positions]
    masked, swapped, kept = (new == MASK_ID), (new >= 5000) & (new < 6000), new == targets
    assert abs(masked.float().mean() - 0.8) < 0.03 and abs(swapped.float().mean() - 0.1) < 0.02
    assert abs(kept.float().mean() - 0.1) < 0.02
    assert torch.equal(inputs.view(-1)[~chosen.view(-1)], ids.view(-1)[~chosen.view(-1)])


@pytest.mark.parametrize("kernels", [False, True])
def test_the_last_block_for_the_masked_rows_only_gives_the_full_models_logits_and_gradients(kernels):
    from labcore.models.cpu_kernels import use_cpu_kernels
    from labcore.pretrain.mlm import build_masked_lm
    from labcore.pretrain.spec import SIZES

    model = build_masked_lm(SIZES["tiny"], 0).eval()  # eval: no dropout, so both paths see the same numbers
    if kernels:
        use_cpu_kernels(model.body)
    torch.manual_seed(3)
    ids = torch.randint(1000, 3000, (5, 30))
    mask = torch.ones_like(ids)
    mask[2, 20:] = 0
    ids = ids * mask
    inputs, positions, _ = mask_tokens(ids, mask, torch.arange(1000, 3000), prob=0.3)
    outputs, grads = [], []
    for rows_only in (True, False):
        model.zero_grad()
        model.rows_only = rows_only
        logits = model(inputs, mask, positions)
        (logits * torch.linspace(-1, 1, logits.shape[1])).sum().backward()
        outputs.append(logits.detach())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert torch.allclose(outputs[0], outputs[1], atol=1e-5)
    assert grads[0].keys() == grads[1].keys()
    scale = max(float(g.abs().max()) for g in grads[1].values())  # (a key bias's gradient is 0 up to rounding)
    for name, grad in grads[1].items():
        assert torch.allclose(grads[0][name], grad, rtol=1e-3, atol=1e-5 * scale), name


def test_substitute_copies_the_used_rows_in_turn_over_the_unused_ones_and_nothing_else():
    table = torch.randn(20, 4)
    before = table.clone()
    used, unused = torch.tensor([3, 5, 9]), torch.tensor([4, 6, 7, 8, 10, 11, 12])
    substitute_rows(table, used, unused)
    for j, row in enumerate(unused.tolist()):
        assert torch.equal(table[row], before[used[j % 3]])
    untouched = [i for i in range(20) if i not in unused.tolist()]
    assert torch.equal(table[untouched], before[untouched])


def test_specs_resolve_keyed_and_refuse_what_cannot_work():
    spec = resolve_pretrain(PretrainSpec(corpus="nested", steps=50))
    assert spec.name == "nested-cpu-50s-seed0" and resolve_pretrain(spec) == spec
    assert resolve_pretrain(PretrainSpec(tokens=32 * 107 * 10)).steps == 10
    assert jobs.key_of(PretrainSpec(steps=50)) == jobs.key_of(spec) != jobs.key_of(PretrainSpec(steps=51))
    job = jobs.new_job(PretrainSpec(steps=50))
    assert (job.kind, job.checkpoint) == ("pretrain", "resume.pt")
    with pytest.raises(LabError, match="valid names"):
        resolve_pretrain(PretrainSpec(corpus="klingon"))
    with pytest.raises(LabError, match="valid sizes"):
        resolve_pretrain(PretrainSpec(size="huge"))
    with pytest.raises(LabError, match="substitute needs"):
        resolve_pretrain(PretrainSpec(corpus="zipf", substitute=True))
    with pytest.raises(LabError, match="model name"):
        resolve_pretrain(PretrainSpec(name="../evil"))


def test_a_run_on_a_runs_body_needs_that_run():
    from labcore.runspec import make_spec

    spec = make_spec(model="run:" + "a" * 20, discipline="listops", protocol="frozen")
    assert jobs.new_job(spec).requires == ("a" * 20,)
    assert jobs.new_job(make_spec(model="tiny:bert", discipline="listops")).requires == ()


# ---------------------------------------------------------------------------------- MiniLM's vocabulary


@pytest.mark.integration
def test_mlm_loss_on_nested_falls_well_below_its_start_and_a_lab_model_loads_like_any_other(
        fetched_assets, tmp_path):
    events, record = _pretrain(tmp_path, corpus="nested", steps=40, name="test-nested")
    losses = [e["loss"] for e in events if e["type"] == "step"]
    start = float(np.mean(losses[:3]))
    assert start > 9.5  # ln(30,522) = 10.3: an untrained model guesses among all ids
    assert record["eval_loss"] < start - 2 and float(np.mean(losses[-5:])) < start - 2
    steps = [e for e in events if e["type"] == "step"]
    assert all(0.0 <= e["accuracy"] <= 1.0 and e["tokens_per_s"] > 0 for e in steps)
    assert_typed(events)
    assert record["name"] == "lab:test-nested" and record["steps"] == 40
    # FLOPs a token as the step computes them: below the analytic count, which assumes every row's full length
    from labcore.pretrain.engine import useful_flops_per_token

    analytic = useful_flops_per_token(record["spec"]["size"], record["tokens_seen"] / (40 * record["spec"]["batch_size"]))
    assert 0.5 * analytic < record["flops_per_token"] < analytic
    assert record["mfu"] == pytest.approx(record["tokens_per_s"] * record["flops_per_token"] / record["peak_flops"])
    assert "lab:test-nested" in made_here_names("lab")

    folder = model_folder("lab:test-nested")
    saved = load_file(str(folder / "model.safetensors"))
    model, tokenizer, info = load_backbone("lab:test-nested")
    assert (info.family, info.num_layers, info.hidden_size, info.max_positions) == ("roberta", 2, 64, 128)
    assert (info.cls_id, info.sep_id, info.pad_id, info.vocab_size) == (CLS_ID, SEP_ID, 0, corpora.VOCAB_SIZE)
    assert "nested" in info.description and tokenizer("the cat")["input_ids"][0] == CLS_ID
    _same_tensors({k: v for k, v in model.state_dict().items() if k in saved}, saved)
    for init in INITS.names():  # every init builds from it
        other, _, other_info = load_backbone("lab:test-nested", init, seed=1)
        assert other_info.init == init
    model.save_pretrained(str(tmp_path / "again"))
    again, _, _ = load_backbone(f"local:{tmp_path / 'again'}")
    _same_tensors(again.state_dict(), model.state_dict())  # save/load round trip, bit for bit

    with pytest.raises(LabError, match="already names another"):
        list(iter_pretrain(PretrainSpec(**{**TINY, "corpus": "zipf", "steps": 2, "name": "test-nested"}),
                           key="other", workdir=tmp_path / "other"))
    with pytest.raises(LabError, match="no lab model named 'absent'"):
        load_backbone("lab:absent")


@pytest.mark.integration
def test_fifty_substitute_writes_the_used_rows_over_the_unused_ones(fetched_assets, tmp_path):
    _, record = _pretrain(tmp_path, corpus="nested-50", steps=2, substitute=True, name="test-sub")
    table = load_file(str(model_folder("lab:test-sub") / "model.safetensors"))["embeddings.word_embeddings.weight"]
    used = corpora.CORPORA["nested-50"].tokens().ids
    unused = np.setdiff1d(corpora.sampleable_ids(), used)
    assert len(used) == 50 and len(unused) == len(corpora.sampleable_ids()) - 50
    expected = table[torch.from_numpy(used)][torch.arange(len(unused)) % 50]
    assert torch.equal(table[torch.from_numpy(unused)], expected)
    assert len(torch.unique(table[torch.from_numpy(corpora.sampleable_ids())], dim=0)) == 50


@pytest.mark.integration
def test_a_finished_runs_body_loads_as_run_key_with_its_trained_weights(fetched_assets, tmp_path):
    from labcore.pretrain.bodies import ensure_run_body, run_body_folder
    from labcore.engine.resolve import resolve_spec
    from labcore.engine.run import load_trained, run
    from labcore.runspec import make_spec
    from labcore.store import JobRecord

    spec = resolve_spec(make_spec(model="tiny:roberta", discipline="listops",
                                  discipline_params={"n_train": 64, "n_validation": 16, "n_test": 16,
                                                     "max_length": 30},
                                  max_steps=4, eval_every=2, precision="fp32", batch_size=16, protocol="full"))
    workdir = tmp_path / "run"
    assert run(spec, workdir=workdir).status == "done"
    record = JobRecord.from_dict({"key": spec.key, "status": "done", "spec": spec.to_dict()})
    shutil.rmtree(run_body_folder(spec.key), ignore_errors=True)  # left by an earlier session of the tests
    with pytest.raises(LabError, match="not written out yet"):
        load_backbone(f"run:{spec.key}")
    ensure_run_body(record, workdir)
    body, _, info = load_backbone(f"run:{spec.key}")
    assert info.family == "roberta" and f"run {spec.key}" in info.description
    trained = load_trained(spec, workdir).model
    rows = trained.adapter.rows
    table = body.get_input_embeddings().weight
    assert torch.equal(table[list(rows)], trained.adapter.embedding.weight)
    original, _, _ = load_backbone("tiny:roberta")
    others = [i for i in range(table.shape[0]) if i not in rows]
    assert torch.equal(table[others], original.get_input_embeddings().weight[others])
    trained_state = trained.backbone.state_dict()
    for name, tensor in body.state_dict().items():
        if name in trained_state:
            assert torch.equal(tensor, trained_state[name]), name
    assert not torch.equal(body.encoder.layer[0].attention.self.query.weight,
                           original.encoder.layer[0].attention.self.query.weight)  # it did train
    body.save_pretrained(str(tmp_path / "again"))
    again, _, _ = load_backbone(f"local:{tmp_path / 'again'}")
    _same_tensors(again.state_dict(), body.state_dict())


# ---------------------------------------------------------------------------------- through a real worker


@pytest.mark.integration
def test_the_pretrain_kind_runs_in_a_worker_and_is_served_from_the_cache_on_resubmit(
        fetched_assets, store, tmp_path):
    from labcore.execution.executor import LocalExecutor
    from labcore.store import ACTIVE
    from test_job_kinds import wait_for  # the job-kind tests' helper (tests/ is on the path under pytest)

    executor = LocalExecutor(store, autostart=False)
    spec = PretrainSpec(**{**TINY, "corpus": "flat", "steps": 6, "name": _fresh("test-worker")})
    first = executor.submit(spec)
    assert (first.outcome, first.kind) == ("queued", "pretrain")
    with open(tmp_path / "worker.log", "ab") as log:
        worker = subprocess.Popen([sys.executable, "-m", "labcore", "worker", "--store", str(store.root)],
                                  cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        wait_for("the pretraining to end", lambda: store.get(first.key).status not in ACTIVE, 240)
        assert store.get(first.key).status == "done", store.log(first.key)
        kinds = [e["type"] for e in store.events(first.key)]
        assert kinds.count("step") == 6 and "eval" in kinds
        result = executor.result(first.key)
        assert result["name"] == "lab:test-worker" and result["steps"] == 6
        again = executor.submit(spec)
        assert (again.key, again.outcome) == (first.key, "cached")
        load_backbone("lab:test-worker")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


@pytest.mark.integration
def test_a_stopped_pretraining_resumes_from_its_checkpoint_to_the_same_model(fetched_assets, tmp_path):
    spec = PretrainSpec(**{**TINY, "corpus": "zipf", "steps": 6, "name": "test-resume"})
    straight = list(iter_pretrain(spec, key="k", workdir=tmp_path / "a", threads=1))[-1]["record"]
    asked = {"n": 0}

    def stop_at_three() -> str | None:  # polled once a step
        asked["n"] += 1
        return "interrupted" if asked["n"] == 3 else None

    first = list(iter_pretrain(spec, key="k", workdir=tmp_path / "b", threads=1, should_stop=stop_at_three))
    assert first[-1]["status"] == "interrupted" and (tmp_path / "b" / "resume.pt").is_file()
    assert [e["step"] for e in first if e["type"] == "step"] == [1, 2, 3]
    second = list(iter_pretrain(spec, key="k", workdir=tmp_path / "b", threads=1, resume=True))
    assert [e["step"] for e in second if e["type"] == "step"] == [4, 5, 6]
    assert second[-1]["record"]["final_loss"] == straight["final_loss"]
    assert second[-1]["record"]["eval_loss"] == straight["eval_loss"]


@pytest.mark.integration
def test_an_embeddings_only_stage_trains_the_word_embeddings_and_head_and_leaves_the_body(fetched_assets,
                                                                                           tmp_path):
    _pretrain(tmp_path / "base", corpus="nested", steps=2, name="test-emb-base")
    spec = PretrainSpec(**{**TINY, "corpus": "zipf", "steps": 3, "start": "lab:test-emb-base",
                           "train": "embeddings", "size": "cpu"})
    resolved = resolve_pretrain(spec)
    assert resolved.size == "tiny" and resolved.name == _fresh("test-emb-base-then-zipf-tiny-3s-seed0-emb")
    events = list(iter_pretrain(spec, key=jobs.key_of(spec), workdir=tmp_path / "stage", threads=1))
    start = next(e for e in events if e["type"] == "start")
    assert start["params_trainable"] < start["params_total"]
    before = load_file(str(model_folder("lab:test-emb-base") / "model.safetensors"))
    after = load_file(str(model_folder(f"lab:{resolved.name}") / "model.safetensors"))
    table = "embeddings.word_embeddings.weight"
    assert not torch.equal(before[table], after[table])
    _same_tensors({k: v for k, v in before.items() if k != table}, {k: v for k, v in after.items() if k != table})
    with pytest.raises(LabError, match="name the model"):
        resolve_pretrain(PretrainSpec(train="embeddings"))
    with pytest.raises(LabError, match="not a finished lab model"):
        resolve_pretrain(PretrainSpec(start="lab:absent"))


def test_the_cli_queues_a_pretraining_and_names_a_bad_corpus(store, capsys):
    from labcore.cli.main import main

    assert main(["pretrain", "--corpus", "flat", "--size", "tiny", "--steps", "3", "--name", "cli-queued",
                 "--queue", "--store", str(store.root)]) == 0
    (job,) = store.jobs(kind="pretrain")
    assert (job.spec["corpus"], job.spec["steps"], job.spec["name"]) == ("flat", 3, "cli-queued")
    assert main(["pretrain", "--corpus", "klingon"]) == 2
    assert "unknown L1 corpus 'klingon'" in capsys.readouterr().err


def test_pretraining_steps_read_as_masked_accuracy_and_tokens_per_second():
    from labcore.events import curves_from_events, describe

    step = {"type": "step", "step": 3, "loss": 7.25, "lr": 1e-4, "samples_per_s": 20.0, "accuracy": 0.125,
            "tokens_per_s": 2140.0}
    assert describe(step) == "step 3  loss 7.2500  masked acc 0.125  lr 1.00e-04  2,140 tokens/s"
    curves = curves_from_events([step, {"type": "eval", "step": 3, "split": "validation", "value": 0.2,
                                        "loss": 7.0, "metric": "masked_accuracy"}])
    assert curves["train_accuracy"] == [(3, 0.125)] and curves["validation_masked_accuracy"] == [(3, 0.2)]
