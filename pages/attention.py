"""Attention: one example of a finished run under the pretrained, random and fine-tuned weights, per layer and
head, with the input shown as the discipline's symbols and as the vocabulary tokens they were fed as.

The maps are computed by the worker (an ``attention`` job, submitted through the executor) and stored in
the job's folder; this page only asks for them and draws what is stored. ``?run=KEY&split=test&index=0`` names what is shown.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door import jobs, views
from labcore.door.data import label_name, load_dataset, patches_image, render_example, spec_info
from labcore.door.jobs import RESULT_FILE, AttentionSpec
from labcore.door.runs import FINISHED, key_of
from labcore.errors import LabError
from pages import common, state

common.through_router()

WEIGHT_NAMES = {"pretrained": "pretrained", "random": "random init", "finetuned": "fine-tuned"}


@st.cache_resource(show_spinner="Loading the data set…", max_entries=4)
def _dataset(name: str, params_json: str):
    return load_dataset(name, json.loads(params_json))


# ---------------------------------------------------------------------------------------------- example
def example(spec, info) -> tuple[str, int]:
    """The split and example shown (``?split=...&index=...``), with its label and symbols; returns them."""
    c1, c2 = st.columns([1, 3])
    splits = list(jobs.ATTENTION_SPLITS)
    split_widget = state.remember("att.split", "test", splits)
    external_split = state.qp_external("split")
    if external_split in splits:
        st.session_state[split_widget] = external_split
    split = state.keep("att.split", c1.selectbox("Split", splits, key=split_widget))
    try:
        dataset = _dataset(spec["discipline"], json.dumps(spec.get("discipline_params") or {}, sort_keys=True))
    except LabError as exc:
        st.error(str(exc))
        st.stop()
    size = len(dataset[split])
    external_index = state.qp_external("index")
    index_key = "w:att.index"
    if external_index is not None and external_index.isdigit():
        st.session_state[index_key] = min(int(external_index), max(0, size - 1))
    st.session_state.setdefault(index_key, 0)
    st.session_state[index_key] = min(int(st.session_state[index_key]), max(0, size - 1))
    index = int(c1.number_input(f"Example (0–{size - 1})", min_value=0, max_value=max(0, size - 1), step=1,
                                key=index_key))
    state.set_qp(split=split, index=str(index))
    row = dataset[split][index]
    with c2:
        st.markdown(f"**Label:** {label_name(info, row['label'])}")
        st.code(render_example(info, row), language="text")
    return split, index


# ------------------------------------------------------------------------------------------ the maps
def maps_path(lab, key: str, split: str, index: int):
    """Where this example's maps are stored; while they are not, asks the worker for them, waits and stops."""
    # An `attention` job of the executor computes them; its key is known before it is submitted, so a page
    # visit finds maps computed earlier (by anyone) without asking again.
    job_spec = AttentionSpec(run=key, split=split, index=index)
    job_key = key_of(job_spec)
    job = lab_runs.record(lab, job_key)
    path = None
    failure = ""
    if job is not None and job.finished and (lab_runs.workdir(lab, job_key) / RESULT_FILE).is_file():
        path = lab_runs.workdir(lab, job_key) / RESULT_FILE
    elif job is not None and job.stopped:
        failure = job.error or "the job stopped without a message; the worker's log may say why"
    # Maps computed before attention maps became a job kind were written into the run's own folder.
    if path is None and jobs.attention_path(lab_runs.workdir(lab, key), split, index).is_file():
        path = jobs.attention_path(lab_runs.workdir(lab, key), split, index)

    if path is None:
        asked = st.session_state.setdefault("_att_asked", set())
        if failure:
            st.error(f"Computing the maps failed: {failure}")
            if not st.button("Try again", key="btn.att.again"):
                st.stop()
            asked.discard(job_key)
        if job_key not in asked:
            try:
                state.get_executor().submit(job_spec)  # idempotent: a job already queued or running is left as it is
            except LabError as exc:
                st.error(str(exc))
                st.stop()
            asked.add(job_key)

        @st.fragment(run_every=common.REFRESH.attention_job_s)
        def waiting() -> None:
            current = lab_runs.record(lab, job_key)
            if current is None or not current.active:
                st.rerun()  # done, or failed: the full page shows the maps, or why and a button to try again
            st.info(":material/hourglass_top: The worker computes this example's maps under the pretrained, random "
                    "and fine-tuned weights (it queues behind training runs). They appear here by themselves.")
        waiting()
        st.stop()
    return path


@st.cache_data(show_spinner=False, max_entries=8)
def _load(path_text: str, mtime: float) -> jobs.AttentionMaps:
    return jobs.load_attention(path_text)


