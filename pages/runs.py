"""Runs: the queue and recent runs; one run or a group live (progress, ETA, curves); cancel, resume, retry, logs.

The run or group shown lives in the address (``?run=KEY`` or ``?group=NAME``), so a reload or a second tab
shows the same live view.

Runs belong to whoever asked for them: a viewer's Cancel withdraws their own request, and the run stops only
when nobody else waits for it. The teacher (the passcode of ``.streamlit/secrets.toml``, entered in the
sidebar) can cancel any run for everyone, clear the queue and stop or start the workers. Every destructive
action asks first.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from labcore.door.catalogue import has_stage
from labcore.door import runs as lab_runs
from labcore.door.desk import stored_spec
from labcore.door.runs import (ACTIVE, COMMAND_LINE, STOPPED, JobRecord, RunRecord, RunSpec, Selection, disk_usage,
                               stage_curves)
from labcore.door import views
from labcore.door.views import fmt_age, fmt_duration, fmt_speed
from labcore.errors import LabError
from pages import common, state

common.through_router()

LIST_LIMIT = 200  # newest runs the list shows
PICK_LIMIT = 1000  # newest runs the page reads and offers to pick (a run named in the address is offered too)
PAGE_SIZE = 25  # runs of a group shown live and in detail at once: a 10,000-run sweep is read a page at a time
CONFIRM = "runs.confirm"  # the destructive action waiting for a yes: (action, key)


def _ask(action: str, key: str = "") -> None:
    st.session_state[CONFIRM] = (action, key)


def _never_mind() -> None:
    st.session_state.pop(CONFIRM, None)


def _pending(action: str, key: str = "") -> bool:
    return tuple(st.session_state.get(CONFIRM) or ()) == (action, key)


def _confirm(prompt: str, yes: str, do, *, key: str = "", action: str = "") -> None:
    """The question of a destructive action with its two answers; ``do()`` returns what to tell the viewer."""
    st.warning(prompt)
    c = st.columns([1, 1, 3])
    if c[0].button(yes, key=f"yes-{action}-{key}", type="primary"):
        _never_mind()
        try:
            st.session_state["runs.note"] = do()
        except LabError as exc:
            st.session_state["runs.error"] = f"{yes} {key[:8]}: {exc}"
        st.rerun()
    c[1].button("Keep it", key=f"no-{action}-{key}", on_click=_never_mind)



def _withdrawn(executor, key: str) -> str:
    done = executor.withdraw(key)
    if done.outcome == "withdrawn":
        return (f"Your request is withdrawn; {done.others} other{'s' if done.others != 1 else ''} still "
                f"wait{'s' if done.others == 1 else ''} for this run, so it goes on for them.")
    if done.outcome == "not-requested":
        return (f"You had not asked for this run; {done.others} other{'s' if done.others != 1 else ''} "
                f"wait{'s' if done.others == 1 else ''} for it, so it goes on. Only the teacher can stop it.")
    if done.outcome == "cancelled":
        return "Cancelled: nobody else was waiting for it; it stops after its current step."
    return f"It had already ended ({done.record.status})."


def _may_delete() -> bool:
    """Deleting is the teacher's in a class (a passcode is set); on a lab of one's own, anyone's."""
    return state.teacher_passcode() is None or state.is_teacher()


def _ask_delete(lab, executor, selection: Selection, action: str, key: str) -> None:
    """The deletion's question: what goes, what depends on it (shown before anything is deleted)."""
    try:
        plan = executor.plan_delete(selection)
    except LabError as exc:
        st.error(str(exc))
        return
    lines = plan.lines()
    if plan.blocking:
        st.error("Cannot delete yet: " + "; ".join(d.describe() for d in plan.blocking)
                 + ". Cancel or delete those first.")
        c = st.columns([1, 4])
        c[0].button("Keep it", key=f"no-{action}-{key}", on_click=_never_mind)
        return

    def go() -> str:
        done = executor.delete(plan, state.TEACHER if state.is_teacher() else executor.who)
        state.set_qp(run=None, group=None)
        return (f"Deleted {len(done.keys)} job(s) and their files ({done.bytes / 2**20:,.1f} MiB); their keys can run "
                f"again.")

    _confirm("Delete for good? " + lines[0] + ("\n\n" + "\n\n".join(line.strip() for line in lines[1:])
                                               if lines[1:] else ""), "Yes, delete", go, key=key, action=action)


