"""Backbones: the packaged pretrained models, hub ids and local folders, loaded offline in fp32.

Names:

* ``minilm``, ``antiberty``, ``smollm2``: packaged weights (:mod:`labcore.assets`). AntiBERTy's pickled
  checkpoint and SmolLM2's 4-bit GGUF are converted once into plain transformers folders under
  ``cache/models/NAME/`` (safetensors), so every later load is a fast ``from_pretrained``.
* ``hub:<id>``: ``from_pretrained(id)`` for users with the model hub or a local hub cache.
* ``local:<dir>``: any transformers-format folder (config.json + weights + tokenizer files).
* ``tiny:<family>``: a tiny random model (bert, roberta, albert, gpt2, llama) for tests and trial runs.
* ``lab:<name>``: a model pretrained in the lab (:mod:`labcore.pretrain`), in ``cache/models/lab-NAME/``.
* ``run:<key>``: the body of a finished run, written to ``cache/models/run-KEY/`` when a run that uses it
  starts (:mod:`labcore.pretrain.bodies`).

Inits (:data:`INITS`): ``pretrained``; ``random`` (same config, the family's own initialiser, seeded);
``stats`` (Lu et al. §3.8: each tensor redrawn i.i.d. normal with the pretrained tensor's mean and std).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from labcore import assets, paths
from labcore.errors import LabError, UnknownNameError
from labcore.registry import Registry

# torch and transformers load inside the functions that use them: the app lists backbones (names,
# descriptions, licences) without importing either.
if TYPE_CHECKING:
    import torch
    from torch import nn

# Bump when a conversion's output changes, so folders written by older code are rebuilt.
CONVERSION_FORMAT = 1
_STAMP = "lab-conversion.json"


@dataclass(frozen=True)
class BackboneInfo:
    """What the rest of the lab needs to know about a loaded backbone (plain data, safe to store)."""

    name: str
    family: str  # "bert" | "roberta" | "albert" | "gpt2" | "llama" | another transformers model_type
    kind: str  # "encoder" | "decoder"
    hidden_size: int
    num_layers: int
    num_heads: int
    max_positions: int | None  # None where positions are rotary (no learned table bounds the length)
    description: str
    licence: str
    cls_id: int | None = None
    sep_id: int | None = None
    bos_id: int | None = None
    pad_id: int | None = None
    eos_id: int | None = None
    vocab_size: int = 0
    embedding_size: int = 0  # width of inputs_embeds: hidden_size, except ALBERT's factorised embeddings
    shared_layers: bool = False  # ALBERT: one block applied num_layers times
    init: str = "pretrained"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
# converted folders under cache/models


def models_dir() -> Path:
    return paths.cache_dir() / "models"


def _asset_stamp(asset_name: str) -> dict[str, Any]:
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


def _build_antiberty(folder: Path) -> None:
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


def _build_smollm2(folder: Path) -> None:
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


def _packaged(name: str, build: Callable[[Path], None] | None, tokenizer: Callable[[str], Any],
              description: str = "") -> Source:
    asset = assets.ASSETS[name]

    def locate() -> str:
        folder = assets.require(name)  # an error that says how to fetch it
        return install_folder(name, _asset_stamp(name), build) if build else str(folder)

    return Source(name=name, description=description or asset.description, licence=asset.licence,
                  locate=locate, tokenizer=tokenizer)


BACKBONES: Registry[Source] = Registry("backbone")
BACKBONES.register("minilm", _packaged("minilm", None, _folder_tokenizer))
BACKBONES.register("antiberty", _packaged("antiberty", _build_antiberty, _bert_wordpiece))
BACKBONES.register("smollm2", _packaged(
    "smollm2", _build_smollm2, _folder_tokenizer,
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


# --------------------------------------------------------------------------------------------------
# inits


INITS: Registry[str] = Registry("init")
INITS.register("pretrained", "the pretrained weights")
INITS.register("random", "same architecture, the family's own initialiser (seeded)")
INITS.register("stats", "each tensor redrawn i.i.d. normal with the pretrained tensor's mean and std "
                        "(Lu et al. §3.8)")


def init_from_statistics(model: nn.Module, seed: int = 0) -> None:
    """Redraw every parameter tensor i.i.d. normal with that tensor's own mean and std (FPT §3.8).

    Weights, biases, norms and position tables alike, as in Lu et al. Table 9. A one-element tensor has
    no spread and keeps its value. Buffers (position ids, rotary frequencies) are not parameters: untouched.
    """
    import torch

    from labcore.models.seeding import generator

    draw = generator(seed, "stats")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.numel() < 2:
                continue
            values = param.detach().double()
            mean, std = values.mean().item(), values.std().item()
            sample = torch.randn(param.shape, generator=draw, dtype=torch.float64) * std + mean
            param.copy_(sample.to(param.dtype))


def _load_pretrained(source: Source, location: str, attn_implementation: str) -> nn.Module:
    import torch
    from transformers import AutoModel

    model, loading = AutoModel.from_pretrained(location, dtype=torch.float32,
                                               attn_implementation=attn_implementation,
                                               output_loading_info=True)
    # A missing pooler is harmless (lab models pool themselves and drop it); anything else missing would
    # silently be random weights posing as pretrained ones.
    missing = [k for k in loading.get("missing_keys", []) if not k.startswith("pooler")]
    if missing:
        fix = (f"delete {location} to convert it again" if source.strict else
               "check that the folder holds the weights of a whole base model")
        raise LabError(f"backbone {source.name!r} lacks weights for {len(missing)} tensor(s) "
                       f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}); {fix}")
    return model


def _build_random(location: str, attn_implementation: str) -> nn.Module:
    import torch
    from transformers import AutoConfig, AutoModel

    from labcore.models.architectures import LAYOUTS

    config = AutoConfig.from_pretrained(location)
    model = AutoModel.from_config(config, attn_implementation=attn_implementation, dtype=torch.float32)
    if config.model_type in LAYOUTS:  # BERT/ALBERT: redraw with their original truncated normal
        LAYOUTS[config.model_type].initialiser(model, model)
    return model


def _token_id(tokenizer: Any, attribute: str) -> int | None:
    value = getattr(tokenizer, attribute, None) if tokenizer is not None else None
    return int(value) if isinstance(value, int) else None


def positions_of(config: dict[str, Any]) -> int | None:
    """The longest input, in tokens, that a model with this ``config.json`` takes; None where positions are
    rotary (Llama: no learned table bounds the length). Plain JSON in, so specs are resolved without torch."""
    family = config.get("model_type")
    limit = config.get("max_position_embeddings", config.get("n_positions"))  # GPT-2 names it n_positions
    if family == "llama" or limit is None:
        return None
    if family == "roberta":  # RoBERTa numbers positions from padding_idx + 1: two rows are never reached
        return int(limit) - int(config.get("pad_token_id", 1)) - 1
    return int(limit)


def known_positions(name: str) -> int | None:
    """The model's :func:`positions_of` read from its ``config.json`` on this machine, without torch; None
    where it is unbounded or not known here (a hub id, a packaged model not fetched yet, a tiny model not
    built yet): the engine then cuts inputs to the loaded model's positions and says so in the run's notes."""
    folder = model_folder(name)
    try:
        config = json.loads((folder / "config.json").read_text()) if folder is not None else None
    except (OSError, ValueError):
        return None
    return positions_of(config) if isinstance(config, dict) else None


def known_layers(name: str) -> int | None:
    """How many layers the model has, from its ``config.json`` on this machine (no torch); None where the
    folder is not here yet."""
    folder = model_folder(name)
    try:
        config = json.loads((folder / "config.json").read_text()) if folder is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    for field in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(config.get(field), int):
            return int(config[field])
    return None


def backbone_info(name: str, model: nn.Module, tokenizer: Any = None, *, description: str = "",
                  licence: str = "", init: str = "pretrained") -> BackboneInfo:
    """Describe a base model (and its tokenizer, if any) as a :class:`BackboneInfo`."""
    from labcore.models.architectures import LAYOUTS

    config = model.config
    family = config.model_type
    layout = LAYOUTS[family] if family in LAYOUTS else None
    if layout is not None:
        kind = layout.kind
    else:
        kind = "decoder" if getattr(config, "is_decoder", False) or any(
            a.endswith(("CausalLM", "LMHeadModel")) for a in (config.architectures or [])) else "encoder"
    max_positions = positions_of(config.to_dict())
    # getattr: families without a layout may name these differently; their info is then partial (0).
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    num_layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    groups = getattr(config, "num_hidden_groups", None)
    return BackboneInfo(
        name=name, family=family, kind=kind, hidden_size=hidden, num_layers=num_layers,
        num_heads=int(getattr(config, "num_attention_heads", 0) or 0), max_positions=max_positions,
        description=description, licence=licence,
        cls_id=_token_id(tokenizer, "cls_token_id"), sep_id=_token_id(tokenizer, "sep_token_id"),
        bos_id=_token_id(tokenizer, "bos_token_id"), pad_id=_token_id(tokenizer, "pad_token_id"),
        eos_id=_token_id(tokenizer, "eos_token_id"),
        vocab_size=int(getattr(config, "vocab_size", 0) or 0),
        embedding_size=int(getattr(config, "embedding_size", hidden) if family == "albert" else hidden),
        shared_layers=bool(groups is not None and groups != num_layers),
        init=init,
    )


def _damaged_weights(error: Exception) -> bool:
    """Whether loading failed on the weight files themselves: shapes that contradict config.json (RuntimeError),
    a truncated safetensors file (SafetensorError) or a truncated pickle (EOFError, UnpicklingError)."""
    import pickle

    from safetensors import SafetensorError

    return isinstance(error, (RuntimeError, SafetensorError, EOFError, pickle.UnpicklingError))


def load_backbone(name: str, init: str = "pretrained", *, seed: int = 0,
                  attn_implementation: str = "sdpa") -> tuple[nn.Module, Any, BackboneInfo]:
    """Load ``(base_model, tokenizer, info)``: the transformers base model without task head, fp32, eval mode.

    ``attn_implementation="eager"`` is needed for attention maps (SDPA returns none). ``seed`` fixes the
    ``random`` and ``stats`` draws; the global random state is left as it was.
    """
    from labcore.models.architectures import LAYOUTS
    from labcore.models.seeding import seeded

    INITS[init]  # unknown init: an error listing the valid ones
    source = resolve_backbone(name)
    try:
        location = source.locate()
        tokenizer = source.tokenizer(location)
        with seeded(seed, "backbone", init):  # also covers any init transformers does while loading
            if init == "random":
                model = _build_random(location, attn_implementation)
            else:
                model = _load_pretrained(source, location, attn_implementation)
        if init == "stats":
            init_from_statistics(model, seed)
    except OSError as error:
        if name.startswith("hub:"):
            raise LabError(
                f"backbone {name!r} needs the model hub or a copy in the local hub cache, and neither is "
                f"reachable here ({str(error).splitlines()[0]}); download it on a machine with the hub, "
                f"save it with save_pretrained and use local:<folder>, or pick a packaged backbone "
                f"({', '.join(BACKBONES.names())})") from None
        raise LabError(f"backbone {name!r} could not be loaded from {name[6:] if name.startswith('local:') else name}"
                       f" ({str(error).splitlines()[0]}); check that it is a complete transformers folder "
                       f"(config.json, weights, tokenizer files)") from None
    except ValueError as error:
        if isinstance(error, LabError):
            raise
        raise LabError(f"backbone {name!r} could not be loaded ({str(error).splitlines()[0]}); the lab "
                       f"loads transformers models of the families {', '.join(LAYOUTS.names())}") from None
    except Exception as error:
        if not _damaged_weights(error):
            raise
        where = name[len("local:"):] if name.startswith("local:") else name
        what = ("its config.json does not describe the model its weights hold (tensor shapes differ)"
                if isinstance(error, RuntimeError) and "mismatch" in str(error)
                else "a weight file is truncated or damaged")
        raise LabError(f"backbone {name!r}: the weights in {where} do not load: {what} "
                       f"({str(error).splitlines()[0][:200]}); save the model again into the folder with "
                       f"save_pretrained (config and weights together), or copy the folder again in full") from None
    model.eval()
    info = backbone_info(name, model, tokenizer, description=source.description, licence=source.licence,
                         init=init)
    return model, tokenizer, info
