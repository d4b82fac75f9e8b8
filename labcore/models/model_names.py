"""Backbone names: what each name means and where its model comes from (:func:`resolve_backbone`).

* ``minilm``, ``antiberty``, ``smollm2``: packaged weights (:mod:`labcore.assets`). AntiBERTy's pickled
  checkpoint and SmolLM2's 4-bit GGUF are converted once into plain transformers folders under
  ``cache/models/NAME/`` (safetensors, :mod:`labcore.models.conversion`), so every later load is a fast
  ``from_pretrained``.
* ``hub:<id>``: ``from_pretrained(id)`` for users with the model hub or a local hub cache.
* ``local:<dir>``: any transformers-format folder (config.json + weights + tokenizer files).
* ``tiny:<family>``: a tiny random model (bert, roberta, albert, gpt2, llama) for tests and trial runs.
* ``lab:<name>``: a model pretrained in the lab (:mod:`labcore.pretrain`), in ``cache/models/lab-NAME/``.
* ``run:<key>``: the body of a finished run, written to ``cache/models/run-KEY/`` when a run that uses it
  starts (:mod:`labcore.pretrain.bodies`).

Nothing here imports torch or transformers at import time: the app lists backbones (names, descriptions,
licences) without either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from labcore import assets
from labcore.errors import LabError, UnknownNameError
from labcore.models.conversion import asset_stamp, build_antiberty, build_smollm2, install_folder, models_dir
from labcore.registry import Registry


@dataclass(frozen=True)
class Source:
    """Where a backbone comes from: a transformers location (folder or hub id) and how to get its tokenizer."""

    name: str
    description: str
    licence: str
    locate: Callable[[], str]  # returns a folder or hub id; may convert or fetch first
    tokenizer: Callable[[str], Any]
    strict: bool = True  # packaged conversions must load without missing tensors


# --------------------------------------------------------------------------------------------------
# tokenizers


def _bert_wordpiece(folder: str) -> Any:
    """A cased WordPiece tokenizer on a bare vocab.txt.

    AutoTokenizer finds no tokenizer in a folder that only has vocab.txt (AntiBERTy) and quietly returns
    one that knows the special tokens alone; lower-casing would turn every residue letter into [UNK].
    """
    from transformers import BertTokenizer

    return BertTokenizer(str(Path(folder) / "vocab.txt"), do_lower_case=False)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "spiece.model", "tokenizer.model")


def _folder_tokenizer(location: str) -> Any:
    """The folder's own tokenizer files; a bare vocab.txt gets a cased WordPiece tokenizer.

    A folder with no tokenizer at all gives ``None``: vector inputs and new embedding tables need none,
    and the token mapping says so when a discipline does.
    """
    from transformers import AutoTokenizer

    folder = Path(location)
    if folder.is_dir() and not any((folder / f).is_file() for f in _TOKENIZER_FILES):
        return _bert_wordpiece(location) if (folder / "vocab.txt").is_file() else None
    return AutoTokenizer.from_pretrained(location)


# --------------------------------------------------------------------------------------------------
# packaged backbones (their converted folders: labcore.models.conversion)


def _packaged(name: str, build: Callable[[Path], None] | None, tokenizer: Callable[[str], Any],
              description: str = "") -> Source:
    asset = assets.ASSETS[name]

    def locate() -> str:
        folder = assets.require(name)  # an error that says how to fetch it
        return install_folder(name, asset_stamp(name), build) if build else str(folder)

    return Source(name=name, description=description or asset.description, licence=asset.licence,
                  locate=locate, tokenizer=tokenizer)


BACKBONES: Registry[Source] = Registry("backbone")
BACKBONES.register("minilm", _packaged("minilm", None, _folder_tokenizer))
BACKBONES.register("antiberty", _packaged("antiberty", build_antiberty, _bert_wordpiece))
BACKBONES.register("smollm2", _packaged(
    "smollm2", build_smollm2, _folder_tokenizer,
    description="SmolLM2-135M-Instruct: Llama-shaped decoder, 30 layers x 576 hidden, 9 heads (3 key/value), "
                "rotary positions, 49,152-token BPE. The weights come from a 4-bit (Q4_1) quantisation "
                "de-quantised to fp32, so they are slightly lossy against the original model."))

# --------------------------------------------------------------------------------------------------
# tiny random backbones: every family in miniature, for tests and quick trial runs without any asset

# 50 tokens: specials, unused slots, amino acids, digits, nucleotides and a few words, so every discipline
# has something to map to.
TINY_VOCAB = (("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") + tuple(f"[unused{i}]" for i in range(5))
              + tuple("ACDEFGHIKLMNPQRSTVWY") + tuple("0123456789") + tuple("acgt")
              + ("the", "of", "and", "to", "in", "is"))
TINY_FORMAT = 1


def _tiny_config(family: str) -> Any:
    from transformers import AlbertConfig, BertConfig, GPT2Config, LlamaConfig, RobertaConfig

    common = dict(vocab_size=len(TINY_VOCAB), pad_token_id=0, bos_token_id=2, eos_token_id=3)
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                   max_position_embeddings=64, **common)
    configs = {
        "bert": lambda: BertConfig(**encoder),
        "roberta": lambda: RobertaConfig(**{**encoder, "max_position_embeddings": 66}),
        # three layers sharing one block, and factorised 32-wide embeddings, as in ALBERT
        "albert": lambda: AlbertConfig(**{**encoder, "num_hidden_layers": 3, "embedding_size": 32}),
        "gpt2": lambda: GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64, **common),
        "llama": lambda: LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                     **common),
    }
    if family not in configs:
        raise LabError(f"no tiny backbone for family {family!r}; valid: tiny:{', tiny:'.join(configs)}")
    return configs[family]()


def _tiny_source(family: str) -> Source:
    """``tiny:<family>``: a 2-layer, 64-wide random model of the family, written once under cache/models."""

    def build(folder: Path) -> None:
        from transformers import AutoModel, BertTokenizer

        from labcore.models.seeding import seeded

        config = _tiny_config(family)
        with seeded(0, "tiny", family):
            model = AutoModel.from_config(config)
        model.save_pretrained(str(folder))
        BertTokenizer(vocab={t: i for i, t in enumerate(TINY_VOCAB)}, do_lower_case=False).save_pretrained(
            str(folder))

    def locate() -> str:
        _tiny_config(family)  # unknown family: an error before anything is written
        return install_folder(f"tiny-{family}", {"format": TINY_FORMAT, "source": f"tiny:{family}"}, build)

    return Source(name=f"tiny:{family}", description=f"a tiny random {family}-shaped model (2 layers x 64) for "
                  f"tests and trial runs: no pretraining", licence="none needed (random weights)",
                  locate=locate, tokenizer=_folder_tokenizer)


def backbone_names() -> list[str]:
    """The packaged backbones (always loadable offline once their assets are fetched)."""
    return BACKBONES.names()


def _hub_source(model_id: str) -> Source:
    return Source(name=f"hub:{model_id}", description=f"{model_id} from the model hub (transformers)",
                  licence=f"see the model card of {model_id}", locate=lambda: model_id,
                  tokenizer=_folder_tokenizer, strict=False)


def _local_source(folder: str) -> Source:
    path = Path(folder).expanduser()

    def locate() -> str:
        if not (path / "config.json").is_file():
            raise LabError(f"local:{folder} is not a transformers model folder (no config.json in {path}); "
                           f"point local: at a folder written by save_pretrained (config.json, weights, "
                           f"tokenizer files)")
        return str(path)

    return Source(name=f"local:{folder}", description=f"transformers folder {path}",
                  licence="as stated by the folder's provider", locate=locate,
                  tokenizer=_folder_tokenizer, strict=False)


# Models the lab made: pretrained here (lab:) or the body of a finished run (run:). Each folder is a complete
# transformers folder with a card.json saying what made it.
MADE_HERE = {"lab": "lab-", "run": "run-"}
CARD = "card.json"


def read_card(folder: Path) -> dict[str, Any]:
    try:
        card = json.loads((folder / CARD).read_text())
    except (OSError, ValueError):
        return {}
    return card if isinstance(card, dict) else {}


def made_here_names(prefix: str = "lab") -> list[str]:
    """``lab:<name>`` (or ``run:<key>``) for every such model folder on this machine, newest first."""
    folders = [f for f in models_dir().glob(f"{MADE_HERE[prefix]}*") if (f / "config.json").is_file()]
    folders.sort(key=lambda f: f.stat().st_mtime, reverse=True)
    return [f"{prefix}:{f.name[len(MADE_HERE[prefix]):]}" for f in folders]


def _made_here_source(prefix: str, value: str) -> Source:
    folder = models_dir() / f"{MADE_HERE[prefix]}{value}"
    card = read_card(folder)

    def locate() -> str:
        if (folder / "config.json").is_file():
            return str(folder)
        if prefix == "lab":
            known = ", ".join(made_here_names("lab")) or "none yet"
            raise LabError(f"no lab model named {value!r} here ({folder} is missing); pretrain it first "
                           f"(python -m labcore pretrain --corpus nested --name {value}, or the Pretrain page); "
                           f"lab models here: {known}")
        raise LabError(f"the body of run {value} is not written out yet ({folder} is missing); it is written "
                       f"when a run that uses run:{value} starts, or by python -m labcore body {value}; the run "
                       f"must be finished")

    return Source(name=f"{prefix}:{value}", description=card.get("description", f"{prefix}:{value}"),
                  licence=card.get("licence", "made in this lab"), locate=locate, tokenizer=_folder_tokenizer)


def model_folder(name: str) -> Path | None:
    """The folder a backbone loads from, when it is already on this machine, found without torch (its
    vocabulary files are read from there); None for a hub id, or a packaged model not fetched yet.

    ``local:`` names its folder; ``tiny:`` and the converted packaged models (AntiBERTy, SmolLM2) live under
    :func:`models_dir`; MiniLM loads from its fetched asset. Nothing is converted or fetched here.
    """
    if name.startswith("local:"):
        return Path(name[len("local:"):]).expanduser()
    if name.startswith("tiny:"):
        return models_dir() / f"tiny-{name[len('tiny:'):]}"
    if name.startswith("hub:"):
        return None
    prefix, _, value = name.partition(":")
    if prefix in MADE_HERE and value:
        return models_dir() / f"{MADE_HERE[prefix]}{value}"
    converted = models_dir() / name
    if converted.is_dir():
        return converted
    if name in assets.ASSETS and assets.is_available(name):
        return assets.ASSETS[name].directory
    return None


def resolve_backbone(name: str) -> Source:
    """The :class:`Source` for a packaged name, ``hub:<id>`` or ``local:<dir>``."""
    if name.startswith("hub:") and name[4:]:
        return _hub_source(name[4:])
    if name.startswith("local:") and name[6:]:
        return _local_source(name[6:])
    if name.startswith("tiny:") and name[5:]:
        return _tiny_source(name[5:])
    prefix, _, value = name.partition(":")
    if prefix in MADE_HERE and value:
        return _made_here_source(prefix, value)
    try:
        return BACKBONES[name]
    except UnknownNameError:
        raise UnknownNameError(
            f"unknown backbone {name!r}; valid names: {', '.join(BACKBONES.names())}, or hub:<model id> "
            f"(needs the model hub or its local cache), local:<folder> (a transformers folder), "
            f"tiny:<family> (a tiny random model: bert, roberta, albert, gpt2, llama), lab:<name> (pretrained in "
            f"the lab) or run:<key> (a finished run's body)") from None
