"""A class of students through one lesson on the app server, at the protocol level (no browsers).

The server runs as the lab runs it (``streamlit run app.py``), with a teacher's passcode. A teacher client signs
in and opens the sitting's page; ``--students`` clients (:class:`st_clients.StudentClient`, which speak
Streamlit's websocket protocol) open the Lessons page, join with the code and a nickname through the join form,
predict on the slider and keep watching (their pages poll the sitting every 2 s). The bench reports: how many
predictions the store recorded, how long after the last one was written the teacher's live count showed them
all (the teacher's histogram redraws every second), the server's CPU and memory through it, and, after the
teacher starts and reveals the lesson, how long until every student saw the answer.

The lesson's runs are put in the store first as results (a lesson served from the store): the bench measures
the class, not the training. Their values are stand-ins written by the bench, not measurements; nothing here
reports them.

    python bench/lesson_class.py --students 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path

from classroom import cpu_seconds, rss_mb, start_server, stop_server
from st_clients import StudentClient

PASSCODE = "bench-passcode"
LESSON = "dna"


def stock(cache: Path) -> None:
    """The lesson's runs as finished results (stand-in values) so the lesson is served from the store."""
    from labcore.engine import run_results
    from labcore.lessons import catalogue, runs
    from labcore.results.record import RunRecord
    from labcore.store import Store

    store = Store(cache / "store")
    for key, value in zip(runs.lesson_keys(catalogue.get(LESSON)), (0.9, 0.55)):
        run_results.put_result(store, RunRecord(key=key, spec={}, status="done", metric="accuracy",
                                                test={"accuracy": value}, baseline={"majority": 0.52},
                                                test_examples=1000, val_curve=[[10, value]], best_step=10,
                                                steps_done=10))
    store.close()


def metric_text(client: StudentClient) -> str:
    return " ".join(e.metric.body for e in client.elements.values() if e.WhichOneof("type") == "metric")


def saw_answer(client: StudentClient) -> bool:
    return any(e.WhichOneof("type") == "alert" and "Measured answer" in e.alert.body for e in client.elements.values())


def saw_figures(client: StudentClient) -> bool:
    """The whole reveal, not only the answer's line that the page's watch redraws on every tick: the class's share
    right, drawn by the run of the page that the reveal starts."""
    return any(e.WhichOneof("type") == "markdown" and e.markdown.body.startswith("**The class:**")
               for e in client.elements.values())


async def until(check, timeout_s: float, step_s: float = 0.05) -> float | None:
    """Seconds until ``check()`` holds (None: not within ``timeout_s``)."""
    start = time.time()
    while time.time() - start < timeout_s:
        if check():
            return time.time() - start
        await asyncio.sleep(step_s)
    return None


async def student(url: str, code: str, number: int, stagger_s: float, end: float, log: dict) -> StudentClient:
    await asyncio.sleep(stagger_s)
    client = StudentClient(url, "lessons", follow_query=True)

    async def act(c: StudentClient) -> None:
        async def steps() -> None:
            form = {"Sitting code (on the teacher's screen)": code, "Your nickname": f"student {number}"}
            if await until(lambda: any(e.WhichOneof("type") == "text_input" and e.text_input.label == "Your nickname"
                                       for e in c.elements.values()), 60) is None or not await c.submit_soon(form, "Join"):
                log["no_form"] += 1
                return
            if await until(lambda: any(e.WhichOneof("type") == "slider" for e in c.elements.values()), 60) is None:
                log["no_slider"] += 1
                return
            guess = round(random.Random(number).uniform(0.3, 1.0), 2)
            if await c.submit_soon({"test accuracy": guess}, "Submit my prediction", timeout_s=20):
                log["sent"] += 1
                return
            log["no_slider"] += 1
        asyncio.create_task(steps())

    await client.run(end, act)
    return client


async def teacher(url: str, code: str, end: float, students: int, state: dict, log: dict) -> StudentClient:
    # the teacher signs in on the lobby and opens the sitting from the list of the lab's sittings, as a teacher does
    client = StudentClient(url, "lessons", follow_query=True)

    async def act(c: StudentClient) -> None:
        async def steps() -> None:
            for _ in range(5):  # a busy server may answer late: sign in again until the sitting is offered
                await until(lambda: any(e.WhichOneof("type") == "text_input"
                                        and e.text_input.label == "Teacher passcode" for e in c.elements.values()), 60)
                state["signed_in_sent"] = await c.submit({"Teacher passcode": PASSCODE})
                if await until(lambda: any(e.WhichOneof("type") == "button" and e.button.label == "Open"
                                           for e in c.elements.values()), 20) is not None:
                    break
            await c.press("Open")
            await until(lambda: f"of {students} students" in metric_text(c) or "Sitting code" in " ".join(c.texts()),
                        60)
            state["teacher_ready"] = time.time()
            # every student has sent a prediction (or failed to): the teacher's count must show them all
            def all_shown() -> bool:
                settled = log["sent"] + log["no_slider"] + log["no_form"] == students
                return settled and metric_text(c).startswith(f"{log['sent']} of {students}")
            if await until(all_shown, end - time.time(), 0.02) is not None:
                state["teacher_saw_all"] = time.time()
        asyncio.create_task(steps())

    await client.run(end, act)
    return client


