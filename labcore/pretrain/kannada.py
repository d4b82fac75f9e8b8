"""The Kannada L1: LibreOffice's Kannada interface strings (Debian ``libreoffice-l10n-kn``, its gettext
``.mo`` catalogues), as Chiang & Lee's other human language at the scale of one package.

MiniLM's WordPiece vocabulary knows three Kannada characters: tokenised as it is, 53 % of the ids come out
[UNK] and the stream would be punctuation and the English words inside the strings. So Kannada is read one
Unicode character a token, each character of the Kannada block (U+0C80..U+0CFF) and the zero-width
(non-)joiners given an id of its own among the vocabulary's ``[unusedN]`` rows — ids no English text uses,
as a Kannada tokenizer of its own would give; everything else in a string (Latin words, digits,
punctuation) goes through the WordPiece tokenizer as usual, its special ids dropped. The vocabulary stays
MiniLM's 30,522 ids, so a model pretrained on Kannada fine-tunes on English text like every other L1.

Strings are the catalogues' translations (msgstr) in sorted file and message order, LibreOffice's mnemonic
marker ``~`` removed; the last 5 % of the stream is held out, as for ``english`` and ``java``.
"""

from __future__ import annotations

import gettext
from functools import lru_cache
from pathlib import Path

import numpy as np

from labcore import assets, paths
from labcore.pretrain.vocab import cached_array, held_out_tail, sampleable_ids, vocabulary, wordpiece_tokenizer

ASSET = "libreoffice-kn"
HELD_OUT_SHARE = 0.05
STREAM_FORMAT = 1
BLOCK = range(0x0C80, 0x0D00)  # the Kannada Unicode block
JOINERS = ("\u200c", "\u200d")  # zero-width non-joiner and joiner: they shape Kannada conjuncts


def is_kannada(char: str) -> bool:
    return ord(char) in BLOCK or char in JOINERS


@lru_cache(maxsize=1)
def character_ids() -> dict[str, int]:
    """Kannada character -> the id of an ``[unusedN]`` row (N: its offset in the block; joiners after it)."""
    ids = {token: i for i, token in enumerate(vocabulary())}
    chars = [chr(c) for c in BLOCK] + list(JOINERS)
    return {ch: ids[f"[unused{n}]"] for n, ch in enumerate(chars)}


def catalogue_strings(folder: Path) -> list[str]:
    """The translations of every ``.mo`` catalogue in ``folder``: sorted files, sorted messages, ``~`` removed."""
    out: list[str] = []
    for path in sorted(folder.glob("*.mo")):
        with path.open("rb") as handle:
            catalogue = gettext.GNUTranslations(handle)._catalog  # msgid -> msgstr (the stdlib's parse)
        for key in sorted(catalogue, key=str):
            text = catalogue[key]
            if isinstance(key, str) and key and isinstance(text, str) and text.strip():
                out.append(text.replace("~", ""))
    return out


def encode(strings: list[str]) -> np.ndarray:
    """One stream of ids: Kannada one character a token, the rest WordPiece, specials dropped."""
    tokenizer = wordpiece_tokenizer()
    table = character_ids()
    ordinary = set(sampleable_ids().tolist())
    out: list[int] = []
    for text in strings:
        run: list[str] = []
        for char in text + "\0":  # the sentinel flushes the last non-Kannada run
            if char != "\0" and not is_kannada(char):
                run.append(char)
                continue
            if run:
                out.extend(i for i in tokenizer.encode("".join(run), add_special_tokens=False).ids if i in ordinary)
                run = []
            if char != "\0":
                out.append(table[char])
    return np.asarray(out, dtype=np.int32)


def _build_stream() -> np.ndarray:
    folder = assets.fetch(ASSET, progress=lambda _message: None)  # 0.4 MB from Debian, on first use
    return encode(catalogue_strings(folder))


@lru_cache(maxsize=1)
def token_stream() -> np.ndarray:
    return cached_array(paths.cache_dir() / "corpora" / f"kannada-libreoffice-v{STREAM_FORMAT}.npy", _build_stream)


def text_part(held_out: bool) -> np.ndarray:
    """The first 95 % of the stream (training), or the last 5 % (``held_out``)."""
    return held_out_tail(token_stream(), held_out, HELD_OUT_SHARE)
