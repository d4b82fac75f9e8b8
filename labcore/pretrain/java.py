"""The Java L1: OpenJDK 17's own class library (Debian ``openjdk-17-source``, ``lib/src.zip``), comments
stripped, tokenised by MiniLM's tokenizer (Chiang & Lee's Java corpus, at the scale of one package).

Only the ``java.base`` module's ``java/`` packages (java.lang, java.util, java.io, ... about 9 MB of
source) are read: the whole library is 200 MB, more than a CPU pretraining sees. Files are taken in
sorted order; the last 5 % of the stream is held out, as for ``english``.
"""

from __future__ import annotations

import zipfile
from functools import lru_cache

import numpy as np

from labcore import assets, paths
from labcore.pretrain.vocab import cached_array, held_out_tail, sampleable_ids, wordpiece_tokenizer

ASSET = "openjdk-src"
PACKAGES = "java.base/java/"
HELD_OUT_SHARE = 0.05
STREAM_FORMAT = 1


def strip_comments(source: str) -> str:
    """Java source without ``//`` and ``/* */`` comments; string and character literals are kept whole
    (a ``//`` inside a string is not a comment)."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(source[i:j + 1])
            i = j + 1
        elif source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            out.append(" ")
            i = n if end < 0 else end + 2
        else:
            j = i
            while j < n and source[j] not in "\"'/":
                j += 1
            if j == i:  # a lone "/" (division)
                j += 1
            out.append(source[i:j])
            i = j
    return "".join(out)


def _build_stream() -> np.ndarray:
    tokenizer = wordpiece_tokenizer()
    folder = assets.fetch(ASSET, progress=lambda _message: None)  # 47 MB from Debian, on first use
    with zipfile.ZipFile(folder / "src.zip") as archive:
        names = sorted(n for n in archive.namelist() if n.startswith(PACKAGES) and n.endswith(".java"))
        sources = [strip_comments(archive.read(n).decode("utf-8", errors="replace")) for n in names]
    ids = np.concatenate([np.asarray(e.ids, dtype=np.int32)
                          for e in tokenizer.encode_batch(sources, add_special_tokens=False)])
    return ids[np.isin(ids, sampleable_ids())]


@lru_cache(maxsize=1)
def token_stream() -> np.ndarray:
    return cached_array(paths.cache_dir() / "corpora" / f"java-openjdk17-v{STREAM_FORMAT}.npy", _build_stream)


def text_part(held_out: bool) -> np.ndarray:
    """The first 95 % of the stream (training), or the last 5 % (``held_out``)."""
    return held_out_tail(token_stream(), held_out, HELD_OUT_SHARE)
