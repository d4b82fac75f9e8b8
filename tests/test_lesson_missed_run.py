"""A class student's page that misses the run of the page the reveal starts still shows the answer.

A busy Streamlit server drops the messages of a run that has just ended when a fragment timer's request makes it
start a new script runner before it has passed them on (seen with 100 students on two cores: 6 to 28 of them
never got the reveal's run, and kept the locked page). The Lessons page's watch fragment draws the phase's headline
on every tick, so the next tick brings the answer. Here a real app server serves one student through the protocol
client of ``bench/st_clients.py``; after the reveal that client throws away every message of a whole-page run, as
the server does in that race, and must still show the measured answer and the student's own guess against it,
drawn by the watch's ticks alone.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # a real app server

REPO = Path(__file__).resolve().parent.parent


def _bench(name: str):
    """A module of ``bench/`` (the protocol client and the app-server helpers the class benches use), imported as
    the benches import each other, so each is loaded once."""
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    return importlib.import_module(name)


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path))
    lesson_class, classroom = _bench("lesson_class"), _bench("classroom")
    lesson_class.stock(tmp_path)
    process, url = classroom.start_server(tmp_path, 0)
    yield tmp_path, url, lesson_class
    classroom.stop_server(process, tmp_path)


def test_a_page_that_misses_the_reveals_run_shows_the_answer_from_its_watch(served):
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from labcore.lessons import catalogue, sittings

    cache, url, lesson_class = served
    clients = _bench("st_clients")
    sitting = sittings.open_sitting(cache / "store", catalogue.get(lesson_class.LESSON))
    dropped = {"page_runs": 0}

    class MissesPageRuns(clients.StudentClient):
        """Once ``deaf`` is set, reads nothing a run of the whole page draws (a fragment's runs still come). A
        run's new_session says whose it is (its fragments, or none for the whole page); its deltas follow it."""
        deaf = False
        in_page_run = False

        def _read(self, raw: bytes) -> None:
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.in_page_run = not msg.metadata.run.fragment_ids
            if self.deaf and self.in_page_run and kind == "delta":
                dropped["page_runs"] += 1
                return
            super()._read(raw)

    client = MissesPageRuns(url, "lessons", follow_query=True)
    outcome: dict = {}

    async def act(c) -> None:
        async def steps() -> None:
            label = "Your nickname"
            until = lesson_class.until  # seconds until the check holds, None if it never did
            assert await until(lambda: any(e.WhichOneof("type") == "text_input" and e.text_input.label == label
                                           for e in c.elements.values()), 60) is not None
            # the nickname input can arrive before the code input and the button: join once all are on the page
            assert await c.submit_soon({"Sitting code (on the teacher's screen)": sitting.code, label: "ada"}, "Join"), \
                "the join form never showed its code input, nickname input and button together"
            assert await until(lambda: any(e.WhichOneof("type") == "slider" for e in c.elements.values()),
                               60) is not None
            await c.submit_soon({"test accuracy": 0.6}, "Submit my prediction", timeout_s=20)
            assert await until(lambda: any(s.guess is not None for s in sittings.seats(cache / "store", sitting.code)),
                               60) is not None
            c.deaf = True
            sittings.set_phase(cache / "store", sitting.code, "running")
            sittings.set_phase(cache / "store", sitting.code, "revealed")
            outcome["answer"] = await until(lambda: lesson_class.saw_answer(c), 60) is not None
            outcome["texts"] = [e.alert.body for e in c.elements.values() if e.WhichOneof("type") == "alert"]
            outcome["figures"] = lesson_class.saw_figures(c)
        outcome["task"] = asyncio.create_task(steps())

    async def main() -> None:
        end = time.time() + 150
        runner = asyncio.create_task(client.run(end, act))
        while "task" not in outcome and time.time() < end:
            await asyncio.sleep(0.1)
        await outcome["task"]
        runner.cancel()

    asyncio.run(main())
    assert dropped["page_runs"] > 0  # the reveal did start a run of the page, and this page never saw it
    assert outcome["answer"], outcome["texts"]
    assert any("Your prediction:** 0.60" in text for text in outcome["texts"]), outcome["texts"]
    assert not outcome["figures"]  # the figures come with the page's run: this page has the watch's headline only