# --------------------------------------------------------------------------------------- teacher controls
def teacher_controls(lab, executor) -> None:
    with st.expander(":material/school: Teacher controls", expanded=True):
        summary = state.worker_summary(lab)
        held = lab_runs.workers_held(lab)
        st.caption(f"{len(summary['workers'])} worker(s) alive · {summary['running']} running · "
                   f"{summary['queued']} queued" + (" · workers stopped by the teacher: queued runs wait"
                                                     if held else ""))
        c = st.columns(3)
        c[0].button("Clear the queue…", key="teacher.clear", on_click=_ask, args=("clear",),
                    disabled=not summary["queued"], help="Cancel every queued run; running ones go on.")
        if c[1].button("Start the workers", key="teacher.start", disabled=bool(summary["workers"]) and not held):
            try:
                executor.start_workers()
            except (LabError, OSError) as exc:
                st.error(f"Could not start a worker: {exc}")
        c[2].button("Stop the workers…", key="teacher.stop", on_click=_ask, args=("stop",),
                    disabled=not summary["workers"], help="Running runs checkpoint and stop (interrupted); "
                                                          "no worker starts again until you start them.")
        if _pending("clear"):
            _confirm(f"Cancel all {summary['queued']} queued runs, whoever asked for them?", "Yes, clear the queue",
                     lambda: f"Cancelled {len(executor.clear_queue(state.TEACHER))} queued runs.", action="clear")
        if _pending("stop"):
            def stop() -> str:
                executor.hold_workers(state.TEACHER)
                state.start_task("stop-workers", lambda progress: executor.stop_workers())
                return "Stopping the workers: running runs checkpoint first (up to half a minute)."
            _confirm("Stop every worker? Running runs stop at their next step and can be resumed later.",
                     "Yes, stop them", stop, action="stop")



# ----------------------------------------------------------------------------------------------- the list
def _device(result: dict, worker: dict | None) -> str:
    """Which device a run trained on: its record's (finished), else the GPU its worker holds (running)."""
    if result.get("device"):
        name = result.get("device_name", "")
        gpus = result.get("visible_gpus") or []
        where = f"{result['device']}" + (f" (GPU {gpus[0]})" if result["device"].startswith("cuda") and len(gpus) == 1
                                          else "")
        return f"{where} {name}".strip()
    if worker is not None and worker.get("gpu"):
        return f"cuda (GPU {worker['gpu']})"
    return ""


def _table(lab, rows) -> pd.DataFrame:
    cache = state.stream_cache()
    workers = {w.get("run"): w for w in lab_runs.workers(lab, role="worker") if w.get("run")}
    out = []
    for r in rows:
        beat = lab_runs.heartbeat(lab, r.key) if r.status == "running" else None
        result = r.result or {}
        step = (beat or {}).get("step", result.get("steps_done", 0)) or 0
        total = (beat or {}).get("total_steps", result.get("total_steps", 0)) or 0
        prog = state.progress(r.status, int(step), int(total), cache.pace(lab, r.key, read=False))
        test = result.get("test", {}).get(result.get("metric", ""), None)
        out.append({"status": r.status, "run": r.label, "progress": prog.fraction,
                    "where": prog.text, "test": test, "node": r.node or r.host or "",
                    "device": _device(result, workers.get(r.key) if r.status == "running" else None),
                    "groups": ", ".join(r.groups),
                    "started by": state.who_label(r.started_by) if r.holds("started_by") else "",
                    "waiting": len(r.requesters or []) if r.active else None,
                    "submitted": fmt_age(r.submitted_at), "key": r.key[:12]})
    return pd.DataFrame(out)


def run_list(lab, records: list[JobRecord]) -> None:
    """The queue and the newest runs, refreshed while any is active."""
    with st.expander(f"Queue and recent runs ({'newest ' if len(records) == PICK_LIMIT else ''}{len(records):,})",
                     expanded=not (state.qp("run") or state.qp("group"))):
        first_read = [records]  # the page's own reading serves the list's first drawing; its refreshes read again

        @st.fragment(run_every=common.REFRESH.run_list_s if any(r.active for r in records) else None)
        def run_list() -> None:
            newest = first_read.pop() if first_read else lab_runs.runs(lab, newest=LIST_LIMIT)[::-1]
            hidden = common.hidden_runs(lab)  # a class lesson's runs before its reveal
            newest = [r for r in newest if r.key not in hidden]
            st.dataframe(_table(lab, newest[:LIST_LIMIT]), hide_index=True, column_config={
                "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent"),
                "test": st.column_config.NumberColumn("test metric", format="%.3f"),
                "node": st.column_config.TextColumn("ran on", help="The machine (a Ray node, or this one) that ran it"),
                "device": st.column_config.TextColumn("device", help="The CPU or GPU it trained on (with several GPUs, "
                                                                      "each worker has one)"),
            })
        run_list()


