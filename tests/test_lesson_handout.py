"""The handout: one self-contained HTML page and its PDF (headless Chromium), with the question, the class's
predictions without names (unless asked), the measured numbers and intervals, the explanation, the paper and the
command line."""

from __future__ import annotations

import shutil

import pytest

from labcore.lessons import catalogue
from labcore.lessons.handout import handout_html, handout_pdf
from labcore.lessons.measure import measure
from test_lessons import finished
from labcore.lessons import runs


@pytest.fixture
def answered(store):
    lesson = catalogue.get("dna")
    keys = finished(store, lesson, {"pretrained": 0.913, "random": 0.551})
    return lesson, measure(lesson, runs.results(store, keys), keys)


def test_the_html_handout_holds_the_lesson_and_no_names(answered):
    lesson, measured = answered
    page = handout_html(lesson, measured, [0.9, 0.6, 0.95])
    for part in (lesson.question.text, "0.913", f"{measured.low:.3f} to {measured.high:.3f}", "2 right (67%)",
                 "Kao &amp; Lee 2021", "table 6", "python -m labcore.lessons run dna", "plotly"):
        assert part in page, part
    assert "<th>student</th>" not in page
    assert "Ada" in handout_html(lesson, measured, [0.9], names=["Ada"])


@pytest.mark.skipif(not shutil.which("chromium") and not shutil.which("/usr/bin/chromium"), reason="no Chromium")
def test_the_pdf_handout_is_printed_by_chromium_with_its_text(answered):
    import io

    import pypdf  # in requirements.txt: the handout's text is read back, never skipped

    lesson, measured = answered
    pdf = handout_pdf(handout_html(lesson, measured, [0.9, 0.6]))
    text = " ".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)
    assert "Does a text model help on DNA?" in text and "0.913" in text
    assert "python -m labcore.lessons run dna" in text
