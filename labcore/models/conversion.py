"""Converted folders under ``cache/models``: a packaged checkpoint turned once into a plain transformers folder.

AntiBERTy's pickled checkpoint and SmolLM2's 4-bit GGUF become fp32 safetensors folders that every later load
reads with a fast ``from_pretrained``. :func:`install_folder` builds any such folder (the tiny random models and
the lab's own models use it too) so that no half-written folder ever looks finished.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from labcore import assets, paths

# torch and transformers load inside the functions that use them (see labcore.models.backbones).
if TYPE_CHECKING:
    import torch

# Bump when a conversion's output changes, so folders written by older code are rebuilt.
CONVERSION_FORMAT = 1
_STAMP = "lab-conversion.json"


def models_dir() -> Path:
    return paths.cache_dir() / "models"


def asset_stamp(asset_name: str) -> dict[str, Any]:
    asset = assets.ASSETS[asset_name]
    return {"format": CONVERSION_FORMAT, "source": asset.requirement,
            "sha256": [m.sha256 for m in asset.members]}


def _stamp_matches(folder: Path, stamp: dict[str, Any]) -> bool:
    try:
        return json.loads((folder / _STAMP).read_text()) == stamp
    except (OSError, json.JSONDecodeError):
        return False


def install_folder(name: str, stamp: dict[str, Any], build: Callable[[Path], None]) -> str:
    """The folder ``cache/models/NAME``, built once by ``build(folder)``.

    Built in a temporary sibling folder and renamed into place, so a crash or a concurrent conversion never
    leaves a half-written folder that looks finished; the stamp records what it was built from, and a
    folder with another stamp (older format, other asset version) is rebuilt.
    """
    final = models_dir() / name
    if _stamp_matches(final, stamp):
        return str(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        build(tmp)
        (tmp / _STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        if _stamp_matches(final, stamp):  # another process finished the same conversion meanwhile
            return str(final)
        if final.exists():  # stale: move aside, then replace
            old = final.parent / f".{name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if not _stamp_matches(final, stamp):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(final)


def _save_tensors(folder: Path, tensors: dict[str, torch.Tensor], config: Any) -> None:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    config.save_pretrained(str(folder))


def build_antiberty(folder: Path) -> None:
    """AntiBERTy's pickled checkpoint -> base BertModel safetensors (MLM and species/chain heads dropped)."""
    import torch
    from transformers import BertConfig

    source = assets.require("antiberty")
    # weights_only: the pickle is never allowed to run code; map_location: it was saved from a GPU.
    state = torch.load(source / "pytorch_model.bin", weights_only=True, map_location="cpu")
    tensors = {k[len("bert."):]: v.float() for k, v in state.items()
               if k.startswith("bert.") and not k.endswith("position_ids")}
    config = BertConfig.from_pretrained(str(source))
    config.architectures = ["BertModel"]
    _save_tensors(folder, tensors, config)
    shutil.copyfile(source / "vocab.txt", folder / "vocab.txt")


_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def build_smollm2(folder: Path) -> None:
    """SmolLM2's Q4_1 GGUF -> de-quantised fp32 LlamaModel safetensors + its tokenizer.

    transformers' own GGUF path (``from_pretrained(gguf_file=...)``) needs the accelerate package and then
    flags the model as quantised, which blocks ``save_pretrained``; its GGUF reader alone does the
    de-quantisation and names the tensors, given a model skeleton on the meta device (no memory, no RNG).
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    source = assets.require("smollm2")
    config = AutoConfig.from_pretrained(str(source), gguf_file=_SMOLLM2_GGUF)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    parsed = load_gguf_checkpoint(str(source / _SMOLLM2_GGUF), return_tensors=True, model_to_load=skeleton)
    prefix = skeleton.base_model_prefix + "."
    # The LM head is tied to the token embeddings (no output.weight in the GGUF): the base model is all.
    tensors = {k[len(prefix):]: v.float() for k, v in parsed["tensors"].items() if k.startswith(prefix)}
    config.architectures = [type(skeleton.base_model).__name__]
    config.dtype = "float32"
    _save_tensors(folder, tensors, config)
    tokenizer = AutoTokenizer.from_pretrained(str(source), gguf_file=_SMOLLM2_GGUF)
    tokenizer.save_pretrained(str(folder))
