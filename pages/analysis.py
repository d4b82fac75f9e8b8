"""Analysis: why transfer works. Pick an analysis, the models (a backbone pretrained or at a random init,
or a finished run's fine-tuned weights) and the examples; the worker computes it as a job, and the page
draws its figure and table. ``?job=KEY`` names the analysis shown, so a link opens it again.
"""

from __future__ import annotations

import json

import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.catalogue import backbones, known_layers
from labcore.door.data import discipline_names
from labcore.door.jobs import ANALYSES, CURVES, SPEC_TYPES, ModelRef, curve_figure, curve_specs, curve_table
from labcore.door.runs import make_spec, results
from labcore.door import views
from labcore.errors import LabError
from pages import common, state

common.through_router()

DESCRIPTIONS = {
    "similarity": "PWCCA or linear CKA between every layer of two models on the same examples (Kao & Lee table 1)",
    "heads": "attention heads of two models matched by least L1 distance, per layer (Kao & Lee §4.4.1)",
    "jacobian": "singular values of the Jacobian of the pooled last layer w.r.t. the input embeddings (Kao F.1)",
    "gradients": "cosine similarity between examples' loss gradients (Kao F.2)",
    "noise": "how far the output moves under Gaussian noise on every parameter (Kao F.3)",
    "params": "std of attention and feed-forward weights per layer (FPT §3.8)",
    "logme": "LogME of frozen features: will this body help here, before any fine-tuning (You et al., 2021)",
}
PAIRS = ("similarity", "heads")  # analyses of exactly two models


def model_options(lab) -> dict[str, ModelRef]:
    """Every model the page offers: each backbone pretrained and at three random seeds, and finished runs."""
    options: dict[str, ModelRef] = {}
    for name in backbones():
        options[f"{name} · pretrained"] = ModelRef(model=name)
        for seed in range(3):
            options[f"{name} · random init, seed {seed}"] = ModelRef(model=name, init="random", seed=seed)
    hidden = common.hidden_runs(lab)  # a class lesson's runs, until the teacher reveals them
    for record in [r for r in lab_runs.runs(lab, status="done") if r.key not in hidden][::-1][:50]:
        options[f"run {record.key[:8]} · fine-tuned · {record.label}"] = ModelRef(run=record.key)
    return options


# ----------------------------------------------------------------------------------------------------- form
def analysis_form(lab, executor) -> None:
    """The form that asks for an analysis; a submitted one becomes the one shown (``?job=KEY``)."""
    with st.form("analysis"):
        kind = st.selectbox("Analysis", ANALYSES, format_func=lambda k: f"{k}: {DESCRIPTIONS[k]}", key="an.kind")
        options = model_options(lab)
        labels = list(options)
        defaults = [labels[0], labels[1]] if len(labels) > 1 else labels
        chosen = st.multiselect("Models (two for similarity and heads)", labels, default=defaults, key="an.models")
        c1, c2, c3 = st.columns(3)
        names = discipline_names()
        discipline = c1.selectbox("Discipline", names, index=names.index("protein-malonylation")
                                  if "protein-malonylation" in names else 0, key="an.discipline")
        split = c2.selectbox("Split", ["test", "validation", "train"], key="an.split")
        examples = c3.number_input("Examples (0: the analysis's default)", min_value=0, max_value=4096, value=0,
                                   key="an.examples")
        measure = st.radio("Similarity measure", ["pwcca", "cka"], horizontal=True, key="an.measure")
        submitted = st.form_submit_button("Run analysis", type="primary")

    if submitted:
        values = {"models": tuple(options[label] for label in chosen), "discipline": discipline, "split": split}
        if examples:
            values["examples"] = int(examples)
        if kind == "similarity":
            values["measure"] = measure
        try:
            submission = executor.submit(SPEC_TYPES[kind](**values), priority="interactive")
            state.set_qp(job=submission.key)
        except LabError as exc:
            st.error(str(exc))


# --------------------------------------------------------------------------------------------------- result
def results_section(lab) -> None:
    """The analysis named in the address (else the newest) and the list of earlier ones."""
    hidden = common.hidden_runs(lab)  # an analysis of a class lesson's run shows its model: hidden with it
    analysis_keys = [r.key for r in lab_runs.jobs(lab) if r.kind in ANALYSES and not hidden & set(r.requires)][::-1]
    shown = state.qp("job") or (analysis_keys[0] if analysis_keys else None)
    if shown is not None and hidden & set(getattr(lab_runs.record(lab, shown), "requires", None) or ()):
        st.info("This analysis reads runs of a class lesson whose answer is not revealed yet; it shows after "
                "the reveal.")
        st.stop()
    if shown is None:
        st.info("No analysis yet: pick one above and press **Run analysis**. With the tiny defaults each takes "
                "seconds to a couple of minutes on this machine.")
        st.stop()
    with st.expander(f"Earlier analyses ({len(analysis_keys)})"):
        for key in analysis_keys[:30]:
            record = lab_runs.record(lab, key)
            if record is not None:  # deleted since the list was read
                st.markdown(f"[{record.label_or(key)}](?job={key}) · {common.status_label(record)}")

    result_view(lab, shown)


