"""A class on one server: N students open Home together, press the same one-click demo and watch it.

For each N of ``--students`` (default 1,10,20,30) the bench starts the app (``streamlit run app.py``) on a
store of its own (the fetched assets, built data sets and models are shared by symlink, as the browser test
does), opens N Chromium pages, each in its own browser context (its own Streamlit session), loads Home in
all of them at once, presses the same demo in each, and then watches every page for ``--watch`` seconds.
Per N it prints:

* ``live``: pages whose curve caption ("N train-loss points so far") changed at least once while watched;
* ``updates/page``: the median number of changes of that caption per page per minute;
* ``max gap s``: the 95th percentile over pages of the longest time between two changes on a page;
* ``p95 age s``: the 95th percentile of how old the step a page shows is: the time since the worker's
  heartbeat first reported that step (heartbeats come every second, so ages are whole-second coarse);
* ``server cpu`` and ``server MB``: the server process's own CPU (% of one core, over the watch) and
  resident memory at the end; ``browsers cpu``: all Chromium processes this bench started (% of one core);
* ``steps/s`` and ``rel``: the worker's training steps per second while watched, and relative to N = 1;
* ``no view``: pages that never showed the demo's live view while watched (not live for that reason, not
  because their view stood still), and ``p95 view s``: how long after the click pages first showed it;
* ``driver cpu``: Playwright's driver and this bench, which take the cores from the class too.

``--browsers-nice 19`` starts Chromium at that niceness: in a classroom the students' browsers run on their own
machines, and at the lowest priority here they should take only the cores the server and the worker leave.
Where the kernel schedules each session as a group (``/proc/sys/kernel/sched_autogroup_enabled``), niceness
orders processes only within their group, so the worker may still share the cores group for group (seen
here: the worker at 0.31-0.36 of its solo speed at 10-30 students either way).

Pages are sampled once a second, so more than one change per second is not seen. Needs Debian's Chromium at
/usr/bin/chromium, the python playwright package, and the demo's assets (``python -m labcore fetch``).
``TRANSFERLAB_DEMO_MAX_STEPS`` (``--steps``) keeps the demo's runs long enough to be watched but finite.

    python bench/classroom.py --students 1,10,20,30 --watch 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
# One sample of a page: its curve caption and the steps its progress bars show ("done at step" excluded).
SAMPLE_JS = r"""() => {
  const text = document.body ? document.body.innerText : "";
  const points = text.match(/(\d+) train-loss points so far/);
  const steps = [...text.matchAll(/(at )?step (\d+) of (\d+)/g)].filter(m => !m[1]).map(m => +m[2]);
  return [points ? +points[1] : -1, steps.length ? Math.max(...steps) : -1];
}"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of one process so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def descendants(root: int) -> list[int]:
    """Pids whose chain of parents reaches ``root`` (read from /proc: the browsers this process started)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = []
    for pid in parents:
        p, seen = pid, 0
        while p in parents and p != root and seen < 64:
            p, seen = parents[p], seen + 1
        if p == root and pid != root:
            found.append(pid)
    return found


def browsers_cpu(names: tuple[str, ...] = ("chrom",)) -> float:
    """CPU seconds so far of this process's descendants whose command name holds one of ``names``."""
    total = 0.0
    for pid in descendants(os.getpid()):
        try:
            if any(name in Path(f"/proc/{pid}/comm").read_text() for name in names):
                total += cpu_seconds(pid)
        except OSError:
            continue
    return total


def driver_cpu() -> float:
    """CPU seconds of what drives the browsers: Playwright's node process and this bench itself, which share
    the cores with the class as the students' browsers do."""
    return browsers_cpu(("node", "playwright")) + cpu_seconds(os.getpid())


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.95 * len(values)))] if values else float("nan")


