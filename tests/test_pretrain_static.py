"""The MLM step a CUDA graph can hold (tiny sizes, CPU, seconds): masking in fixed prediction slots chooses the
positions the dynamic masking chooses, the slots decode to the same logits, a pretraining on that step trains and
counts its masked accuracy, and the ``step`` field keys a pretraining as it keys a run."""

from __future__ import annotations

import math
import shutil

import pytest
import torch

from labcore import jobs
from labcore.jobs.pretrain import pretrain_key
from labcore.pretrain import mlm
from labcore.pretrain.engine import iter_pretrain
from labcore.pretrain.mlm import (CLS_ID, IGNORED, MASK_ID, SEP_ID, build_masked_lm, mask_tokens, mask_tokens_static,
                                  prediction_slots)
from labcore.pretrain.spec import SIZES, PretrainSpec, resolve_pretrain


def _batch(rows: int = 64, length: int = 120, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    ids = torch.randint(1000, 2000, (rows, length))
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    mask = torch.ones_like(ids)
    mask[:8, 100:] = 0
    return ids * mask, mask


def _chosen(positions: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    chosen = torch.zeros(shape.numel(), dtype=torch.bool)
    chosen[positions] = True
    return chosen.view(shape)


def test_static_masking_chooses_the_positions_the_dynamic_masking_chooses_in_fixed_slots():
    ids, mask = _batch()
    replacements = torch.arange(5000, 6000)
    _, positions, targets = mask_tokens(ids, mask, replacements, generator=torch.Generator().manual_seed(7))
    inputs, rows, slot_targets = mask_tokens_static(ids, mask, replacements, generator=torch.Generator().manual_seed(7))
    assert rows.shape == slot_targets.shape == (64, prediction_slots(120)) and prediction_slots(128) == 36
    taught = slot_targets != IGNORED
    flat = (rows + torch.arange(64).unsqueeze(1) * 120)[taught]
    assert torch.equal(flat.sort().values, positions)  # the same positions, each once
    assert torch.equal(slot_targets[taught].sort().values, targets.sort().values)
    assert torch.equal(slot_targets[taught], ids.view(-1)[flat])
    chosen = _chosen(positions, ids.shape)
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else corrupted, padding and specials included
    new = inputs.view(-1)[flat]
    masked, swapped = (new == MASK_ID), (new >= 5000) & (new < 6000)
    assert abs(masked.float().mean() - 0.8) < 0.03 and abs(swapped.float().mean() - 0.1) < 0.02


def test_a_sequence_with_more_chosen_positions_than_slots_keeps_its_first(monkeypatch):
    monkeypatch.setattr(mlm, "SLOT_SIGMAS", 0)  # slots = the expected count: about half the sequences overflow
    ids, mask = _batch()
    _, positions, _ = mask_tokens(ids, mask, torch.arange(5000, 6000), generator=torch.Generator().manual_seed(1))
    inputs, rows, targets = mask_tokens_static(ids, mask, torch.arange(5000, 6000),
                                               generator=torch.Generator().manual_seed(1))
    chosen = _chosen(positions, ids.shape)
    slots = prediction_slots(120)
    for sequence in range(64):
        wanted = chosen[sequence].nonzero().squeeze(1)[:slots]
        taught = rows[sequence][targets[sequence] != IGNORED]
        assert torch.equal(taught, wanted), sequence
        untaught = chosen[sequence].clone()
        untaught[wanted] = False
        assert torch.equal(inputs[sequence][untaught], ids[sequence][untaught])  # left as they were
    assert (chosen.sum(1) > slots).any()


def test_a_batch_with_nothing_drawn_still_teaches_its_first_ordinary_position():
    ids, mask = _batch(rows=2, length=6)
    inputs, rows, targets = mask_tokens_static(ids, mask, torch.arange(5000, 6000), prob=1e-9)
    taught = targets != IGNORED
    assert taught.sum() == 1 and rows[taught].tolist() == [1] and taught[0].any()


def test_decoding_fixed_slots_gives_the_logits_of_decoding_the_same_positions():
    model = build_masked_lm(SIZES["tiny"], 0).eval()  # eval: no dropout
    ids, mask = _batch(rows=5, length=30, seed=3)
    mask[2, 20:] = 0
    ids = ids * mask
    inputs, rows, targets = mask_tokens_static(ids, mask, torch.arange(1000, 3000), prob=0.3,
                                               generator=torch.Generator().manual_seed(2))
    taught = (targets != IGNORED).view(-1)
    flat = (rows + torch.arange(5).unsqueeze(1) * 30).view(-1)[taught]
    order = flat.argsort()
    for rows_only in (True, False):
        model.rows_only = rows_only
        slotted = model.forward_rows(inputs, mask, rows)[taught][order]
        assert torch.allclose(slotted, model(inputs, mask, flat[order]), atol=1e-5), rows_only


def test_a_pretraining_on_the_graph_ready_step_trains_and_reads_its_masked_accuracy(tmp_path):
    from labcore.pretrain.export import lab_folder

    shutil.rmtree(lab_folder("test-static-step"), ignore_errors=True)  # one an earlier session left may hold another key
    spec = PretrainSpec(size="tiny", batch_size=8, sequences=128, lr=3e-3, precision="fp32", steps=12,
                        corpus="nested", step="graphs", name="test-static-step")
    events = list(iter_pretrain(spec, key=jobs.key_of(spec), workdir=tmp_path / "job", threads=1))
    assert events[-1]["type"] == "result" and events[-1]["status"] == "done", events[-1]
    steps = [e for e in events if e["type"] == "step"]
    assert all(0 <= e["accuracy"] <= 1 for e in steps if not math.isnan(e["accuracy"])) and steps
    assert sum(not math.isnan(e["accuracy"]) for e in steps) == len(steps)
    losses = [e["loss"] for e in steps]
    assert max(losses[-3:]) < losses[0], losses


def test_the_step_keys_a_pretraining_as_it_keys_a_run(monkeypatch):
    monkeypatch.delenv("TRANSFERLAB_DEVICE", raising=False)
    monkeypatch.delenv("TRANSFERLAB_RUN_GPUS", raising=False)
    monkeypatch.setattr("labcore.machine.hardware.budget_device", lambda: "cpu")
    # pinned before the field existed: an eager pretraining keeps its key
    assert pretrain_key(resolve_pretrain(PretrainSpec())) == "ad09652e4ff572758693"
    tiny = PretrainSpec(corpus="nested", size="tiny", steps=7, seed=3)
    assert resolve_pretrain(tiny).step == "eager" and pretrain_key(resolve_pretrain(tiny)) == "bc94aeabc61799e7c551"
    graphs = resolve_pretrain(PretrainSpec(corpus="nested", size="tiny", steps=7, seed=3, step="graphs"))
    assert graphs.step == "graphs" and pretrain_key(graphs) != "bc94aeabc61799e7c551"
    monkeypatch.setattr("labcore.machine.hardware.budget_device", lambda: "cuda")
    assert resolve_pretrain(tiny).step == "graphs" and pretrain_key(resolve_pretrain(tiny)) == pretrain_key(graphs)
    monkeypatch.setenv("TRANSFERLAB_GRAPHS", "0")
    assert resolve_pretrain(tiny).step == "eager"
    from labcore.errors import LabError

    with pytest.raises(LabError, match="step must be one of auto, eager, graphs"):
        resolve_pretrain(PretrainSpec(step="fast"))
