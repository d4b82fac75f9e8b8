"""Streamlit pieces every page shares: the worker status, run pickers, and the live curves of a set of runs.

Pages never train and never wait: they submit specs to the executor and read the store. Live views are
fragments that rerun on a timer (``run_every``) only while a run is queued or running, so an idle page
costs nothing; when the last run ends, the fragment reruns the whole page once to show final results.
What they draw comes from caches shared by every session (:class:`state.StreamCache`, :class:`FigureCache`):
a class watching one demo costs the server one read of the new events and one figure per cursor, not one
per viewer.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.runs import ACTIVE, STOPPED, JobRecord
from labcore.door import views
from labcore.errors import LabError
from pages import state

PAGES = {  # file pages, for st.page_link / st.switch_page (Home is a function page of app.py)
    "new": "pages/new_experiment.py",
    "runs": "pages/runs.py",
    "compare": "pages/compare.py",
    "atlas": "pages/atlas.py",
    "attention": "pages/attention.py",
    "mapping": "pages/mapping.py",
    "data": "pages/data.py",
    "analysis": "pages/analysis.py",
    "pretrain": "pages/pretrain.py",
    "recipes": "pages/recipes.py",
    "lessons": "pages/lessons.py",
}


@dataclass(frozen=True)
class Refresh:
    """How often the live parts of the pages redraw themselves (``st.fragment(run_every=...)``), in seconds.

    Views of runs refresh only while a run is queued or running, and a background task's view only while the
    task works, so an idle page costs nothing.
    """

    task_s: float = 1.0  # a background task's messages: fetching assets, building a data set
    live_runs_s: float = 2.0  # progress bars and curves of queued or running runs
    attention_job_s: float = 2.0  # waiting for the worker to compute an example's attention maps
    run_list_s: float = 3.0  # the Runs page's queue table, while any run is active
    worker_status_s: float = 5.0  # the worker and queue status line (sidebar and Home)
    sitting_s: float = 2.0  # a class student's page watching for the teacher to move the sitting on

    def scaled(self, factor: float) -> "Refresh":
        """Every interval times ``factor`` (2: half as many redraws, for a big class on a small server)."""
        if not factor > 0:
            raise LabError(f"TRANSFERLAB_REFRESH_SCALE must be a positive number, got {factor!r}")
        return Refresh(**{f.name: getattr(self, f.name) * factor for f in dataclasses.fields(self)})


# The one setting: TRANSFERLAB_REFRESH_SCALE multiplies every interval above (default 1).
REFRESH = Refresh().scaled(float(os.environ.get("TRANSFERLAB_REFRESH_SCALE", "1") or 1))
STATUS_ICONS = {"queued": ":material/schedule:", "running": ":blue[:material/play_circle:]",
                "done": ":green[:material/check_circle:]", "diverged": ":orange[:material/warning:]",
                "failed": ":red[:material/error:]", "cancelled": ":gray[:material/stop_circle:]",
                "interrupted": ":gray[:material/pause_circle:]", "dead": ":red[:material/heart_broken:]"}


def through_router() -> None:
    """Make sure this page runs inside the app's router (app.py), with its menu and frame.

    A folder named ``pages/`` next to the main script puts Streamlit into its older multipage mode until
    some session runs ``st.navigation``; a deep link (``/runs?group=...``) opened first on a fresh server
    would then run this file on its own, with a menu of raw file names. Here the page switches the app to
    ``st.navigation`` mode, exactly as ``st.navigation`` itself does, and reruns through the router.
    """
    try:
        from streamlit.runtime import Runtime
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without these: nothing to do
        return
    # Only in a served app: AppTest (whose runtime is a stand-in) resets the flag before every run and
    # routes by itself, and a rerun there would swallow the widget event of that run.
    served = Runtime.exists() and type(Runtime.instance()) is Runtime
    if served and getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def ensure_worker_if_needed(summary: dict[str, Any]) -> None:
    """The app starts a worker when runs wait in the queue and none is alive (e.g. after a restart)."""
    if summary["queued"] and not summary["workers"]:
        try:
            started = state.get_executor().ensure_workers()
        except (LabError, OSError) as exc:
            st.sidebar.error(f"Could not start a worker: {exc}. Start one by hand: `python -m labcore worker`.")
            return
        if started:
            summary["workers"] = [{"pid": pid, "state": "starting"} for pid in started]


def sidebar_status() -> None:
    """Worker and queue status in the sidebar, refreshed every few seconds."""
    @st.fragment(run_every=REFRESH.worker_status_s)
    def status() -> None:
        lab = state.get_lab()
        summary = state.worker_summary(lab)
        ensure_worker_if_needed(summary)
        workers = summary["workers"]
        if workers:
            states = ", ".join(f"{w.get('state', '?')}" for w in workers)
            plural = "s" if len(workers) > 1 else ""
            st.caption(f":green[:material/circle:] {len(workers)} worker{plural} ({states}) · "
                       f"{summary['running']} running · {summary['queued']} queued")
        else:
            st.caption(f":gray[:material/circle:] no worker running (one starts when you run something) · "
                       f"{summary['total']} runs "
                       f"in the store")

    with st.sidebar:
        status()


def teacher_sign_in() -> None:
    """The sidebar's teacher passcode, shown only where ``.streamlit/secrets.toml`` sets ``teacher_passcode``;
    once entered, the Runs page shows the teacher's controls to this session."""
    if state.teacher_passcode() is None:
        return
    with st.sidebar.expander("Teacher", icon=":material/school:", expanded=False):
        if state.is_teacher():
            st.caption("Teacher controls are on: the Runs page can cancel any run, clear the queue and stop or "
                       "start the workers.")
            if st.button("Sign out", key="teacher.out"):
                st.session_state.pop("_teacher_code", None)
                st.session_state.pop("teacher.code", None)
                st.rerun()
            return
        st.text_input("Teacher passcode", type="password", key="teacher.code", on_change=_try_passcode)
        message = st.session_state.get("teacher.message")
        if message:
            st.error(message)