def start_server(cache: Path, steps: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, TRANSFERLAB_CACHE=str(cache), TRANSFERLAB_DEMO_MAX_STEPS=str(steps),
               PYTHONPATH=str(REPO))
    log = open(cache / "server.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                "--server.address", "127.0.0.1", "--server.headless", "true"],
                               cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as reply:
                if reply.read().decode().strip() == "ok":
                    return process, url
        except OSError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise SystemExit("bench: the app did not start:\n" + (cache / "server.log").read_text()[-3000:])


def stop_server(process: subprocess.Popen, cache: Path) -> None:
    from labcore.execution.pool import stop_workers
    from labcore.store import Store

    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    store = Store(cache / "store")
    stop_workers(store, timeout_s=30)
    store.close()


def chromium_at(nice: int, folder: Path) -> Path:
    """Chromium itself, or (``nice`` > 0) a launcher in ``folder`` that starts it at that niceness; its
    renderers inherit it."""
    if nice <= 0:
        return CHROMIUM
    launcher = folder / "chromium-niced"
    launcher.write_text(f'#!/bin/sh\nexec nice -n {int(nice)} {CHROMIUM} "$@"\n')
    launcher.chmod(0o755)
    return launcher


async def watch_class(url: str, n: int, demo_index: int, watch_s: float, store, keys: list[str],
                      executable: Path = CHROMIUM) -> dict:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(executable), headless=True, args=FLAGS)
        try:
            pages = []
            for _ in range(n):
                context = await browser.new_context(viewport={"width": 1280, "height": 1600})
                page = await context.new_page()
                page.set_default_timeout(120_000)
                pages.append(page)
            await asyncio.gather(*(page.goto(url + "/") for page in pages))  # everyone opens Home at once
            buttons = [page.get_by_role("button", name="▶ Run this demo").nth(demo_index) for page in pages]
            await asyncio.gather(*(b.wait_for() for b in buttons))
            await asyncio.gather(*(b.click() for b in buttons))  # and presses the same demo
            clicked = time.monotonic()
            # Watching starts once the worker trains (a fresh worker first loads torch and the model).
            started = time.monotonic()
            while not any((store.heartbeat_of(k) or {}).get("step") for k in keys):
                if time.monotonic() - started > 300:
                    raise SystemExit("bench: the demo did not start training within 5 minutes")
                await asyncio.sleep(0.5)
            samples: list[list[tuple[float, int, int]]] = [[] for _ in pages]
            errors: dict[str, int] = {}  # why a sample of a page failed, by the error's first line
            beats: list[tuple[float, str, int]] = []
            server_pid = int(os.environ["_CLASSROOM_SERVER_PID"])
            cpu0, browsers0, driver0, t0 = cpu_seconds(server_pid), browsers_cpu(), driver_cpu(), time.monotonic()
            while time.monotonic() - t0 < watch_s:
                tick = time.monotonic()
                for key in keys:
                    beat = store.heartbeat_of(key)
                    if beat:
                        beats.append((tick, key, int(beat.get("step") or 0)))
                results = await asyncio.gather(*(page.evaluate(SAMPLE_JS) for page in pages),
                                               return_exceptions=True)
                now = time.monotonic()
                for i, result in enumerate(results):
                    if isinstance(result, BaseException):
                        reason = f"{type(result).__name__}: {str(result).splitlines()[0][:80] if str(result) else ''}"
                        errors[reason] = errors.get(reason, 0) + 1
                    else:
                        samples[i].append((now, int(result[0]), int(result[1])))
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
            elapsed = time.monotonic() - t0
            server_cpu = (cpu_seconds(server_pid) - cpu0) / elapsed * 100
            chromium_cpu = (browsers_cpu() - browsers0) / elapsed * 100
            bench_cpu = (driver_cpu() - driver0) / elapsed * 100
            server_mb = rss_mb(server_pid)
        finally:
            await browser.close()
    row = summarise(samples, beats, elapsed, server_cpu, chromium_cpu, server_mb)
    # A page that is not live either showed no curve caption at all (never reached the demo's view) or showed
    # one that never changed; and a sample can fail outright. The three say different things about a class.
    row["no_caption"] = sum(1 for page in samples if not any(pts >= 0 for _, pts, _ in page))
    row["errors"] = errors
    row["driver_cpu"] = bench_cpu
    # How long after the click a page first showed the demo's live view (an upper bound: pages are sampled
    # from the moment the worker trains); pages that never showed it count as the whole time watched.
    firsts = [next((t for t, pts, _ in page if pts >= 0), time.monotonic()) - clicked for page in samples]
    row["view_s"] = p95(firsts)
    return row