def disk_section(lab) -> None:
    """What the lab holds on disk, by kind, group and requester, measured on request."""
    with st.expander(":material/hard_drive: Disk: what the lab holds", expanded=False):
        # Measured on request: it walks every job's folder (seconds for thousands of runs).
        if st.button("Measure", key="disk.measure"):
            st.session_state["runs.disk"] = disk_usage(lab)
        usage = st.session_state.get("runs.disk")
        if usage is not None:
            st.caption(usage.lines()[0])
            c = st.columns(3)
            for col, title, rows in zip(c, ("kind", "group", "requester"),
                                        (usage.by_kind, usage.by_group, usage.by_requester)):
                col.dataframe(pd.DataFrame([{title: state.who_label(r.name) if title == "requester" and
                                             r.name != COMMAND_LINE else r.name, "jobs": r.jobs,
                                             "MiB": round(r.bytes / 2**20, 1)} for r in rows]),
                              hide_index=True)



# ------------------------------------------------------------------------------------------- what to show
def chosen_keys(lab, executor, runs: list[JobRecord]) -> tuple[list[str], str | None]:
    """One run or a group, synchronised with the address (``?run=...`` or ``?group=...``): its keys, and the
    group's name (None for one run)."""
    groups = lab_runs.groups(lab)
    modes = ["One run", "A group of runs"]
    external_group = state.qp_external("group")
    external_run = state.qp("run")
    mode_widget = state.remember("runs.mode", modes[0], modes)
    if external_group in groups:
        st.session_state[mode_widget] = modes[1]
    elif external_run and not state.qp("group"):
        st.session_state[mode_widget] = modes[0]
    mode = st.radio("Show", modes, key=mode_widget, horizontal=True)
    state.keep("runs.mode", mode)

    group = None
    if mode == modes[1] and groups:
        order = groups[::-1]
        widget = state.remember("runs.group", order[0], order)
        if external_group in order:
            st.session_state[widget] = external_group
        group = st.selectbox("Group (a sweep, a demo, a pretrained-vs-random pair)", order, key=widget)
        state.keep("runs.group", group)
        state.set_qp(group=group, run=None)
        keys = list(lab_runs.group_keys(lab, group))
        st.button("Delete this group…", key="delete-group", on_click=_ask, args=("delete-group", group),
                  disabled=not _may_delete(), help="Its jobs that no other group lists go, with their files; "
                                                   "what depends on them is shown first.")
        if _pending("delete-group", group):
            _ask_delete(lab, executor, Selection(group=group), "delete-group", group)
    else:
        if mode == modes[1]:
            st.info("No groups yet: a demo, a sweep or a pretrained-vs-random pair makes one.")
        chosen = common.pick_run(lab, key="runs.run", arrive_at="running", runs=runs)
        state.set_qp(group=None)
        keys = [chosen.key] if chosen else []

    return keys, group