def _try_passcode() -> None:
    """One try of the passcode (counted once, when the field changes): wrong tries in a row pause the sign-in
    for this session and address (the teacher's passcode_attempts and passcode_pause_s)."""
    code = st.session_state.get("teacher.code") or ""
    st.session_state.pop("teacher.message", None)
    if not code:
        return
    guard, who = state.passcode_guard(), state.sign_in_ids()
    wait = guard.wait_s(*who)
    if not wait:
        st.session_state["_teacher_code"] = code
        if state.is_teacher():
            guard.succeeded(*who)
            return
        st.session_state.pop("_teacher_code", None)
        wait = guard.failed(*who)
        if not wait:
            st.session_state["teacher.message"] = "That is not the passcode."
            return
    st.session_state["teacher.message"] = (f"Too many wrong passcodes: the sign-in is paused for {wait:.0f} s "
                                           f"(the teacher's passcode_attempts and passcode_pause_s).")


def hidden_runs(lab) -> set[str]:
    """Runs of a class lesson whose answer is not revealed yet: hidden from students on every page (the
    teacher, and a lab with no class, sees everything)."""
    if state.teacher_passcode() is None or state.is_teacher():
        return set()
    from labcore.door.lessons import hidden_keys  # the lessons' catalogue loads on first use only

    return hidden_keys(lab)


def status_label(record: JobRecord) -> str:
    return f"{STATUS_ICONS.get(record.status, '')} {record.status}"


def run_option_label(record: JobRecord) -> str:
    return f"{record.label_or(record.key)} · {record.status} · {record.key[:8]}"


CURRENT_RUN = "run.current"  # the run last picked on any page: where a page opened from the menu starts


