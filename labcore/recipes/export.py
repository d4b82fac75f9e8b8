"""A recipe's report written out: the verdict table, the CSV, the terminal text and the self-contained HTML.

Pure functions of a :class:`labcore.recipes.report.Report` (and, for the CSV, its plan and results); the report
itself is built in :mod:`labcore.recipes.report`.
"""

from __future__ import annotations

import html
import io

import pandas as pd

from labcore.recipes import tuning
from labcore.recipes.base import Claim, Plan
from labcore.recipes.report import Report, Results, long_table
from labcore.recipes.undecided import decider_line
from labcore.recipes.verdict import ALPHA, LOOKS, NOMINAL_ALPHA, NOT_TESTED, Verdict


def verdict_table(report: Report) -> pd.DataFrame:
    rows = [dict(claim=c.id, question="paper" if c.headline else "lab", counted=v.primary, section=c.section,
                 paper=c.paper,
                 kind=v.kind, verdict=v.word, why=v.why(), a=v.a, b=v.b, mean_a=v.mean_a, mean_b=v.mean_b,
                 difference=v.difference, ci_low=v.ci_low, ci_high=v.ci_high, p_value=v.p_value, n=v.n,
                 decided_at=v.decided_at or None, n_a=v.n_a, n_b=v.n_b, cpu_minutes=round(v.cpu_s / 60, 2),
                 numbers=v.sentence(), pooled=v.pooled, undecided=decider_line(v, report.budget, report.machine))
            for c, v in report.claims]
    return pd.DataFrame(rows, columns=["claim", "question", "counted", "section", "paper", "kind", "verdict", "why",
                                       "a", "b", "mean_a", "mean_b", "difference", "ci_low", "ci_high", "p_value", "n",
                                       "decided_at", "n_a", "n_b", "cpu_minutes", "numbers", "pooled", "undecided"])


def headline_count(report: Report) -> dict[str, int]:
    """How the paper's headline claims stand, one counted verdict each (its primary task's): verdict word ->
    count; the claims' secondary rows and the lab's own questions are not counted."""
    out: dict[str, int] = {}
    for claim, verdict in report.claims:
        if claim.headline and verdict.primary:
            out[verdict.word] = out.get(verdict.word, 0) + 1
    return out


