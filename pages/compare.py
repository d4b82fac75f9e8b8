"""Compare: groups or runs -> mean ± std and 95 % intervals (Kao & Lee table 5), bars with error bars (fig. 2),
mean curves with std bands (fig. 4), steps to converge with speed-up (FPT table 6), CSV and JSON downloads.

The selection lives in the address (``?groups=a,b&runs=k1,k2``), so a link opens the same comparison.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.runs import JobRecord, results
from labcore.door import views
from labcore.door.views import alignment_table
from labcore.errors import LabError
from pages import common, state

common.through_router()

PICK_LIMIT = 1000  # newest runs offered one by one (a chosen or linked older one is offered too)


def _run_keys(lab, by_key: dict[str, JobRecord], prefixes: list[str]) -> list[str]:
    out = []
    for prefix in prefixes:
        try:
            key = lab_runs.resolve_key(lab, prefix)
        except LabError:
            continue
        if key in by_key and key not in out:
            out.append(key)
    return out


def selection(lab, by_key: dict[str, JobRecord]) -> tuple[list[str], list[str]]:
    """The groups and single runs compared, synchronised with the address (``?groups=...&runs=...``)."""
    groups = lab_runs.groups(lab)
    # The address decides when it was set from outside (a link, a reload); otherwise the widgets do.
    external_groups = state.qp_external("groups")
    external_runs = state.qp_external("runs")
    if "w:cmp.groups" not in st.session_state or external_groups is not None or external_runs is not None:
        from_groups = [g for g in (external_groups or "").split(",") if g in groups]
        from_runs = _run_keys(lab, by_key, [k for k in (external_runs or "").split(",") if k])
        if not from_groups and not from_runs:  # first visit without a link: the last choice, else the newest group
            from_groups = [g for g in state.remembered("cmp.groups", []) if g in groups]
            from_runs = [k for k in state.remembered("cmp.runs", []) if k in by_key]
            if not from_groups and not from_runs:
                from_groups = [groups[-1]] if groups else []
                from_runs = [] if groups else list(by_key)[-2:]
        st.session_state["w:cmp.groups"] = from_groups
        st.session_state["w:cmp.runs"] = from_runs

    c1, c2 = st.columns(2)
    chosen_groups = c1.multiselect("Groups (demos, sweeps, pairs)", groups[::-1], key="w:cmp.groups")
    newest = list(by_key)[::-1][:PICK_LIMIT]
    offered = newest + sorted(set(st.session_state["w:cmp.runs"]) & set(by_key) - set(newest))
    chosen_runs = c2.multiselect("Single runs", offered, key="w:cmp.runs",
                                 format_func=lambda k: common.run_option_label(by_key[k]))
    state.keep("cmp.groups", chosen_groups)
    state.keep("cmp.runs", chosen_runs)
    state.set_qp(groups=chosen_groups or None, runs=[k[:12] for k in chosen_runs] or None)
    return chosen_groups, chosen_runs


def small_tests_warning(records) -> None:
    """Runs whose test set is too small for their accuracy to count as evidence, named before the tables."""
    small = [(r, *common.test_reliability(vars(r))) for r in records]  # vars: its fields, without asdict's deep copy
    small = [(r, interval, why) for r, interval, why in small if why]
    if small:
        fields = views.condition_fields(records)
        listed = "; ".join(f"{views.condition_label(r.spec, fields)} seed {r.spec.get('seed')}: {why}"
                           f"{' (' + interval + ')' if interval else ''}" for r, interval, why in small[:6])
        st.warning(f"{len(small)} of {len(records)} runs were tested on too few examples to compare: {listed}"
                   f"{' …' if len(small) > 6 else ''}. Their bars and means below are no evidence either way.",
                   icon=":material/warning:")


# ---------------------------------------------------------------------------------------------- tables
def tables(records, summary, named_by) -> None:
    st.subheader("Test metric per condition")
    st.caption("Mean ± sample standard deviation over seeds (and the folds of a cross-validation), and the 95 % "
               "Student-t interval (Tamkin et al.'s "
               "reporting); n counts finished runs, not_done the others (left out of the statistics). With n = 1 "
               "there is no spread to estimate: add seeds for error bars.")
    shown = summary.copy()
    shown["mean ± std"] = [("–" if not n else f"{m:.3f} ± {s:.3f}") for m, s, n in zip(shown["mean"], shown["std"],
                                                                                      shown["n"])]
    shown["95 % CI"] = [("–" if not n else f"[{lo:.3f}, {hi:.3f}]") for lo, hi, n in zip(shown["ci_low"],
                                                                                       shown["ci_high"], shown["n"])]
    st.dataframe(shown[["condition", "discipline", "metric", "n", "not_done", "mean ± std", "95 % CI", "majority",
                        "steps_to_converge"]], hide_index=True,
                 column_config={"majority": st.column_config.NumberColumn("majority class", format="%.3f"),
                                "steps_to_converge": st.column_config.NumberColumn("steps to converge", format="%.0f")})
    paper = views.paper_table(summary)
    if not paper.empty:
        st.markdown("**As Kao & Lee print it (table 5):** mean (std) in percent, conditions by discipline")
        st.dataframe(paper)

    aligned = alignment_table(records, lambda r: views.condition_label(r.spec, named_by))
    if not aligned.empty:
        st.subheader("Alignment distance beside the test metric (ORCA)")
        st.caption("Runs whose embedder was aligned to a text source before fine-tuning: the OTDD before and after "
                   "the alignment (lower: the embedded data sits closer to the text), on the run's measuring sample.")
        st.dataframe(aligned, hide_index=True,
                     column_config={c: st.column_config.NumberColumn(c, format="%.3f") for c in ("test", "before",
                                                                                                "after")})


# ---------------------------------------------------------------------------------------------- figures
def figures_section(records, summary):
    """The paper-shaped figures; returns the steps-to-converge table (the JSON download carries it)."""
    st.subheader("Bars with error bars (Kao & Lee fig. 2)")
    st.plotly_chart(views.bars_with_error(summary, title="Test metric: mean ± std over seeds"), key="cmp-bars")

    st.subheader("Mean curves with std bands (Kao & Lee fig. 4)")
    st.session_state.setdefault("keep.cmp.smoothing", 0.6)
    smoothing = st.slider("Smoothing of the mean train loss", 0.0, 0.95, step=0.05, key="keep.cmp.smoothing")
    st.plotly_chart(views.condition_curves(records, smoothing=smoothing),
                    key="cmp-curves")
    st.caption("Curves are averaged up to the shortest run's last step; a run's train loss is the record's thinned "
               "curve (every logged step for short runs).")

    st.subheader("Steps to converge (FPT table 6)")
    steps = views.steps_to_converge_table(records)
    if steps.empty:
        st.caption("Needs the same condition with both pretrained and random init (a pretrained-vs-random pair).")
    else:
        st.caption("Gradient steps until the validation metric first came within 0.01 of the run's own best; "
                   "speed-up = random steps / pretrained steps. Read it beside the test metric: a run that plateaus "
                   "early at a poor value also 'converges' early.")
        formatted = steps.copy().astype(object)
        for index in formatted.index:
            for column in formatted.columns:
                value = steps.loc[index, column]
                if isinstance(value, float) and math.isnan(value):
                    formatted.loc[index, column] = "–"
                elif index == "speed-up":
                    formatted.loc[index, column] = f"{value:.1f}×"
                elif "steps" in index:
                    formatted.loc[index, column] = f"{value:,.0f}"
                else:
                    formatted.loc[index, column] = f"{value:.3f}"
        st.dataframe(formatted)
    return steps


# --------------------------------------------------------------------------------------------- downloads
def downloads(records, summary, steps, named_by) -> None:
    st.subheader("Download")
    per_run = pd.DataFrame([{"key": r.key, "label": views.condition_label(r.spec, named_by),
                             "seed": r.spec.get("seed"), "status": r.status, "metric": r.metric,
                             "test": r.test_value, "untrained": r.untrained, "best_step": r.best_step,
                             "steps_to_converge": r.steps_to_converge,
                             "wall_time_s": r.wall_time_s, "discipline": r.spec.get("discipline")} for r in records])
    d1, d2, d3 = st.columns(3)
    d1.download_button("Summary (CSV)", summary.to_csv(index=False), file_name="transfer-lab-summary.csv",
                       mime="text/csv", key="dl.summary")
    d2.download_button("Per run (CSV)", per_run.to_csv(index=False), file_name="transfer-lab-runs.csv",
                       mime="text/csv", key="dl.runs")

    def _everything() -> str:
        """The JSON download, built when it is clicked (every record of a 10,000-run group: seconds)."""
        payload = {"summary": json.loads(summary.to_json(orient="records")),
                   "steps_to_converge": json.loads(steps.to_json()) if not steps.empty else {},
                   "records": [r.to_dict() for r in records]}
        return json.dumps(payload, indent=1)

    d3.download_button("Everything (JSON)", _everything, file_name="transfer-lab-compare.json",
                       mime="application/json", key="dl.json")


def main() -> None:
    st.title(":material/bar_chart: Compare")
    lab = state.get_lab()
    hidden = common.hidden_runs(lab)  # a class lesson's runs before its reveal
    # read once: the selection and the results below use it
    every_run = {r.key: r for r in lab_runs.runs(lab) if r.key not in hidden}
    with_result = [r for r in every_run.values() if r.result]
    if not with_result:
        st.info("Nothing to compare yet: runs appear here once they have a result. Run a demo on **Home**, or a "
                "pretrained-vs-random pair with several seeds on **New experiment**.")
        st.stop()
    by_key = {r.key: r for r in with_result}
    chosen_groups, chosen_runs = selection(lab, by_key)

    # Sets, not list scans: a group of 10,000 runs made each of these lines quadratic.
    keys = list(dict.fromkeys([k for group in chosen_groups for k in lab_runs.group_keys(lab, group)] + chosen_runs))
    if hidden & set(keys):
        st.caption(":material/lock: Some of these runs belong to a lesson your class has not seen revealed yet: "
                   "they appear here after the teacher's reveal.")
        keys = [k for k in keys if k not in hidden]
    records = results(lab, keys, every_run)  # the runs read above: none is read twice
    with_results = {r.key for r in records}
    waiting = [k for k in keys if k not in with_results]
    if waiting:
        st.caption(f"{len(waiting)} selected run(s) have no result yet (queued or running); they join the tables "
                   f"when they finish.")
    if not records:
        st.info("Pick at least one group or run with a result.")
        st.stop()
    small_tests_warning(records)
    summary = views.summary_table(records)
    named_by = views.condition_fields(records)  # once: per run it made the tables quadratic (13 s at 1,000 runs)
    tables(records, summary, named_by)
    steps = figures_section(records, summary)
    downloads(records, summary, steps, named_by)


main()