def pick_run(lab, *, key: str, label: str = "Run", statuses: Sequence[str] | None = None,
             where=None, arrive_at: str = "current", runs: Sequence[JobRecord] | None = None
             ) -> JobRecord | None:
    """A select box of runs (newest first), synchronised with the ``run`` query parameter.

    Opened without a run in the address (from the menu), it starts at ``arrive_at``: ``"current"``, the
    run last looked at on any page; ``"running"``, a run that is training now (the Runs page). Either
    only where there is one among its runs; otherwise the page's own last choice, else the newest.
    ``runs``: the runs to offer, in submission order, where the page has read them already (the Runs page
    reads only the newest: 10,000 records take over half a second); a run named in the address is offered
    too."""
    records = [r for r in (lab_runs.runs(lab) if runs is None else runs) if statuses is None or r.status in statuses]
    hidden = hidden_runs(lab)  # a class lesson's runs, until the teacher reveals them
    records = [r for r in records if r.key not in hidden]
    if where is not None:
        records = [r for r in records if where(r)]
    records = records[::-1]
    if not records:
        return None
    keys = [r.key for r in records]
    by_key = {r.key: r for r in records}
    wanted = state.qp_external("run")
    if wanted and wanted not in by_key:
        try:
            wanted = lab_runs.resolve_key(lab, wanted)
        except LabError:
            wanted = None
        found = lab_runs.record(lab, wanted) if wanted and wanted not in by_key and runs is not None else None
        # older than the newest ``runs`` the page read: offered too
        if found and found.kind == "run" and found.key not in hidden and (
                statuses is None or found.status in statuses) and (where is None or where(found)):
            keys.append(wanted)
            by_key[wanted] = found
    if f"w:{key}" not in st.session_state and wanted not in by_key:  # arriving from the menu
        arrival = (next((k for k in keys if by_key[k].status == "running"), None) if arrive_at == "running"
                   else state.remembered(CURRENT_RUN))
        if arrival in by_key:
            state.keep(key, arrival)
    widget = state.remember(key, keys[0], keys)
    if wanted in by_key:
        st.session_state[widget] = wanted
    chosen = st.selectbox(label, keys, key=widget, format_func=lambda k: run_option_label(by_key[k]))
    state.keep(key, chosen)
    state.keep(CURRENT_RUN, chosen)
    state.set_qp(run=chosen)
    return by_key[chosen]


def pick_run_or_stop(lab, empty: str, **options: Any) -> JobRecord:
    """:func:`pick_run`; where there is no run to pick, the page says ``empty`` and stops."""
    record = pick_run(lab, **options)
    if record is None:
        st.info(empty)
        st.stop()
    return record


def short_labels(lab, keys: Sequence[str]) -> list[str]:
    """Legend names for runs shown together: the spec fields that differ between them (``random · seed=1``);
    a run shown alone keeps its full label."""
    records = [lab_runs.record(lab, k) or JobRecord.from_dict({"spec": {}, "key": k}) for k in keys]
    if len(records) < 2:
        return [r.label_or(r.key[:8]) for r in records]
    fields = views.varying([r.spec for r in records], ignore=("discipline_params",))
    fields = sorted(fields, key=lambda f: (f == "seed", f))  # the seed last: "random · seed=1"
    return [views.condition_label(r.spec, fields) if fields else r.label_or(r.key[:8]) for r in records]


class FigureCache:
    """Live figures shared by every session of the server, keyed by what they show: each run's key, event
    cursor and status, the legend names, the smoothing and the title. Thirty viewers of one demo at one
    cursor cost one Plotly figure, built by the first of them while the others wait for it (building the
    same figure in many script threads at once is what froze a class of 20)."""

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._figures: dict[tuple, tuple[Any, list]] = {}
        self._lock = threading.Lock()

    def get(self, signature: tuple, build) -> tuple[Any, list]:
        with self._lock:
            found = self._figures.get(signature)
            if found is None:
                found = self._figures[signature] = build()
                _freeze(found[0])
                while len(self._figures) > self.limit:
                    self._figures.pop(next(iter(self._figures)))
        return found


def _freeze(fig) -> None:
    """Serialise a shared figure's dict once: ``st.plotly_chart`` asks every viewer's figure for
    ``to_dict()`` (a deep copy, half of its cost per viewer), and a shared figure is never changed."""
    spec = fig.to_dict()
    object.__setattr__(fig, "to_dict", lambda: spec)


FIGURES = FigureCache()