def maps_view(maps, info) -> None:
    """The maps of one layer and head side by side, or a grid of every head of one set of weights."""
    layers, heads = maps.layers, maps.heads
    names = WEIGHT_NAMES
    st.markdown(f"**{maps.meta.get('model')}**, {layers} layers × {heads} heads, {len(maps.symbols)} positions · "
                f"label **{maps.meta.get('label')}**, fine-tuned prediction **{maps.meta.get('prediction')}** · the "
                f"run started from **{maps.meta.get('init')}** weights ({maps.meta.get('protocol')})")

    tokens_table = pd.DataFrame({"position": range(len(maps.symbols)), "symbol": maps.symbols,
                                 "vocabulary token": maps.vocab_tokens})
    with st.expander("The input, position by position: the discipline's symbols and the vocabulary tokens fed to the "
                     "model", expanded=False):
        image = patches_image(maps.vectors) if maps.vectors is not None and info.vectors_are_patches else None
        if image is not None:
            st.image(image, width=160, caption="the image, from its patches (one patch = one position)")
        st.dataframe(tokens_table.T, width="stretch")

    axis_options = ["discipline symbols", "vocabulary tokens"]
    has_vocab = any(maps.vocab_tokens)
    axis = st.radio("Label the axes with", axis_options, horizontal=True, key="keep.att.axis") if has_vocab \
        else axis_options[0]
    labels = maps.symbols if axis == axis_options[0] else maps.vocab_tokens

    view = st.radio("View", ["Side by side: one layer and head under each set of weights",
                             "Grid: every layer and head of one set of weights"], key="keep.att.view")
    if view.startswith("Side"):
        c1, c2 = st.columns(2)
        for name, count in (("keep.att.layer", layers), ("keep.att.head", heads)):  # another run may have fewer
            st.session_state[name] = min(int(st.session_state.get(name, 0)), count - 1)
        layer = c1.slider("Layer", 0, layers - 1, key="keep.att.layer") if layers > 1 else 0
        head = c2.slider("Head", 0, heads - 1, key="keep.att.head") if heads > 1 else 0
        panels = {names[w]: maps.maps[w][layer, head] for w in jobs.ATTENTION_WEIGHTS if w in maps.maps}
        st.plotly_chart(views.attention_compare(panels, labels, title=f"Layer {layer}, head {head}: rows attend "
                                                  f"to columns"), key="att-compare")
    else:
        c1, c2 = st.columns([1, 2])
        weights = c1.radio("Weights", [w for w in jobs.ATTENTION_WEIGHTS if w in maps.maps], format_func=names.get,
                           key="keep.att.weights")
        default_layers = list(range(min(layers, 6)))
        st.session_state.setdefault("keep.att.layers", default_layers)
        st.session_state["keep.att.layers"] = [x for x in st.session_state["keep.att.layers"] if x < layers] or \
            default_layers
        chosen = c2.multiselect("Layers", list(range(layers)), key="keep.att.layers")
        st.plotly_chart(views.attention_grid(maps.maps[weights], layers=chosen or default_layers,
                                               title=f"{names[weights]}: every head (rows L = layer, H = head)"),
                        key="att-grid")


def head_distances(maps) -> None:
    names = WEIGHT_NAMES
    st.subheader("How alike are the heads? (Kao & Lee fig. 5)")
    st.caption("For each layer, heads of two weight sets are paired one-to-one by the Hungarian algorithm so that the "
               "total L1 distance between their maps is least; the line is the mean distance of the pairs (0: the "
               "same maps; 2: attending to entirely different tokens).")
    pairs = {}
    if "finetuned" in maps.maps and "pretrained" in maps.maps:
        pairs["fine-tuned vs pretrained"] = jobs.layer_distances(maps.maps["finetuned"], maps.maps["pretrained"])
    if "random" in maps.maps and "pretrained" in maps.maps:
        pairs["random vs pretrained"] = jobs.layer_distances(maps.maps["random"], maps.maps["pretrained"])
    if "finetuned" in maps.maps and "random" in maps.maps:
        pairs["fine-tuned vs random"] = jobs.layer_distances(maps.maps["finetuned"], maps.maps["random"])
    st.plotly_chart(views.layer_distance_lines(pairs), key="att-distances")
    st.caption(" · ".join(f"{names[w]}: {note}" for w, note in (maps.meta.get("notes") or jobs.WEIGHT_NOTES).items()
                          if w in names))


def main() -> None:
    st.title(":material/visibility: Attention")
    st.caption("What does each head look at? The same example through the pretrained weights before training, a "
               "random initialisation, and the run's fine-tuned weights (FPT §3.5 draws such maps for bit tasks; "
               "Kao & Lee §4.4.1 compare heads by matching them).")
    lab = state.get_lab()
    record = common.pick_run_or_stop(
        lab, "No finished run yet. Attention maps need a run that has ended: run a demo on **Home** and come back "
        "when it is done.", key="att.run", label="Finished run", statuses=FINISHED)
    key = record.key
    spec = record.spec
    try:
        info = spec_info(spec)
    except LabError as exc:
        st.error(f"{exc}. This run's discipline is not available here, so its examples cannot be shown.")
        st.stop()
    split, index = example(spec, info)
    path = maps_path(lab, key, split, index)
    maps = _load(str(path), path.stat().st_mtime)
    maps_view(maps, info)
    head_distances(maps)


main()
