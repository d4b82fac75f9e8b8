"""A finished run's body as a backbone: ``run:<key>`` (FPT's "bit-pretrained" bodies: train on one task
with the full protocol, then use the body frozen on another; two runs and no new code).

The body is the run's best checkpoint (``best.safetensors``) put back into a whole base model of the
run's backbone: every transformer tensor as the run trained it (layers frozen, re-initialised or permuted
by its protocol included), and the word-embedding table with the rows the run used (its sliced
vocabulary) as trained and every other row as the run started. A run with a new input layer (FPT's
``embedding`` / ``linear`` adapters) never touched the table: it stays as the run's backbone had it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from labcore.errors import LabError
from labcore.models import install_folder, models_dir

if TYPE_CHECKING:
    from labcore.store import JobRecord

BODY_FORMAT = 1


def run_body_folder(key: str) -> Path:
    return models_dir() / f"run-{key}"


def ensure_run_body(record: "JobRecord", workdir: Path) -> Path:
    """``cache/models/run-KEY/`` for the finished run ``record`` (its folder ``workdir``), written once."""
    key = record.key
    if record.status != "done":
        raise LabError(f"run:{key} needs a finished run; run {key} is {record.status}")
    stamp = {"format": BODY_FORMAT, "key": key}
    return Path(install_folder(f"run-{key}", stamp, lambda folder: _write_body(record, workdir, folder)))


def trained_base(record: "JobRecord", workdir: Path) -> tuple[Any, Any, Any]:
    """``(base_model, tokenizer, info)``: the run's backbone, whole, with its trained weights."""
    import torch

    from labcore.models import load_backbone
    from labcore.models.lab_model import VocabAdapter
    from labcore.engine.run import load_trained
    from labcore.runspec import make_spec

    spec = make_spec(**record.spec)
    trained = load_trained(spec, workdir).model
    base, tokenizer, info = load_backbone(spec.model, spec.init, seed=spec.seed)
    state = trained.backbone.state_dict()  # the detached word table is not in it: handled below
    missing, unexpected = base.load_state_dict(state, strict=False)
    table = base.get_input_embeddings().weight
    missing = [m for m in missing if not m.endswith("word_embeddings.weight") and not m.startswith("pooler")]
    if missing or unexpected:
        raise LabError(f"run {record.key}'s body does not fit its backbone {spec.model} (missing "
                       f"{missing[:3]}, unexpected {unexpected[:3]}); rerun it with this version of the lab")
    adapter = trained.adapter
    if isinstance(adapter, VocabAdapter):
        with torch.no_grad():
            rows = torch.tensor(adapter.rows) if adapter.rows is not None else torch.arange(table.shape[0])
            table[rows] = adapter.embedding.weight.detach().to(table.dtype)
    return base, tokenizer, info


def _write_body(record: "JobRecord", workdir: Path, folder: Path) -> None:
    from labcore.pretrain.export import write_backbone_folder

    base, tokenizer, info = trained_base(record, workdir)
    spec = record.spec
    card = {"key": record.key, "source": "run", "run_spec": spec,
            "description": f"the body of run {record.key} ({spec.get('model')} {spec.get('init')}, "
                           f"{spec.get('protocol')} on {spec.get('discipline')}, seed {spec.get('seed')})",
            "licence": info.licence}
    write_backbone_folder(folder, base, card, tokenizer=tokenizer)
