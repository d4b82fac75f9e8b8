"""Bit XOR and bit memory: the synthetic bit tasks of Lu et al. 2021 (FPT), §2.1.

Both feed the model vectors rather than symbols (``input_kind == "vectors"``): FPT passes each token
through a trained linear input layer, so a bit arrives as a number, not as a vocabulary entry.

FPT draws a fresh batch at every step. The lab trains on a fixed, cached data set instead, so that a
run is reproducible and pretrained and scratch models see the same examples. Inputs are drawn
distinct wherever the input space allows, which keeps train, validation and test disjoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo
from labcore.errors import LabError

_FPT = "Lu et al. 2021 (FPT)"
_GENERATED_LICENCE = "generated data, no licence restrictions"
# Below this many input bits the input space is enumerated exactly (2**24 ids fit comfortably).
_ENUMERATE_BELOW = 24


def _check_sizes(task: str, n_train: int, n_validation: int, n_test: int) -> None:
    if n_train < 1 or n_validation < 1 or n_test < 1:
        raise LabError(f"{task}: n_train, n_validation and n_test must each be at least 1 "
                       f"(got {n_train}/{n_validation}/{n_test})")


def _distinct_rows(draw: Callable[[int], "np.ndarray"], total: int, task: str,  # noqa: F821
                   key_width: int | None = None) -> "np.ndarray":  # noqa: F821
    """Draw rows in batches until ``total`` rows distinct in their first ``key_width`` columns (all
    columns if None) are found, in draw order.

    Used where the input space is far larger than the data set, so a duplicate is rare and a few
    extra draws replace it; the bound on rounds only guards against a space that is too small.
    """
    import numpy as np

    seen: set[bytes] = set()
    kept: list[np.ndarray] = []
    need = total
    for _ in range(100):
        batch = draw(need)
        for row in batch:
            key = row[:key_width].tobytes()
            if key not in seen:
                seen.add(key)
                kept.append(row)
        need = total - len(kept)
        if need == 0:
            return np.stack(kept)
    raise LabError(f"{task}: found only {len(kept)} distinct inputs for the {total} asked; the input "
                   f"space is too small: lower n_train / n_validation / n_test or raise n_bits")


def _split_blocks(arrays: dict[str, "np.ndarray"], sizes: tuple[int, int, int], features):  # noqa: F821
    """Cut consecutive blocks of i.i.d. rows into train / validation / test."""
    import datasets

    bounds = (0, sizes[0], sizes[0] + sizes[1], sum(sizes))
    return datasets.DatasetDict({
        split: datasets.Dataset.from_dict({k: v[bounds[i]:bounds[i + 1]] for k, v in arrays.items()},
                                          features=features)
        for i, split in enumerate(("train", "validation", "test"))})


def _vector_features(multilabel: bool):
    import datasets

    label = datasets.List(datasets.Value("int64")) if multilabel else datasets.Value("int64")
    return datasets.Features({"vectors": datasets.List(datasets.List(datasets.Value("float32"))),
                              "label": label})


# --------------------------------------------------------------------------------------------------
# bit XOR


@dataclass(frozen=True)
class XorParams:
    n_bits: int = 5  # length of each of the two bitstrings (paper: 5)
    n_train: int = 768
    n_validation: int = 128
    n_test: int = 128  # defaults use all 1,024 distinct inputs of n_bits = 5 exactly once
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.n_bits <= 1024:
            raise LabError(f"bits-xor n_bits={self.n_bits} is out of range; use 1..1024 (paper: 5)")
        _check_sizes("bits-xor", self.n_train, self.n_validation, self.n_test)

    @property
    def total(self) -> int:
        return self.n_train + self.n_validation + self.n_test

    @property
    def disjoint(self) -> bool:
        """Whether every example can have its own input (the two strings give 2**(2n) inputs)."""
        return self.total <= 2 ** (2 * self.n_bits)


def xor_inputs(params: XorParams) -> "np.ndarray":  # noqa: F821
    """``[total, 2 * n_bits]`` array of 0/1: the first string, then the second."""
    import numpy as np

    rng = np.random.default_rng(params.seed)
    width = 2 * params.n_bits
    if not params.disjoint:
        # More examples than distinct inputs: draw with replacement, as FPT's fresh batches do.
        return rng.integers(0, 2, size=(params.total, width), dtype=np.int8)
    if width <= _ENUMERATE_BELOW:
        # Exact sampling without replacement from the enumerated space: no rejection loop needed.
        ids = rng.choice(2 ** width, size=params.total, replace=False)
        shifts = np.arange(width - 1, -1, -1)
        return ((ids[:, None] >> shifts) & 1).astype(np.int8)
    return _distinct_rows(lambda k: rng.integers(0, 2, size=(k, width), dtype=np.int8), params.total,
                          "bits-xor")


@register
class BitsXor(Discipline):
    name = "bits-xor"
    title = "Bit XOR"
    Params = XorParams
    presets = {
        "paper": {"n_bits": 5},
        # §3.1: FPT still learns XOR exactly on strings of 256 bits (512 tokens of dimension 1).
        "paper-n256": {"n_bits": 256, "n_train": 20_000, "n_validation": 2_000, "n_test": 2_000},
    }

    def info(self, params: XorParams) -> DisciplineInfo:
        space = 2 ** (2 * params.n_bits)
        if params.disjoint:
            split = ("Inputs are drawn without replacement, so train / validation / test are disjoint"
                     + (f" (all {space:,} distinct inputs, each used once)."
                        if params.total == space else "."))
        else:
            split = (f"There are only {space:,} distinct inputs for {params.total:,} examples, so inputs "
                     f"are drawn with replacement and the splits overlap; lower the sizes to "
                     f"{space:,} in all to make them disjoint.")
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="vectors", output_kind="multilabel",
            metric="bit_accuracy", vector_dim=1, n_bits=params.n_bits, max_length=2 * params.n_bits, bit_groups=2,
            citation=f"{_FPT}, §2.1 Bit XOR",
            source="generated here (seeded)", licence=_GENERATED_LICENCE,
            notes=(f"Two random strings of {params.n_bits} bits shown one bit per token (0.0 or 1.0, as "
                   f"in FPT's code): {2 * params.n_bits} tokens of dimension 1, first string then second. "
                   f"Target: their element-wise XOR ({params.n_bits} bits). FPT samples a fresh batch "
                   f"at every step; here the data set is fixed. {split}"),
        )

    def build(self, params: XorParams, progress):
        progress(f"generating {params.total} bit-XOR examples of {params.n_bits} bits")
        bits = xor_inputs(params)
        n = params.n_bits
        target = (bits[:, :n] ^ bits[:, n:]).astype("int64")
        vectors = bits.astype("float32")[:, :, None]  # one bit per token: [total, 2n, 1]
        return _split_blocks({"vectors": vectors, "label": target},
                             (params.n_train, params.n_validation, params.n_test), _vector_features(True))


# --------------------------------------------------------------------------------------------------
# bit memory


@dataclass(frozen=True)
class MemoryParams:
    n_bits: int = 100  # length of each bitstring (paper: 1000)
    token_dim: int = 10  # bits per token (paper: 50); must divide n_bits
    n_patterns: int = 5  # strings to remember (paper: 5)
    mask_prob: float = 0.5  # chance that a bit of the query is masked (paper: 0.5)
    n_train: int = 4_000
    n_validation: int = 500
    n_test: int = 500
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_bits < 1 or self.token_dim < 1 or self.n_bits % self.token_dim:
            raise LabError(f"bits-memory: token_dim={self.token_dim} must divide n_bits={self.n_bits} "
                           f"(each token holds token_dim bits of one string); e.g. n_bits=100, token_dim=10")
        if not 1 <= self.n_patterns <= 100:
            raise LabError(f"bits-memory n_patterns={self.n_patterns} is out of range; use 1..100 (paper: 5)")
        if not 0.0 <= self.mask_prob < 1.0:
            raise LabError(f"bits-memory mask_prob={self.mask_prob} must be in [0, 1) (paper: 0.5)")
        _check_sizes("bits-memory", self.n_train, self.n_validation, self.n_test)

    @property
    def total(self) -> int:
        return self.n_train + self.n_validation + self.n_test

    @property
    def n_tokens(self) -> int:
        return (self.n_patterns + 1) * self.n_bits // self.token_dim


def memory_examples(params: MemoryParams) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:  # noqa: F821
    """Inputs ``[total, n_patterns + 1, n_bits]`` in {-1, 0, +1}, query indices, targets in {0, 1}.

    The last row of each input is the masked query (0 = masked). Inputs are distinct across the set.
    """
    import numpy as np

    rng = np.random.default_rng(params.seed)
    p, n = params.n_patterns, params.n_bits

    def draw(k: int) -> np.ndarray:
        patterns = rng.integers(0, 2, size=(k, p, n), dtype=np.int8) * 2 - 1  # +1 / -1, as FPT
        query = rng.integers(0, p, size=k)
        keep = rng.random((k, n)) >= params.mask_prob
        masked = np.where(keep, patterns[np.arange(k), query], 0).astype(np.int8)
        # The query index travels in an extra column so the target can be read back after dedup.
        return np.concatenate([patterns.reshape(k, p * n), masked, query[:, None].astype(np.int8)], axis=1)

    # Distinct by the input alone (the query index column is left out of the key).
    rows = _distinct_rows(draw, params.total, "bits-memory", key_width=(p + 1) * n)
    query = rows[:, -1].astype(np.int64)
    inputs = rows[:, :-1].reshape(params.total, p + 1, n)
    targets = (inputs[np.arange(params.total), query] > 0).astype(np.int64)
    return inputs, query, targets


@register
class BitsMemory(Discipline):
    name = "bits-memory"
    title = "Bit memory"
    Params = MemoryParams
    presets = {
        # 5 strings of 1000 bits in tokens of 50 bits: 100 + 20 = 120 tokens of dimension 50.
        "paper": {"n_bits": 1000, "token_dim": 50, "n_patterns": 5, "mask_prob": 0.5,
                  "n_train": 10_000, "n_validation": 1_000, "n_test": 1_000},
    }

    def floor(self, params: MemoryParams) -> tuple[float, str]:
        # the query shows every unmasked bit: copying it gets those right and half of the masked ones by chance
        # (FPT's frozen random body scored 75.8 %, table 2)
        return 1.0 - params.mask_prob / 2, "copying the query's unmasked bits"

    def info(self, params: MemoryParams) -> DisciplineInfo:
        per_string = params.n_bits // params.token_dim
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="vectors", output_kind="multilabel",
            metric="bit_accuracy", vector_dim=params.token_dim, n_bits=params.n_bits,
            max_length=params.n_tokens,
            citation=f"{_FPT}, §2.1 Bit memory (after Miconi et al. 2018)",
            source="generated here (seeded)", licence=_GENERATED_LICENCE,
            notes=(f"{params.n_patterns} random strings of {params.n_bits} bits, then a copy of one of "
                   f"them with each bit masked with probability {params.mask_prob}; target: that string "
                   f"unmasked ({params.n_bits} bits, 1 = +1). Bits are +1 / -1 and a masked bit is 0, as "
                   f"in FPT's code. Each string is cut into {per_string} tokens of {params.token_dim} "
                   f"bits: {params.n_tokens} tokens in all, the query last. FPT samples a fresh batch at "
                   f"every step; here the data set is fixed, and inputs are distinct, so train / "
                   f"validation / test are disjoint."),
        )

    def build(self, params: MemoryParams, progress):
        progress(f"generating {params.total} bit-memory examples ({params.n_tokens} tokens of "
                 f"dimension {params.token_dim})")
        inputs, _query, targets = memory_examples(params)
        vectors = inputs.reshape(params.total, params.n_tokens, params.token_dim).astype("float32")
        return _split_blocks({"vectors": vectors, "label": targets},
                             (params.n_train, params.n_validation, params.n_test), _vector_features(True))
