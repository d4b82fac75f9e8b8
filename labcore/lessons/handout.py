"""What a class takes home from a lesson: one self-contained HTML page (plotly inlined, so it opens offline) and
the same page printed to PDF by headless Chromium (a kept renderer, not PDF written by hand).

It holds the question, the class's predictions (counted, with no names unless the teacher asks for them), the
measured figures and numbers with their 95 % intervals, the explanation written from those numbers, the paper
reference, and the command line that reruns the lesson; once a what-if has been revealed, the option the class
chose (a mapping table it proposed included), what it measured beside the run it changed, and its command line.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from labcore.errors import LabError
from labcore.figures import lessons as lesson_figures
from labcore.figures.style import figure_html
from labcore.lessons.explain import explain
from labcore.lessons.runs import command, whatif_role, whatif_spec
from labcore.lessons.measure import Measured, is_right
from labcore.lessons.model import Lesson
from labcore.recipes.demos import PAPERS

CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
STYLE = ("body{font-family:sans-serif;max-width:820px;margin:24px auto;color:#222}h1{font-size:24px}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
         "code{background:#f3f3f3;padding:2px 4px}")


def _text(guess: Any) -> str:
    return " > ".join(guess) if isinstance(guess, (list, tuple)) else (f"{guess:.2f}" if isinstance(guess, float)
                                                                       else str(guess))


def _predictions(lesson: Lesson, measured: Measured, guesses: Sequence[Any], names: Sequence[str] | None) -> str:
    right = sum(1 for g in guesses if is_right(lesson, measured, g))
    head = f"<p>{len(guesses)} predictions; {right} right ({right / max(1, len(guesses)):.0%}).</p>"
    if names is not None:
        rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{html.escape(_text(g))}</td>"
                       f"<td>{'right' if is_right(lesson, measured, g) else ''}</td></tr>"
                       for n, g in zip(names, guesses))
        return head + f"<table><tr><th>student</th><th>prediction</th><th></th></tr>{rows}</table>"
    counts = Counter(_text(g) for g in guesses)
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in sorted(counts.items()))
    return head + f"<table><tr><th>prediction</th><th>students</th></tr>{rows}</table>"


def _figures(lesson: Lesson, measured: Measured, guesses: Sequence[Any]) -> str:
    question = lesson.question
    if question.kind == "number":
        guessed = lesson_figures.number_histogram([float(g) for g in guesses], question.low, question.high,
                                                  unit=question.unit, answer=measured.value, answer_low=measured.low,
                                                  answer_high=measured.high, title="The class's predictions")
    else:
        guessed = lesson_figures.answer_bars(guesses, question.choices if question.kind == "choice" else (),
                                             answer=measured.answer, title="The class's predictions")
    values = measured.values
    bars = lesson_figures.measured_bars([v.role for v in values], [v.mean for v in values], [v.low for v in values],
                                        [v.high for v in values], metric=measured.metric, floor=measured.floor,
                                        title="What the runs measured (95 % intervals)")
    for fig in (guessed, bars):
        fig.update_layout(width=760, height=360)
    return figure_html(guessed, with_script=True) + figure_html(bars, with_script=False)


def _whatif(lesson: Lesson, option: str, measured: Measured | None) -> str:
    """The what-if the class chose, named as its run is (a proposed table with its rows), and what it measured."""
    if not option or lesson.whatif is None or measured is None:
        return ""
    e = html.escape
    rows = "".join(f"<tr><td>{e(v.role)}</td><td>{v.mean:.3f}</td><td>{v.low:.3f} to {v.high:.3f}</td></tr>"
                   for v in measured.values)
    gap = (f" The gap: {measured.value:+.3f} (95 % interval {measured.low:+.3f} to {measured.high:+.3f})."
           if measured.value is not None else "")
    return (f"<h2>What if?</h2><p>{e(lesson.whatif.text)}</p>"
            f"<p>The class chose <b>{e(whatif_role(lesson, option))}</b>.{e(gap)}</p>"
            f"<table><tr><th>condition</th><th>{e(measured.metric.replace('_', ' '))}</th><th>95 % interval</th>"
            f"</tr>{rows}</table><p><code>{e(whatif_spec(lesson, option).cli())}</code></p>")


def handout_html(lesson: Lesson, measured: Measured, guesses: Sequence[Any], names: Sequence[str] | None = None,
                 whatif: str = "", whatif_measured: Measured | None = None) -> str:
    """The handout as one HTML page; ``names`` (one per guess) only where the teacher asks for them; ``whatif``
    (the option the class chose) with ``whatif_measured`` (its run beside the one it changes) once revealed."""
    rows = "".join(f"<tr><td>{html.escape(v.role)}</td><td>{v.mean:.3f}</td><td>{v.low:.3f} to {v.high:.3f}</td>"
                   f"</tr>" for v in measured.values)
    answer = (f"{measured.value:.3f} (95 % interval {measured.low:.3f} to {measured.high:.3f})"
              if measured.value is not None else measured.answer)
    e = html.escape
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{e(lesson.title)}</title>"
            f"<style>{STYLE}</style></head><body>"
            f"<h1>{e(lesson.title)}</h1><p>{e(lesson.background)}</p>"
            f"<h2>The question</h2><p>{e(lesson.question.text)}</p>"
            f"<h2>The class's predictions</h2>{_predictions(lesson, measured, guesses, names)}"
            f"<h2>The answer</h2><p>Measured: <b>{e(answer)}</b></p>"
            f"<table><tr><th>condition</th><th>{e(measured.metric.replace('_', ' '))}</th><th>95 % interval</th></tr>"
            f"{rows}</table>{_figures(lesson, measured, guesses)}"
            f"<h2>Why</h2><p>{e(explain(lesson, measured))}</p>"
            f"{_whatif(lesson, whatif, whatif_measured)}"
            f"<h2>Where it comes from</h2><p>{e(PAPERS[lesson.paper])}: {e(lesson.source)}.</p>"
            f"<h2>Run it again</h2><p><code>{e(command(lesson.name))}</code> (finished runs are read from the "
            f"lab's store; a fresh lab trains them)</p></body></html>")


def chromium() -> str:
    for name in CHROMIUM:
        found = shutil.which(name) or (name if os.path.isfile(name) else None)
        if found:
            return found
    raise LabError("no Chromium here to print the handout to PDF: install it (Debian: apt-get install chromium) "
                   "or download the HTML handout and print it from a browser")


def handout_pdf(page: str, timeout_s: float = 90.0) -> bytes:
    """``page`` (HTML) printed to PDF by headless Chromium (A4-sized by its defaults, no header or footer)."""
    with tempfile.TemporaryDirectory(prefix="handout-") as folder:
        source, target = Path(folder) / "handout.html", Path(folder) / "handout.pdf"
        source.write_text(page, encoding="utf-8")
        # a profile of its own: a second Chromium (the teacher's browser) must not share its lock
        args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                f"--user-data-dir={folder}/profile", "--virtual-time-budget=5000",
                f"--print-to-pdf={target}", source.as_uri()]
        try:
            subprocess.run(args, capture_output=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise LabError(f"Chromium took over {timeout_s:.0f} s to print the handout; download the HTML") from None
        if not target.is_file() or target.stat().st_size == 0:
            raise LabError("Chromium printed no PDF of the handout; download the HTML and print it from a browser")
        return target.read_bytes()
