"""Transfer atlas: what pretraining buys, model by discipline, measured from the store's runs and estimated by
LogME beside it, with how far the estimate can be trusted. Clicking a cell with runs opens them on Compare;
a cell without runs is picked for filling. Everything drawn comes from the door's atlas (:mod:`labcore.door.jobs`).
"""

from __future__ import annotations

import streamlit as st

from labcore.door import catalogue, jobs
from labcore.door.data import discipline_names
from labcore.door import runs as lab_runs
from labcore.door.runs import ACTIVE
from labcore.errors import LabError
from pages import common, state

common.through_router()


def _choice(key: str, default, options: list, many: bool = False):
    """Prepare the widget ``key`` (kept across pages by its ``keep.`` prefix) to show a valid value."""
    value = st.session_state.get(key, default)
    if many:
        value = [v for v in value if v in options] or [v for v in default if v in options]
    elif value not in options:
        value = default if default in options else options[0]
    st.session_state[key] = value
    return key


def axes(found_models: list[str], found_protocols):
    """The budget and protocol of the grid, and its rows (models) and columns (disciplines)."""
    protocols = {p.label: p for p in found_protocols}
    for name in catalogue.protocols():
        protocols.setdefault(jobs.AtlasProtocol(name).label, jobs.AtlasProtocol(name))
    c1, c2 = st.columns(2)
    budgets = list(catalogue.BUDGETS)
    budget = c1.selectbox("Budget", budgets, key=_choice("keep.atlas.budget", jobs.FILL_BUDGET, budgets))
    protocol = protocols[c2.selectbox("Protocol", list(protocols), key=_choice("keep.atlas.protocol", "full",
                                                                               list(protocols)))]
    names = discipline_names()
    with st.expander("Rows (models) and columns (disciplines)", expanded=not found_models):
        more = st.text_input("More models by name, comma separated (local:<folder>, tiny:bert, lab:<name>, a hub id)",
                             key="keep.atlas.more_models")
        named = [m.strip() for m in more.split(",") if m.strip()]
        model_options = list(dict.fromkeys(found_models + list(catalogue.backbones()) + named))
        wanted = list(dict.fromkeys((found_models or ["minilm"]) + named))
        models = st.multiselect("Models", model_options,
                                key=_choice("keep.atlas.models", wanted, model_options, many=True))
        columns = st.multiselect("Disciplines", names, key=_choice("keep.atlas.disciplines", names, names, many=True))
    return budget, protocol, models, columns


def follow_click(grid) -> None:
    """A click on the chart (its callback ran before this run): a cell with runs opens Compare, an empty one is
    picked."""
    clicked = st.session_state.pop("atlas.clicked", None)
    if clicked in grid.cells:
        keys = grid.cell(*clicked).keys
        if keys:
            st.switch_page(common.PAGES["compare"], query_params={"runs": ",".join(k[:12] for k in keys)})
        st.session_state["keep.atlas.cell.model"], st.session_state["keep.atlas.cell.discipline"] = clicked


def _clicked() -> None:
    points = st.session_state["atlas-grid"].selection.points
    if points:
        data = points[0].get("customdata") or [points[0].get("y"), points[0].get("x")]
        st.session_state["atlas.clicked"] = tuple(data)


# ------------------------------------------------------------------------------------------------ the grid
def grid_view(grid, protocol, budget) -> None:
    st.markdown(f"**How far the estimate can be trusted:** {grid.agreement.sentence()}.")
    chosen = (st.session_state.get("keep.atlas.cell.model"), st.session_state.get("keep.atlas.cell.discipline"))
    st.plotly_chart(jobs.atlas_figure(grid, highlight=chosen), key="atlas-grid", on_select=_clicked,
                    selection_mode="points", config={"displaylogo": False})
    st.caption(f"Blue: pretraining helps; red: it hurts ({protocol.label}, {budget} budget). In each cell the "
               f"measured gain, the seeds pretrained/random and the LogME estimate (est). Grey: fewer than "
               f"{jobs.MIN_SEEDS} seeds on a side, so no interval (light grey: no runs). Metrics differ between "
               f"disciplines (accuracy, MCC, bit accuracy), so read colours within a column. Hover for the 95 % "
               f"interval; click a cell to compare its runs.")


