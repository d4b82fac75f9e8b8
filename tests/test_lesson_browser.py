"""One whole lesson in a real browser (Chromium): a teacher and three students. The students join with the
sitting's code and predict, the teacher's screen counts them, starting the runs locks the predictions, the
reveal shows each student their own guess against the answer, the class votes a what-if that the teacher queues
and reveals, and the teacher downloads the PDF handout, whose text is checked. The lesson's runs are in the store
already (a lesson served from the store, as a second sitting of it is): the test is about the class, not the
training. Screenshots of the teacher's and a student's screen at the reveal and of the handout's first page go
to ``docs/images/``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from test_e2e_browser import FLAGS, _need_a_browser, serving

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
# The docs' screenshots are taken by this test where TRANSFERLAB_DOC_IMAGES names their folder (docs/images);
# an ordinary run writes them under its own temporary folder and leaves the checkout as it was.
DOC_IMAGES = "TRANSFERLAB_DOC_IMAGES"
PASSCODE = "owl-42"
GUESSES = {"Ada": 38, "Bob": -20, "Cy": 40}  # arrow presses from the slider's middle (0.50), 0.01 each


def _stock(cache: Path) -> None:
    """The dna lesson's two runs and its what-if run ("shift", the class's vote) as finished results in the
    store."""
    from labcore.engine import run_results
    from labcore.jobs import key_of
    from labcore.lessons import catalogue, runs
    from labcore.results.record import RunRecord
    from labcore.store import Store

    lesson = catalogue.get("dna")
    store = Store(cache / "store")
    keys = runs.lesson_keys(lesson) + (key_of(runs.whatif_spec(lesson, "shift")),)
    for key, value in zip(keys, (0.913, 0.551, 0.876)):
        run_results.put_result(store, RunRecord(key=key, spec={}, status="done", metric="accuracy",
                                                test={"accuracy": value}, baseline={"majority": 0.52},
                                                test_examples=1276, val_curve=[[120, value]], best_step=120,
                                                steps_done=120))
    store.close()


@pytest.fixture
def served(tmp_path):
    _need_a_browser()
    (tmp_path / "here" / ".streamlit").mkdir(parents=True)
    (tmp_path / "here" / ".streamlit" / "secrets.toml").write_text(f'teacher_passcode = "{PASSCODE}"\n')
    _stock(tmp_path / "cache")
    with serving(tmp_path / "cache", tmp_path / "server.log", cwd=tmp_path / "here") as base:
        yield base, tmp_path


def _student(browser, base: str, code: str, name: str, steps: int):
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    page.set_default_timeout(60_000)
    page.goto(f"{base}/lessons")
    page.get_by_label("Sitting code (on the teacher's screen)").fill(code)
    page.get_by_label("Your nickname").fill(name)
    page.get_by_role("button", name="Join").click()
    slider = page.get_by_role("slider")
    slider.focus()
    for _ in range(abs(steps)):
        slider.press("ArrowRight" if steps > 0 else "ArrowLeft")
    page.get_by_role("button", name="Submit my prediction").click()
    page.get_by_text(f"Your prediction: {0.5 + steps / 100:.2f}").wait_for()
    return page


def test_a_teacher_and_three_students_through_one_lesson(served):
    from playwright.sync_api import expect, sync_playwright

    import pypdf

    base, tmp_path = served
    IMAGES = Path(os.environ.get(DOC_IMAGES) or tmp_path / "images")
    IMAGES.mkdir(parents=True, exist_ok=True)
    # expect() waits 5 s by default, not the pages' default timeout: on two busy cores a student's page, which
    # looks for the reveal every 2 s, took longer than that to show it. Every condition gets a generous limit.
    expect.set_options(timeout=60_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        try:
            teacher = browser.new_page(viewport={"width": 1200, "height": 1600}, accept_downloads=True)
            teacher.set_default_timeout(60_000)
            teacher.goto(f"{base}/lessons")
            teacher.get_by_test_id("stExpander").get_by_text("Teacher", exact=True).click()
            teacher.get_by_label("Teacher passcode").fill(PASSCODE)
            teacher.get_by_label("Teacher passcode").press("Enter")
            teacher.get_by_role("button", name="Open a class sitting").click()
            heading = teacher.get_by_text("Sitting code:").first
            code = heading.inner_text().split("Sitting code:")[1].strip().strip("`").strip()
            students = {n: _student(browser, base, code, n, s) for n, s in GUESSES.items()}
            expect(teacher.get_by_text("3 of 3 students")).to_be_visible(timeout=10_000)

            teacher.get_by_role("button", name="Start the runs (locks the predictions)").click()
            for page in students.values():
                expect(page.get_by_text("Predictions are locked")).to_be_visible()
                expect(page.get_by_text("0.91")).to_have_count(0)  # nothing of the result before the reveal
            teacher.get_by_role("button", name="Reveal the answer").click()
            expect(teacher.get_by_text("2 of 3 predictions right (67%)")).to_be_visible()
            for name, page in students.items():
                expect(page.get_by_text("Measured answer:")).to_be_visible()
                verdict = "not right" if name == "Bob" else "right"
                mine = f"{0.5 + GUESSES[name] / 100:.2f}"
                expect(page.get_by_text(f"Your prediction: {mine} — {verdict}.")).to_be_visible()
            teacher.wait_for_timeout(1500)
            teacher.screenshot(path=str(IMAGES / "lesson-teacher-reveal.png"), full_page=True)
            students["Ada"].screenshot(path=str(IMAGES / "lesson-student-reveal.png"), full_page=True)

            with teacher.expect_download() as html_download:
                teacher.get_by_role("button", name="Handout (HTML)").click()
            teacher.get_by_role("button", name="Make the PDF handout").click()
            with teacher.expect_download() as pdf_download:
                teacher.get_by_role("button", name="Handout (PDF)").click()
            pdf = Path(pdf_download.value.path()).read_bytes()
            text = " ".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)
            for part in ("Does a text model help on DNA?", "0.913", "2 right (67%)",
                         "python -m labcore.lessons run dna"):
                assert part in text, part
            assert not any(name in text for name in GUESSES)  # no names unless the teacher asks
            handout = browser.new_page(viewport={"width": 900, "height": 1270})
            handout.goto(Path(html_download.value.path()).as_uri())
            handout.wait_for_timeout(1500)
            handout.screenshot(path=str(IMAGES / "lesson-handout.png"))

            # The class votes for the second option, not the one leading when the vote opened: the teacher's
            # press must read the votes, not the page as it was drawn.
            teacher.get_by_role("button", name="Open the vote").click()
            for name, page in students.items():
                page.get_by_text("unused" if name == "Bob" else "shift", exact=True).click()
                page.get_by_role("button", name="Vote").click()
            expect(teacher.get_by_text("Leading: shift (3 votes)")).to_be_visible()
            teacher.get_by_role("button", name="Queue the winner").click()
            teacher.get_by_role("button", name="Reveal the what-if").click()
            expect(students["Ada"].get_by_text("What if: shift")).to_be_visible()
            expect(students["Ada"].get_by_text("mapping shift 0.88").first).to_be_visible()
        finally:
            browser.close()