@st.fragment(run_every=common.REFRESH.live_runs_s)
def result_view(lab, shown: str) -> None:
    record = lab_runs.record(lab, shown)
    if record is None:
        st.error(f"There is no analysis {shown!r} in the store; pick one from the list above.")
        return
    st.subheader(record.label_or(shown))
    if record.active:
        lines = [e.get("message", "") for e in lab_runs.events(lab, shown) if e.get("type") == "log"]
        st.info(f":material/hourglass_top: {record.status} · " + (lines[-1] if lines else "waiting for a worker"))
        return
    if record.stopped:
        st.error(f"The analysis {record.status}: {record.error or 'no message; its log may say why'}")
        return
    result = record.result or {}
    kind = record.kind
    for note in result.get("notes", []):
        st.warning(note)
    st.plotly_chart(views.analysis_figure(kind, result), key=f"fig-{shown}")
    table = views.analysis_table(kind, result)
    st.dataframe(table)
    st.download_button("Table (CSV)", table.to_csv(), file_name=f"{kind}-{shown[:8]}.csv", key=f"csv-{shown}")
    st.download_button("Result (JSON)", json.dumps(result), file_name=f"{kind}-{shown[:8]}.json",
                       key=f"json-{shown}")
    if record.finished and kind == "similarity":
        st.caption(f"{result['measure'].upper()} of the last layers: **{result['last']:.3f}** "
                   f"({result['rows']} rows{', pooled' if result.get('pooled') else ', every position'}).")


# ------------------------------------------------------------------------------------------ layer curves
def layer_curves(lab, executor) -> None:
    st.divider()
    st.subheader("Layer curves")
    st.caption("What each layer contributes, measured by training: probing every layer, re-initialising the "
               "layers after k, a block of layers, or shuffling their order (Tamkin et al.), each point over "
               "seeds, beside the full fine-tune of the pretrained model and of a random init. Every point is a "
               "real run at the quick budget.")
    with st.form("curve"):
        c1, c2, c3 = st.columns(3)
        curve = c1.selectbox("Curve", list(CURVES), format_func=lambda c: CURVES[c].title, key="an.curve")
        model = c2.selectbox("Model", list(backbones()), key="an.curve.model")
        curve_discipline = c3.selectbox("Discipline", discipline_names(), key="an.curve.discipline")
        seeds = st.multiselect("Seeds", list(range(5)), default=[0, 1, 2], key="an.curve.seeds")
        queued = st.form_submit_button("Queue the curve's runs")
    layers = known_layers(model)
    group = f"curve:{curve}:{model}:{curve_discipline}"
    if queued:
        if layers is None:
            st.error(f"{model}'s configuration is not on this machine yet, so its layers are unknown: run any "
                     f"experiment with it once (that fetches it), then queue the curve.")
        else:
            try:
                specs = curve_specs(curve, make_spec(model=model, discipline=curve_discipline), layers, seeds or [0])
                executor.submit_group(group, specs, priority="sweep")
                st.success(f"{len(specs)} runs queued as the group {group!r} (finished ones come from the store).")
            except LabError as exc:
                st.error(str(exc))
    if group in lab_runs.groups(lab):
        records = results(lab, lab_runs.group_keys(lab, group))
        if records:
            st.plotly_chart(curve_figure(curve, records), key=f"curve-{group}")
            st.dataframe(curve_table(curve, records))
        st.caption(f"{len(records)} of {len(lab_runs.group_keys(lab, group))} runs of {group!r} have a result; the "
                   f"Runs page follows them live.")


def main() -> None:
    st.title(":material/insights: Analysis")
    st.caption("Why does a text-pretrained body help on DNA? Representation similarity, attention heads, Jacobians, "
               "gradients, noise and parameter statistics, for pretrained, random and fine-tuned weights side by side.")
    lab = state.get_lab()
    executor = state.get_executor()
    analysis_form(lab, executor)
    results_section(lab)
    layer_curves(lab, executor)


main()
