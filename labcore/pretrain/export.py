"""Writing a model the lab made as a backbone folder: ``cache/models/lab-NAME/`` (or ``run-KEY/``).

A complete transformers folder: ``model.safetensors`` and ``config.json`` of the base model (what
``load_backbone`` loads with every init), MiniLM's tokenizer files (the shared vocabulary), and
``card.json`` (what made it: corpus, steps, final MLM loss, wall time, spec and key). A pretrained model
also keeps its MLM head in ``mlm_head.safetensors`` (for a later MLM stage; loading ignores it). The folder
is built aside and renamed into place (:func:`labcore.models.install_folder`), so it is never seen
half-written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from labcore import assets, durable
from labcore.durable import CommitFn
from labcore.errors import LabError
from labcore.models import install_folder, models_dir, read_card
from labcore.pretrain.mlm import HEAD_FILE

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
CARD_FILE = "card.json"


def lab_folder(name: str) -> Path:
    return models_dir() / f"lab-{name}"


def check_name_free(name: str, key: str) -> None:
    """Refuse a name that another pretraining spec already holds (the same spec may write it again)."""
    card = read_card(lab_folder(name))
    if card and key and card.get("key") not in (None, key):
        raise LabError(f"lab:{name} already names another pretrained model (spec {card.get('key')}: "
                       f"{card.get('corpus')}, {card.get('steps')} steps); choose another name")


def copy_tokenizer(folder: Path) -> None:
    source = assets.require("minilm")
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, folder / name)


def write_backbone_folder(folder: Path, body: Any, card: dict[str, Any], tokenizer: Any = None,
                          extra: dict[str, Any] | None = None) -> None:
    """``body``'s weights and config, the tokenizer files and the card into ``folder`` (a new, empty one).
    ``tokenizer``: the body's own (saved with it), or None for MiniLM's files (the lab's shared vocabulary)."""
    from safetensors.torch import save_file

    body.save_pretrained(str(folder), safe_serialization=True)
    config = json.loads((folder / "config.json").read_text())
    config.pop("attn_implementation", None)  # the CPU kernels' name is the trainer's business, not the model's
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))
    else:
        copy_tokenizer(folder)
    for file, tensors in (extra or {}).items():
        save_file({k: v.detach().float().contiguous().cpu() for k, v in tensors.items()}, str(folder / file))
    (folder / CARD_FILE).write_text(json.dumps(card, indent=1, sort_keys=True, default=str) + "\n")


def save_lab_model(name: str, model: Any, record: dict[str, Any], *, workdir: Path | None = None,
                   commit_file: CommitFn = os.replace) -> Path:
    """Write a pretrained :class:`~labcore.pretrain.mlm.MaskedLM` as ``lab:<name>``.

    The card goes first into the job's folder through ``commit_file``: a worker whose attempt was superseded
    is refused there and never replaces the model folder the current attempt writes."""
    card = {k: v for k, v in record.items() if k not in ("losses", "eval_curve")}
    after = f"{record['start']}, then " if record.get("start") else ""
    part = " (word embeddings and LM head only)" if record.get("train") == "embeddings" else ""
    card["description"] = (f"pretrained in the lab: {after}MLM on {record['corpus']}{part}, {record['steps']:,} steps, "
                           f"{record['size']} size; final MLM loss {record['final_loss']:.3f}, held-out masked "
                           f"accuracy {record['eval_accuracy']:.3f}, {record['wall_s']:.0f} s")
    card["licence"] = "made in this lab (token ids of MiniLM's vocabulary: Apache-2.0)"
    if workdir is not None:
        durable.write_text(workdir / CARD_FILE, json.dumps(card, indent=1, sort_keys=True, default=str) + "\n",
                           commit_file)
    head = {"dense.weight": model.dense.weight, "dense.bias": model.dense.bias, "norm.weight": model.norm.weight,
            "norm.bias": model.norm.bias, "bias": model.bias}
    stamp = {"key": record.get("key"), "wall_s": record.get("wall_s"), "steps": record.get("steps")}
    return Path(install_folder(f"lab-{name}", stamp,
                               lambda folder: write_backbone_folder(folder, model.body, card,
                                                                    extra={HEAD_FILE: head})))