def summarise(samples, beats, elapsed, server_cpu, chromium_cpu, server_mb) -> dict:
    updates, gaps, ages = [], [], []
    # A heartbeat exists only while its run runs, so the keys beating at a tick are the runs a page can show
    # as "step X of Y" then; a page's step is as old as the time since one of them first reached it.
    first_seen: dict[tuple[str, int], float] = {}
    running_at: dict[float, set[str]] = {}
    for t, key, step in beats:
        first_seen.setdefault((key, step), t)
        running_at.setdefault(t, set()).add(key)
    ticks = sorted(running_at)
    for page in samples:
        changes = [t for (t, pts, _), (_, before, _) in zip(page[1:], page[:-1]) if pts != before and pts >= 0]
        updates.append(len(changes) * 60.0 / elapsed)
        marks = [page[0][0]] + changes + [page[-1][0]] if page else []
        gaps.append(max((b - a for a, b in zip(marks, marks[1:])), default=elapsed))
        for t, _, step in page:
            before = [tick for tick in ticks if tick <= t]
            if step < 0 or not before:
                continue
            keys = running_at[before[-1]]
            when = [seen for (key, s), seen in first_seen.items() if key in keys and s >= step and seen <= t]
            if when:
                ages.append(t - min(when))
    steps = 0
    last: dict[str, int] = {}
    for _, key, step in beats:
        if key in last and step > last[key]:
            steps += step - last[key]
        last[key] = step
    return {"live": sum(u > 0 for u in updates), "pages": len(samples),
            "updates": statistics.median(updates) if updates else 0.0, "gap": p95(gaps), "age": p95(ages),
            "server_cpu": server_cpu, "browsers_cpu": chromium_cpu, "server_mb": server_mb,
            "steps_s": steps / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", default="1,10,20,30", help="class sizes to try, comma-separated")
    parser.add_argument("--watch", type=float, default=60.0, help="seconds each class watches")
    parser.add_argument("--demo", default="bits", help="the one-click demo everyone presses")
    parser.add_argument("--assets-from", type=Path, default=None,
                        help="a lab cache whose fetched assets/ to use (read only; default: this lab's cache)")
    parser.add_argument("--steps", type=int, default=500,
                        help="TRANSFERLAB_DEMO_MAX_STEPS for the demo's runs (the bits demo has 500 steps a run)")
    parser.add_argument("--browsers-nice", type=int, default=0,
                        help="start Chromium at this niceness (19: the browsers take only the cores left over)")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"bench: no Chromium at {CHROMIUM}; install Debian's chromium (`make browser`)")
    from labcore import paths
    from labcore.recipes import demos
    from labcore.engine.resolve import resolve_spec
    from labcore.store import Store

    os.environ["TRANSFERLAB_DEMO_MAX_STEPS"] = str(args.steps)  # the keys the server will use
    demo = demos.DEMOS[args.demo]
    keys = [resolve_spec(spec).key for spec in demo.specs()]
    shared = paths.cache_dir()
    rows = []
    for n in [int(x) for x in args.students.split(",") if x.strip()]:
        cache = Path(tempfile.mkdtemp(prefix=f"classroom-{n}-"))
        for name in ("assets", "datasets", "models"):
            source = (args.assets_from or shared) / name if name == "assets" else shared / name
            source.mkdir(parents=True, exist_ok=True)
            (cache / name).symlink_to(source)
        process, url = start_server(cache, args.steps)
        os.environ["_CLASSROOM_SERVER_PID"] = str(process.pid)
        store = Store(cache / "store")
        try:
            row = asyncio.run(watch_class(url, n, demos.DEMOS.names().index(args.demo), args.watch, store, keys,
                                          chromium_at(args.browsers_nice, cache)))
        finally:
            store.close()
            stop_server(process, cache)
            shutil.rmtree(cache, ignore_errors=True)
        rows.append((n, row))
        print(f"N={n}: {row}", flush=True)
    solo = next((r["steps_s"] for n, r in rows if n == 1), None)
    print(f"\n{'N':>3} {'live':>7} {'updates/page/min':>16} {'max gap s':>9} {'p95 age s':>9} {'server cpu %':>12} "
          f"{'server MB':>9} {'browsers cpu %':>14} {'steps/s':>8} {'rel':>5} {'no view':>7} {'p95 view s':>10} {'driver cpu %':>12}")
    for n, r in rows:
        rel = f"{r['steps_s'] / solo:.2f}" if solo else "-"
        print(f"{n:>3} {r['live']:>3}/{r['pages']:<3} {r['updates']:>16.1f} {r['gap']:>9.1f} {r['age']:>9.1f} "
              f"{r['server_cpu']:>12.0f} {r['server_mb']:>9.0f} {r['browsers_cpu']:>14.0f} {r['steps_s']:>8.2f} "
              f"{rel:>5} {r['no_caption']:>7} {r['view_s']:>10.1f} {r['driver_cpu']:>12.0f}")
    print(f"(cores: {os.cpu_count()}; browsers at nice {args.browsers_nice}; load average now: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