def sample(pid: int, samples: list, stop: dict) -> None:
    last = (time.time(), cpu_seconds(pid))
    while not stop.get("done"):
        time.sleep(1.0)
        now = (time.time(), cpu_seconds(pid))
        samples.append({"cpu": (now[1] - last[1]) / (now[0] - last[0]), "rss_mb": rss_mb(pid)})
        last = now


async def run_class(url: str, root: Path, code: str, n: int, join_s: float, watch_s: float, pid: int) -> dict:
    from labcore.lessons import sittings

    # One session opens the app first: until a session has run app.py's router, Streamlit serves a page of
    # pages/ on its own (without the sidebar, where the teacher signs in), as a browser opening a deep link first
    # would see it for a moment (common.through_router).
    first = StudentClient(url)
    await first.run(time.time() + 15)
    state_first = first.stats.first_page_s
    end = time.time() + join_s + watch_s
    log, state, samples, stop = {"sent": 0, "no_slider": 0, "no_form": 0}, {"first_page_s": state_first}, [], {}
    sampler = asyncio.get_running_loop().run_in_executor(None, sample, pid, samples, stop)
    teacher_task = asyncio.create_task(teacher(url, code, end, n, state, log))
    room = [asyncio.create_task(student(url, code, i, join_s * i / n, end, log)) for i in range(n)]
    await until(lambda: "teacher_saw_all" in state, join_s + watch_s)
    seats = sittings.seats(root, code)
    last_guess = max((s.guessed_at for s in seats if s.guess is not None), default=float("nan"))
    # the reveal: the teacher's actions through the library (the page's buttons call the same), then every student
    sittings.set_phase(root, code, "running")
    sittings.set_phase(root, code, "revealed")
    revealed = time.time()
    clients = await asyncio.gather(*room)
    stop["done"] = True
    await teacher_task
    await sampler
    saw = sum(1 for c in clients if saw_answer(c))
    whole = sum(1 for c in clients if saw_figures(c))
    return {
        "students": n, "joined": len(seats), "predictions_recorded": sum(1 for s in seats if s.guess is not None),
        "predictions_sent": log["sent"], "no_slider": log["no_slider"], "no_form": log["no_form"],
        "teacher_saw_all_s_after_last_prediction": round(state.get("teacher_saw_all", float("nan")) - last_guess, 2),
        "students_who_saw_the_answer": saw, "students_who_saw_the_whole_reveal": whole,
        "reveal_to_end_s": round(end - revealed, 1),
        "server_cpu_cores_mean": round(sum(s["cpu"] for s in samples) / max(1, len(samples)), 2),
        "server_cpu_cores_max": round(max((s["cpu"] for s in samples), default=0.0), 2),
        "server_rss_mb_max": round(max((s["rss_mb"] for s in samples), default=0.0), 1),
        "exceptions": sum(c.stats.exceptions for c in clients), "drops": sum(c.stats.drops for c in clients),
        "load_average": round(os.getloadavg()[0], 1), "teacher_signed_in": bool(state.get("signed_in_sent")),
        "first_page_s": state.get("first_page_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--join-s", type=float, default=30.0, help="the students join spread over this long")
    parser.add_argument("--watch-s", type=float, default=60.0, help="then they watch this long (the reveal in it)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lesson-class-"))
    (work / "home" / ".streamlit").mkdir(parents=True)
    (work / "home" / ".streamlit" / "secrets.toml").write_text(f'teacher_passcode = "{PASSCODE}"\n')
    os.environ["HOME"] = str(work / "home")  # the server reads the passcode from ~/.streamlit/secrets.toml
    cache = work / "cache"
    cache.mkdir()
    os.environ["TRANSFERLAB_CACHE"] = str(cache)
    stock(cache)
    from labcore.lessons import catalogue, sittings

    sitting = sittings.open_sitting(cache / "store", catalogue.get(LESSON))
    process, url = start_server(cache, 0)
    try:
        result = asyncio.run(run_class(url, cache / "store", sitting.code, args.students, args.join_s, args.watch_s,
                                       process.pid))
    finally:
        stop_server(process, cache)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