def to_csv(report: Report, plan: Plan, results: Results) -> str:
    """Every step's number and then every verdict, as one CSV text (two blocks, a header each)."""
    out = io.StringIO()
    out.write(f"# {report.title} ({report.budget} budget, seeds {', '.join(map(str, report.seeds))})\n")
    long_table(plan, results).to_csv(out, index=False)
    out.write("\n# verdicts\n")
    verdict_table(report).to_csv(out, index=False)
    return out.getvalue()


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
.holds { color: #1a7f37; font-weight: bold; } .does-not-hold { color: #b42318; font-weight: bold; }
.inconclusive { color: #8a6d00; font-weight: bold; } .open { color: #1f5fa8; font-weight: bold; }
.not-measured { color: #666; font-weight: bold; } .not-tested { color: #666; font-weight: bold; }
"""


def _frame_html(frame: pd.DataFrame) -> str:
    return frame.to_html(border=0, na_rep="–", float_format=lambda x: f"{x:.3f}")


def summary_line(report: Report) -> str:
    """Budget, seeds and how much of the recipe has finished, in one sentence."""
    return (f"{report.budget} budget, seeds {', '.join(map(str, report.seeds))}; {report.done} of {report.total} "
            f"jobs finished, {report.wall_s / 60:.1f} min of run time")


RULE = (f"Rule: a paired test of the per-seed differences (a two-sided t-test for a difference, two one-sided "
        f"tests for an equivalence within a stated margin), looked at after {', '.join(map(str, LOOKS))} pairs of "
        f"seeds at {NOMINAL_ALPHA:g} a look, which keeps the chance of any verdict under a true null at or below "
        f"{ALPHA:.0%} over all looks; a look tests a claim only where its runs learnt the task (the better side of a "
        f"difference, both sides of an equivalence, every run a claim on another measure reads, at least the "
        f"claim's smallest effect of interest above the task's floor), else the claim is not tested and leaves its "
        f"family; one counted verdict per claim, on a primary task fixed beforehand; Holm's correction over the "
        f"paper's claims (and, apart, over the lab's own questions, and the secondary rows); the spread of the "
        f"differences taken as at least the claim's resolution. A claim decided at a look stops; an open one gets "
        f"more seeds; one undecided at the last look is inconclusive.")


TUNING_TITLE = (f"Learning rates: each arm's validation metric per rate of the grid (seed {tuning.TUNE_SEED}, apart "
                f"from the verdicts' seeds) and the rate its seeds ran with")


def secondary_line(verdict: Verdict) -> str:
    """What the claim cost and the pooled per-example figure, under its verdict."""
    cost = ("" if verdict.primary else "secondary: a row beside the claim's counted verdict, not counted; ") + \
        f"{verdict.cpu_s / 60:.1f} CPU minutes of runs"
    return cost + (f"; {verdict.pooled}" if verdict.pooled else "")


def _claim_line(claim: Claim) -> str:
    who = "" if claim.headline else "the lab's question, not the paper's: "
    paper = f"; the paper: {claim.paper}" if claim.paper else ""
    why = f" ({claim.why})" if claim.why else ""
    primary = f" Counted on {claim.primary}: {claim.primary_why}." if claim.primary and claim.primary_why else ""
    return f"{who}{claim.text} ({claim.section}{paper}){why}{primary}"


def headline_line(report: Report) -> str:
    counts = headline_count(report)
    untested = counts.pop(NOT_TESTED, 0)
    total = sum(counts.values())
    decided = counts.get("holds", 0) + counts.get("does not hold", 0)
    line = (f"The paper's claims: {decided} of {total} tested decided ("
            + ", ".join(f"{n} {word}" for word, n in sorted(counts.items())) + ")")
    if untested:
        line += (f"; {untested} not tested, counted apart (their runs did not learn the task: outside Holm's "
                 f"family)")
    if report.dropped:
        line += f"; {len(report.dropped)} dropped from the headline claims (named with the reason)"
    return line


def dropped_lines(report: Report) -> list[str]:
    """Each claim taken out of the paper's headline claims, with the reason."""
    return [f"{claim.id}: {claim.dropped}" for claim in report.dropped]


def to_text(report: Report, *, all_tables: bool = True) -> str:
    """The report for a terminal: the summary, each claim with its verdicts and their numbers, then the
    tables (the first, the headline table, alone with ``all_tables=False``), and with ``all_tables`` the
    cuts, the paper's numbers and the notes. Figures stay in the HTML export."""
    lines = [report.title, summary_line(report), headline_line(report), "", "Claims and verdicts:"]
    shown = None
    for claim, verdict in report.claims:
        if claim.id != shown:
            lines.append(f"  {_claim_line(claim)}")
            shown = claim.id
        lines.append(f"    {verdict.word.upper()}: {verdict.claim}: {verdict.sentence()}")
        lines.append(f"      {secondary_line(verdict)}")
        if not verdict.decided and verdict.primary:
            lines.append(f"      {decider_line(verdict, report.budget, report.machine)}")
    lines.append("  " + RULE)
    if report.dropped:
        lines += ["", "Dropped from the paper's headline claims:"] + [f"  - {d}" for d in dropped_lines(report)]
    tables = report.tables if all_tables else report.tables[:1]
    for title, frame in tables:
        lines += ["", title + ":", frame.to_string()]
    if all_tables and report.tuning is not None:
        lines += ["", TUNING_TITLE + ":", report.tuning.to_string()]
    if all_tables:
        if report.cuts:
            lines += ["", "What this budget leaves out:"] + [f"  - {c}" for c in report.cuts]
        for numbers in report.paper_numbers:
            lines += ["", f"The paper's numbers: {numbers.source}:", numbers.table.to_string()]
        if report.notes:
            lines += ["", "Notes:"] + [f"  - {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def to_html(report: Report) -> str:
    """A self-contained HTML page: text, tables, and the figures with their script embedded (works offline)."""
    from labcore.figures import figure_html

    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(report.title)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>{e(report.title)}</h1>",
             f"<p>{e(summary_line(report))}.</p>", f"<p>{e(headline_line(report))}.</p>",
             "<h2>Claims and verdicts</h2><ul>"]
    for claim, verdict in report.claims:
        css = verdict.word.replace(" ", "-")
        undecided = decider_line(verdict, report.budget, report.machine) if verdict.primary else ""
        parts.append(f"<li><p>{e(_claim_line(claim))}</p><p><span class='{css}'>{e(verdict.word)}</span>"
                     f": {e(verdict.sentence())}</p><p><small>{e(secondary_line(verdict))}</small></p>"
                     + (f"<p><small>{e(undecided)}</small></p>" if undecided else "") + "</li>")
    parts.append(f"</ul><p>{e(RULE)}</p>")
    if report.dropped:
        parts.append("<h2>Dropped from the paper's headline claims</h2><ul>"
                     + "".join(f"<li>{e(d)}</li>" for d in dropped_lines(report)) + "</ul>")
    if report.cuts:
        parts.append("<h2>What this budget leaves out</h2><ul>" + "".join(f"<li>{e(c)}</li>" for c in report.cuts)
                     + "</ul>")
    for title, frame in report.tables:
        parts.append(f"<h2>{e(title)}</h2>{_frame_html(frame)}")
    if report.tuning is not None:
        parts.append(f"<h2>{e(TUNING_TITLE)}</h2>{_frame_html(report.tuning)}")
    for numbers in report.paper_numbers:
        parts.append(f"<h2>The paper's numbers: {e(numbers.source)}</h2>{_frame_html(numbers.table)}")
    for i, (title, figure) in enumerate(report.figures):
        # the script once, inline, with the first figure: the file opens without a network
        parts.append(f"<h2>{e(title)}</h2>" + figure_html(figure, with_script=i == 0))
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


__all__ = ["RULE", "TUNING_TITLE", "dropped_lines", "headline_count", "headline_line", "secondary_line",
           "summary_line", "to_csv",
           "to_html", "to_text", "verdict_table"]
