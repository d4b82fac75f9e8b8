"""ListOps: nested MIN / MAX / MED / SUM_MOD expressions over digits (Lu et al. 2021, §2.1, from LRA).

An example is a bracketed expression such as ``[MAX 4 3 [MIN 2 3 ] 1 0 ]``; the label is its value,
a digit 0-9. The generator follows the Long Range Arena generator (``lra_benchmarks/data/listops.py``):
a random tree where each node below ``max_depth`` is an operator with probability 0.25 (else a digit),
an operator takes 2..``max_args`` arguments, and trees whose token count falls outside the length
window are drawn again. Values are computed exactly while the tree is built.

Two deliberate differences from LRA's files, both stated in ``info.notes``:

* the root is always an operator. LRA draws a digit root three times in four and then rejects it
  (length 1 is below any minimum length), so forcing the root gives the same accepted distribution
  without the wasted draws.
* the closing bracket ``]`` is a token. LRA's input pipeline tokenised with TFDS's alphanumeric-only
  tokenizer, which silently dropped every bracket; we keep the generator's own vocabulary so an
  expression can be read back unambiguously.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo
from labcore.errors import DataValidationError, LabError

DIGITS = tuple(str(d) for d in range(10))
OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")  # SM = sum modulo 10
CLOSE = "]"
ALPHABET = DIGITS + OPERATORS + (CLOSE,)  # token id = index: digits 0-9, operators 10-13, "]" 14
CLASSES = DIGITS

_OP_BASE = len(DIGITS)
_CLOSE_ID = len(ALPHABET) - 1
_OPERATOR_P = 0.25  # LRA's VALUE_P: a node below max_depth is an operator with this probability
_MIN_TREE_LENGTH = 4  # the shortest expression: an operator, two digits, "]"


def apply_operator(op: str, values: Sequence[int]) -> int:
    """Value of one operator over its argument values.

    MED of an even count is the mean of the two middle values rounded down, which is what LRA's
    ``int(np.median(values))`` gives for non-negative digits (``int`` truncates toward zero).
    """
    if not values:
        raise DataValidationError(f"operator {op} has no arguments; every operator needs at least one")
    if op == "[MIN":
        return min(values)
    if op == "[MAX":
        return max(values)
    if op == "[SM":
        return sum(values) % 10
    if op == "[MED":
        s = sorted(values)
        mid = len(s) // 2
        return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) // 2
    raise DataValidationError(f"unknown operator {op!r}; valid operators: {', '.join(OPERATORS)}")


def to_symbols(tokens: Sequence[int]) -> list[str]:
    return [ALPHABET[t] for t in tokens]


def evaluate(expression: str | Sequence[str]) -> int:
    """Value of an expression given as a string (symbols separated by spaces) or a list of symbols.

    >>> evaluate("[MAX 4 3 [MIN 2 3 ] 1 0 ]")
    4
    """
    symbols = expression.split() if isinstance(expression, str) else list(expression)
    if not symbols:
        raise DataValidationError("empty expression; give digits and operators such as '[MAX 4 3 ]'")
    # Each open operator keeps its argument list; "]" applies it and hands the value to its parent.
    stack: list[tuple[str, list[int]]] = []
    result: int | None = None
    for position, sym in enumerate(symbols):
        if result is not None:
            raise DataValidationError(f"symbol {sym!r} at position {position} follows a complete "
                                      f"expression; remove it or wrap both in an operator")
        if sym in OPERATORS:
            stack.append((sym, []))
        elif sym in DIGITS or sym == CLOSE:
            if sym == CLOSE:
                if not stack:
                    raise DataValidationError(f"']' at position {position} closes nothing; "
                                              f"remove it or open an operator before it")
                op, values = stack.pop()
                value = apply_operator(op, values)
            else:
                value = int(sym)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        else:
            raise DataValidationError(f"unknown symbol {sym!r} at position {position}; valid symbols: "
                                      f"{' '.join(ALPHABET)}")
    if stack:
        raise DataValidationError(f"{len(stack)} operator(s) never closed; add ']' for each")
    assert result is not None
    return result


@dataclass(frozen=True)
class ListOpsParams:
    max_depth: int = 10  # LRA: operators occur at depths 1..max_depth-1, leaves at max_depth are digits
    max_args: int = 10  # LRA: each operator takes 2..max_args arguments
    min_length: int = 16  # tokens, inclusive; LRA used 500 (exclusive)
    max_length: int = 128  # tokens, inclusive; longer trees are drawn again. LRA used 2000 (exclusive)
    truncate_to: int = 0  # keep only the first N tokens (0 = keep all), as FPT's input pipeline did
    n_train: int = 10_000
    n_validation: int = 1_000
    n_test: int = 1_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_depth < 2:
            raise LabError(f"listops max_depth={self.max_depth} leaves no room for an operator; use 2 or more")
        if self.max_args < 2:
            raise LabError(f"listops max_args={self.max_args}: operators take 2..max_args arguments; use 2 or more")
        if self.max_length < _MIN_TREE_LENGTH:
            raise LabError(f"listops max_length={self.max_length} is below the shortest expression "
                           f"({_MIN_TREE_LENGTH} tokens, e.g. '[MAX 1 2 ]'); use {_MIN_TREE_LENGTH} or more")
        if self.min_length > self.max_length:
            raise LabError(f"listops min_length={self.min_length} exceeds max_length={self.max_length}; "
                           f"lower min_length or raise max_length")
        longest = _longest_tree(self.max_depth, self.max_args)
        if self.min_length > longest:
            raise LabError(f"listops: no tree with max_depth={self.max_depth}, max_args={self.max_args} "
                           f"reaches min_length={self.min_length} (longest possible: {longest}); lower "
                           f"min_length or raise max_depth / max_args")
        if self.truncate_to < 0:
            raise LabError(f"listops truncate_to={self.truncate_to} is negative; use 0 (keep all) or a length")
        if self.n_train < 1 or self.n_validation < 1 or self.n_test < 1:
            raise LabError("listops n_train, n_validation and n_test must each be at least 1")


def _longest_tree(max_depth: int, max_args: int) -> int:
    length = 1  # a digit at max_depth
    for _ in range(max_depth - 1):
        length = max_args * length + 2
    return length


class _TooLong(Exception):
    """Raised inside the recursion to abandon a tree as soon as it passes max_length."""


def _uniforms(rng, block: int = 1 << 16) -> Iterator[float]:
    # One numpy call per 65k draws: per-draw Generator calls would dominate the pure-Python tree walk.
    while True:
        yield from rng.random(block).tolist()


def generate(params: ListOpsParams, n: int, seed: int) -> tuple[list[list[int]], list[int], int]:
    """``n`` distinct expressions (token ids) inside the length window, their values, and draws used.

    Distinct across the whole set, as LRA (which kept a ``set`` of trees), so splits cut from it are
    disjoint. Trees past ``max_length`` are abandoned mid-build: they would be rejected anyway, and
    every draw is independent, so this changes the cost, not the distribution.
    """
    import numpy as np

    u = _uniforms(np.random.default_rng(seed)).__next__
    max_depth, max_args, max_length = params.max_depth, params.max_args, params.max_length

    def node(depth: int, out: list[int]) -> int:
        if depth < max_depth and u() < _OPERATOR_P:
            return operator(depth, out)
        digit = int(u() * 10)
        out.append(digit)
        return digit

    def operator(depth: int, out: list[int]) -> int:
        n_args = 2 + int(u() * (max_args - 1))
        op = int(u() * len(OPERATORS))
        out.append(_OP_BASE + op)
        values = []
        for _ in range(n_args):
            values.append(node(depth + 1, out))
            if len(out) >= max_length:  # the closing "]" would still follow
                raise _TooLong
        out.append(_CLOSE_ID)
        return apply_operator(OPERATORS[op], values)

    seen: set[tuple[int, ...]] = set()
    rows: list[list[int]] = []
    labels: list[int] = []
    draws = last_new = 0
    while len(rows) < n:
        draws += 1
        out: list[int] = []
        try:
            value = operator(1, out)  # the root is an operator: see the module docstring
        except _TooLong:
            value = -1
        if value >= 0 and len(out) >= params.min_length:
            key = tuple(out)
            if key not in seen:
                seen.add(key)
                rows.append(out)
                labels.append(value)
                last_new = draws
        # Stop rather than spin when the window is too narrow (rare fits) or too small (all repeats).
        if draws - last_new >= 100_000 or (draws >= 50_000 and len(rows) * 5_000 < draws):
            raise LabError(f"listops: only {len(rows)} distinct expressions in {draws} draws fit "
                           f"{params.min_length}..{params.max_length} tokens; widen the window "
                           f"(min_length / max_length) or ask for fewer examples")
    return rows, labels, draws


@register
class ListOps(Discipline):
    name = "listops"
    title = "ListOps (nested list operations)"
    Params = ListOpsParams
    presets = {
        # LRA's generator settings and sizes; FPT then fed the first 512 tokens of each expression.
        "paper": {"max_depth": 10, "max_args": 10, "min_length": 501, "max_length": 1999,
                  "truncate_to": 512, "n_train": 96_000, "n_validation": 2_000, "n_test": 2_000},
    }

    def info(self, params: ListOpsParams) -> DisciplineInfo:
        longest = min(params.max_length, params.truncate_to) if params.truncate_to else params.max_length
        truncation = (f" Each example keeps only its first {params.truncate_to} tokens (FPT's input "
                      f"pipeline did the same), while the label is the value of the whole expression, so "
                      f"some labels cannot be computed from what the model sees."
                      if params.truncate_to and params.truncate_to < params.max_length else "")
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="tokens", output_kind="class",
            metric="accuracy", alphabet=ALPHABET, class_names=CLASSES, max_length=longest,
            citation="Lu et al. 2021 (FPT), §2.1 ListOps; generator of Tay et al. 2020 (Long Range Arena)",
            source="generated here with the Long Range Arena ListOps rules (seeded)",
            licence="generated data, no licence restrictions (LRA generator rules: Apache-2.0)",
            notes=(f"{params.n_train}/{params.n_validation}/{params.n_test} distinct expressions of "
                   f"{params.min_length}..{params.max_length} tokens (both inclusive; longer or shorter "
                   f"trees are drawn again), so the splits are disjoint. Operators MIN, MAX, MED (median; "
                   f"even count: mean of the middle two rounded down, as LRA) and SM (sum mod 10), 2.."
                   f"{params.max_args} arguments, depth <= {params.max_depth}. The root is always an "
                   f"operator and ']' is kept as a token (LRA's tokenizer dropped brackets). The classes "
                   f"are skewed (long MIN lists tend to 0, MAX lists to 9): compare with the majority "
                   f"class, not with 10 %.{truncation}"),
        )

    def build(self, params: ListOpsParams, progress):
        import datasets

        total = params.n_train + params.n_validation + params.n_test
        progress(f"generating {total} ListOps expressions of {params.min_length}..{params.max_length} tokens")
        rows, labels, draws = generate(params, total, params.seed)
        progress(f"kept {total} of {draws} drawn trees")
        if params.truncate_to:
            rows = [r[:params.truncate_to] for r in rows]
        features = datasets.Features({"tokens": datasets.List(datasets.Value("int64")),
                                      "label": datasets.Value("int64")})
        cuts = {"train": (0, params.n_train),
                "validation": (params.n_train, params.n_train + params.n_validation),
                "test": (params.n_train + params.n_validation, total)}
        # Rows come in draw order, i.i.d., so consecutive blocks are random splits already.
        return datasets.DatasetDict({
            split: datasets.Dataset.from_dict({"tokens": rows[a:b], "label": labels[a:b]}, features=features)
            for split, (a, b) in cuts.items()})
