"""What parsing an upload gives (:class:`ParsedUpload`) and what a format module declares about itself
(:class:`UploadFormat`, collected in :mod:`labcore.data.upload.registry`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from labcore.data.upload.manifest import UploadLimits, UploadOptions


def numpy():
    # Imported on first use: the pages import the upload package, and most of them never parse.
    import numpy

    return numpy


@dataclass(frozen=True)
class ParsedUpload:
    """A validated upload as flat arrays: one entry per example (a window, for MIDI)."""

    input_kind: str
    class_names: tuple[str, ...]
    labels: Any  # int32 [N]: index into class_names
    tokens: Any = None  # input_kind "tokens": symbol ids (uint8 or uint16), all examples end to end
    offsets: Any = None  # int64 [N + 1]: example i is tokens[offsets[i]:offsets[i + 1]]
    vectors: Any = None  # input_kind "vectors": float32 array [N, patches, vector_dim]
    groups: Any = None  # MIDI: int32 [N], index into group_names (the file each window comes from)
    group_names: tuple[str, ...] = ()
    splits: Any = None  # int8 [N] when the file gives its own split: 0 train, 1 validation, 2 test
    alphabet: tuple[str, ...] = ()
    vector_dim: int = 0
    longest: int = 0
    truncated: int = 0
    ignored: int = 0
    skipped: tuple[str, ...] = ()  # MIDI entries left out as unreadable
    windowed: int = 0  # records cut into windows

    def arrays(self) -> dict[str, Any]:
        """The arrays saved as examples.npz (no object arrays: they load with allow_pickle=False)."""
        np = numpy()
        out = {"labels": self.labels}
        if self.input_kind == "tokens":
            out.update(tokens=self.tokens, offsets=self.offsets)
        else:
            out["vectors"] = self.vectors
        if self.groups is not None:
            out.update(groups=self.groups, group_names=np.array(self.group_names, dtype=str))
        if self.splits is not None:
            out["splits"] = self.splits
        return out


class Parse(Protocol):
    """A format's reader: the file at ``path``, read as ``options`` say and within ``limits``; ``source``
    names the file in error messages (the user's file name; the path's own name if not given). Raises
    :class:`~labcore.errors.DataValidationError` naming the line or entry and the fix."""

    def __call__(self, path: Path, options: UploadOptions, limits: UploadLimits,
                 source: str = "") -> ParsedUpload: ...


@dataclass(frozen=True)
class UploadFormat:
    """One upload format: how a file of it is recognised, stored and read."""

    kind: str  # the name kind= takes and the manifest keeps
    extensions: tuple[str, ...]  # file name endings (lower case, with the dot) that mean this format
    stored_name: str  # the file's name inside the upload folder
    # max_length when the upload gives 0: symbols, notes per window or patches per image
    default_max_length: int
    hint: str  # what a file of this format holds, for the refusal of an empty file
    parse: Parse
    # records of symbols (CSV, FASTA): a chosen field holds the label or the split, and over-long
    # records may be cut into windows
    records: bool = False