def curves_figure(lab, keys: Sequence[str], roles: Sequence[str] | None = None, *, smoothing: float = 0.0,
                  title: str = ""):
    """The overlay figure of several runs (train loss solid, validation metric dashed on the right axis),
    from the shared caches: rebuilt only when a run's cursor or status moved."""
    cache = state.stream_cache()
    records = [(k, lab_runs.record(lab, k)) for k in keys]
    records = [(k, r) for k, r in records if r is not None]
    shown = [k for k, _ in records]
    names = list(roles) if roles is not None else short_labels(lab, shown)
    signature = (str(lab.root), tuple((k, cache.cursor(lab, k), r.status) for k, r in records),
                 tuple(names), tuple(roles or ()), round(float(smoothing), 3), title)

    def build():
        runs = []
        metric = ""
        for i, (key, record) in enumerate(records):
            train, validation, name = state.run_curves(lab, key, cache)
            metric = metric or name
            role = roles[i] if roles is not None and i < len(roles) else views.role_of(record.spec)
            label = names[i] if i < len(names) else record.label_or(key[:8])
            runs.append(views.RunCurves(label=label, role=role, train_loss=train, validation=validation,
                                          status=record.status))
        return views.loss_curves(runs, smoothing=smoothing, metric=metric.replace("_", " ") or "metric",
                                   title=title), runs

    return FIGURES.get(signature, build)


def progress_rows(lab, keys: Sequence[str], roles: Sequence[str] | None = None) -> None:
    """One progress bar per run, with its ETA while it trains."""
    cache = state.stream_cache()
    names = list(roles) if roles is not None else short_labels(lab, keys)
    for i, key in enumerate(keys):
        try:
            status = lab_runs.status(lab, key)
        except LabError:
            continue
        prog = state.progress(status.status, status.step, status.total_steps, cache.pace(lab, key))
        name = names[i] if i < len(names) else status.label
        st.progress(prog.fraction, text=f"{STATUS_ICONS.get(status.status, '')} **{name}**: {prog.text}")
        if status.error and status.status in STOPPED:
            st.caption(f"↳ {status.error}")


def live_runs(lab, keys: Sequence[str], roles: Sequence[str] | None = None, *, fragment_key: str,
              smoothing_key: str | None = None, title: str = "") -> bool:
    """Progress and overlaid curves of ``keys``, refreshed every few seconds (:attr:`Refresh.live_runs_s`) while
    any is queued or running.

    Returns whether any run is still active (at the time of the full page run).
    """
    keys = list(keys)
    statuses = {k: r.status if (r := lab_runs.record(lab, k)) is not None else None for k in keys}
    active = any(s in ACTIVE for s in statuses.values())

    def body() -> None:
        now_active = any((r := lab_runs.record(lab, k)) is not None and r.active for k in keys)
        smoothing = float(st.session_state.get(smoothing_key, 0.0)) if smoothing_key else 0.0
        fig, runs = curves_figure(lab, keys, roles, smoothing=smoothing, title=title)
        progress_rows(lab, keys, roles)
        points = sum(len(r.train_loss) for r in runs)
        st.plotly_chart(fig, key=f"{fragment_key}-chart", config={"displaylogo": False})
        refreshing = f" · refreshing every {REFRESH.live_runs_s:g} s" if now_active else ""
        st.caption(f"{points} train-loss points so far{refreshing}",
                   help="The curves come from the worker's metric stream; a page reload shows the same view "
                        "because the runs are named in the address bar.")
        if active and not now_active:
            st.rerun()  # the last run just ended: redraw the whole page once, with its results

    st.fragment(body, run_every=REFRESH.live_runs_s if active else None)()
    return active



def test_reliability(result: dict[str, Any]) -> tuple[str, str]:
    """A finished run's test accuracy as far as its test set can carry it: the 95 % Wilson interval (text,
    "" where the record does not say how many examples it counts) and a warning ("" where none is due)."""
    n, classes = int(result.get("test_examples") or 0), int(result.get("test_classes") or 0)
    accuracy = (result.get("test") or {}).get("accuracy")
    interval = ""
    if n and accuracy is not None:
        low, high = views.wilson_interval(round(accuracy * n), n)
        interval = f"95 % Wilson interval {low:.3f}–{high:.3f} over {n:,} test example{'s' if n != 1 else ''}"
    return interval, views.small_test_warning(n, classes)
