"""A pooled per-example test of two conditions: the report's secondary figure beside the seed-level verdict.

Both conditions of a claim are tested on the same test examples (the split does not change with the run's
seed), so their records' per-example right/wrong (:attr:`labcore.results.record.RunRecord.test_correct`) can be pooled
over the paired seeds into one McNemar test: the examples one condition got right and the other wrong, and the
reverse. It has far more power than the seed-level rule and answers a narrower question: it ignores the
variance between seeds (a new data order, mapping or head), so it never decides a claim; the report shows it,
labelled so, where the seed-level rule is the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from labcore.results.record import RunRecord, unpack_correct


@dataclass(frozen=True)
class Pooled:
    seeds: int  # paired seeds pooled
    examples: int  # test examples a seed
    only_a: int  # right under a, wrong under b (summed over seeds)
    only_b: int
    p_value: float  # exact two-sided McNemar (binomial on the discordant pairs)

    def sentence(self) -> str:
        return (f"pooled per-example test (McNemar, ignores seed variance): over {self.seeds} seeds x "
                f"{self.examples} test examples, {self.only_a} right only under a, {self.only_b} only under b, "
                f"p = {self.p_value:.2g}")


def pooled_mcnemar(a: Mapping[int, Any], b: Mapping[int, Any]) -> Pooled | None:
    """McNemar over the seeds whose records on both sides kept their per-example results (same test set);
    None where no pair has them."""
    from scipy.stats import binomtest

    only_a = only_b = seeds = examples = 0
    for seed in sorted(set(a) & set(b)):
        ra, rb = a[seed], b[seed]
        if not (isinstance(ra, RunRecord) and isinstance(rb, RunRecord)) or "done" != ra.status or "done" != rb.status:
            continue
        xa, xb = unpack_correct(ra.test_correct), unpack_correct(rb.test_correct)
        if xa is None or xb is None or len(xa) != len(xb):
            continue
        only_a += int((xa & ~xb).sum())
        only_b += int((~xa & xb).sum())
        seeds, examples = seeds + 1, len(xa)
    if not seeds:
        return None
    discordant = only_a + only_b
    p = binomtest(only_a, discordant, 0.5).pvalue if discordant else 1.0
    return Pooled(seeds, examples, only_a, only_b, float(p))


__all__ = ["Pooled", "pooled_mcnemar"]
