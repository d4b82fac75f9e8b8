"""Runs: the queue and recent runs; one run or a group live (progress, ETA, curves); cancel, resume, retry, logs.

The run or group shown lives in the address (``?run=KEY`` or ``?group=NAME``), so a reload or a second tab
shows the same live view.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from labcore.errors import LabError
from labcore.fmt import fmt_age, fmt_duration
from labcore.record import RunRecord
from labcore.spec import RunSpec
from labcore.store import ACTIVE, STOPPED
from pages import common, state

common.through_router()

st.title(":material/list_alt: Runs")
store = state.get_store()
records = store.runs()[::-1]
if not records:
    st.info("No runs yet. Start a one-click demo on **Home** or design one on **New experiment**; it appears "
            "here while it is queued, running and after it ends.")
    st.page_link(common.PAGES["new"], label="New experiment", icon=":material/science:")
    st.stop()


# ----------------------------------------------------------------------------------------------- the list
def _table(rows) -> pd.DataFrame:
    cache = state.stream_cache()
    out = []
    for r in rows:
        beat = store.heartbeat_of(r["key"]) if r["status"] == "running" else None
        result = r.get("result") or {}
        step = (beat or {}).get("step", result.get("steps_done", 0)) or 0
        total = (beat or {}).get("total_steps", result.get("total_steps", 0)) or 0
        prog = state.progress(r["status"], int(step), int(total), cache.events.get(r["key"], []))
        test = result.get("test", {}).get(result.get("metric", ""), None)
        out.append({"status": r["status"], "run": r.get("label", ""), "progress": prog.fraction,
                    "where": prog.text, "test": test, "groups": ", ".join(r.get("groups", [])),
                    "submitted": fmt_age(r.get("submitted_at")), "key": r["key"][:12]})
    return pd.DataFrame(out)


with st.expander(f"Queue and recent runs ({len(records)})", expanded=not (state.qp("run") or state.qp("group"))):
    @st.fragment(run_every=common.REFRESH.run_list_s if any(r["status"] in ACTIVE for r in records) else None)
    def run_list() -> None:
        st.dataframe(_table(store.runs()[::-1][:200]), hide_index=True, column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent"),
            "test": st.column_config.NumberColumn("test metric", format="%.3f"),
        })
    run_list()


# ------------------------------------------------------------------------------------------- what to show
groups = store.groups()
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

if mode == modes[1] and groups:
    order = groups[::-1]
    widget = state.remember("runs.group", order[0], order)
    if external_group in order:
        st.session_state[widget] = external_group
    group = st.selectbox("Group (a sweep, a demo, a pretrained-vs-random pair)", order, key=widget)
    state.keep("runs.group", group)
    state.set_qp(group=group, run=None)
    keys = list(store.group(group)["keys"])
else:
    if mode == modes[1]:
        st.info("No groups yet: a demo, a sweep or a pretrained-vs-random pair makes one.")
    chosen = common.pick_run(store, key="runs.run", arrive_at="running")
    state.set_qp(group=None)
    keys = [chosen["key"]] if chosen else []

if not keys:
    st.stop()

# --------------------------------------------------------------------------------------------- live view
st.session_state.setdefault("keep.runs.smoothing", 0.6)
st.slider("Smoothing of the train loss", 0.0, 0.95, key="keep.runs.smoothing", step=0.05,
          help="Exponential moving average (as TensorBoard's slider); the raw curve stays faint behind it.")
inits = {(store.get(k) or {}).get("spec", {}).get("init") for k in keys}
colours = ": pretrained blue, random orange" if {"pretrained", "random"} <= inits else ""
common.live_runs(store, keys, fragment_key="runs-live", smoothing_key="keep.runs.smoothing",
                 title=f"Train loss (solid) and validation metric (dashed){colours}")
cols = st.columns(3)
cols[0].page_link(common.PAGES["compare"], label="Compare these runs", icon=":material/bar_chart:",
                  query_params={"runs": ",".join(keys)})

# ----------------------------------------------------------------------------------------------- details
executor = state.get_executor()


def _act(label: str, key: str, action) -> None:
    try:
        action()
    except LabError as exc:
        st.session_state["runs.error"] = f"{label} {key[:8]}: {exc}"
    st.rerun()


error = st.session_state.pop("runs.error", None)
if error:
    st.error(error)

st.subheader("Details")
for key in keys:
    record = store.get(key)
    if record is None:
        continue
    status = record["status"]
    with st.expander(f"{common.status_label(record)} · {record.get('label', key)}", expanded=len(keys) == 1):
        result = record.get("result") or {}
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
            interval, small = common.test_reliability(result)
            if interval:
                st.caption(f"Test accuracy: {interval}.")
            if small:
                st.warning(f"Too small to compare: {small}.", icon=":material/warning:")
        if record.get("error") or result.get("error"):
            st.error(record.get("error") or result["error"])
        b = st.columns(4)
        if b[0].button("Cancel", key=f"cancel-{key}", disabled=status not in ACTIVE,
                       help="Stops after the current training step; the curves so far are kept."):
            _act("Cancel", key, lambda: executor.cancel(key))
        if b[1].button("Resume", key=f"resume-{key}", disabled=status not in STOPPED,
                       help="Continue from the last checkpoint."):
            _act("Resume", key, lambda: executor.resume(key))
        if b[2].button("Retry", key=f"retry-{key}", disabled=status != "failed",
                       help="Run a failed spec again from the start."):
            _act("Retry", key, lambda: executor.submit(RunSpec.from_dict(record["spec"])))
        b[3].page_link(common.PAGES["attention"], label="Attention", icon=":material/visibility:",
                       query_params={"run": key},
                       disabled=status not in ("done", "diverged"))
        spec = RunSpec.from_dict(record["spec"])
        st.code(spec.cli(), language="bash", wrap_lines=True)
        with st.popover("Spec as JSON"):
            st.code(json.dumps(record["spec"], indent=1, sort_keys=True), language="json")
        if result.get("notes"):
            st.caption(" · ".join(result["notes"]))
        show_log = st.toggle("Show log", key=f"log-{key}", value=status in ("failed", "dead"))
        if show_log:
            log = store.log(key)
            st.code(log[-20000:] or "(nothing logged yet)", language="text")
