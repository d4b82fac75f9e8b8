"""Pretrain: grow a small model on a chosen first language (L1) by masked-language modelling (Chiang & Lee),
watch its loss and masked accuracy live, then use it as a backbone like any other (``lab:<name>``).

The page shows a sample of the corpus (its tokens, unigram histogram and nesting depths), submits a
``pretrain`` job to the executor and draws its stream; it never trains. ``?pretrain=KEY`` names the job shown.
"""

from __future__ import annotations

import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.catalogue import made_here_names
from labcore.door.data import corpus_about, corpus_names
from labcore.door.jobs import SIZES, PretrainSpec, resolve_pretrain
from labcore.door.runs import key_of
from labcore.errors import LabError
from pages import common, corpus_view, state

common.through_router()


# ------------------------------------------------------------------------------------------- choose
def choose() -> PretrainSpec | None:
    """The form: corpus, size, steps, seed, name and where to start; the spec it asks for, None after showing why
    there is none (the corpus cannot be read, or the choices do not make a spec)."""
    names = corpus_names()
    left, right = st.columns(2)
    with left:
        corpus = state.keep("pre.corpus", st.selectbox("L1 corpus", names, key=state.remember("pre.corpus", "nested",
                                                                                              names)))
        size = state.keep("pre.size", st.radio("Size", list(SIZES), horizontal=True,
                                              key=state.remember("pre.size", "cpu", list(SIZES))))
        st.caption(f"{size}: {SIZES[size].describe()}, sequences up to {SIZES[size].max_length} tokens"
                   + (" (for a GPU)" if size == "paper" else ""))
    with right:
        c1, c2 = st.columns(2)
        steps = int(c1.number_input("Steps", min_value=1, max_value=1_000_000, value=1000, step=100, key="pre.steps",
                                    help="Batches of 32 sequences (about 3,400 tokens each). On 2 CPU cores the cpu "
                                         "size takes roughly 0.5-1 s a step."))
        seed = int(c2.number_input("Seed", min_value=0, max_value=10_000, value=0, key="pre.seed"))
        name = st.text_input("Name", key="pre.name", placeholder="derived from the choices",
                             help="The model becomes lab:<name>, usable as any backbone.")
        made = made_here_names("lab")
        start = state.keep("pre.start", st.selectbox(
            "Start from", [""] + made, key=state.remember("pre.start", "", [""] + made),
            format_func=lambda n: n or "a random initialisation",
            help="Go on from a model pretrained here: another L1 after it, or (below) its embeddings alone."))
        train = "embeddings" if start and st.checkbox(
            "Word embeddings and LM head only", key="pre.embeddings",
            help="Chiang §4.4: align a pretrained body's embeddings to a new L1 (English) with the body frozen.") \
            else "all"
        substitute = False
        if corpus_about(corpus).few_ids:
            substitute = st.checkbox("50-substitute", key="pre.substitute",
                                     help="After pretraining, copy the used token embeddings over the unused rows "
                                          "(Chiang §4.3), so English tokens start from learnt embeddings.")
    # ------------------------------------------------------------------------------------------- sample
    if not corpus_view.show(corpus, seed, key="pre.sample"):
        return None
    try:
        return resolve_pretrain(PretrainSpec(corpus=corpus, size=size, steps=steps, seed=seed, name=name,
                                             substitute=substitute, start=start, train=train))
    except LabError as exc:
        st.error(str(exc))
        return None


# ------------------------------------------------------------------------------------------- start
def start_button(lab, spec) -> None:
    key = key_of(spec)
    existing = lab_runs.record(lab, key)
    st.caption(f"Spec {key}: {spec.label()}" + (f" · already {existing.status} in the store" if existing else ""))
    if st.button("▶ Pretrain", type="primary", key="btn.pre.start"):
        try:
            state.get_executor().submit(spec, priority="interactive")
        except LabError as exc:
            st.error(str(exc))
            st.stop()
        state.set_qp(pretrain=key)
        st.session_state[state.remember("pre.shown", key)] = state.keep("pre.shown", key)  # show the new one
        st.rerun()


# ------------------------------------------------------------------------------------------- watch
def watch(lab) -> None:
    earlier = lab_runs.jobs(lab, kind="pretrain")[::-1]
    if earlier:
        labels = {r.key: f"{common.status_label(r)} {r.label or r.key}" for r in earlier}
        widget = state.remember("pre.shown", state.qp("pretrain") or earlier[0].key, list(labels))
        external = state.qp_external("pretrain")  # a link or a reload names the pretraining to show
        if external in labels:
            st.session_state[widget] = external
        state.set_qp(pretrain=state.keep("pre.shown", st.selectbox("Pretrainings in this store", list(labels),
                                                                   format_func=labels.get, key=widget)))
    shown = state.qp("pretrain")
    if shown:
        record = lab_runs.record(lab, shown)
        if record is None:
            st.info(f"There is no pretraining {shown} in this store; start one above.")
            st.stop()
        st.subheader(record.label or shown)
        active = common.live_runs(lab, [shown], ["pretrain"], fragment_key="pretrain",
                                  title="MLM loss (solid) and held-out masked accuracy (dashed)")
        if not active and record.finished:
            result = record.result or {}
            if result.get("name"):
                st.success(f"**{result['name']}**: final MLM loss {result['final_loss']:.3f}, held-out masked accuracy "
                           f"{result['eval_accuracy']:.3f} (always guessing the most frequent id: "
                           f"{result['unigram_baseline_accuracy']:.3f}), {result['tokens_per_s']:,.0f} tokens/s, "
                           f"{result['wall_s']:.0f} s.")
                st.page_link(common.PAGES["new"], label=f"Use {result['name']} in a new experiment",
                             icon=":material/science:", query_params={"model": result["name"]})
        elif not active and record.error:
            st.error(record.error)


def main() -> None:
    st.title(":material/school: Pretrain")
    st.caption("Which first language makes a transformer learn English tasks faster? Pretrain a small RoBERTa-shaped "
               "model by masked-language modelling on random tokens, English unigrams, nested or flat parentheses "
               "(Chiang & Lee §3), then fine-tune it under New experiment and compare it with no pretraining.")
    spec = choose()
    if spec is None:
        st.stop()
    lab = state.get_lab()
    start_button(lab, spec)
    watch(lab)


main()
