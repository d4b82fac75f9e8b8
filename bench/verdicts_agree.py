"""Compare the verdicts of two drives of the same recipes (two precisions, two machines), claim by claim.

    python bench/verdicts_agree.py first.csv second.csv

The files are ``bench/recipe_drive.py --out`` files. A claim decided one way in one and the other way in the
other is a contradiction (the rule must never produce one beyond its error rate); one decided in one and open
or inconclusive in the other is allowed. Prints every claim's pair of words, the counts, and exits 1 on any
contradiction.
"""

from __future__ import annotations

import sys

import pandas as pd

DECIDED = ("holds", "does not hold")


def compare(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """One row a claim both files judged: its two words and whether they contradict. A claim of several tasks has
    a row per task, so a row is known by its two sides (``a``, ``b``) as well as its name."""
    both = first.merge(second, on=["recipe", "claim", "a", "b"], suffixes=("_1", "_2"))[
        ["recipe", "claim", "a", "question_1", "verdict_1", "verdict_2", "n_1", "n_2"]]
    both["contradiction"] = both.verdict_1.isin(DECIDED) & both.verdict_2.isin(DECIDED) & \
        (both.verdict_1 != both.verdict_2)
    return both


def main() -> int:
    table = compare(pd.read_csv(sys.argv[1]), pd.read_csv(sys.argv[2]))
    print(table.to_string(index=False))
    same = int((table.verdict_1 == table.verdict_2).sum())
    bad = int(table.contradiction.sum())
    print(f"\n{len(table)} claims: {same} with the same word, {bad} contradictions, "
          f"{len(table) - same - bad} decided in one drive and left open in the other")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
