"""Why a claim is not decided, and what would decide it: the report's line under every undecided verdict.

Three reasons, from the verdict alone: its runs did not learn the task (the learnt gate: not tested), its
difference is below what the seeds' spread lets the rule see (undecided before the last look, with the plan
unable to grow), or the rule's looks are exhausted (undecided at the last look). What would decide it is
projected from the runs measured so far: the pairs a paired test at the rule's per-look level needs to find
the claim's smallest effect of interest (fixed with the claim, never the difference observed) at the spread
measured, and their CPU minutes at the run time a pair of its runs took on the machine that ran them.
Pure functions of a verdict and a few figures of its report.
"""

from __future__ import annotations

import math

from labcore.recipes.verdict import (EQUIVALENCE, INCONCLUSIVE, LOOKS, NOMINAL_ALPHA, NOT_MEASURED, NOT_TESTED, OPEN,
                                     Verdict)

POWER = 0.8  # the chance of finding the smallest effect of interest the projection sizes seeds for
NEXT_BUDGET = {"quick": "standard", "standard": "paper", "paper": ""}


def pairs_needed(sd: float, effect: float, equivalence: bool = False, nominal: float = NOMINAL_ALPHA,
                 power: float = POWER) -> int:
    """Pairs of seeds a paired t-test at the per-look level ``nominal`` needs to find a true difference of
    ``effect`` (an equivalence: to show a true difference of 0 within a margin of ``effect``) with chance
    ``power``, at a spread ``sd`` of the per-seed differences; the t quantiles refined until n settles."""
    from scipy import stats

    if not (sd > 0 and effect > 0):
        return LOOKS[0]
    alpha_side = nominal if equivalence else nominal / 2
    beta = (1 - power) / 2 if equivalence else 1 - power
    n = LOOKS[0]
    for _ in range(20):
        df = max(n - 1, 1)
        need = math.ceil(((stats.t.ppf(1 - alpha_side, df) + stats.t.ppf(1 - beta, df)) * sd / effect) ** 2)
        need = max(need, LOOKS[0])
        if need == n:
            break
        n = need
    return n


def pair_minutes(verdict: Verdict) -> float:
    """CPU minutes one pair of the claim's runs took here (NaN where none finished)."""
    pairs = verdict.n or min(verdict.n_a, verdict.n_b)
    return verdict.cpu_s / 60 / pairs if pairs and verdict.cpu_s else math.nan


def _minutes(pairs: int, per_pair: float, machine: str) -> str:
    if math.isnan(per_pair):
        return f"{pairs} pairs (no run of its has been timed here yet)"
    where = f" on {machine}" if machine else ""
    return f"{pairs} pairs, about {pairs * per_pair:.0f} CPU minutes{where} ({per_pair:.1f} a pair, as measured)"


def reason(verdict: Verdict) -> str:
    """Why the verdict is not decided, in a few words ("" where it is decided)."""
    if verdict.decided:
        return ""
    if verdict.word == NOT_MEASURED:
        return "not measured: a side has no finished run"
    if verdict.word == NOT_TESTED:
        return "not learnt: " + verdict.floor
    if verdict.word == OPEN:
        return f"open: the rule looks again at n = {next((n for n in LOOKS if n > verdict.n), LOOKS[0])}"
    if verdict.n >= LOOKS[-1]:
        return f"looks exhausted: undecided at the last look (n = {verdict.n})"
    return f"effect below the seeds' spread: undecided at n = {verdict.n}, and the plan adds no seeds"


def what_decides(verdict: Verdict, budget: str, machine: str = "") -> str:
    """What would decide the verdict, projected from its measured runs ("" where it is decided)."""
    if verdict.decided or verdict.word == NOT_MEASURED:
        return ""
    per_pair = pair_minutes(verdict)
    if verdict.word == NOT_TESTED:
        bigger = NEXT_BUDGET.get(budget, "")
        if not bigger:
            return ("runs that learn the task: the paper budget's did not, so a longer run or a larger model than "
                    "the papers' own settings on this machine")
        return (f"runs that learn the task: the {bigger} budget's longer runs, {LOOKS[0]} pairs to start (its runs "
                f"are not timed here; a {budget} pair of them took "
                + (f"{per_pair:.1f} CPU minutes" if not math.isnan(per_pair) else "no measured time")
                + (f" on {machine}" if machine else "") + ")")
    sd = verdict.looks[-1].sd if verdict.looks else math.nan
    test = verdict.test
    effect = test.margin if test.kind == EQUIVALENCE else test.effect
    if math.isnan(sd):
        return f"{LOOKS[0]} pairs for a first look: " + _minutes(LOOKS[0], per_pair, machine)
    need = pairs_needed(sd, effect, test.kind == EQUIVALENCE)
    sized = (f"at the spread measured ({sd:.3f}), finding the smallest effect of interest ({effect:g}) with chance "
             f"{POWER:.0%} takes {_minutes(need, per_pair, machine)}")
    if verdict.word == OPEN or (verdict.word == INCONCLUSIVE and verdict.n < LOOKS[-1]):
        more = (f"the rule's looks up to n = {LOOKS[-1]}" if need <= LOOKS[-1]
                else f"more than the rule's last look (n = {LOOKS[-1]}): a plan with later looks")
        return f"{sized}: {more}"
    return f"{sized}: past the rule's last look, a new plan with more looks (or a larger effect than measured)"


def decider_line(verdict: Verdict, budget: str, machine: str = "") -> str:
    """"why; what would decide it" for an undecided verdict ("" for a decided one)."""
    why = reason(verdict)
    decides = what_decides(verdict, budget, machine)
    return f"{why}; would decide it: {decides}" if decides else why


__all__ = ["NEXT_BUDGET", "POWER", "decider_line", "pair_minutes", "pairs_needed", "reason", "what_decides"]
