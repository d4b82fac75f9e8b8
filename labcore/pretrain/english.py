"""The English L1: Jane Austen's six novels (Debian ``r-cran-janeaustenr``), as MiniLM WordPiece ids.

The package keeps the novels in an R lazy-load database, ``data/Rdata.rdb``: one record per object, each a
4-byte big-endian length followed by zlib data (or a type byte, ``Z`` xz, ``2`` bzip2, ``X`` xz, ``0``
none, and the payload). Records are contiguous, so they are read one after the other without the
``.rdx`` index; each decompresses to an R serialization that ``pyreadr`` parses into the novel's lines.

Paragraphs (runs of non-empty lines) are tokenised by MiniLM's tokenizer and joined into one stream of
ids, cached under ``cache/corpora/``. Sequences are windows of that stream at seeded random offsets; the
last 5 % of the stream is kept for held-out evaluation, so the held-out accuracy is measured on text the
model never trained on.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import tempfile
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from labcore import assets, paths
from labcore.errors import LabError
from labcore.pretrain.vocab import cached_array, held_out_tail, sampleable_ids, wordpiece_tokenizer

ASSET = "janeaustenr"
STREAM_FORMAT = 1
HELD_OUT_SHARE = 0.05


def rdb_records(raw: bytes) -> list[bytes]:
    """The decompressed records of an R lazy-load database (``.rdb``), in file order."""
    records, offset = [], 0
    while offset + 4 <= len(raw):
        (size,) = struct.unpack(">I", raw[offset:offset + 4])
        body = raw[offset + 4:]
        kind = body[:1]
        if kind == b"0":  # stored as it is
            records.append(body[1:1 + size])
            offset += 5 + size
            continue
        if kind in (b"Z", b"X"):
            decompressor, skip = lzma.LZMADecompressor(), 1
        elif kind == b"2":
            decompressor, skip = bz2.BZ2Decompressor(), 1
        else:
            decompressor, skip = zlib.decompressobj(), 0
        data = decompressor.decompress(body[skip:])
        if len(data) != size:
            raise LabError(f"a record of the R database is damaged (expected {size} bytes, got {len(data)}); "
                           f"fetch the {ASSET} asset again")
        records.append(data)
        offset += 4 + len(body) - len(decompressor.unused_data)
    return records


def novels(rdb: Path) -> list[list[str]]:
    """Each novel's lines (each record of the database, parsed by ``pyreadr``)."""
    import pyreadr

    out = []
    for record in rdb_records(rdb.read_bytes()):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "object.rds"
            path.write_bytes(record)
            frame = next(iter(pyreadr.read_r(str(path)).values()))
        out.append([str(line) for line in frame.iloc[:, 0].tolist()])
    return out


def paragraphs(lines: list[str]) -> list[str]:
    """Runs of non-empty lines, each joined into one paragraph."""
    out, current = [], []
    for line in lines + [""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(" ".join(current))
            current = []
    return out


def _stream_path() -> Path:
    return paths.cache_dir() / "corpora" / f"english-austen-v{STREAM_FORMAT}.npy"


def _build_stream() -> np.ndarray:
    tokenizer = wordpiece_tokenizer()
    # Fetched on first use (1.6 MB from Debian; a machine without apt-get gets an error saying how to hand the
    # package over): only this corpus needs it, so it is not among the assets every setup fetches.
    folder = assets.fetch(ASSET, progress=lambda _message: None)
    texts = [p for novel in novels(folder / "Rdata.rdb") for p in paragraphs(novel)]
    ids = np.concatenate([np.asarray(e.ids, dtype=np.int32)
                          for e in tokenizer.encode_batch(texts, add_special_tokens=False)])
    return ids[np.isin(ids, sampleable_ids())]  # [UNK] (a character the vocabulary lacks) is never a target


@lru_cache(maxsize=1)
def token_stream() -> np.ndarray:
    """Every novel as one stream of ordinary MiniLM ids (about 0.9 M), built once and cached."""
    return cached_array(_stream_path(), _build_stream)


def text_part(held_out: bool) -> np.ndarray:
    """The first 95 % of the stream (training), or the last 5 % (``held_out``)."""
    return held_out_tail(token_stream(), held_out, HELD_OUT_SHARE)