def estimates(lab, executor, grid) -> None:
    """The button that queues LogME for every cell not estimated yet, and the grid as a table."""
    estimated = sum(c.logme is not None for c in grid.cells.values())
    logme_status = {spec: r.status if (r := lab_runs.record(lab, jobs.logme_key(spec))) is not None else None
                    for spec in grid.logme_specs()}
    waiting = [spec for spec, status in logme_status.items() if status in ACTIVE]
    to_go = [spec for spec, status in logme_status.items() if status != "done" and status not in ACTIVE]
    e1, e2 = st.columns([1, 2])
    if e1.button(f"Estimate the whole grid ({len(to_go)} LogME job{'' if len(to_go) == 1 else 's'})",
                 key="btn.atlas.estimate", disabled=not to_go,
                 help=f"LogME of the pretrained and the random body on {jobs.LOGME_EXAMPLES} training examples of "
                      f"each cell's data: seconds a cell, no training."):
        try:
            executor.submit_group(jobs.LOGME_GROUP, to_go, priority="sweep")
            st.rerun()
        except LabError as exc:
            st.error(str(exc))
    e2.caption(f"{estimated} of {len(grid.cells)} cells estimated" + (f" · {len(waiting)} queued or running"
                                                                      if waiting else ""))

    with st.expander("The grid as a table"):
        table = jobs.atlas_table(grid)
        st.dataframe(table, hide_index=True)
        st.download_button("Atlas (CSV)", table.to_csv(index=False), file_name="transfer-atlas.csv", mime="text/csv",
                           key="dl.atlas")


# ------------------------------------------------------------------------------------------------ one cell
def one_cell(executor, grid, protocol, budget) -> None:
    st.subheader("One cell")
    p1, p2 = st.columns(2)
    model = p1.selectbox("Model", list(grid.models), key=_choice("keep.atlas.cell.model", grid.models[0],
                                                                 list(grid.models)))
    discipline = p2.selectbox("Discipline", list(grid.disciplines),
                              key=_choice("keep.atlas.cell.discipline", grid.disciplines[0], list(grid.disciplines)))
    cell = grid.cell(model, discipline)
    st.markdown("  \n".join(jobs.cell_lines(cell)))
    b1, b2 = st.columns(2)
    if cell.keys:
        b1.page_link(common.PAGES["compare"], label=f"Compare these {len(cell.keys)} runs", icon=":material/bar_chart:",
                     query_params={"runs": ",".join(k[:12] for k in cell.keys)})
    missing = jobs.fill_specs(cell) if budget == jobs.FILL_BUDGET else []
    why = ("" if budget == jobs.FILL_BUDGET else f"The atlas fills cells at the {jobs.FILL_BUDGET} budget only: "
           f"pick it above to fill this cell.")
    if b2.button(f"Fill this cell ({len(missing)} runs at the {jobs.FILL_BUDGET} budget)", key="btn.atlas.fill",
                 disabled=not missing, help=why or f"The pretrained and random runs this cell lacks, up to "
                                                   f"{len(jobs.FILL_SEEDS)} seeds a side, with the settings it "
                                                   f"shows."):
        try:
            done = executor.submit_group(f"atlas:{model}:{discipline}:{protocol.label}", missing, priority="sweep")
            st.success(f"{sum(s.outcome in ('queued', 'requeued', 'resumed') for s in done)} run(s) queued for "
                       f"{model} on {discipline}; the Runs page follows them live, the atlas counts them as they "
                       f"finish.")
        except LabError as exc:
            st.error(str(exc))
    elif why:
        b2.caption(why)


# ------------------------------------------------------------------------------------- while jobs are running
def watch(lab) -> None:
    """While atlas jobs are queued or running, redraw the page as each ends."""
    def _atlas_keys() -> list[str]:
        return [k for g in lab_runs.groups(lab) if g.startswith("atlas:") for k in lab_runs.group_keys(lab, g)]

    def _active() -> int:
        return sum((r := lab_runs.record(lab, k)) is not None and r.active for k in _atlas_keys())

    running = _active()

    def _watch() -> None:
        now = _active()
        if now < running:
            st.rerun()  # a job ended: draw the grid again with its result
        st.caption(f":material/hourglass_top: {now} atlas job(s) queued or running · the grid redraws as they finish")

    if running:
        st.fragment(_watch, run_every=common.REFRESH.live_runs_s)()


def main() -> None:
    st.title(":material/grid_view: Transfer atlas")
    st.caption("Each cell: the test metric of a pretrained model minus that of the same architecture trained from "
               "a random init, every other setting equal, from the runs in the store; beside it the LogME estimate of "
               "the same gain from frozen features, which takes seconds instead of minutes.")
    lab = state.get_lab()
    executor = state.get_executor()
    hidden = common.hidden_runs(lab)  # a class lesson's runs, until the teacher reveals them
    records = [r for r in jobs.finished_runs(lab) if r.key not in hidden]
    found_models, found_protocols = jobs.atlas_present(records)
    budget, protocol, models, columns = axes(found_models, found_protocols)
    if not models or not columns:
        st.info("Pick at least one model and one discipline.")
        st.stop()

    grid = jobs.build_atlas(records, models=models, disciplines=columns, protocol=protocol, budget=budget)
    grid = jobs.atlas_estimates(lab, grid)
    follow_click(grid)
    grid_view(grid, protocol, budget)
    estimates(lab, executor, grid)
    one_cell(executor, grid, protocol, budget)
    watch(lab)


main()