def page_of(keys: list[str], group: str | None) -> list[str]:
    """A group's keys a page at a time (a 10,000-run sweep is read a page at a time)."""
    group_keys = keys
    if len(keys) > PAGE_SIZE:
        pages = -(-len(keys) // PAGE_SIZE)
        page = int(st.number_input(f"Page of the group ({pages:,} pages of {PAGE_SIZE} runs)", min_value=1,
                                   max_value=pages, value=1, step=1, key=f"runs.page.{group}"))
        keys = keys[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]
        st.caption(f"Runs {(page - 1) * PAGE_SIZE + 1:,}-{(page - 1) * PAGE_SIZE + len(keys):,} of "
                   f"{len(group_keys):,}: the curves and details below are this page's; Compare shows the whole group.")
    return keys


# --------------------------------------------------------------------------------------------- live view
def live_view(lab, keys: list[str], group: str | None) -> None:
    st.session_state.setdefault("keep.runs.smoothing", 0.6)
    st.slider("Smoothing of the train loss", 0.0, 0.95, key="keep.runs.smoothing", step=0.05,
              help="Exponential moving average (as TensorBoard's slider); the raw curve stays faint behind it.")
    specs = {k: r.spec if (r := lab_runs.record(lab, k)) is not None else {} for k in keys}
    inits = {spec.get("init") for spec in specs.values()}
    colours = ": pretrained blue, random orange" if {"pretrained", "random"} <= inits else ""
    staged = [k for k in keys if has_stage(specs[k].get("protocol", "full"))]
    if staged:  # a protocol that trains something before the loop (ORCA's alignment): its curve first
        def stage_view() -> None:
            cache = state.stream_cache()
            names = dict(zip(staged, common.short_labels(lab, staged)))
            curves = {f"{names[k]}: {name.replace('_', ' ')}": points for k in staged
                      for name, points in stage_curves(cache.read(lab, k)).items()}
            if curves:
                st.plotly_chart(views.stage_curves_figure(curves, metric="distance to the source",
                                                            title="Before training: the alignment"),
                                key="runs-stage-chart", config={"displaylogo": False})
            else:
                st.caption("The alignment curve appears here once the run starts aligning, before its training curve.")

        aligning = any((r := lab_runs.record(lab, k)) is not None and r.active for k in staged)
        st.fragment(stage_view, run_every=common.REFRESH.live_runs_s if aligning else None)()
    common.live_runs(lab, keys, fragment_key="runs-live", smoothing_key="keep.runs.smoothing",
                     title=f"Train loss (solid) and validation metric (dashed){colours}")
    cols = st.columns(3)
    cols[0].page_link(common.PAGES["compare"], label="Compare these runs", icon=":material/bar_chart:",
                      query_params={"groups": group} if group else {"runs": ",".join(keys)})


# ----------------------------------------------------------------------------------------------- details
def _act(label: str, key: str, action) -> None:
    try:
        action()
    except LabError as exc:
        st.session_state["runs.error"] = f"{label} {key[:8]}: {exc}"
    st.rerun()


def _ownership(executor, record) -> str:
    """Who started the run, who waits for it and who cancelled it, in a line."""
    parts = [f"Started by {state.who_label(record.started_by)}"] if record.holds("started_by") else []
    waiting = record.requesters or []
    if record.active and waiting:
        parts.append(f"{len(waiting)} waiting for it" + (" (you among them)" if executor.who in waiting else ""))
    if record.cancelled_by is not None and record.status in ("cancelled", "running"):
        parts.append(f"cancelled by {state.who_label(record.cancelled_by)}")
    return " · ".join(parts) or "Started before the lab recorded who asked"


def result_summary(record, result: dict) -> None:
    """A finished run's test metric, speed and how far its test set carries it; its error where it failed."""
    if result.get("test") and RunRecord.from_dict(result).untrained:
        st.warning(f"No test result: the run stopped at step {result.get('steps_done')}, before its first "
                   f"validation, so its weights are untrained.")
    elif result.get("test"):
        metric = result.get("metric", "")
        majority = (result.get("baseline") or {}).get("majority")
        st.markdown(f"**Test {metric.replace('_', ' ')}:** {result['test'].get(metric, float('nan')):.4f} · best "
                    f"validation step {result.get('best_step')} · {result.get('steps_done')} steps in "
                    f"{fmt_duration(result.get('wall_time_s'))} · "
                    f"{result.get('params_trainable', 0):,} of {result.get('params_total', 0):,} parameters "
                    f"trained" + (f" · majority class {majority:.3f}" if majority is not None else ""))
        if fmt_speed(result):
            st.caption(fmt_speed(result) + ".")
        interval, small = common.test_reliability(result)
        if interval:
            st.caption(f"Test accuracy: {interval}.")
        if small:
            st.warning(f"Too small to compare: {small}.", icon=":material/warning:")
    if record.error or result.get("error"):
        st.error(record.error or result["error"])


def run_actions(lab, executor, record, teacher: bool) -> None:
    """Cancel, resume, retry, attention and delete for one run, each destructive one asking first."""
    key, status = record.key, record.status
    b = st.columns(6 if teacher else 5)
    b[0].button("Cancel", key=f"cancel-{key}", disabled=status not in ACTIVE, on_click=_ask,
                args=("withdraw", key), help="Withdraws your request: the run stops (after its current "
                                             "step, keeping its curves) once nobody else waits for it.")
    if teacher:
        b[4].button("Cancel for everyone", key=f"cancel-all-{key}", disabled=status not in ACTIVE,
                    on_click=_ask, args=("cancel", key), help="The teacher's cancel: it stops whoever asked.")
    if _pending("withdraw", key):
        asking = record.requesters or []
        others = [w for w in asking if w != executor.who]
        many = f"{len(others)} other{'s' if len(others) != 1 else ''}"
        if others and executor.who not in asking:
            prompt = f"You did not ask for this run; {many} wait for it, so it goes on whatever you do."
        elif others:
            prompt = f"Withdraw your request? {many} still wait for this run; it goes on for them."
        else:
            prompt = "Cancel this run? Nobody else waits for it: it stops after its current step."
        _confirm(prompt, "Yes, cancel", lambda: _withdrawn(executor, key), key=key, action="withdraw")
    if _pending("cancel", key):
        _confirm(f"Cancel this run for all {len(record.requesters or [])} who asked for it?",
                 "Yes, cancel for everyone", key=key, action="cancel",
                 do=lambda: f"Cancelled for everyone ({executor.cancel(key, state.TEACHER).status}).")
    if b[1].button("Resume", key=f"resume-{key}", disabled=status not in STOPPED,
                   help="Continue from the last checkpoint."):
        _act("Resume", key, lambda: executor.resume(key))
    if b[2].button("Retry", key=f"retry-{key}", disabled=status != "failed",
                   help="Run a failed spec again from the start."):
        # the stored resolution, as it is: the retry runs under the key the failed run had
        _act("Retry", key, lambda: executor.submit(stored_spec(record)))
    b[3].page_link(common.PAGES["attention"], label="Attention", icon=":material/visibility:",
                   query_params={"run": key},
                   disabled=status not in ("done", "diverged"))
    b[5 if teacher else 4].button("Delete…", key=f"delete-{key}", on_click=_ask, args=("delete", key),
                                  disabled=not _may_delete(),
                                  help="The run's record, curves and files go (a running one is cancelled "
                                       "first); what depends on it is shown first." if _may_delete() else
                                       "Only the teacher deletes runs in a class.")
    if _pending("delete", key):
        _ask_delete(lab, executor, Selection(keys=(key,)), "delete", key)


def run_details(lab, executor, record, teacher: bool, expanded: bool) -> None:
    key, status = record.key, record.status
    with st.expander(f"{common.status_label(record)} · {record.label_or(key)}", expanded=expanded):
        result = record.result or {}
        result_summary(record, result)
        st.caption(_ownership(executor, record))
        run_actions(lab, executor, record, teacher)
        spec = RunSpec.from_dict(record.spec)
        st.code(spec.cli(), language="bash", wrap_lines=True)
        with st.popover("Spec as JSON"):
            st.code(json.dumps(record.spec, indent=1, sort_keys=True), language="json")
        if result.get("notes"):
            st.caption(" · ".join(result["notes"]))
        show_log = st.toggle("Show log", key=f"log-{key}", value=status in ("failed", "dead"))
        if show_log:
            log = lab_runs.log(lab, key)
            st.code(log[-20000:] or "(nothing logged yet)", language="text")


def details(lab, executor, keys: list[str]) -> None:
    error = st.session_state.pop("runs.error", None)
    if error:
        st.error(error)
    note = st.session_state.pop("runs.note", None)
    if note:
        st.success(note)
    teacher = state.is_teacher()

    st.subheader("Details")
    for key in keys:
        record = lab_runs.record(lab, key)
        if record is not None:
            run_details(lab, executor, record, teacher, expanded=len(keys) == 1)


def main() -> None:
    st.title(":material/list_alt: Runs")
    lab = state.get_lab()
    # The newest runs only, read once for the list and the run picker: a page of a 10,000-run lab reads no more.
    hidden = common.hidden_runs(lab)  # a class lesson's runs, hidden from students until its reveal
    runs = [r for r in lab_runs.runs(lab, newest=PICK_LIMIT) if r.key not in hidden]
    records = runs[::-1]
    if not records:
        st.info("No runs yet. Start a one-click demo on **Home** or design one on **New experiment**; it appears "
                "here while it is queued, running and after it ends.")
        st.page_link(common.PAGES["new"], label="New experiment", icon=":material/science:")
        st.stop()
    executor = state.get_executor()
    if state.is_teacher():
        teacher_controls(lab, executor)
    run_list(lab, records)
    if _may_delete():
        disk_section(lab)
    keys, group = chosen_keys(lab, executor, runs)
    keys = [k for k in keys if k not in hidden]  # a group or a link may name them
    if not keys:
        st.stop()
    keys = page_of(keys, group)
    live_view(lab, keys, group)
    details(lab, executor, keys)


main()
